"""Snapshots saved by the job queue, not by the api processes (issue 32): the ``matrix_snapshots`` table
(PostgreSQL's default) serves a starting worker like a directory does, an api process that runs no
jobs saves nothing, and one process of the deployment per period saves the snapshot most behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update

import service.matrices.store
from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.jobs import PERIODIC
from service.data.models import Job, MatrixSnapshot, Project, utcnow
from service.documents.sessions import worker_sessionmaker
from service.matrices.matrix import load_matrix
from service.matrices.snapshot_keeper import TURN, SnapshotKeeper, snapshot_due
from service.matrices.snapshots import KEPT, SnapshotTable, newest_snapshots, read_snapshot
from service.matrices.store import SNAPSHOT_EVERY, MatrixStore, current_matrix
from tests.conftest import ADMIN_KEY
from tests.factories import create_project
from tests.service.test_matrix_store import _same

ITEMS = [f"i{k}" for k in range(10)]


@pytest.fixture
def api(settings: Settings, tmp_path: Path) -> Iterator[TestClient]:
    """An api process that runs no jobs (as on PostgreSQL by default), snapshots in a directory."""
    quiet = settings.model_copy(
        update={"api_runs_jobs": False, "matrix_snapshot_dir": str(tmp_path / "m"), "matrix_snapshot_min_cells": 0}
    )
    with TestClient(create_app(quiet), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


def _labelled(c: TestClient, raters: tuple[str, ...] = ("judge", "prim")) -> str:
    pid = create_project(c, items=ITEMS)
    for rater in raters:
        rows = [{"item": i, "rater": rater, "value": "pass" if k % 3 else "fail"} for k, i in enumerate(ITEMS)]
        assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def _relabel(c: TestClient, pid: str, n: int, start: int = 0) -> None:
    """``n`` labels of h2 on new cells from item ``start`` on, one request each."""
    rows = [{"item": ITEMS[start + k], "rater": "h2", "value": "pass" if k % 2 else "fail"} for k in range(n)]
    for row in rows:
        assert c.post(f"/projects/{pid}/labels", json=[row]).status_code == 200


def _table_store(engine: Engine) -> tuple[MatrixStore, Any]:
    store = MatrixStore(snapshots=SnapshotTable(), snapshot_min_cells=0)
    return store, worker_sessionmaker(engine, store)


def test_the_table_serves_a_starting_worker_the_matrix_a_fresh_read_gives(
    api: TestClient, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _labelled(api)
    saver, sessions = _table_store(engine)
    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        assert project is not None and saver.save_now(session, project, "default") == project.label_seq == 20
    _relabel(api, pid, 3)  # corrections after the snapshot: the starting worker applies them
    starter, sessions = _table_store(engine)

    def refused(*_: Any) -> None:
        raise AssertionError("a full read where the table's snapshot should have served")

    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        assert project is not None
        fresh = load_matrix(session, project, "default")
        monkeypatch.setattr(service.matrices.store, "load_matrix", refused)
        started = current_matrix(session, project, "default")
    _same(started, fresh)
    assert started.label_seq == 23


def test_the_table_keeps_the_newest_rows_and_ignores_a_damaged_one(api: TestClient, engine: Engine) -> None:
    pid = _labelled(api)
    saver, sessions = _table_store(engine)
    for start in (0, 1, 2):
        _relabel(api, pid, 1, start)
        with session_scope(sessions) as session:
            project = session.get(Project, pid)
            assert project is not None
            saver.save_now(session, project, "default")
    with session_scope(sessions) as session:
        seqs = session.scalars(select(MatrixSnapshot.label_seq).where(MatrixSnapshot.project_id == pid)).all()
        assert sorted(seqs) == [22, 23][-KEPT:]
        assert newest_snapshots(SnapshotTable(), session, [pid]) == {(pid, "default"): 23}
    with session_scope(sessions, write=True) as session:  # one byte of the newest changed: its digest fails
        row = session.get(MatrixSnapshot, (pid, "default", 23))
        assert row is not None
        body = bytearray(row.body)
        at = body.index(b"\x93NUMPY", body.index(b"raw.npy")) + 130  # inside the codes array
        body[at] ^= 1
        row.body = bytes(body)
    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        assert project is not None
        found = read_snapshot(SnapshotTable(), session, project, "default")
        assert found is not None and found[0].label_seq == 22  # the older one serves


def test_an_api_process_that_runs_no_jobs_saves_no_snapshot(api: TestClient, tmp_path: Path) -> None:
    pid = _labelled(api, ("judge", "prim", "h2", "h3"))
    assert api.get(f"/projects/{pid}/reliability").status_code == 200
    api.app.state.sessions.kw["info"]["matrices"].flush()  # type: ignore[attr-defined]
    assert not (tmp_path / "m" / pid).exists()


def test_one_process_per_period_saves_the_snapshot_most_behind(api: TestClient, engine: Engine) -> None:
    behind, ahead = _labelled(api), _labelled(api)
    (store_a, sessions_a), (store_b, sessions_b) = _table_store(engine), _table_store(engine)
    with session_scope(sessions_a) as session:
        project = session.get(Project, ahead)
        assert project is not None
        store_a.save_now(session, project, "default")  # `ahead` has one at its label_seq
    _relabel(api, ahead, 1)
    _relabel(api, behind, 1)
    keepers = [
        SnapshotKeeper(sessions, store, poll_seconds=3600, min_cells=0)
        for sessions, store in ((sessions_a, store_a), (sessions_b, store_b))
    ]
    with session_scope(sessions_a) as session:
        assert snapshot_due(session, SnapshotTable(), 0) == (behind, "default")  # 21 behind against 1
        assert snapshot_due(session, SnapshotTable(), 10 * 4 + 1) is None  # too small: none due
    assert keepers[0].run_once() == (behind, "default", 21)
    assert keepers[1].run_once() is None  # the period not over: the turn was taken
    with session_scope(sessions_a, write=True) as session:  # an hour later
        session.execute(update(Job).where(Job.kind == PERIODIC, Job.key == TURN).values(run_after=utcnow()))
    # `ahead` is 1 event past its snapshot: 40 cells // SNAPSHOT_EVERY = 0 events tolerated, so it is due
    assert 40 // SNAPSHOT_EVERY == 0
    assert keepers[1].run_once() == (ahead, "default", 21)
    with session_scope(sessions_a, write=True) as session:
        session.execute(update(Job).where(Job.kind == PERIODIC, Job.key == TURN).values(run_after=utcnow()))
        assert snapshot_due(session, SnapshotTable(), 0) is None
    assert keepers[0].run_once() is None
    with session_scope(sessions_a) as session:
        payload = session.scalar(select(Job.payload).where(Job.kind == PERIODIC, Job.key == TURN))
        assert payload == {"saved": 2}
        assert newest_snapshots(SnapshotTable(), session, [behind, ahead]) == {
            (behind, "default"): 21,
            (ahead, "default"): 21,
        }
