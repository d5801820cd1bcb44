"""Issue 32: 4 api processes and 2 job workers (process groups standing for hosts) over one real
PostgreSQL, during a 100,000-label ingest: the decision watcher reads each changed decision once,
by one process of the deployment, not once per process.

The api processes run no queue work (as on PostgreSQL by default): the workers' senders watch,
and of the two one per period (``webhook_decision_seconds``) takes the turn. The counters ride on
the watcher's periodic row (``decisions_read``, ``decisions_recorded``): a read that another
process had already recorded would make them differ. PostgreSQL only.
"""

from __future__ import annotations

import time

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.core.db import make_engine
from service.data.jobs import PERIODIC
from service.data.models import DecisionWatch, Job, Project
from service.webhooks.watch import DECISION_WATCH
from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer, LiveWorker
from tests.webhook_receiver import Receiver

ITEMS, RATERS, ROWS = 25_000, ("judge", "prim", "h2", "h3"), 5_000  # 100,000 labels, 20 writes
PERIOD = 1.0
QUEUE = {
    "webhook_allow_private": 1,
    "webhook_poll_seconds": 0.2,
    "webhook_decision_seconds": PERIOD,
    "bootstrap_resamples": 200,
}


def watch_state(database_url: str, pid: str) -> tuple[dict, int | None, int]:
    """The watcher's counters, the label_seq it last recorded, and the project's."""
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            payload = session.scalar(select(Job.payload).where(Job.kind == PERIODIC, Job.key == DECISION_WATCH))
            seen = session.scalar(select(DecisionWatch.label_seq).where(DecisionWatch.project_id == pid))
            seq = session.scalar(select(Project.label_seq).where(Project.id == pid))
            return payload or {}, seen, int(seq or 0)
    finally:
        engine.dispose()


def test_each_changed_decision_is_read_once_for_the_whole_deployment(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("the deployment of N api and M worker hosts is a PostgreSQL one (ANNOPLAN_TEST_DATABASE_URL)")
    api = LiveServer(database_url, ADMIN_KEY, workers=4, api_runs_jobs="false", **QUEUE)
    workers = [LiveWorker(database_url, **QUEUE), LiveWorker(database_url, **QUEUE)]
    began = time.monotonic()
    with Receiver() as receiver, api, api.client() as c:
        c.timeout = httpx.Timeout(120)
        pid = c.post("/projects", json={"name": "ingest", "labels": ["pass", "fail"]}).json()["id"]
        assert c.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}}).status_code == 200
        for ext, kind in zip(RATERS, ["judge", "primary", "human", "human"], strict=True):
            assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        hook = {"url": receiver.url, "events": ["decision.changed"]}  # its baseline: the empty project's
        assert c.post(f"/projects/{pid}/webhooks", json=hook).status_code == 201
        items = [{"external_id": f"i{i:05d}"} for i in range(ITEMS)]
        assert c.post(f"/projects/{pid}/items", json=items).status_code == 200
        rows = [
            {"item": f"i{i:05d}", "rater": r, "value": "pass" if (i % 5) or r == "judge" else "fail"}
            for i in range(ITEMS)
            for r in RATERS
        ]
        try:
            for w in workers:
                w.start()
            deadline = time.monotonic() + 60
            while c.get("/healthz/queue").json()["workers"] < len(workers):
                assert time.monotonic() < deadline, "the workers did not start"
                time.sleep(0.2)
            print(f"set up in {time.monotonic() - began:.1f} s")
            started = time.monotonic()
            for k in range(0, len(rows), ROWS):
                assert c.post(f"/projects/{pid}/labels", json=rows[k : k + ROWS]).status_code == 200
            ingest = time.monotonic() - started
            print(f"ingested in {ingest:.1f} s")
            deadline = time.monotonic() + 60  # the watcher catches up with the last write
            while (state := watch_state(database_url, pid))[1] != state[2] and time.monotonic() < deadline:
                time.sleep(0.2)
            print(f"caught up {time.monotonic() - started - ingest:.1f} s later")
        finally:
            for w in workers:
                w.stop()
    counters, seen, seq = state
    read, recorded = counters.get("decisions_read", 0), counters.get("decisions_recorded", 0)
    print(f"{len(rows) // ROWS} writes in {ingest:.1f} s: {read} decisions read, {recorded} recorded")
    assert seen == seq, "the watcher did not catch up with the last write"
    assert read == recorded >= 1  # each read was of a change nobody had recorded: once per change
    assert read <= len(rows) // ROWS + 1  # at most one per write (and the baseline), not one per process
    assert read <= ingest / PERIOD + 2  # and at most one per period
