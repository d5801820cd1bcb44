"""``GET /reliability?by=feature:<name>``: the decision per value of an item feature (docs/method.md §3b)."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from planner.slices import validate_judge_by_slice
from service.schemas.documents import ReliabilityDocument

N = 120


def _panel() -> dict[str, np.ndarray]:
    """The planner test's two-slice panel: the judge misses every third of the 30 "de" items."""
    i = np.arange(N)
    truth = i % 2
    h3 = np.where(i % 6 == 0, 1 - truth, truth)
    judge = np.where((i >= 90) & (i % 3 == 0), 1 - truth, truth)
    return {"prim": truth, "h2": truth, "h3": h3, "judge": judge}


def _project(client: TestClient, order_seed: int | None = None, **decision: Any) -> str:
    body = {"name": "slices", "labels": ["pass", "fail"], "decision": {"epsilon": 0.08, **decision}}
    if order_seed is not None:
        body["order_seed"] = order_seed
    pid: str = client.post("/projects", json=body).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}", "features": {"language": "en" if i < 90 else "de"}} for i in range(N)]
    items += [{"external_id": "bare", "features": {}}]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    rows = [
        {"item": f"i{i}", "rater": r, "value": ("pass", "fail")[int(codes[i])]}
        for r, codes in _panel().items()
        for i in range(N)
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def test_fixed_mode_slices_match_the_planner_and_lead_with_the_failing_slice(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed")
    r = client.get(f"/projects/{pid}/reliability", params={"by": "feature:language"})
    assert r.status_code == 200, r.text
    doc = r.json()
    ReliabilityDocument.model_validate(doc)
    slices = doc["slices"]
    assert slices["mode"] == "fixed" and slices["correction"] == "none" and slices["n_items_without"] == 1
    assert [s["value"] for s in slices["slices"]] == ["de", "en"] and slices["failing"] == ["de"]
    assert slices["headline"].endswith("fails on slice de (omega 0.00, d -0.17)")
    de = slices["slices"][0]
    assert de["n_items"] == 30 and [x["d"] for x in de["raters"]] == [-1 / 6] * 3
    assert {x["status"] for x in de["raters"]} == {"lost"}
    panel = _panel()
    codes = np.column_stack([panel[k] for k in ("judge", "prim", "h2", "h3")])
    expected = validate_judge_by_slice(
        codes, np.where(np.arange(N) < 90, "en", "de"), judge=0, humans=[1, 2, 3], n_labels=2, epsilon=0.08
    )
    assert [o.omega for o in expected.slices] == [s["omega"] for s in slices["slices"]]
    assert client.get(f"/projects/{pid}/reliability").json().get("slices") is None
    again = client.get(
        f"/projects/{pid}/reliability", params={"by": "feature:language"}, headers={"If-None-Match": r.headers["ETag"]}
    )
    assert again.status_code == 304
    plain = client.get(f"/projects/{pid}/reliability")
    assert plain.headers["ETag"] != r.headers["ETag"]


def test_the_project_setting_slices_by_default_with_a_per_slice_epsilon(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed", slices="feature:language", slice_epsilon={"de": 0.2})
    doc = client.get(f"/projects/{pid}/reliability").json()
    de = next(s for s in doc["slices"]["slices"] if s["value"] == "de")
    assert de["epsilon"] == 0.2 and de["omega"] == 1.0 and doc["slices"]["failing"] == []


def test_anytime_mode_slices_are_one_e_bh_family_or_bonferroni_by_the_multiplicity(client: TestClient) -> None:
    """The project's multiplicity picks the family (docs/method.md §3b): e-BH over every slice's humans by
    default, Bonferroni on request; on the same labels e-BH certifies every human Bonferroni does, and here
    more: all three of en's (90 items where the judge is the primary) where Bonferroni certifies one, so en
    passes under e-BH and is still open under Bonferroni. The dashboard names the correction."""
    pid = _project(client, order_seed=35)
    doc = client.get(f"/projects/{pid}/reliability", params={"by": "feature:language"}).json()
    slices = doc["slices"]
    assert slices["mode"] == "anytime" and slices["correction"] == "e-bh-joint" and slices["alpha"] == 0.05
    assert {s["value"] for s in slices["slices"]} == {"en", "de"}
    joint = {(s["value"], x["rater"]): x["status"] for s in slices["slices"] for x in s["raters"]}
    assert client.patch(f"/projects/{pid}", json={"decision": {"multiplicity": "bonferroni"}}).status_code == 200
    other = client.get(f"/projects/{pid}/reliability", params={"by": "feature:language"}).json()["slices"]
    assert other["correction"] == "bonferroni-slices"
    bonferroni = {(s["value"], x["rater"]): x["status"] for s in other["slices"] for x in s["raters"]}
    assert all(joint[key] == status for key, status in bonferroni.items() if status != "open")
    assert [joint[("en", r)] for r in ("prim", "h2", "h3")] == ["won"] * 3
    assert [bonferroni[("en", r)] for r in ("prim", "h2", "h3")] == ["open", "open", "won"]
    decided = [{s["value"]: s["decision"] for s in block["slices"]} for block in (slices, other)]
    assert decided == [{"en": "pass", "de": "continue"}, {"en": "continue", "de": "continue"}]
    back = {"decision": {"multiplicity": "e-bh", "slices": "feature:language"}}
    assert client.patch(f"/projects/{pid}", json=back).status_code == 200
    page = client.get(f"/projects/{pid}/dashboard").text
    assert "Corrected across slices: e-bh-joint" in page


def test_a_feature_no_item_has_or_a_malformed_by_is_422(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed")
    for by, message in [
        ("feature:topic", "no item has the feature 'topic'"),
        ("language", "by must be 'feature:<name>'"),
    ]:
        r = client.get(f"/projects/{pid}/reliability", params={"by": by})
        assert r.status_code == 422 and message in r.text, r.text
    r = client.patch(f"/projects/{pid}", json={"decision": {"slices": "language"}})
    assert r.status_code == 422, r.text


def test_the_dashboard_shows_the_slices_failing_first(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed", slices="feature:language")
    page = client.get(f"/projects/{pid}/dashboard").text
    assert 'id="slices"' in page and "fails on slice de (omega 0.00, d -0.17)" in page
    assert page.index("<td>de</td>") < page.index("<td>en</td>")
    other = _project(client, monitoring="fixed", slices="feature:topic")
    assert "no item has the feature" in client.get(f"/projects/{other}/dashboard").text


def test_the_report_notes_the_slices_headline(client: TestClient) -> None:
    pid = _project(client, monitoring="fixed", slices="feature:language")
    notes = client.get(f"/projects/{pid}/report").json()["notes"]
    assert any(
        n.startswith("slices (feature:language, default, none): passes overall; fails on slice de") for n in notes
    )
