"""Issue 32: simulations run on the job queue by `annoplan worker` processes, each standing for a host.

An api server that leaves the queue to workers takes a simulation; the worker process group
running it is killed with SIGKILL mid-job, and a second worker takes the job over once its
lease runs out: the client polling the api sees it complete, with the seeded run's result.
Runs on a SQLite file, or on PostgreSQL when ``ANNOPLAN_TEST_DATABASE_URL`` is set.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.simulate import simulate
from service.core.db import make_engine
from service.data.models import Job
from tests.conftest import ADMIN_KEY
from tests.live_server import ROOT, START_DEADLINE_S, LiveServer, LiveWorker, free_port
from tests.system.test_attacks import alive, descendants

LEASE = 2.0
# cells and trials enough (seconds of work) that the kill lands mid-job on a fast machine too:
# six cells of 20,000 trials once finished between two polls of 0.1 s
RHO = [round(0.1 + 0.06 * k, 2) for k in range(16)]
TRIALS = 100_000  # the route's most
BODY = {"p_h": 0.85, "p_j": 0.9, "rho": RHO, "design": "random", "trials": TRIALS, "seed": 7}
PLANNER = dict(
    n_items=20,
    n_humans=3,
    n_labels=2,
    p_h=0.85,
    p_j=[0.9],
    prevalence=None,
    rho=RHO,
    design=["random"],
    coefficient=["po"],
    rule="margin",
    epsilon=0.05,
    delta=0.05,
    omega_threshold=0.5,
    q=0.05,
    trials=TRIALS,
    clusters=None,
    cluster_difficulty=0.5,
    rng=7,
)
SETTINGS = {"job_lease_seconds": LEASE, "job_poll_seconds": 0.2, "simulation_max_work": 10**9}


def project(c: httpx.Client) -> str:
    pid = c.post("/projects", json={"name": "jobs", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(20)]).status_code == 200
    return pid


def job_row(database_url: str, sim_id: str) -> Job:
    engine = make_engine(database_url)
    try:
        with Session(engine, expire_on_commit=False) as session:
            job = session.scalar(select(Job).where(Job.kind == "simulation", Job.key == sim_id))
            assert job is not None
            return job
    finally:
        engine.dispose()


def poll_until(c: httpx.Client, poll: str, done: callable, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while not done(job := c.get(poll).json()):
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"still {job} after {timeout} s"
        time.sleep(0.1)
    return job


def test_a_simulation_whose_worker_host_dies_is_finished_by_another(database_url: str) -> None:
    api = LiveServer(database_url, ADMIN_KEY, simulation_sync_limit=0, api_runs_jobs="false", **SETTINGS)
    with api, api.client() as c:
        pid = project(c)
        first = LiveWorker(database_url, **SETTINGS).start()
        second = LiveWorker(database_url, **SETTINGS)
        try:
            r = c.post(f"/projects/{pid}/simulate", json=BODY)
            assert r.status_code == 202, r.text
            poll = r.json()["poll"]
            sim_id = r.json()["id"]
            # the api runs nothing itself: the first worker takes the job and computes a cell or more
            job = poll_until(c, poll, lambda j: j["status"] == "running" and 1 <= j["done"] < j["total"], timeout=120)
            held = job_row(database_url, sim_id)
            assert held.state == "running", (held.state, held.error)
            assert (held.lease_owner or "").endswith(f":{first.pid}:worker") and held.attempts == 1
            first.kill()
            killed_at = time.monotonic()
            second.start()
            job = poll_until(c, poll, lambda j: j["status"] in ("done", "failed"), timeout=180)
            taken_after = time.monotonic() - killed_at
        finally:
            first.kill()
            second.stop()
    assert job["status"] == "done", job["error"]
    assert job["done"] == job["total"] == len(RHO)
    finished = job_row(database_url, sim_id)
    assert finished.state == "done" and finished.attempts == 2 and finished.lease_token is None
    expected = [cell.as_dict() for cell in simulate(**PLANNER).cells]
    assert job["result"]["cells"] == expected  # run again from the start, seeded: the same result
    print(f"taken over and finished {taken_after:.1f} s after the kill (lease {LEASE} s)")


def test_annoplan_serve_starts_a_worker_beside_an_api_that_runs_no_jobs_and_stops_it(database_url: str) -> None:
    """One command still does everything when the api leaves the queue to workers (as on PostgreSQL)."""
    port = free_port()
    env = {
        **os.environ,
        "ANNOPLAN_DATABASE_URL": database_url,
        "ANNOPLAN_ADMIN_KEY": ADMIN_KEY,
        "ANNOPLAN_PORT": str(port),
        "ANNOPLAN_API_RUNS_JOBS": "false",
        "ANNOPLAN_SIMULATION_SYNC_LIMIT": "0",
        "ANNOPLAN_JOB_POLL_SECONDS": "0.2",
    }
    serve = subprocess.Popen([sys.executable, "-m", "service.cli", "serve"], cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert serve.poll() is None and time.monotonic() < deadline, "annoplan serve did not start"
            time.sleep(0.1)
        workers = [p for p in descendants(serve.pid) if "worker" in Path(f"/proc/{p}/cmdline").read_bytes().decode()]
        assert len(workers) == 1, "one worker beside the api"
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=60) as c:
            pid = project(c)
            r = c.post(f"/projects/{pid}/simulate", json={**BODY, "trials": 50})
            assert r.status_code == 202, r.text
            job = poll_until(c, r.json()["poll"], lambda j: j["status"] in ("done", "failed"), timeout=120)
            assert job["status"] == "done", job["error"]
        owner = job_row(database_url, r.json()["id"])
        everything = descendants(serve.pid)
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
        deadline = time.monotonic() + 30
        while alive(everything) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert alive(everything) == set(), "the worker outlived annoplan serve"
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert owner.state == "done" and owner.attempts == 1
