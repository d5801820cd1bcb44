"""The decision watcher's counters on its periodic row: decisions read and recorded, summed over
the deployment's turns; they differ exactly when a read was of a change already recorded."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from service.core.db import session_scope
from service.data.jobs import PERIODIC
from service.data.models import DecisionWatch, Job
from service.documents.reliability import DocumentCache
from service.webhooks import watch
from service.webhooks.sender import WebhookSender
from tests.service.test_webhooks import client, labels, pid, subscribe  # noqa: F401 (fixtures)
from tests.webhook_receiver import Receiver


def counters(c: TestClient) -> dict:
    with session_scope(c.app.state.sessions) as session:  # type: ignore[attr-defined]
        return session.scalar(select(Job.payload).where(Job.kind == PERIODIC, Job.key == watch.DECISION_WATCH))


def test_three_senders_read_each_change_once(client: TestClient, pid: str) -> None:  # noqa: F811
    app = client.app
    senders = [WebhookSender(app.state.sessions, app.state.settings, DocumentCache()) for _ in range(3)]
    assert client.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}}).status_code == 200
    with Receiver() as receiver:
        subscribe(client, pid, receiver.url, ["decision.changed"])  # period 0: every round may take a turn
        for judge_agrees in (True, False, True):
            labels(client, pid, judge_agrees=judge_agrees)
            for _ in range(2):
                for sender in senders:
                    sender.run_once()
    # three writes moved label_seq three times; every later round found nothing new to read
    assert counters(client) == {"decisions_read": 3, "decisions_recorded": 3}


def test_a_read_of_a_change_recorded_meanwhile_is_counted_apart(
    client: TestClient,  # noqa: F811
    pid: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = client.app
    sender = WebhookSender(app.state.sessions, app.state.settings, DocumentCache())
    with Receiver() as receiver:
        subscribe(client, pid, receiver.url, ["decision.changed"])
        labels(client, pid, judge_agrees=True)
        real = watch.live_decision

        def recorded_meanwhile(session, project, documents, *, n_resamples):  # another process records it first
            doc = real(session, project, documents, n_resamples=n_resamples)
            with session_scope(app.state.sessions, write=True) as other:
                other.execute(
                    update(DecisionWatch).where(DecisionWatch.project_id == pid).values(label_seq=doc.label_seq)
                )
            return doc

        monkeypatch.setattr(watch, "live_decision", recorded_meanwhile)
        sender.run_once()
    assert counters(client) == {"decisions_read": 1, "decisions_recorded": 0}
