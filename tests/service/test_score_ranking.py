"""``GET /ranking`` of a numeric project: judges ranked by the alignment score of the numeric decision
(docs/method.md §3d "Ranking score judges"), on a hand-computed panel and against the planner."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

import planner.score_ranking as score_ranking
from planner.score_ranking import rank_score_judges
from service.schemas.documents import ScoreRankingDocument

# judge A, judge B, h1, h2, h3 (tests/planner/test_score_ranking.py: scores 1/12 and 1/48 under the margin rule)
PANEL = np.array([[1.0, 2, 1, 1, 2], [3, 3, 2, 3, 3], [5, 4, 4, 5, 5], [2, 1, 2, 2, 1]])
RATERS = [("A", "judge"), ("B", "judge"), ("h1", "primary"), ("h2", "human"), ("h3", "human")]


def ok(r, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json()


def _project(client: TestClient, x: np.ndarray, rule: str = "margin", raters: list[tuple[str, str]] = RATERS) -> str:
    body = {
        "name": "ranked",
        "scale": "numeric",
        "value_range": {"min": 1, "max": float(np.nanmax(x)), "step": 1},
        "decision": {"rule": rule, "epsilon": 0.1},
    }
    pid: str = ok(client.post("/projects", json=body), 201)["id"]
    for ext, kind in raters:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in range(len(x))]))
    rows = [
        {"item": f"i{n}", "rater": raters[k][0], "value": int(x[n, k])}
        for n in range(len(x))
        for k in range(len(raters))
        if not np.isnan(x[n, k])
    ]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid


def test_the_margin_ranking_by_hand(client: TestClient) -> None:
    pid = _project(client, PANEL)
    r = client.get(f"/projects/{pid}/ranking")
    doc = ok(r)
    ScoreRankingDocument.model_validate(doc)
    assert doc["scale"] == "numeric" and doc["rule"] == "margin" and doc["epsilon"] == 0.1
    assert doc["order"] == ["A", "B"] and doc["n_items"] == 4 and doc["reason"] is None
    assert [j["judge"] for j in doc["judges"]] == ["A", "B"]
    assert [j["score"] for j in doc["judges"]] == pytest.approx([1 / 12, 1 / 48], abs=1e-15)
    assert doc["judges"][0]["ci"] == pytest.approx([1 / 12, 1 / 12])
    (margin,) = doc["margins"]
    assert (margin["better"], margin["worse"]) == ("A", "B") and margin["margin"] == pytest.approx(1 / 16)
    assert client.get(f"/projects/{pid}/ranking", headers={"If-None-Match": r.headers["ETag"]}).status_code == 304


@pytest.mark.parametrize("rule", ["alt-test", "margin"])
def test_the_ranking_is_the_planners_on_the_projects_numbers(client: TestClient, rule: str) -> None:
    rng = np.random.default_rng(12)
    truth = rng.integers(1, 8, size=(80, 1)).astype(float)
    humans = np.clip(truth + rng.integers(-1, 2, size=(80, 3)), 1, 7)
    judges = np.clip(np.column_stack([truth[:, 0], truth[:, 0] + rng.integers(-3, 4, 80)]), 1, 7)
    x = np.column_stack([judges, humans])
    x[:, 1][rng.random(80) < 0.1] = np.nan  # B skips a few items: only the common ones are compared
    pid = _project(client, x, rule)
    doc = ok(client.get(f"/projects/{pid}/ranking"))
    label_seq = ok(client.get(f"/projects/{pid}/reliability"))["label_seq"]
    want = rank_score_judges(
        x,
        [0, 1],
        [2, 3, 4],
        rule=rule,
        epsilon=0.1,
        value_range=(1, 7),
        n_resamples=1000,
        rng=label_seq,  # type: ignore[arg-type]
    )
    assert doc["n_items"] == want.n_items == int((~np.isnan(x[:, 1])).sum())
    names = {0: "A", 1: "B"}
    assert doc["order"] == [names[k] for k in want.order] == ["A", "B"]
    by_name = {j["judge"]: j for j in doc["judges"]}
    for s in want.judges:
        got = by_name[names[s.judge]]
        assert got["score"] == pytest.approx(s.score, abs=1e-12) and got["omega"] == pytest.approx(s.omega)
        assert got["p_top1"] == pytest.approx(s.p_top1) and got["ci"] == pytest.approx([s.ci.low, s.ci.high])
    assert doc["flip_share"] == pytest.approx(want.flip_share)


def test_without_two_humans_there_is_no_ranking(client: TestClient) -> None:
    raters = [("A", "judge"), ("B", "judge"), ("h1", "primary")]
    pid = _project(client, PANEL[:, :3], raters=raters)
    doc = ok(client.get(f"/projects/{pid}/ranking"))
    ScoreRankingDocument.model_validate(doc)
    assert doc["judges"] == [] and doc["order"] == [] and "two human raters" in doc["reason"]


def test_bad_criterion_and_the_work_bound_are_422(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = _project(client, PANEL)
    r = client.get(f"/projects/{pid}/ranking", params={"criterion": "nope"})
    assert r.status_code == 422 and r.json()["error"] == "invalid", r.text
    monkeypatch.setattr(score_ranking, "MAX_RANKING_WORK", 100)
    r = client.get(f"/projects/{pid}/ranking")
    assert r.status_code == 422 and "multiply-adds" in r.json()["detail"], r.text
    monkeypatch.undo()
    assert ok(client.get(f"/projects/{pid}/ranking"))["order"] == ["A", "B"]  # the refusal was not cached
