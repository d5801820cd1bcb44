"""Issue 32: over one real PostgreSQL, a job worker saves the label matrix into the ``matrix_snapshots``
table by default, and a fresh api process's first /reliability reads that snapshot plus the events
since, not every label.

Which path a fresh server took is read from PostgreSQL's own counters, not from the server: the rows
of ``current_labels`` read (``pg_stat_user_tables``: sequential and index tuples) while it answered.
A server started with snapshots off (``ANNOPLAN_MATRIX_SNAPSHOT_DIR=``) is the control: it reads every
label. The 1M figures (wall and CPU against a warm server) are ``bench/fresh_worker.py``'s.
PostgreSQL only.
"""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import select, text

from service.core.db import make_engine
from service.data.models import MatrixSnapshot, Project
from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer, LiveWorker

ITEMS, RATERS = 30_000, ("judge", "prim", "h2", "h3")  # 120,000 labels: past the smallest matrix saved (100,000 cells)
QUIET = {"api_runs_jobs": "false", "webhook_sender": "false", "bootstrap_resamples": 200}


def current_label_reads(database_url: str) -> int:
    """Rows of ``current_labels`` read so far by every backend that has reported (a backend reports when
    its connection closes, at the latest)."""
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            return int(
                conn.scalar(
                    text(
                        "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_user_tables "
                        "WHERE relname = 'current_labels'"
                    )
                )
            )
    finally:
        engine.dispose()


def snapshots(database_url: str, pid: str) -> tuple[int, list[int]]:
    """The project's label_seq and the label_seqs of its snapshots."""
    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            seq = conn.scalar(select(Project.label_seq).where(Project.id == pid))
            saved = conn.scalars(select(MatrixSnapshot.label_seq).where(MatrixSnapshot.project_id == pid)).all()
            return int(seq or 0), sorted(int(s) for s in saved)
    finally:
        engine.dispose()


def first_reliability(database_url: str, pid: str, **settings: object) -> tuple[dict, int, float]:
    """A new api server's first /reliability of ``pid``: the document, the current labels read meanwhile
    (counted once the server has stopped and its connections reported), and its wall time."""
    before = current_label_reads(database_url)
    with LiveServer(database_url, ADMIN_KEY, **QUIET, **settings) as server, server.client() as c:
        c.timeout = httpx.Timeout(300)
        t0 = time.perf_counter()
        r = c.get(f"/projects/{pid}/reliability")
        wall = time.perf_counter() - t0
        assert r.status_code == 200, r.text
    time.sleep(0.5)
    return r.json(), current_label_reads(database_url) - before, wall


def test_a_fresh_api_process_reads_the_workers_snapshot_plus_the_events_since(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("the snapshots table is PostgreSQL's default (ANNOPLAN_TEST_DATABASE_URL)")
    with LiveServer(database_url, ADMIN_KEY, **QUIET) as api, api.client() as c:
        c.timeout = httpx.Timeout(300)
        pid = c.post("/projects", json={"name": "fresh", "labels": ["pass", "fail"]}).json()["id"]
        for ext, kind in zip(RATERS, ("judge", "primary", "human", "human"), strict=True):
            assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(ITEMS)]).is_success
        for k, rater in enumerate(RATERS):
            rows = [{"item": f"i{i}", "rater": rater, "value": "pass" if (i + k) % 4 else "fail"} for i in range(ITEMS)]
            assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
        with LiveWorker(database_url, matrix_snapshot_seconds=0.5, **QUIET):  # a job worker saves the snapshot
            deadline = time.monotonic() + 120
            while snapshots(database_url, pid)[1] != [ITEMS * len(RATERS)]:
                assert time.monotonic() < deadline, "the worker saved no snapshot"
                time.sleep(0.2)
        assert c.get(f"/projects/{pid}/reliability").status_code == 200  # this api's first look: every label
        corrections = [{"item": f"i{i}", "rater": "judge", "value": "fail" if i % 4 else "pass"} for i in range(500)]
        assert c.post(f"/projects/{pid}/labels", json=corrections).status_code == 200
        t0 = time.perf_counter()
        warm = c.get(f"/projects/{pid}/reliability")  # its kept matrix and the 500 events
        warm_wall = time.perf_counter() - t0
        assert warm.status_code == 200
    seq, saved = snapshots(database_url, pid)
    assert seq == ITEMS * len(RATERS) + 500 and saved == [ITEMS * len(RATERS)]

    doc, reads, wall = first_reliability(database_url, pid)
    control, control_reads, control_wall = first_reliability(database_url, pid, matrix_snapshot_dir="")
    print(
        f"first /reliability at {ITEMS:,} items: warm api {warm_wall:.2f} s, fresh from the snapshot {wall:.2f} s "
        f"({reads:,} current labels read), fresh without snapshots {control_wall:.2f} s ({control_reads:,} read)"
    )
    assert doc == control == warm.json()  # a cache: the same document whichever way the matrix came
    assert control_reads >= ITEMS * len(RATERS)  # the control reads every label: the counter sees reads
    assert reads < ITEMS * len(RATERS) / 10  # the fresh api did not: it read the snapshot and 500 events
    assert snapshots(database_url, pid)[1] == saved  # and, running no jobs, saved none
