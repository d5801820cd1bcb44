"""Documents are models inside the service (issue 27): a project's decision settings are parsed in one place,
and the live documents are served as their builders set them, not reshaped on the way out."""

from __future__ import annotations

import ast
from pathlib import Path

from fastapi.testclient import TestClient

from service.schemas.documents import ReliabilityDocument, ScoreReliabilityDocument
from tests.factories import PANEL, create_project

SERVICE = Path(__file__).resolve().parents[2] / "service"


def test_a_projects_decision_is_parsed_in_one_place() -> None:
    """``Project.decision_settings`` parses the row's ``decision``; no other module builds DecisionSettings from
    it again (eight places did, and a ninth came back after the fix)."""
    parsed_again = sorted(
        f"{path.relative_to(SERVICE.parent)}:{node.lineno}"
        for path in SERVICE.rglob("*.py")
        if path.name != "models.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("DecisionSettings", "DecisionSettings.model_validate")
        and ".decision" in ast.unparse(node)
    )
    assert parsed_again == []


def _labels(client: TestClient, pid: str, value: str) -> None:
    rows = [{"item": f"i{n}", "rater": r, "value": value(n, k)} for n in range(30) for k, (r, _) in enumerate(PANEL)]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200


def test_a_label_document_leaves_out_the_blocks_its_builder_did_not_set(client: TestClient) -> None:
    """A label project's optional blocks (slices, pairwise) are absent, not null, unless asked for; a numeric
    document names every field (as each was served when it was a dict); either validates as its model."""
    pid = create_project(client, items=[f"i{n}" for n in range(30)])
    features = [{"external_id": f"i{n}", "features": {"lang": "de" if n % 3 else "en"}} for n in range(30)]
    assert client.post(f"/projects/{pid}/items", json=features).status_code == 200
    _labels(client, pid, lambda n, k: "pass" if (n + k * (n % 4 == 0)) % 3 else "fail")
    plain = client.get(f"/projects/{pid}/reliability").json()
    ReliabilityDocument.model_validate(plain)
    assert "slices" not in plain and "pairwise" not in plain and plain["judges"]
    sliced = client.get(f"/projects/{pid}/reliability", params={"by": "feature:lang"}).json()
    assert sliced["slices"]["by"] == "feature:lang" and {s["value"] for s in sliced["slices"]["slices"]} == {"de", "en"}
    assert {k: v for k, v in sliced.items() if k != "slices"} == plain
    body = {"name": "n", "scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 1}}
    numeric = client.post("/projects", json=body).json()["id"]
    for ext, kind in PANEL:
        assert client.post(f"/projects/{numeric}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert client.post(f"/projects/{numeric}/items", json=[{"external_id": f"i{n}"} for n in range(30)]).is_success
    _labels(client, numeric, lambda n, k: str(1 + (n + k) % 5))
    score = client.get(f"/projects/{numeric}/reliability").json()
    ScoreReliabilityDocument.model_validate(score)
    assert score["slices"] is None and set(score) == set(ScoreReliabilityDocument.model_fields)
