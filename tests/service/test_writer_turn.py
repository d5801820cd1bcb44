"""Write requests wait for SQLite's single writer without holding a pool thread (service.db.writer_turn).

Regression: the write dependency took the process's writer lock inside a pool thread. With more
waiting writers than threads, every thread waited for the lock while its holder needed one more
thread to run its route: the server hung, and no read was answered either.
"""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer

THREADS = 8  # the smallest pool the settings allow
WRITERS = 3 * THREADS


@pytest.mark.parametrize("writer", ["labels", "key deletion"])
def test_more_waiting_writers_than_threads_neither_block_reads_nor_hang(database_url, writer):
    """Label writes (a project's write dependency) and key deletions (no project: the route's own
    turn, service.deps.WriterTurn) alike."""
    if not database_url.startswith("sqlite"):
        pytest.skip("PostgreSQL has no process-wide writer: its writers wait on row locks inside their route")
    with LiveServer(database_url, ADMIN_KEY, worker_threads=THREADS) as server, server.client() as admin:
        pid = admin.post("/projects", json={"name": "writers", "labels": ["pass", "fail"]}).json()["id"]
        assert admin.post(f"/projects/{pid}/raters", json={"external_id": "h1", "kind": "human"}).status_code == 201
        items = [{"external_id": f"i{k}"} for k in range(WRITERS)]
        assert admin.post(f"/projects/{pid}/items", json=items).status_code == 200
        keys = [admin.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["id"] for _ in range(WRITERS)]

        # Another process holds the database's write lock, so the server's writers queue behind it.
        blocker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")

        def write(k: int) -> int:
            with server.client(timeout=60) as c:
                row = {"item": f"i{k}", "rater": "h1", "value": "pass"}
                try:
                    if writer == "labels":
                        return c.post(f"/projects/{pid}/labels", json=[row]).status_code
                    return c.delete(f"/keys/{keys[k]}").status_code
                except httpx.TimeoutException:
                    return 0

        with ThreadPoolExecutor(WRITERS) as pool:
            writes = [pool.submit(write, k) for k in range(WRITERS)]
            time.sleep(2)  # every writer has reached the server and waits
            try:
                read = admin.get(f"/projects/{pid}/labels", params={"rater": "h1"}, timeout=15)
            except httpx.TimeoutException:
                read = None
            finally:
                blocker.rollback()
                blocker.close()
            statuses = [w.result() for w in writes]
        assert read is not None, "a read waited behind the queued writers (no thread free)"
        assert read.status_code == 200 and read.json()["items"] == []
        assert statuses == [200 if writer == "labels" else 204] * WRITERS, "queued writers hung or failed"
        if writer == "labels":
            labeled = admin.get(f"/projects/{pid}/labels", params={"rater": "h1", "limit": 1000}).json()["items"]
            assert sorted(row["item"] for row in labeled) == sorted(f"i{k}" for k in range(WRITERS))
        else:
            listed = admin.get("/keys", params={"include_revoked": True}).json()
            assert {k["id"] for k in listed if k["revoked_at"]} >= set(keys)
