"""Corrections after a decision was shown are honest (issue 28 item 4, docs/method.md §8.3).

A judge re-run after a shown pass (its labels re-posted with other values on the overlap items) keeps the
items at their arrival ranks, and the shown pass stays on record: the document, the dashboard and the
``decision.changed`` webhook mark the rewrite with the seq and what changed. An identical re-post is a
duplicate: no event, no mark.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from standardwebhooks import Webhook as Verifier

from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.models import ShownDecision
from service.webhooks.sender import WebhookSender
from tests.conftest import ADMIN_KEY
from tests.factories import create_project
from tests.webhook_receiver import Receiver

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
N_ITEMS = 200
RERUN = 140  # the judge's labels re-posted with the other value


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The app with the background sender off (the test runs its rounds), private targets allowed."""
    quiet = settings.model_copy(
        update={"webhook_sender": False, "webhook_allow_private": True, "webhook_decision_seconds": 0}
    )
    with TestClient(create_app(quiet), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


def _labels(rng: np.random.Generator) -> list[dict[str, str]]:
    """A judge right .95 of the time and three humans right .8 of the time on every item."""
    truth = rng.integers(0, 2, N_ITEMS)
    rows = []
    for rater, p in (("judge", 0.95), ("prim", 0.8), ("h2", 0.8), ("h3", 0.8)):
        right = rng.random(N_ITEMS) < p
        rows += [
            {"item": f"i{k}", "rater": rater, "value": ("pass", "fail")[t if r else 1 - t]}
            for k, (t, r) in enumerate(zip(truth, right, strict=True))
        ]
    return rows


def _events(client: TestClient, receiver: Receiver, n: int) -> list[dict]:
    """The first ``n`` decision.changed payloads, after running the sender's rounds."""
    sender = WebhookSender(client.app.state.sessions, client.app.state.settings, client.app.state.documents)  # type: ignore[attr-defined]
    for _ in range(50):
        sender.run_once()
        client.app.state.documents.settle()  # type: ignore[attr-defined]
        if len(receiver.received) >= n:
            break
        time.sleep(0.02)
    return receiver.wait_for(n, timeout=1)


def test_a_judge_rerun_after_a_shown_pass_is_marked_everywhere(client: TestClient) -> None:
    pid = create_project(client, raters=RATERS, items=[f"i{k}" for k in range(N_ITEMS)], order_seed=7)
    rows = _labels(np.random.default_rng(3))
    with Receiver() as receiver:
        r = client.post(f"/projects/{pid}/webhooks", json={"url": receiver.url, "events": ["decision.changed"]})
        assert r.status_code == 201, r.text
        secret = r.json()["secret"]
        _events(client, receiver, 0)  # the sender's first sight, before any label
        assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
        shown = client.get(f"/projects/{pid}/reliability").json()
        client.app.state.documents.settle()  # type: ignore[attr-defined]  # the shown decision is kept in the background
        seq = shown["label_seq"]
        assert seq == 4 * N_ITEMS and shown["decision"] == "pass" and shown["rewritten_at"] is None
        assert shown["monitoring"]["decided_at_label_seq"] == seq  # the write is one arrival
        with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
            [record] = session.scalars(select(ShownDecision).where(ShownDecision.project_id == pid)).all()
            assert (record.judge, record.decision, record.label_seq, record.decided_at) == ("judge", "pass", seq, seq)
        [event] = _events(client, receiver, 1)
        first = Verifier(secret).verify(event.body, event.headers)
        assert first["data"]["new"]["decision"] == "pass" and first["data"]["rewritten_at"] is None

        judge = [row for row in rows if row["rater"] == "judge"]
        again = client.post(f"/projects/{pid}/labels", json=judge).json()  # an identical re-post: duplicates
        assert (again["accepted"], again["duplicates"], again["label_seq"]) == (0, N_ITEMS, seq)
        rerun = [{**row, "value": "fail" if row["value"] == "pass" else "pass"} for row in judge[:RERUN]]
        assert client.post(f"/projects/{pid}/labels", json=rerun).json()["accepted"] == RERUN

        doc = client.get(f"/projects/{pid}/reliability").json()
        assert doc["label_seq"] == seq + RERUN and doc["decision"] == "reject"
        # the corrections kept their items' rank: the monitor decided at the same arrival, not at the re-run's end
        assert doc["monitoring"]["decided_at_label_seq"] == seq
        assert max(p["label_seq"] for r in doc["monitoring"]["raters"] for p in r["band"]) == seq
        mark = doc["rewritten_at"]
        assert mark == doc["judges"][0]["rewritten_at"]
        assert mark["shown"] == {"decision": "pass", "label_seq": seq, "decided_at_label_seq": seq}
        assert (mark["label_seq"], mark["decision"], mark["corrected"], mark["retracted"]) == (
            seq + 1,
            "reject",
            {"judge": RERUN},
            {},
        )
        assert f"pass shown at label_seq {seq} is now reject: {RERUN} of judge's labels changed" in mark["changed"]
        page = client.get(f"/projects/{pid}/dashboard")
        assert page.status_code == 200 and f"rewritten since label_seq {seq + 1}" in page.text
        assert f"reject (rewritten: pass shown at label_seq {seq})" in page.text

        events = _events(client, receiver, 2)
        second = Verifier(secret).verify(events[1].body, events[1].headers)["data"]
        assert (second["old"]["decision"], second["new"]["decision"]) == ("pass", "reject")
        assert second["provisional"] is False and second["rewritten_at"] == mark
        # the record keeps the decision first shown; nothing more to announce
        _events(client, receiver, 2)
        assert len(receiver.received) == 2
        with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
            [record] = session.scalars(select(ShownDecision).where(ShownDecision.project_id == pid)).all()
            assert (record.decision, record.label_seq) == ("pass", seq)
