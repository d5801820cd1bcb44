"""The dashboard's pool-score history is stored by the job queue's history turn, never by reads: each point is
the document's score at its label_seq, it survives a restart, any worker's turn adds to it, and long histories
are thinned."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

import service.documents.history as pool_scores
import service.documents.history_keeper as history_keeper
import service.documents.history_replays as history_replays
from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data import jobs
from service.data.models import Job, PoolScore, utcnow
from service.documents.history_keeper import store_due_points
from tests.conftest import ADMIN_KEY
from tests.factories import PANEL, create_project
from tests.service.test_reliability import loo_margins, setup_dense


def _history(client: TestClient, pid: str) -> list[tuple[int, float | None]]:
    rows = list(csv.DictReader(io.StringIO(client.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text)))
    return [(int(r["label_seq"]), float(r["pool_score"]) if r["pool_score"] else None) for r in rows]


def _write(client: TestClient, pid: str, rows: list[tuple[str, str, str]]) -> int:
    r = client.post(f"/projects/{pid}/labels", json=[{"item": i, "rater": k, "value": v} for i, k, v in rows])
    assert r.status_code == 200, r.text
    return int(r.json()["label_seq"])


def _turn(client: TestClient) -> list[tuple[str, int, float | None]]:
    """The history turn's work, done now (the app's own turn waits an hour in tests): the points it stored."""
    return store_due_points(client.app.state.sessions, "")[0]  # type: ignore[attr-defined]


def _stored(client: TestClient, pid: str) -> dict[int, float | None]:
    with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
        rows = session.execute(select(PoolScore.label_seq, PoolScore.score).where(PoolScore.project_id == pid))
        return {int(seq): score for seq, score in rows}


def test_points_are_the_documents_scores_stored_by_the_history_turn_and_survive_a_restart(
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
        doc = client.get(f"/projects/{pid}/reliability").json()
        client.app.state.documents.settle()  # type: ignore[attr-defined]
        assert seq not in _stored(client, pid)  # the read stored no point
        if step == 0:  # one human: undefined, and not stored as the first point; the turn queues the replay of it
            assert doc["human_pool"]["estimate"] is None and _turn(client) == []
            continue
        assert _turn(client) == [(pid, seq, doc["human_pool"]["estimate"])] and _turn(client) == []
        seen[seq] = doc["human_pool"]["estimate"]
    before = dict(_history(client, pid))  # the replay the turn queued drew what precedes the first point
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
        [(_, _, score)] = _turn(other)  # the turn taken by the other process
        after = dict(_history(client, pid))  # the first worker reads the point the second stored
        assert score == other.get(f"/projects/{pid}/reliability").json()["human_pool"]["estimate"]
    assert replays == []
    assert after == {**before, seq: score}


def test_a_point_is_the_leave_one_out_pool_score_of_the_labels_in_hand(client: TestClient) -> None:
    """Against docs/method.md §3 written out directly (``loo_margins``): the mean over held-out humans of the
    share of the other humans agreeing with them, on a sparse panel."""
    raters = {"judge": ("judge", 0.9), "prim": ("primary", 0.85), "h2": ("human", 0.8), "h3": ("human", 0.9)}
    pid, codes = setup_dense(client, raters, n_items=90, seed=5, subsets={"h2": np.arange(30, 90), "h3": np.arange(60)})
    [(got_pid, seq, score)] = _turn(client)
    expected = np.mean([e["pool"] for e in loo_margins(codes, 0, [1, 2, 3]).values()])
    assert got_pid == pid and seq == int((codes >= 0).sum()) and score == pytest.approx(expected, abs=1e-12)


def test_reads_store_no_point_and_the_turn_fills_the_chart_as_the_batches_are_labeled(client: TestClient) -> None:
    """Following the batches as the user does (each secondary labels its next batch, the dashboard is polled
    after every write, the turn runs between writes): once the history is whole, every read leaves pool_scores
    as it was, and the chart holds a point at each write's label_seq, the document's score there."""
    pid = create_project(client, items=[f"i{k}" for k in range(40)], order_seed=11)
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, 40)
    value = ("pass", "fail")
    for rater, p in (("judge", 0.9), ("prim", 0.85)):
        _write(
            client,
            pid,
            [(f"i{k}", rater, value[int(truth[k] if rng.random() < p else 1 - truth[k])]) for k in range(40)],
        )
    r = client.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "design": "random", "m": 20, "seed": 2})
    assert r.status_code == 201, r.text
    # The turn queues the one-time replay of the history before the first point it takes (none stored yet: all
    # of it; undefined, so not stored), which the app's queue runs while the view waits; then the history is whole.
    assert _turn(client) == []
    assert client.get(f"/projects/{pid}/dashboard").status_code == 200
    assert 0 in _stored(client, pid)
    shown: dict[int, float | None] = {}
    for _ in range(4):
        for rater, p in (("h2", 0.8), ("h3", 0.85)):
            batch = client.post(f"/projects/{pid}/batches", json={"rater": rater, "size": 5})
            assert batch.status_code == 200, batch.text
            rows = [
                (item, rater, value[int(truth[int(item[1:])] if rng.random() < p else 1 - truth[int(item[1:])])])
                for item in batch.json()["items"]
            ]
            seq = _write(client, pid, rows)
            before = _stored(client, pid)
            doc = client.get(f"/projects/{pid}/reliability").json()
            for path in (
                f"/projects/{pid}/dashboard",
                "/dashboard",
                f"/projects/{pid}/dashboard/charts/pool-history.csv",
            ):
                assert client.get(path).status_code == 200, path
            client.app.state.documents.settle()  # type: ignore[attr-defined]
            assert _stored(client, pid) == before  # reads wrote no pool-score row
            assert _turn(client) == [(pid, seq, doc["human_pool"]["estimate"])]
            shown[seq] = doc["human_pool"]["estimate"]
    history = dict(_history(client, pid))
    assert {seq: history[seq] for seq in shown} == shown
    assert sum(score is not None for score in shown.values()) == len(shown)  # two humans from the first write


def test_history_before_the_first_stored_point_is_replayed_once(client: TestClient) -> None:
    pid = create_project(client, items=[f"i{k}" for k in range(10)])
    for r in ("judge", "prim", "h2", "h3"):
        seq = _write(client, pid, [(f"i{k}", r, "pass" if k % 3 else "fail") for k in range(10)])
    assert [(p, s) for p, s, _ in _turn(client)] == [(pid, seq)]  # the first point queues the replay before it
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


SIX_ITEMS = [(f"i{k}", r, "pass" if (k + n) % 3 else "fail") for k in range(6) for n, (r, _) in enumerate(PANEL)]
"""Every rater of the panel labels six items."""


@contextmanager
def _quiet_projects(settings: Settings, n_projects: int) -> Iterator[tuple[TestClient, list[str], dict[str, int]]]:
    """An app that runs no jobs (no replay, no turn of its own) with ``n_projects`` projects labelled
    :data:`SIX_ITEMS`: the client, the project ids in order, and each one's label_seq."""
    quiet = settings.model_copy(update={"api_runs_jobs": False})
    with TestClient(create_app(quiet), raise_server_exceptions=False) as api:
        api.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        pids = sorted(create_project(api, items=[f"i{k}" for k in range(6)]) for _ in range(n_projects))
        yield api, pids, {pid: _write(api, pid, SIX_ITEMS) for pid in pids}


