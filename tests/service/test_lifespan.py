"""A server's lifespan: the background threads it starts end with it, and a second lifespan of a serving
app is refused (it would replace the first's engine and threads, which then ran on unstopped, reading
the next server's database)."""

from __future__ import annotations

import threading

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.core.settings import Settings
from tests.conftest import ADMIN_KEY
from tests.factories import create_project

PER_APP = (
    "annoplan-strata-warmer",
    "annoplan-webhooks",
    "annoplan-documents",
    "annoplan-table-statistics",
    "annoplan-matrix-snapshots",
    "annoplan-history-replays",
)
"""Name prefixes of the threads one app's lifespan starts (the simulation heartbeat is per process)."""


def app_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith(PER_APP)}


def test_a_lifespan_stops_every_thread_it_started(settings: Settings) -> None:
    before = app_threads()
    with TestClient(create_app(settings), headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
        pid = create_project(client, items=[f"i{i}" for i in range(12)])
        rows = [
            {"item": f"i{i}", "rater": r, "value": "pass" if (i + k) % 3 else "fail"}
            for i in range(12)
            for k, r in enumerate(("judge", "prim", "h2", "h3"))
        ]
        assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
        plan = {"source": "prior", "p_h": 0.85, "p_j": 0.9}
        assert client.post(f"/projects/{pid}/plan", json=plan).status_code == 201  # pokes the strata warmer
        assert client.get(f"/projects/{pid}/dashboard").status_code == 200  # hands work to the documents' threads
        assert {t.name.split("_")[0] for t in app_threads() - before} >= {"annoplan-strata-warmer", "annoplan-webhooks"}
    assert app_threads() - before == set()


def test_a_second_lifespan_of_a_serving_app_is_refused(settings: Settings) -> None:
    before = app_threads()
    app = create_app(settings)
    with TestClient(app) as first:
        with pytest.raises(RuntimeError, match="already serving"), TestClient(app):
            pass
        assert first.get("/healthz").json() == {"status": "ok", "database": "ok"}  # the first still serves
    assert app_threads() - before == set()
    with TestClient(app) as again:  # once stopped, it may serve again
        assert again.get("/healthz").status_code == 200
    assert app_threads() - before == set()
