"""``/reliability`` of a numeric project carries each judge's anytime-monitored decision (docs/method.md §8b):
the planner's ``monitor_scores`` on the numbers in their arrival order; absent in fixed mode."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from planner.score_monitor import monitor_scores


def ok(r, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _project(client: TestClient, ratings: np.ndarray, **decision: Any) -> str:
    body = {"name": "m", "scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 1}, "decision": decision}
    pid = ok(client.post("/projects", json=body), 201)["id"]
    names = ["j", "h1", "h2"]
    for ext, kind in zip(names, ["judge", "primary", "human"], strict=True):
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    n = ratings.shape[0]
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{k}"} for k in range(n)]))
    for col, ext in enumerate(names):  # the judge first, then each human: arrival follows the writes
        rows = [{"item": f"i{k}", "rater": ext, "value": int(ratings[k, col])} for k in range(n)]
        ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid


def test_a_judge_rating_as_the_humans_do_is_certified(client: TestClient) -> None:
    """xi = 0 on every item: both humans certified won at item 351 (the planner's doctest), pass."""
    values = np.repeat(np.arange(1.0, 6.0), 80)[:, None].repeat(3, axis=1)
    pid = _project(client, values)
    document = ok(client.get(f"/projects/{pid}/reliability"))
    (monitored,) = document["monitoring"]
    expected = monitor_scores(values, np.tile([0.0, 1, 2], (400, 1)), 0, [1, 2], value_range=(1, 5))
    assert monitored["decision"] == expected.decision == "pass" and monitored["judge"] == "j"
    assert [(r["rater"], r["status"], r["decided_at"], r["m"]) for r in monitored["raters"]] == [
        ("h1", "won", 351, 400),
        ("h2", "won", 351, 400),
    ]
    assert monitored["raters"][0]["lower"] == expected.raters[0].lower
    assert document["decision"] == "pass"  # the fixed-sample decision stays at the top


def test_a_worse_judge_is_monitored_open_or_lost_and_fixed_mode_has_none(client: TestClient) -> None:
    rng = np.random.default_rng(4)
    truth = rng.integers(1, 6, 300).astype(float)
    humans = [np.clip(truth + rng.integers(-1, 2, 300), 1, 5) for _ in range(2)]
    judge = np.clip(truth + rng.integers(-3, 4, 300), 1, 5)
    values = np.column_stack([judge, *humans])
    pid = _project(client, values)
    (monitored,) = ok(client.get(f"/projects/{pid}/reliability"))["monitoring"]
    expected = monitor_scores(values, np.tile([0.0, 1, 2], (300, 1)), 0, [1, 2], value_range=(1, 5))
    assert [r["status"] for r in monitored["raters"]] == [r.status for r in expected.raters]
    assert monitored["decision"] == expected.decision and monitored["decision"] != "pass"
    fixed = _project(client, values, monitoring="fixed")
    assert ok(client.get(f"/projects/{fixed}/reliability"))["monitoring"] is None