def test_the_history_turn_runs_once_a_period_and_serves_every_moved_project_in_turn(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One turn per period for the whole deployment; a turn computes at most its share of projects, resuming
    after the last one it took (a project that keeps moving does not starve the others); a project whose point
    fails leaves the others'."""
    monkeypatch.setattr(history_keeper, "PROJECTS_PER_TURN", 2)
    with _quiet_projects(settings, 3) as (api, pids, seqs):
        sessions = api.app.state.sessions  # type: ignore[attr-defined]
        hourly = history_keeper.HistoryKeeper(sessions, poll_seconds=3600)
        assert [(p, s) for p, s, _ in hourly.run_once()] == [(pids[0], seqs[pids[0]]), (pids[1], seqs[pids[1]])]
        other = history_keeper.HistoryKeeper(sessions, poll_seconds=3600)  # another process, same period
        assert other.run_once() == [] and hourly.run_once() == []
        seqs[pids[0]] = _write(api, pids[0], [("i0", "h2", "fail" if SIX_ITEMS[2][2] == "pass" else "pass")])
        with session_scope(sessions, write=True) as session:  # the period is over
            session.execute(
                update(Job).where(Job.kind == jobs.PERIODIC, Job.key == history_keeper.TURN).values(run_after=utcnow())
            )
        # the turn resumes after pids[1]: the third project first, then the first one again
        assert [(p, s) for p, s, _ in other.run_once()] == [(pids[2], seqs[pids[2]]), (pids[0], seqs[pids[0]])]
        for pid in pids:
            seqs[pid] = _write(api, pid, [("i1", "h3", "fail")])  # a changed label: a new event
        failing, original = pids[1], history_keeper.pool_score_point
        monkeypatch.setattr(
            history_keeper,
            "pool_score_point",
            lambda s, project, c: 1 / 0 if project.id == failing else original(s, project, c),
        )
        monkeypatch.setattr(history_keeper, "PROJECTS_PER_TURN", 3)
        stored, after = history_keeper.store_due_points(sessions, "")
        assert [p for p, _, _ in stored] == [pids[0], pids[2]] and after == pids[2]


def test_histories_stored_before_the_turn_queued_replays_get_theirs_a_few_a_turn_once(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployment older than the replay mark: projects with stored points, no mark and no replay job get the
    replay through their first stored point from the turn, at most ``PROJECTS_PER_TURN`` a turn, in id order,
    once; a history with its mark gets none."""
    monkeypatch.setattr(history_keeper, "PROJECTS_PER_TURN", 2)
    with _quiet_projects(settings, 4) as (api, pids, seqs):
        sessions = api.app.state.sessions  # type: ignore[attr-defined]
        with session_scope(sessions, write=True) as session:  # points stored before the turn queued replays
            for pid in pids:
                session.add(PoolScore(project_id=pid, criterion="default", label_seq=seqs[pid] - 3, score=0.5))
                session.add(PoolScore(project_id=pid, criterion="default", label_seq=seqs[pid], score=0.5))
            session.add(PoolScore(project_id=pids[3], criterion="default", label_seq=0, score=None))  # its mark

        def queued() -> dict[str, int]:
            with session_scope(sessions) as session:
                rows = session.execute(select(Job.payload).where(Job.kind == history_replays.KIND)).scalars()
                return {payload["project"]: payload["until"] for payload in rows}

        assert _turn(api) == [] and queued() == {pid: seqs[pid] - 3 for pid in pids[:2]}
        assert _turn(api) == [] and queued() == {pid: seqs[pid] - 3 for pid in pids[:3]}
        assert _turn(api) == [] and len(queued()) == 3  # each once; the marked history none
