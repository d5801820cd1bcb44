"""`GET /healthz/queue`: live job workers (heartbeats within their lease) and the age of the oldest
waiting work, so a deployment with no worker running says so."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data import jobs
from service.data.models import utcnow
from tests.conftest import ADMIN_KEY


def app_client(settings: Settings, **changes: object) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=changes)), raise_server_exceptions=False)


@pytest.fixture
def idle(settings: Settings) -> Iterator[TestClient]:
    """An api that leaves the queue to workers, none of which runs."""
    with app_client(settings, api_runs_jobs=False, webhook_sender=False) as c:
        yield c


def test_an_api_that_runs_the_queue_is_its_live_worker(settings: Settings) -> None:
    with app_client(settings, api_runs_jobs=True, webhook_sender=False) as c:
        deadline = time.monotonic() + 10
        while (body := c.get("/healthz/queue").json())["workers"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert body == {"status": "ok", "workers": 1, "oldest_waiting_seconds": None}
    with app_client(settings, api_runs_jobs=False, webhook_sender=False) as c:  # it stopped: its heartbeat went
        assert c.get("/healthz/queue").json()["status"] == "no_worker"


def test_no_worker_and_the_oldest_waiting_work_are_shown(idle: TestClient) -> None:
    sessions = idle.app.state.sessions  # type: ignore[attr-defined]
    assert idle.get("/healthz/queue").json() == {"status": "no_worker", "workers": 0, "oldest_waiting_seconds": None}
    now = utcnow()
    with session_scope(sessions, write=True) as session:
        jobs.enqueue(session, "simulation", "sim_a", {}, run_after=now - timedelta(seconds=30))
        jobs.enqueue(session, "simulation", "sim_later", {}, run_after=now + timedelta(hours=1))  # not due yet
        jobs.enqueue(session, jobs.PERIODIC, "a-task", {}, run_after=now - timedelta(days=3))  # standing rows:
        jobs.enqueue(session, "webhook", "wh_x", {}, run_after=now - timedelta(days=3))  # no work waits in them
    body = idle.get("/healthz/queue").json()
    assert body["status"] == "no_worker" and 30 <= body["oldest_waiting_seconds"] < 40
    jobs.beat(sessions, "host:1:worker", lease_seconds=60)
    jobs.beat(sessions, "host:1:worker", lease_seconds=60)  # one row per worker, renewed
    jobs.beat(sessions, "host:2:worker", lease_seconds=0.05)
    assert idle.get("/healthz/queue").json()["workers"] == 2
    time.sleep(0.1)
    assert idle.get("/healthz/queue").json()["workers"] == 1  # the second's heartbeat ran out
    jobs.retire(sessions, "host:1:worker")
    assert idle.get("/healthz/queue").json()["status"] == "no_worker"


def test_the_queue_health_needs_no_key(idle: TestClient) -> None:
    idle.headers.pop("Authorization", None)
    assert idle.get("/healthz/queue", headers={"Authorization": f"Bearer {ADMIN_KEY}x"}).status_code == 200
    assert idle.get("/healthz/queue").status_code == 200
