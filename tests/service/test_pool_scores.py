"""The dashboard's pool-score history is stored as documents are computed: it survives a restart,
any worker adds to it, each point is the document's score at its label_seq, and long histories are thinned."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

import service.documents.history as pool_scores
import service.documents.history_replays as history_replays
from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.models import PoolScore
from tests.conftest import ADMIN_KEY
from tests.factories import create_project


def _history(client: TestClient, pid: str) -> list[tuple[int, float | None]]:
    rows = list(csv.DictReader(io.StringIO(client.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text)))
    return [(int(r["label_seq"]), float(r["pool_score"]) if r["pool_score"] else None) for r in rows]


def _write(client: TestClient, pid: str, rows: list[tuple[str, str, str]]) -> int:
    r = client.post(f"/projects/{pid}/labels", json=[{"item": i, "rater": k, "value": v} for i, k, v in rows])
    assert r.status_code == 200, r.text
    return int(r.json()["label_seq"])


def test_points_are_the_documents_scores_and_survive_a_restart(
    client: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = create_project(client, items=[f"i{k}" for k in range(12)])
    seen = {}
    base = [(f"i{k}", r, "pass" if (k + n) % 4 else "fail") for k in range(12) for n, r in enumerate(["judge", "prim"])]
    for step, rows in enumerate(
        [
            base,
            [(f"i{k}", "h2", "pass" if k % 3 else "fail") for k in range(12)],
            [(f"i{k}", "h3", "fail" if k % 5 else "pass") for k in range(6)],
        ]
    ):
        seq = _write(client, pid, rows)
        doc = client.get(f"/projects/{pid}/reliability").json()  # a document built at seq stores its point
        seen[seq] = doc["human_pool"]["estimate"]
        if step == 0:
            assert doc["human_pool"]["estimate"] is None  # one human: undefined, stored as undefined
    client.app.state.documents.settle()  # type: ignore[attr-defined]  # the points are stored in the background
    before = dict(_history(client, pid))  # the first view replays what precedes the first point, once
    first = min(seen)
    assert {seq: before[seq] for seq in seen} == seen and all(seq < first for seq in set(before) - set(seen))
    replays = []
    monkeypatch.setattr(history_replays, "pool_history", lambda *a, **k: replays.append(1) or [])
    # A new app on the same database (a restart, or another worker): the history is read, not replayed.
    with TestClient(create_app(settings), raise_server_exceptions=False) as other:
        other.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        assert dict(_history(other, pid)) == before
        seq = _write(other, pid, [("i7", "h3", "pass")])
        assert other.get(f"/projects/{pid}/dashboard").status_code == 200
        other.app.state.documents.settle()  # type: ignore[attr-defined]
        after = dict(_history(client, pid))  # the first worker reads the point the second stored
    assert replays == []
    assert after == {**before, seq: other.get(f"/projects/{pid}/reliability").json()["human_pool"]["estimate"]}


def test_history_before_the_first_stored_point_is_replayed_once(client: TestClient) -> None:
    pid = create_project(client, items=[f"i{k}" for k in range(10)])
    for r in ("judge", "prim", "h2", "h3"):
        _write(client, pid, [(f"i{k}", r, "pass" if k % 3 else "fail") for k in range(10)])
    history = _history(client, pid)
    # Nobody looked before: the events from the second human's first label (h2, seq 21; with the primary
    # alone the pool score is undefined) are replayed at their 1/8 .. 8/8 quantiles ('higher': of the 20
    # events 21..40, the 4th, 6th, 9th, ...).
    assert [seq for seq, _ in history] == [24, 26, 29, 31, 33, 36, 38, 40]
    assert all(score is not None for _, score in history)
    assert history[-1][1] == client.get(f"/projects/{pid}/reliability").json()["human_pool"]["estimate"]


def test_a_long_history_is_thinned_to_the_points_shown_keeping_the_last(client: TestClient) -> None:
    pid = create_project(client, items=["a"])
    n = pool_scores.SHOWN_POINTS + 101
    with session_scope(client.app.state.sessions, write=True) as session:  # type: ignore[attr-defined]
        session.add_all([PoolScore(project_id=pid, criterion="default", label_seq=k, score=k / n) for k in range(n)])
    history = _history(client, pid)
    assert len(history) == pool_scores.SHOWN_POINTS
    assert history[0][0] == 1 and history[-1][0] == n - 1  # label_seq 0 is the replay's mark, not a point
    assert [seq for seq, _ in history] == sorted({seq for seq, _ in history})
