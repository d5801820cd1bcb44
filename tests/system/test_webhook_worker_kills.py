"""Issue 32: webhook deliveries run on the job queue by `annoplan worker` processes (process groups
standing for hosts), at least once and never two attempts of one delivery at once, while the
workers are killed with SIGKILL mid-delivery and started again.

Runs on a SQLite file, or on PostgreSQL when ``ANNOPLAN_TEST_DATABASE_URL`` is set.
"""

from __future__ import annotations

import time
from collections import Counter

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer, LiveWorker
from tests.system.test_webhook_delivery import PLAN, deliveries, project
from tests.webhook_receiver import Receiver

HOOKS, EVENTS = 3, 6
LEASE = 3.0
WORKER = {
    "webhook_allow_private": 1,
    "webhook_poll_seconds": 0.2,
    "webhook_retry_base_seconds": 0.2,
    "webhook_lease_seconds": LEASE,
    "webhook_timeout_seconds": 1.0,
    "webhook_target_budget_seconds": 0.5,
    "job_poll_seconds": 0.2,
}


def test_deliveries_survive_worker_kills_at_least_once_and_never_two_at_once(database_url: str) -> None:
    api = LiveServer(database_url, ADMIN_KEY, api_runs_jobs="false", webhook_allow_private=1)
    workers = [LiveWorker(database_url, **WORKER), LiveWorker(database_url, **WORKER)]
    # every request is held 0.4 s: a kill lands mid-delivery (sent, no outcome recorded)
    with Receiver(lambda n: (200, 0.4)) as receiver, api, api.client() as c:
        pid = project(c)
        hooks = [
            c.post(f"/projects/{pid}/webhooks", json={"url": f"{receiver.url}?hook={k}", "events": ["plan.created"]})
            for k in range(HOOKS)
        ]
        assert {r.status_code for r in hooks} == {201}
        for _ in range(EVENTS):
            assert c.post(f"/projects/{pid}/plan", json=PLAN).status_code == 201
        kills = 0
        try:
            for w in workers:
                w.start()
            for victim, after in [(0, 3), (1, 8), (0, 12)]:
                receiver.wait_for(after, timeout=60)
                workers[victim].kill()
                kills += 1
                time.sleep(0.3)
                workers[victim].start()
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                logs = [d for r in hooks for d in deliveries(c, pid, r.json()["id"])]
                if len(logs) == HOOKS * EVENTS and {d["status"] for d in logs} == {"delivered"}:
                    break
                time.sleep(0.2)
        finally:
            for w in workers:
                w.kill()
    assert len(logs) == HOOKS * EVENTS and {d["status"] for d in logs} == {"delivered"}, logs
    sent = Counter((r.path, r.headers["webhook-id"]) for r in receiver.received)
    assert len(sent) == HOOKS * EVENTS  # every delivery arrived, at least once
    assert receiver.overlaps == 0  # and never while another attempt of it was in flight
    again = sum(n - 1 for n in sent.values())
    print(f"{kills} kills: {len(receiver.received)} requests for {len(sent)} deliveries ({again} sent again)")
