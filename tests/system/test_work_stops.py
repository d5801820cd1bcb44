"""Work stops when its client leaves (issue 30): a plan, a synchronous simulation, a certificate and a
certificate verification, each large enough to compute in a child process of a live server, whose client
closes the connection mid-computation. Counted: every computing child is gone within 2 s of the close, and a
plan or certificate whose client left is not stored.

Before, a plan, a synchronous simulation and a certificate computed on a request thread to the end (a plan or
certificate then stored) however long the client had been gone; the verification's kill had no test of its
own. A certificate computed inside its process's turn to write, so on SQLite every other project's writes
waited for it."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer
from tests.system.test_attacks import alive, computations, seconds_to_stop_after_leaving

GONE_WITHIN_S = 2.0


def labelled_project(c: httpx.Client, n_items: int) -> str:
    """A project of ``n_items`` items, each labelled by a judge, the primary and three humans."""
    pid: str = c.post("/projects", json={"name": "leaving", "labels": ["pass", "fail"]}).json()["id"]
    raters = [("judge", "judge"), ("prim", "primary"), ("h1", "human"), ("h2", "human"), ("h3", "human")]
    for ext, kind in raters:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{k}"} for k in range(n_items)]).status_code == 200
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, n_items)
    for ext, _ in raters:
        values = np.where(rng.random(n_items) < 0.85, truth, 1 - truth)
        rows = [{"item": f"i{k}", "rater": ext, "value": ("pass", "fail")[v]} for k, v in enumerate(values)]
        assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def test_a_plan_stops_and_stores_nothing_when_its_client_leaves(database_url: str) -> None:
    with LiveServer(database_url, ADMIN_KEY) as server, server.client(timeout=300) as c:
        pid = labelled_project(c, 20_000)  # 100,000 cells: the draft computes in a child (off_worker)
        plan = {"source": "pilot", "design": "auto", "seed": 3}
        took = seconds_to_stop_after_leaving(server, f"/projects/{pid}/plan", plan)
        assert took <= GONE_WITHIN_S, f"the plan computed on for {took:.1f} s after its client left"
        time.sleep(1.0)  # the request thread sees the departure at its next poll and ends
        assert c.get(f"/projects/{pid}/plan").status_code == 404, "a plan whose client left was stored"
        # the project's plan share is free again: the same plan, waited for, is computed and stored
        assert c.post(f"/projects/{pid}/plan", json={**plan, "design": "random"}).status_code == 201


def test_a_synchronous_simulation_stops_when_its_client_leaves(database_url: str) -> None:
    server = LiveServer(database_url, ADMIN_KEY, simulation_sync_limit=50_000_000, simulation_max_work=50_000_000)
    with server, server.client() as c:
        pid = c.post("/projects", json={"name": "sim", "labels": ["pass", "fail"]}).json()["id"]
        body = {"p_h": 0.85, "p_j": 0.9, "n_items": 2_000, "n_humans": 4, "rho": [0.5], "trials": 2_000, "seed": 1}
        took = seconds_to_stop_after_leaving(server, f"/projects/{pid}/simulate", body)
        assert took <= GONE_WITHIN_S, f"the simulation computed on for {took:.1f} s after its client left"
        small = c.post(f"/projects/{pid}/simulate", json={**body, "trials": 2})  # and one waited for is answered
        assert small.status_code == 200, small.text


def test_certificates_compute_off_the_writers_turn_and_stop_when_their_client_leaves(database_url: str) -> None:
    """Issuing a certificate leaves another project's writes free, and stops storing nothing when its client
    leaves; verifying one stops likewise. 20,000 label rows x 100,000 resamples (the most a certificate may
    name) compute for seconds in a child; resamples run over item patterns, so 10,000 took under a second:
    the work bound is raised for them."""
    with LiveServer(database_url, ADMIN_KEY, certificate_max_work=10**10) as server, server.client(timeout=300) as c:
        assert server.proc is not None
        pid = labelled_project(c, 4_000)
        other = c.post("/projects", json={"name": "other", "labels": ["pass", "fail"]}).json()["id"]
        assert c.post(f"/projects/{other}/raters", json={"external_id": "h", "kind": "human"}).status_code == 201
        assert c.post(f"/projects/{other}/items", json=[{"external_id": "x"}]).status_code == 200
        body = {"n_resamples": 100_000, "seed": 1}
        before = computations(server.proc.pid)
        issued: list[httpx.Response] = []
        issuing = threading.Thread(target=lambda: issued.append(c.post(f"/projects/{pid}/certificates", json=body)))
        issuing.start()
        deadline = time.monotonic() + 2.0  # a tree that computes in the request has no child to wait for
        while not alive(computations(server.proc.pid) - before) and time.monotonic() < deadline:
            time.sleep(0.05)
        with server.client() as writer:  # another project's labels, written while the certificate computes
            written = writer.post(f"/projects/{other}/labels", json=[{"item": "x", "rater": "h", "value": "pass"}])
        computing = issuing.is_alive()
        issuing.join()
        assert written.status_code == 200, written.text
        assert computing, "another project's labels waited for the certificate's computation (the writer was held)"
        assert issued[0].status_code == 201, issued[0].text
        again = c.post(f"/projects/{pid}/certificates", json=body)  # idempotent: the first certificate
        assert again.status_code == 200 and again.json() == issued[0].json()

        took = seconds_to_stop_after_leaving(server, f"/projects/{pid}/certificates", {**body, "seed": 2})
        assert took <= GONE_WITHIN_S, f"the certificate computed on for {took:.1f} s after its client left"
        time.sleep(1.0)  # the request sees the departure at its next poll and ends
        stored = c.get(f"/projects/{pid}/certificates").json()["items"]
        assert [s["id"] for s in stored] == [issued[0].json()["predicate"]["certificate"]["id"]], (
            "a certificate whose client left was stored"
        )

        export = c.get(f"/projects/{pid}/labels", params={"history": "true", "format": "ndjson"}).text
        labels = [json.loads(line) for line in export.splitlines()]
        verify = {"certificate": issued[0].json(), "labels": labels}
        took = seconds_to_stop_after_leaving(server, "/certificates/verify", verify)
        assert took <= GONE_WITHIN_S, f"the verification computed on for {took:.1f} s after its client left"
