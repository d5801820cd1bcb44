"""``GET /reliability?by=feature:<name>`` of a numeric project: the first judge's numeric decision per slice
(docs/method.md §3d "Slices of score judges"), by hand, against the planner, in anytime mode, and refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from planner.score_slices import validate_scores_by_slice
from service.schemas.documents import ScoreReliabilityDocument

# judge, h1, h2, h3: slice "a" repeats the §3d check excerpt 8 times, slice "b" the judge far off (32 items each)
EXCERPT = np.array([[1.0, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]])
FAR = np.column_stack([[5.0, 1, 1, 5], EXCERPT[:, 1:]])
PANEL = np.vstack([np.tile(EXCERPT, (8, 1)), np.tile(FAR, (8, 1))])
TOPIC = ["a"] * 32 + ["b"] * 32
RATERS = [("j", "judge"), ("h1", "primary"), ("h2", "human"), ("h3", "human")]


def ok(r, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json()


def _project(client: TestClient, x: np.ndarray, topics: list[str], **decision: Any) -> str:
    body = {
        "name": "sliced",
        "scale": "numeric",
        "value_range": {"min": 1, "max": 5, "step": 1},
        "decision": {"rule": "margin", "epsilon": 0.0, **decision},
    }
    pid: str = ok(client.post("/projects", json=body), 201)["id"]
    for ext, kind in RATERS:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    items = [{"external_id": f"i{n}", "features": {"topic": t}} for n, t in enumerate(topics)]
    ok(client.post(f"/projects/{pid}/items", json=[*items, {"external_id": "bare", "features": {}}]))
    rows = [
        {"item": f"i{n}", "rater": RATERS[k][0], "value": int(x[n, k])}
        for n in range(len(x))
        for k in range(4)
        if not np.isnan(x[n, k])
    ]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid


def test_margin_slices_by_hand(client: TestClient) -> None:
    """The planner test's hand values, each slice's items repeated 8 times: slice b d = (-.625, -.5625, -.625)
    and rejects, slice a d = (.125, .125, 0) and passes; the rest of the document is the unsliced one."""
    pid = _project(client, PANEL, TOPIC, monitoring="fixed")
    r = client.get(f"/projects/{pid}/reliability", params={"by": "feature:topic"})
    doc = ok(r)
    ScoreReliabilityDocument.model_validate(doc)
    block = doc["slices"]
    assert (block["mode"], block["correction"], block["n_items_without"]) == ("fixed", "none", 1)
    assert block["failing"] == ["b"] and [s["value"] for s in block["slices"]] == ["b", "a"]
    assert block["headline"] == "fails overall; fails on slice b (omega 0.00, d -0.60)"
    b, a = block["slices"]
    assert b["n_items"] == a["n_items"] == 32 and b["decision"] == "reject" and a["decision"] == "pass"
    assert [x["d"] for x in b["raters"]] == pytest.approx([-0.625, -0.5625, -0.625], abs=1e-12)
    assert [x["d"] for x in a["raters"]] == pytest.approx([0.125, 0.125, 0.0], abs=1e-12)
    assert {x["status"] for x in b["raters"]} == {"lost"} and {x["status"] for x in a["raters"]} == {"won"}
    plain = ok(client.get(f"/projects/{pid}/reliability"))
    assert {k: v for k, v in doc.items() if k != "slices"} == {k: v for k, v in plain.items() if k != "slices"}
    assert plain["slices"] is None
    assert (
        client.get(
            f"/projects/{pid}/reliability", params={"by": "feature:topic"}, headers={"If-None-Match": r.headers["ETag"]}
        ).status_code
        == 304
    )


def test_the_projects_slices_setting_and_the_alt_test_joint_family(client: TestClient) -> None:
    rng = np.random.default_rng(4)
    truth = rng.integers(1, 6, size=(180, 1)).astype(float)
    x = np.clip(truth + rng.integers(-1, 2, size=(180, 4)), 1, 5)
    x[:120, 0] = truth[:120, 0]  # en: the judge rates the truth, closer than any human
    x[120:, 0] = np.clip(x[120:, 0] + rng.choice([-2.0, 2.0], 60), 1, 5)  # de: two points off
    topics = ["en"] * 120 + ["de"] * 60
    pid = _project(client, x, topics, rule="alt-test", epsilon=0.1, slices="feature:topic", monitoring="fixed")
    block = ok(client.get(f"/projects/{pid}/reliability"))["slices"]
    want = validate_scores_by_slice(x, np.array(topics), judge=0, humans=[1, 2, 3], epsilon=0.1)
    assert block["correction"] == "by-joint" == want.correction and block["q"] == 0.05
    assert block["failing"] == list(want.failing) == ["de"]
    assert [(s["value"], s["omega"], s["decision"]) for s in block["slices"]] == [
        (o.value, o.omega, o.decision) for o in want.slices
    ]
    assert [x["p_value"] for x in block["slices"][0]["raters"]] == pytest.approx(
        [r.p_value for r in want.slices[0].raters]
    )


def test_anytime_slices_are_monitored_at_alpha_over_the_slices(client: TestClient) -> None:
    pid = _project(client, PANEL, TOPIC, monitoring="anytime")
    block = ok(client.get(f"/projects/{pid}/reliability", params={"by": "feature:topic"}))["slices"]
    assert block["mode"] == "anytime" and block["correction"] == "bonferroni-slices" and block["alpha"] == 0.05
    assert {s["value"] for s in block["slices"]} == {"a", "b"}
    assert all(
        x["p_value"] is None and x["status"] in ("won", "lost", "open") for s in block["slices"] for x in s["raters"]
    )


@pytest.mark.parametrize(
    ("by", "says"),
    [("topic", "by must be 'feature:<name>'"), ("feature:colour", "no item has the feature")],
)
def test_bad_slicing_is_422_and_writes_nothing(client: TestClient, by: str, says: str) -> None:
    pid = _project(client, PANEL, TOPIC)
    before = ok(client.get(f"/projects/{pid}/reliability"))["label_seq"]
    r = client.get(f"/projects/{pid}/reliability", params={"by": by})
    assert r.status_code == 422 and r.json()["error"] == "invalid" and says in r.json()["detail"], r.text
    assert ok(client.get(f"/projects/{pid}/reliability"))["label_seq"] == before


def test_too_many_slice_values_are_422(client: TestClient) -> None:
    pid = _project(client, np.tile(EXCERPT, (26, 1))[:101], [f"t{n}" for n in range(101)])
    r = client.get(f"/projects/{pid}/reliability", params={"by": "feature:topic"})
    assert r.status_code == 422 and "distinct values" in r.json()["detail"], r.text


def test_the_dashboard_and_the_report_show_the_projects_slices(client: TestClient) -> None:
    pid = _project(client, PANEL, TOPIC, monitoring="fixed", slices="feature:topic")
    page = client.get(f"/projects/{pid}/dashboard").text
    assert 'id="slices"' in page and "fails on slice b (omega 0.00, d -0.60)" in page
    assert page.index("<td>b</td>") < page.index("<td>a</td>")
    notes = ok(client.get(f"/projects/{pid}/report"))["notes"]
    assert "slices (feature:topic, default, none): fails overall; fails on slice b (omega 0.00, d -0.60)" in notes
    other = _project(client, PANEL, TOPIC, slices="feature:colour")
    assert "no item has the feature" in client.get(f"/projects/{other}/dashboard").text
    assert any("no item has the feature" in n for n in ok(client.get(f"/projects/{other}/report"))["notes"])
