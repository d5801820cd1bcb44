"""Webhook targets on the job queue: a per-target budget keeps one slow target from starving the
others, a target is held by one sender at a time, and a webhook's target goes with it."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.models import Job, WebhookDelivery
from service.webhooks.sender import TARGET, WebhookSender, claim_targets
from tests.conftest import ADMIN_KEY
from tests.factories import create_project
from tests.service.test_webhooks import pid, plan, subscribe  # noqa: F401 (pid is a fixture)
from tests.webhook_receiver import Receiver

EVENTS = 8
SLOW = 1.0  # seconds the slow target takes to answer each delivery


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The app with the background sender off (the tests start their own), private targets allowed."""
    quiet = settings.model_copy(
        update={
            "webhook_sender": False,
            "webhook_allow_private": True,
            "webhook_poll_seconds": 0.05,
            "webhook_target_budget_seconds": 1.0,
            "webhook_timeout_seconds": 5.0,
            "webhook_decision_seconds": 0,
        }
    )
    with TestClient(create_app(quiet), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


def delivered_within(receiver: Receiver, n: int, timeout: float) -> float:
    started = time.monotonic()
    receiver.wait_for(n, timeout=timeout)
    return time.monotonic() - started


@pytest.mark.parametrize("at_once", [1, 2])
def test_a_slow_target_does_not_starve_the_others(client: TestClient, pid: str, at_once: int) -> None:  # noqa: F811
    """The slow target is subscribed first, so its deliveries are due first: sent one after another
    (as before targets), the fast target's last would wait EVENTS x SLOW = 8 s. With a 1 s budget per
    turn it waits for at most one turn of the slow one (two deliveries), or none with two turns at once."""
    with Receiver(lambda n: (200, SLOW)) as slow, Receiver() as fast:
        subscribe(client, pid, slow.url, ["plan.created"])
        subscribe(client, pid, fast.url, ["plan.created"])
        for _ in range(EVENTS):
            plan(client, pid)
        app = client.app
        settings = app.state.settings.model_copy(update={"webhook_targets_at_once": at_once})
        sender = WebhookSender(app.state.sessions, settings, app.state.documents)
        sender.start()
        try:
            took = delivered_within(fast, EVENTS, timeout=30)
            slow_by_then = len(slow.received)
        finally:
            sender.stop()
    assert slow_by_then <= (3 if at_once == 1 else 2), slow_by_then
    assert took < (2 * SLOW + 1.5 if at_once == 1 else 1.5), took
    with session_scope(app.state.sessions) as session:
        statuses = session.scalars(select(WebhookDelivery.status)).all()
    assert statuses.count("delivered") >= EVENTS + slow_by_then - 1


def test_a_target_is_claimed_only_while_a_delivery_is_due_and_by_one_sender(client: TestClient, pid: str) -> None:  # noqa: F811
    sessions = client.app.state.sessions
    with Receiver() as receiver:
        hook = subscribe(client, pid, receiver.url, ["plan.created"])
        assert claim_targets(sessions, owner="a", lease_seconds=60, limit=5) == []  # nothing due
        plan(client, pid)
        (held,) = claim_targets(sessions, owner="a", lease_seconds=60, limit=5)
        assert held.key == hook["id"]
        assert claim_targets(sessions, owner="b", lease_seconds=60, limit=5) == []  # held by a
    with session_scope(sessions) as session:
        job = session.scalar(select(Job).where(Job.kind == TARGET, Job.key == hook["id"]))
        assert job is not None and job.state == "running" and (job.lease_owner, job.attempts) == ("a", 1)
    assert client.delete(f"/projects/{pid}/webhooks/{hook['id']}").status_code == 204
    with session_scope(sessions) as session:
        assert session.scalar(select(Job).where(Job.kind == TARGET, Job.key == hook["id"])) is None


def test_one_projects_hanging_targets_do_not_delay_another_projects_delivery(client: TestClient) -> None:
    """Issue 30 item 4: 6 never-answering targets of project A delayed project B's plan.created by 68.8 s.
    With A's turns in progress (each waiting out its timeout), B's delivery is sent within a poll period:
    A holds at most its share of the turns, and B's target is claimed while A's turns still run."""
    timeout = 2.0
    app = client.app
    settings = app.state.settings.model_copy(update={"webhook_timeout_seconds": timeout})
    assert (settings.webhook_targets_at_once, settings.webhook_targets_per_project) == (4, 2)  # the defaults
    a, b = (create_project(client, name=name, items=[f"i{i}" for i in range(20)]) for name in "ab")
    with Receiver(lambda n: (200, timeout + 1)) as hanging, Receiver() as fast:
        for _ in range(6):
            subscribe(client, a, hanging.url, ["plan.created"])
        subscribe(client, b, fast.url, ["plan.created"])
        plan(client, a)
        sender = WebhookSender(app.state.sessions, settings, app.state.documents)
        sender.start()
        try:
            hanging.wait_for(2, timeout=10)  # A's turns are waiting on its targets
            time.sleep(0.2)
            assert len(hanging.received) == 2  # A's share of the turns, not all four
            plan(client, b)
            took = delivered_within(fast, 1, timeout=30)
        finally:
            sender.stop()
    assert took < timeout / 2, f"B's delivery waited {took:.2f} s behind A's hanging targets"
