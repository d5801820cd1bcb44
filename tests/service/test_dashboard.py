"""The dashboard's data: the pool-score history replays the label events exactly."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from planner.decision import validate_judge
from service.dashboard import pool_history
from service.db import session_scope
from service.models import Project


def _labels(client: TestClient, pid: str, rows: list[tuple[str, str, str]]) -> None:
    r = client.post(f"/projects/{pid}/labels", json=[{"item": i, "rater": k, "value": v} for i, k, v in rows])
    assert r.status_code == 200, r.text


def test_pool_history_replays_events_with_corrections(client: TestClient, project: dict) -> None:
    pid = project["id"]
    rng = np.random.default_rng(3)
    first = [(f"i{i}", k, ["pass", "fail"][rng.integers(2)]) for k in ("judge", "prim", "h2", "h3") for i in range(20)]
    _labels(client, pid, first)
    # Corrections: h2 flips its first eight labels; only the newest value may count afterwards.
    flips = {"pass": "fail", "fail": "pass"}
    _labels(client, pid, [(i, k, flips[v]) for i, k, v in first if k == "h2"][:8])
    with session_scope(client.app.state.sessions) as session:
        history = pool_history(session, session.get(Project, pid), "default")
    assert [seq for seq, _ in history][-1] == 88
    # Independent replay at each cut: the matrix of the newest value per cell among events <= cut.
    events = client.get(f"/projects/{pid}/labels", params={"history": "true", "limit": 1000}).json()["items"]
    columns = {"judge": 0, "prim": 1, "h2": 2, "h3": 3}
    for seq, score in history:
        codes = np.full((20, 4), -1)
        for e in sorted(events, key=lambda e: e["seq"]):
            if e["seq"] <= seq:
                codes[int(e["item"][1:]), columns[e["rater"]]] = ["pass", "fail"].index(e["value"])
        expected = validate_judge(codes, judge=0, humans=[1, 2, 3], n_labels=2, n_resamples=20, rng=0)
        want = expected.human_pool.estimate
        assert (score is None and not np.isfinite(want)) or score == want, (seq, score, want)
    final = client.get(f"/projects/{pid}/reliability").json()["human_pool"]["estimate"]
    assert history[-1][1] == final
