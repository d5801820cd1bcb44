"""The outside attack of issue 16, replayed against live servers with several workers.

Each test failed before its fix; they run on SQLite and, in CI, on PostgreSQL.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer

PRIOR = {"source": "prior", "p_h": 0.85, "p_j": 0.9}


def racing(n: int, call: Callable[[httpx.Client, int], httpx.Response], server: LiveServer) -> Counter[int]:
    """Status codes of ``n`` calls released at the same moment, each on its own connection."""
    start = threading.Barrier(n)

    def one(k: int) -> int:
        with server.client() as c:
            start.wait()
            return call(c, k).status_code

    with ThreadPoolExecutor(n) as pool:
        return Counter(pool.map(one, range(n)))


def project_with_raters(c: httpx.Client, n_items: int, humans: list[str]) -> str:
    pid = c.post("/projects", json={"name": "race", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), *((h, "human") for h in humans)]:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)]).status_code == 200
    return pid


def test_concurrent_plans_and_batches_racing_a_replan_never_500(database_url: str) -> None:
    with LiveServer(database_url, ADMIN_KEY, workers=2) as server, server.client() as admin:
        for round_ in range(3):  # the race is likely, not certain, in any one round
            pid = project_with_raters(admin, 300, ["h1", "h2"])
            plans = racing(4, lambda c, k, pid=pid: c.post(
                f"/projects/{pid}/plan", json={**PRIOR, "design": "random", "seed": k}), server)
            assert set(plans) <= {201, 409} and plans[201] >= 1, plans
            # New raters join and a re-plan races the batch requests of every rater.
            new = [f"n{k}" for k in range(6)]
            for h in new:
                assert admin.post(f"/projects/{pid}/raters", json={"external_id": h, "kind": "human"}).status_code == 201
            everyone = ["h1", "h2", *new]

            def call(c: httpx.Client, k: int, pid: str = pid) -> httpx.Response:
                if k % 6 == 0:
                    return c.post(f"/projects/{pid}/plan", json={**PRIOR, "design": "random", "seed": 100 + k})
                return c.post(f"/projects/{pid}/batches", json={"rater": everyone[k % len(everyone)], "size": 5})

            statuses = racing(18, call, server)
            assert set(statuses) <= {200, 201, 409}, f"round {round_}: {statuses}"
            # Every rater's list is whole and has no item twice.
            for h in everyone:
                r = admin.post(f"/projects/{pid}/batches", json={"rater": h, "size": 1000})
                assert r.status_code == 200, r.text
