"""Issue 32: a job worker stopped with SIGTERM gives its running simulation back to the queue.

The job is queued again at once with its attempt not counted (not failed, not left to its
lease), and the next worker runs it from the start. The lease is long (60 s) so that the second
worker finishing it within seconds shows a release, not a takeover after the lease ran out.
Runs on a SQLite file, or on PostgreSQL when ``ANNOPLAN_TEST_DATABASE_URL`` is set.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer, LiveWorker
from tests.system.test_job_worker import BODY, RHO, job_row, poll_until, project

LEASE = 60.0
LONG = {**BODY, "trials": 100_000}  # long enough that the stop lands mid-job on a fast machine
SETTINGS = {"job_lease_seconds": LEASE, "job_poll_seconds": 0.2, "simulation_max_work": 10**9}


@pytest.mark.slow
def test_a_worker_stopped_with_sigterm_gives_its_job_back_uncounted(database_url: str) -> None:
    api = LiveServer(database_url, ADMIN_KEY, simulation_sync_limit=0, api_runs_jobs="false", **SETTINGS)
    with api, api.client() as c:
        pid = project(c)
        first = LiveWorker(database_url, **SETTINGS).start()
        second = LiveWorker(database_url, **SETTINGS)
        try:
            r = c.post(f"/projects/{pid}/simulate", json=LONG)
            assert r.status_code == 202, r.text
            poll, sim_id = r.json()["poll"], r.json()["id"]
            poll_until(c, poll, lambda j: j["status"] == "running", timeout=120)
            time.sleep(1.0)  # computing
            assert job_row(database_url, sim_id).attempts == 1
            assert first.proc is not None
            first.proc.terminate()  # SIGTERM to the worker alone, as a redeploy sends it
            assert first.proc.wait(timeout=30) == 0
            first.proc = None
            given_back = job_row(database_url, sim_id)
            shown = c.get(poll).json()
            second.start()
            stopped_at = time.monotonic()
            job = poll_until(c, poll, lambda j: j["status"] in ("done", "failed"), timeout=180)
            finished_after = time.monotonic() - stopped_at
        finally:
            first.kill()
            second.stop()
    given = (given_back.state, given_back.attempts, given_back.lease_token, given_back.error)
    assert given == ("queued", 0, None, None)
    assert (shown["status"], shown["done"], shown["error"]) == ("queued", 0, None)
    assert job["status"] == "done", job["error"]
    assert job["done"] == job["total"] == len(RHO)
    finished = job_row(database_url, sim_id)
    assert (finished.state, finished.attempts) == ("done", 1)  # the stopped worker's attempt was not counted
    assert finished_after < LEASE  # claimed at once, not after the lease ran out
