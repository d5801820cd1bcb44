"""Outbound webhooks on real servers: an event survives a SIGKILL of the server in the middle of its
delivery (sent again after restart: at-least-once), and two server processes sharing one database
never send one delivery twice, nor at the same time.

Runs on a SQLite file, or on PostgreSQL when ``ANNOPLAN_TEST_DATABASE_URL`` is set.
"""

from __future__ import annotations

import time
from collections import Counter

import httpx
from standardwebhooks import Webhook as Verifier

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer
from tests.webhook_receiver import Receiver

PLAN = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "random", "seed": 1, "m": 3}
# the servers run the job queue, webhook deliveries included (unset, they do not on PostgreSQL)
SENDER = {
    "webhook_allow_private": 1,
    "webhook_poll_seconds": 0.2,
    "webhook_retry_base_seconds": 0.2,
    "api_runs_jobs": 1,
}


def project(c: httpx.Client) -> str:
    pid = c.post("/projects", json={"name": "hooks", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human")]:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(10)]).status_code == 200
    return pid


def deliveries(c: httpx.Client, pid: str, wid: str) -> list[dict]:
    return c.get(f"/projects/{pid}/webhooks/{wid}/deliveries").json()["items"]


def test_sigkill_mid_delivery_loses_no_event(database_url: str) -> None:
    # the first request is held (1.5 s, inside the 2 s timeout) while the server is killed
    with (
        Receiver(lambda n: (200, 1.5 if n == 0 else 0.0)) as receiver,
        LiveServer(database_url, ADMIN_KEY, **SENDER, webhook_lease_seconds=6) as server,
    ):
        with server.client() as c:
            pid = project(c)
            hook = c.post(f"/projects/{pid}/webhooks", json={"url": receiver.url, "events": ["plan.created"]}).json()
            assert c.post(f"/projects/{pid}/plan", json=PLAN).status_code == 201  # acknowledged: the event is stored
        receiver.wait_for(1)
        server.kill()  # mid-delivery: claimed, sent, no outcome recorded
        killed_at = time.monotonic()
        server.start()
        first, again = receiver.wait_for(2, timeout=60)
        assert time.monotonic() - killed_at < 60
        assert again.headers["webhook-id"] == first.headers["webhook-id"]  # the same message, sent again
        assert Verifier(hook["secret"]).verify(again.body, again.headers)["type"] == "plan.created"
        with server.client() as c:
            deadline = time.monotonic() + 10
            while (log := deliveries(c, pid, hook["id"]))[0]["status"] != "delivered" and time.monotonic() < deadline:
                time.sleep(0.1)
        assert [(d["status"], d["attempts"]) for d in log] == [("delivered", 2)]


def test_two_servers_never_send_one_delivery_twice(database_url: str) -> None:
    """Five webhooks x eight events = 40 deliveries, drained by two server processes at once."""
    with (
        Receiver(lambda n: (200, 0.05)) as receiver,
        LiveServer(database_url, ADMIN_KEY, **SENDER, webhook_sender=0) as writer,
    ):
        with writer.client() as c:
            pid = project(c)
            hooks = [
                c.post(
                    f"/projects/{pid}/webhooks", json={"url": f"{receiver.url}?hook={k}", "events": ["plan.created"]}
                ).json()
                for k in range(5)
            ]
            for _ in range(8):
                assert c.post(f"/projects/{pid}/plan", json=PLAN).status_code == 201
        with LiveServer(database_url, ADMIN_KEY, **SENDER), LiveServer(database_url, ADMIN_KEY, **SENDER):
            got = receiver.wait_for(40, timeout=120)
            time.sleep(1.0)  # a second send would arrive within a round or two
        assert len(receiver.received) == 40
        sent = Counter((r.path, r.headers["webhook-id"]) for r in got)
        assert len(sent) == 40 and set(sent.values()) == {1} and receiver.overlaps == 0
        with writer.client() as c:
            for hook in hooks:
                assert {(d["status"], d["attempts"]) for d in deliveries(c, pid, hook["id"])} == {("delivered", 1)}
