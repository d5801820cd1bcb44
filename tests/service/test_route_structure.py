"""Routes are glue: access comes from role-scoped dependencies and SQL lives in service.data.queries."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

import service.routes
from service import deps
from service.core.errors import Forbidden, NotFound
from service.data.keys import Principal
from service.schemas.keys import Role

ROUTES = Path(service.routes.__file__).parent


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from _calls(sub)


def _project_routes() -> list[APIRoute]:
    modules = [importlib.import_module(f"service.routes.{p.stem}") for p in ROUTES.glob("*.py") if p.stem != "__init__"]
    return [r for m in modules for r in m.router.routes if isinstance(r, APIRoute) and "{pid}" in r.path]


PROJECT_RETURNS = ("Project", "AsyncIterator[Project]", "Project | Response", "tuple[Project, Rater] | Response")


def test_every_project_route_gets_its_project_from_a_scoped_dependency():
    routes = _project_routes()
    assert len(routes) > 20
    unscoped = [
        f"{sorted(r.methods)} {r.path}"
        for r in routes
        if not any(
            getattr(call, "__annotations__", {}).get("return") in PROJECT_RETURNS for call in _calls(r.dependant)
        )
    ]
    assert unscoped == []


def test_route_modules_hold_no_sql_and_check_no_role_by_hand():
    offenders = []
    for path in sorted(ROUTES.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sqlalchemy"):
                if node.module != "sqlalchemy.exc" and any(a.name != "Row" for a in node.names):
                    offenders.append(f"{path.name}: imports from {node.module}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require_role":
                offenders.append(f"{path.name}:{node.lineno} checks a role by hand")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"execute", "scalar", "scalars", "get", "add"}
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in {"session", "writer"}
            ):
                offenders.append(f"{path.name}:{node.lineno} session.{node.func.attr}")
    assert offenders == []


@pytest.mark.parametrize(
    ("roles", "allowed"),
    [
        (deps.PM, {Role.ADMIN, Role.PM}),
        (deps.ANNOTATOR, {Role.ADMIN, Role.PM, Role.ANNOTATOR}),
        (deps.VIEWER, {Role.ADMIN, Role.PM, Role.VIEWER}),
        (deps.ADMIN, {Role.ADMIN}),
    ],
)
def test_role_sets_admit_exactly_their_roles(roles, allowed):
    for role in Role:
        principal = Principal("k", role, "p1", None)
        if role in allowed:
            deps.require_role(principal, roles)
        else:
            with pytest.raises(Forbidden, match=f"your key is {role}"):
                deps.require_role(principal, roles)


def test_out_of_scope_project_is_hidden_before_the_role_is_checked(client, project):
    """A viewer of another project gets 404 (not 403) even where viewers are not allowed."""
    from service.core.db import session_scope

    principal = Principal("k", Role.VIEWER, "another", None)
    with session_scope(client.app.state.sessions) as session:
        with pytest.raises(NotFound):
            deps.scoped_project(session, principal, project["id"], deps.PM)
        with pytest.raises(Forbidden):
            deps.scoped_project(session, Principal("k", Role.VIEWER, project["id"], None), project["id"], deps.PM)


def test_every_service_package_says_what_it_holds_and_the_readme_names_it():
    readme = (ROUTES.parents[1] / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("\n## ", 1)]
    packages = [p.parent for p in sorted(ROUTES.parent.glob("*/__init__.py"))]
    assert len(packages) >= 10
    unnamed = [p.name for p in packages if f"`{p.name}/`" not in layout]
    undocumented = [p.name for p in packages if not ast.get_docstring(ast.parse((p / "__init__.py").read_text()))]
    assert (unnamed, undocumented) == ([], [])
