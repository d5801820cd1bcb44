"""One name for one idea: the names docs/vocabulary.md rules out appear in no public planner signature and
in no field or parameter of the REST API (deprecated names, accepted for one release, aside)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import planner
from service.app import create_app
from service.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def ruled_out() -> set[str]:
    """The names of the vocabulary's "not" column that are not themselves a name of the table."""
    named, banned = set(), set()
    for row in (ROOT / "docs" / "vocabulary.md").read_text().splitlines():
        row = re.sub(r"`[^`]*`", lambda m: m.group(0).replace("|", "/"), row)  # a pipe inside code splits no cell
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            named |= set(re.findall(r"`([A-Za-z_]+)`", cells[0]))
            banned |= set(re.findall(r"`([A-Za-z_]+)`", cells[2]))
    return banned - named


def planner_parameters() -> dict[str, set[str]]:
    """Every public planner function's and public method's parameter names."""
    out: dict[str, set[str]] = {}
    for name in planner.__all__:
        obj = getattr(planner, name)
        members = [obj] if inspect.isfunction(obj) else []
        if inspect.isclass(obj):
            members = [m for k, m in vars(obj).items() if not k.startswith("_") and inspect.isfunction(m)]
        for fn in members:
            out[f"{name}.{fn.__name__}" if fn is not obj else name] = set(inspect.signature(fn).parameters)
    return out


def api_names(spec: dict[str, Any]) -> dict[str, set[str]]:
    """Every schema property and operation parameter of the OpenAPI document, deprecated ones left out."""
    out: dict[str, set[str]] = {}
    for schema, body in spec["components"]["schemas"].items():
        out[schema] = {k for k, v in body.get("properties", {}).items() if not v.get("deprecated")}
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            out[f"{method} {path}"] = {p["name"] for p in op.get("parameters", []) if not p.get("deprecated")}
    return out


def test_the_ruled_out_names_are_read_from_the_vocabulary() -> None:
    assert {"level", "random_state", "omega_star"} <= ruled_out()


def test_no_public_planner_signature_uses_a_ruled_out_name() -> None:
    banned = ruled_out()
    found = {where: sorted(names & banned) for where, names in planner_parameters().items() if names & banned}
    assert found == {}


def test_no_rest_field_or_parameter_uses_a_ruled_out_name(tmp_path: Path) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'vocabulary.db'}"))
    banned = ruled_out()
    found = {where: sorted(names & banned) for where, names in api_names(app.openapi()).items() if names & banned}
    assert found == {}
