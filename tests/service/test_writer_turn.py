"""Write requests wait for SQLite's single writer without holding a pool thread (service.core.db.writer_turn).

Regression: the write dependency took the process's writer lock inside a pool thread. With more
waiting writers than threads, every thread waited for the lock while its holder needed one more
thread to run its route: the server hung, and no read was answered either.
"""

from __future__ import annotations

import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer
from tests.service.test_label_studio import FIXTURES

THREADS = 8  # the smallest pool the settings allow
WRITERS = 3 * THREADS


PLAN = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "random", "seed": 1, "m": 3}


def label_studio_delivery(k: int) -> dict:
    """The fixture's ANNOTATION_CREATED delivery, for task ``1000 + k``."""
    payload = json.loads((FIXTURES / "webhook_annotation_created.json").read_text())
    payload["task"]["id"] = payload["annotation"]["task"] = 1000 + k
    return payload


@pytest.mark.parametrize(
    "writer", ["labels", "key deletion", "label studio webhook", "project", "plan", "certificate", "simulation"]
)
def test_more_waiting_writers_than_threads_neither_block_reads_nor_hang(database_url, writer):
    """Label writes (a project's write dependency), key deletions, Label Studio deliveries and new
    projects (no project dependency: the route's own turn, service.deps.WriterTurn), plans (drafted
    first on threads of their own, then stored in the turn: service.deps.in_writer_turn) and
    certificates and simulations (computed, then stored in the turn) alike."""
    if not database_url.startswith("sqlite"):
        pytest.skip("PostgreSQL has no process-wide writer: its writers wait on row locks inside their route")
    # every writer in one project with one key: its shares of plans and simulations in flight (issue 30)
    # raised to all of them
    shares = {f"{what}_per_{whose}": WRITERS for what in ("plans", "simulations") for whose in ("project", "key")}
    with (
        LiveServer(database_url, ADMIN_KEY, worker_threads=THREADS, **shares) as server,
        server.client() as admin,
    ):
        # a plan in anytime mode sizes the monitor by simulation (seconds each); this test is about queueing
        decision = {"monitoring": "fixed"} if writer == "plan" else {}
        project = {"name": "writers", "labels": ["pass", "fail"], "decision": decision}
        pid = admin.post("/projects", json=project).json()["id"]
        for rater, kind in [("h1", "human"), ("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
            assert admin.post(f"/projects/{pid}/raters", json={"external_id": rater, "kind": kind}).status_code == 201
        items = [{"external_id": f"i{k}"} for k in range(WRITERS)]
        assert admin.post(f"/projects/{pid}/items", json=items).status_code == 200
        if writer == "certificate":  # labels to certify (none by h1, whose labels the read below lists)
            rows = [
                {"item": f"i{k}", "rater": r, "value": "pass" if (k + j) % 4 else "fail"}
                for k in range(WRITERS)
                for j, r in enumerate(("judge", "prim", "h2", "h3"))
            ]
            assert admin.post(f"/projects/{pid}/labels", json=rows).status_code == 200
        keys = [admin.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()["id"] for _ in range(WRITERS)]

        # Another process holds the database's write lock, so the server's writers queue behind it.
        blocker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")

        def write(k: int) -> int:
            with server.client(timeout=180 if writer == "plan" else 60) as c:
                row = {"item": f"i{k}", "rater": "h1", "value": "pass"}
                try:
                    if writer == "labels":
                        return c.post(f"/projects/{pid}/labels", json=[row]).status_code
                    if writer == "label studio webhook":
                        delivery = label_studio_delivery(k)
                        return c.post(f"/projects/{pid}/webhooks/label-studio", json=delivery).status_code
                    if writer == "plan":
                        return c.post(f"/projects/{pid}/plan", json=PLAN).status_code
                    if writer == "project":
                        return c.post("/projects", json={"name": f"p{k}", "labels": ["pass", "fail"]}).status_code
                    if writer == "certificate":
                        body = {"seed": k, "n_resamples": 100}
                        return c.post(f"/projects/{pid}/certificates", json=body).status_code
                    if writer == "simulation":  # a small one, answered at once: its Idempotency-Key is stored
                        body = {"p_h": 0.85, "p_j": 0.9, "rho": 1.0, "design": "random", "trials": 20, "seed": k}
                        headers = {"Idempotency-Key": f"sim-{k}"}
                        return c.post(f"/projects/{pid}/simulate", json=body, headers=headers).status_code
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
        expected = {
            "labels": 200,
            "key deletion": 204,
            "label studio webhook": 200,
            "project": 201,
            "plan": 201,
            "certificate": 201,
            "simulation": 200,
        }[writer]
        assert statuses == [expected] * WRITERS, "queued writers hung or failed"
        if writer == "label studio webhook":
            labeled = admin.get(f"/projects/{pid}/labels", params={"rater": "ls-user-12", "limit": 1000}).json()
            assert sorted(row["item"] for row in labeled["items"]) == sorted(str(1000 + k) for k in range(WRITERS))
        elif writer == "plan":
            assert admin.get(f"/projects/{pid}/plan").json()["design"] == "random"
        elif writer == "project":
            names = {p["name"] for p in admin.get("/projects", params={"limit": 100}).json()["items"]}
            assert names >= {f"p{k}" for k in range(WRITERS)}
        elif writer == "simulation":  # every key was stored: reusing one for another body is refused
            other = {"p_h": 0.8, "p_j": 0.9, "rho": 1.0, "design": "random", "trials": 20, "seed": 0}
            assert (
                admin.post(f"/projects/{pid}/simulate", json=other, headers={"Idempotency-Key": "sim-0"}).status_code
                == 409
            )
        elif writer == "certificate":
            issued = admin.get(f"/projects/{pid}/certificates", params={"limit": 100}).json()["items"]
            assert len(issued) == WRITERS
        elif writer == "labels":
            labeled = admin.get(f"/projects/{pid}/labels", params={"rater": "h1", "limit": 1000}).json()["items"]
            assert sorted(row["item"] for row in labeled) == sorted(f"i{k}" for k in range(WRITERS))
        else:
            listed = admin.get("/keys", params={"include_revoked": True}).json()
            assert {k["id"] for k in listed if k["revoked_at"]} >= set(keys)
