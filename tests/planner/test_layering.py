"""``planner`` is a pure numpy/scipy library: importing it pulls in no web, database or service code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("fastapi", "starlette", "sqlalchemy", "pydantic", "alembic", "service")


def test_planner_imports_no_service_or_web_stack() -> None:
    modules = sorted(p.stem for p in (ROOT / "planner").glob("*.py") if p.stem != "__init__")
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module('planner.' + m)\n"
        "print(json.dumps(sorted({n.split('.')[0] for n in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert {"numpy", "planner"} <= loaded  # the probe really imported the library
    assert not loaded & set(FORBIDDEN), sorted(loaded & set(FORBIDDEN))


def test_no_planner_module_imports_another_ones_private_names() -> None:
    """Shared machinery has a public home; a leading underscore stays inside its module."""
    import ast

    private = []
    for path in sorted((ROOT / "planner").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("planner"):
                private += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert private == []


def test_curated_public_api_resolves() -> None:
    import planner

    assert len(planner.__all__) == len(set(planner.__all__))
    missing = [name for name in planner.__all__ if not hasattr(planner, name)]
    assert missing == []
    assert {"validate_judge", "certify_recipe", "simulate", "design_masks"} <= set(planner.__all__)


def test_the_service_uses_only_the_planners_public_names() -> None:
    """Whatever service/ imports from planner is in ``planner.__all__``: the library's public API is what
    its one client needs, no more hidden corners."""
    import ast

    import planner

    hidden = sorted(
        f"{path.relative_to(ROOT)}: {node.module}.{alias.name}"
        for path in (ROOT / "service").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("planner")
        for alias in node.names
        if alias.name not in planner.__all__
    )
    assert hidden == []
