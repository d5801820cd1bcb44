"""Outbound webhooks: subscriptions, signed deliveries (checked by the standardwebhooks package),
retries with backoff, the delivery log, redelivery, every event type, the SSRF guard, and claims
that never hand one delivery to two senders."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from standardwebhooks import Webhook as Verifier

from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data import jobs
from service.data.models import Job, Project, WebhookDelivery, utcnow
from service.webhooks.sender import WebhookSender, after_failure, claim_targets, next_delivery, retry_delay
from tests.conftest import ADMIN_KEY
from tests.factories import create_project
from tests.webhook_receiver import Receiver


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """The app with the background sender off (tests run its rounds), private targets allowed."""
    quiet = settings.model_copy(
        update={
            "webhook_sender": False,
            "webhook_allow_private": True,
            "webhook_retry_base_seconds": 0.01,
            "bootstrap_resamples": 200,
            "lease_seconds": 1,
            "webhook_decision_seconds": 0,
            "webhook_watch_seconds": 0,
        }
    )
    with TestClient(create_app(quiet), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


def sender_of(client: TestClient) -> WebhookSender:
    app = client.app
    return WebhookSender(app.state.sessions, app.state.settings, app.state.documents)


def run_until(client: TestClient, receiver: Receiver, n: int, rounds: int = 50) -> list:
    sender = sender_of(client)
    for _ in range(rounds):
        sender.run_once()
        if len(receiver.received) >= n:
            break
        time.sleep(0.02)
    return receiver.wait_for(n, timeout=1)


@pytest.fixture
def pid(client: TestClient) -> str:
    p = client.post("/projects", json={"name": "hooks", "labels": ["pass", "fail"]}).json()
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert client.post(f"/projects/{p['id']}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i:02d}"} for i in range(20)]
    assert client.post(f"/projects/{p['id']}/items", json=items).status_code == 200
    return p["id"]


def subscribe(client: TestClient, pid: str, url: str, events: list[str]) -> dict:
    r = client.post(f"/projects/{pid}/webhooks", json={"url": url, "events": events})
    assert r.status_code == 201, r.text
    return r.json()


def verified(hook: dict, received) -> dict:
    """The payload, after the standardwebhooks package accepted the signature."""
    return Verifier(hook["secret"]).verify(received.body, received.headers)


def test_subscribe_list_get_delete(client: TestClient, pid: str) -> None:
    hook = subscribe(client, pid, "http://127.0.0.1:9/hook", ["plan.created", "decision.changed"])
    assert hook["secret"].startswith("whsec_") and hook["events"] == ["decision.changed", "plan.created"]
    listed = client.get(f"/projects/{pid}/webhooks").json()["items"]
    assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
    assert "secret" not in client.get(f"/projects/{pid}/webhooks/{hook['id']}").json()
    assert client.delete(f"/projects/{pid}/webhooks/{hook['id']}").status_code == 204
    assert client.get(f"/projects/{pid}/webhooks/{hook['id']}").status_code == 404
    assert client.get(f"/projects/{pid}/webhooks").json()["items"] == []


@pytest.mark.parametrize(
    "body, code",
    [
        ({"url": "not a url", "events": ["plan.created"]}, "invalid_url"),
        ({"url": "ftp://example.com/x", "events": ["plan.created"]}, "invalid_url"),
        ({"url": "http://user:pw@example.com/x", "events": ["plan.created"]}, "invalid_url"),
        ({"url": "http://host.invalid/x", "events": ["plan.created"]}, "unresolvable_host"),
        ({"url": "http://127.0.0.1:9/x", "events": ["label.created"]}, "validation_error"),
        ({"url": "http://127.0.0.1:9/x", "events": []}, "validation_error"),
    ],
)
def test_bad_subscriptions_are_refused_and_nothing_is_written(
    client: TestClient, pid: str, body: dict, code: str
) -> None:
    r = client.post(f"/projects/{pid}/webhooks", json=body)
    assert r.status_code == 422 and r.json()["error"] == code, r.text
    assert client.get(f"/projects/{pid}/webhooks").json()["items"] == []


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/x",
        "http://localhost/x",
        "http://10.1.2.3/x",
        "http://169.254.169.254/latest",
        "http://[::1]/x",
        "http://[::ffff:127.0.0.1]/x",
    ],
)
def test_ssrf_guard_refuses_private_targets(settings: Settings, url: str) -> None:
    strict = settings.model_copy(update={"webhook_sender": False})
    with TestClient(create_app(strict), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        p = c.post("/projects", json={"name": "x", "labels": ["a", "b"]}).json()["id"]
        r = c.post(f"/projects/{p}/webhooks", json={"url": url, "events": ["plan.created"]})
        assert r.status_code == 422 and r.json()["error"] == "private_target", r.text
        assert "ANNOPLAN_OUTBOUND_ALLOW_PRIVATE" in r.json()["detail"]
        assert c.get(f"/projects/{p}/webhooks").json()["items"] == []


def test_only_pms_manage_webhooks(client: TestClient, pid: str) -> None:
    keys = {
        role: client.post(
            f"/projects/{pid}/keys", json={"role": role, **({"rater": "h2"} if role == "annotator" else {})}
        ).json()["key"]
        for role in ("pm", "viewer", "annotator")
    }
    body = {"url": "http://127.0.0.1:9/x", "events": ["plan.created"]}
    assert (
        client.post(
            f"/projects/{pid}/webhooks", json=body, headers={"Authorization": f"Bearer {keys['pm']}"}
        ).status_code
        == 201
    )
    for role in ("viewer", "annotator"):
        auth = {"Authorization": f"Bearer {keys[role]}"}
        assert client.post(f"/projects/{pid}/webhooks", json=body, headers=auth).status_code == 403
        assert client.get(f"/projects/{pid}/webhooks", headers=auth).status_code == 403


def plan(client: TestClient, pid: str) -> dict:
    r = client.post(
        f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "random", "seed": 1}
    )
    assert r.status_code == 201, r.text
    return r.json()


def test_plan_created_is_signed_and_logged(client: TestClient, pid: str) -> None:
    with Receiver() as receiver:
        hook = subscribe(client, pid, receiver.url, ["plan.created"])
        made = plan(client, pid)
        (got,) = run_until(client, receiver, 1)
        payload = verified(hook, got)
        assert payload["type"] == "plan.created" and payload["data"]["plan"] == made["id"]
        assert payload["data"]["project"] == pid and got.headers["webhook-signature"].startswith("v1,")
        log = client.get(f"/projects/{pid}/webhooks/{hook['id']}/deliveries").json()["items"]
        assert [(d["status"], d["attempts"], d["event_id"]) for d in log] == [
            ("delivered", 1, got.headers["webhook-id"])
        ]
        tampered = got.body.replace(made["id"].encode(), b"plan_forged000000")
        with pytest.raises(Exception, match="(?i)signature"):
            Verifier(hook["secret"]).verify(tampered, got.headers)


def test_failures_are_retried_with_the_same_id_then_redelivered(client: TestClient, pid: str) -> None:
    with Receiver(lambda n: (500 if n < 2 else 200, 0.0)) as receiver:
        hook = subscribe(client, pid, receiver.url, ["plan.created"])
        plan(client, pid)
        got = run_until(client, receiver, 3)
        assert len({g.headers["webhook-id"] for g in got}) == 1
        (delivery,) = client.get(f"/projects/{pid}/webhooks/{hook['id']}/deliveries").json()["items"]
        assert delivery["status"] == "delivered" and delivery["attempts"] == 3 and delivery["last_error"] is None
        r = client.post(f"/projects/{pid}/webhooks/{hook['id']}/deliveries/{delivery['id']}/redeliver")
        assert r.status_code == 202 and r.json()["status"] == "pending"
        again = run_until(client, receiver, 4)[-1]
        assert again.headers["webhook-id"] == got[0].headers["webhook-id"]
        assert verified(hook, again)["type"] == "plan.created"
        assert client.post(f"/projects/{pid}/webhooks/{hook['id']}/deliveries/999999/redeliver").status_code == 404
        assert (
            client.post(f"/projects/{pid}/webhooks/{hook['id']}/deliveries/{delivery['id']}/redeliver").status_code
            == 202
        )
        held = claim_targets(client.app.state.sessions, owner="test", lease_seconds=600, limit=1)
        assert [t.key for t in held] == [hook["id"]]  # a sender takes its turn at the webhook now
        r = client.post(f"/projects/{pid}/webhooks/{hook['id']}/deliveries/{delivery['id']}/redeliver")
        assert r.status_code == 409 and r.json()["error"] == "delivery_in_flight"


def test_a_sender_keeps_one_http_client_for_its_rounds_and_closes_it_on_stop(
    client: TestClient,
    pid: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[httpx.Client] = []

    class Counted(httpx.Client):
        def __init__(self, **options: object) -> None:
            super().__init__(**options)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr("service.webhooks.sender.httpx.Client", Counted)
    with Receiver(lambda n: (500 if n < 2 else 200, 0.0)) as receiver:
        subscribe(client, pid, receiver.url, ["plan.created"])
        plan(client, pid)
        sender = sender_of(client)
        for _ in range(50):  # three attempts, each in its own round
            sender.run_once()
            if len(receiver.received) >= 3:
                break
            time.sleep(0.02)
        assert len(receiver.wait_for(3, timeout=1)) == 3
        assert len(made) == 1 and not made[0].is_closed
        sender.stop()
        assert made[0].is_closed


def test_a_failing_target_is_logged_and_given_up_after_the_window(client: TestClient, pid: str) -> None:
    client.app.state.settings = client.app.state.settings.model_copy(update={"webhook_retry_window_seconds": 0})
    with Receiver(lambda n: (503, 0.0)) as receiver:
        hook = subscribe(client, pid, receiver.url, ["plan.created"])
        plan(client, pid)
        run_until(client, receiver, 1)
        (delivery,) = client.get(f"/projects/{pid}/webhooks/{hook['id']}/deliveries").json()["items"]
        assert delivery["status"] == "failed" and delivery["last_status_code"] == 503
        assert delivery["last_error"].startswith("HTTP 503")


def test_backoff_keeps_trying_for_at_least_24_hours() -> None:
    """A target that always fails: exponential, jittered delays; retried until the window ends, then failed."""
    rng = random.Random(0)
    start = now = datetime(2026, 1, 1, tzinfo=UTC)
    until = start + timedelta(hours=24)
    delays, status, attempts = [], "pending", 0
    while status == "pending":
        attempts += 1
        delay = retry_delay(attempts, base=5, cap=7200, rng=rng)
        status, next_at = after_failure(attempts, now, until, delay)
        delays.append((next_at - now).total_seconds())
        now = next_at
    assert now - start >= timedelta(hours=24) and status == "failed"
    assert all(2.5 * 2**k <= d <= 5 * 2**k for k, d in enumerate(delays[:8]))  # doubling, jittered
    assert max(delays) <= 7200 and len(set(delays[:10])) == 10
    assert 20 < attempts < 40


def test_claims_never_hand_one_delivery_to_two_senders(client: TestClient, pid: str) -> None:
    """Six senders take turns at three targets at once, over and over: every delivery is attempted
    exactly once, and a target is held by one sender at a time."""
    with Receiver() as receiver:
        for _ in range(3):
            subscribe(client, pid, receiver.url, ["plan.created"])
        for _ in range(8):
            plan(client, pid)
    sessions = client.app.state.sessions
    claims: list[int] = []
    holding: Counter[str] = Counter()
    overlaps = []
    lock = threading.Lock()
    barrier = threading.Barrier(6)

    def work(n: int) -> None:
        barrier.wait()
        while targets := claim_targets(sessions, owner=f"sender{n}", lease_seconds=600, limit=1):
            (target,) = targets
            with lock:
                holding[target.key] += 1
                overlaps.append(holding[target.key] > 1)
            for _ in range(3):  # a turn of at most three deliveries, then the target goes back
                if (delivery := next_delivery(sessions, target)) is None:
                    break
                claims.append(delivery.id)
                with session_scope(sessions, write=True) as session:
                    session.execute(
                        update(WebhookDelivery).where(WebhookDelivery.id == delivery.id).values(status="delivered")
                    )
            with lock:
                holding[target.key] -= 1
            with session_scope(sessions, write=True) as session:
                assert jobs.hand_back(session, target)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(Counter(claims).values()) == [1] * 24 and not any(overlaps)
    with sessions() as s:
        assert {d.attempts for d in s.query(WebhookDelivery)} == {1}


def labels(client: TestClient, pid: str, judge_agrees: bool) -> None:
    rows = []
    for i in range(20):
        truth = "pass" if i % 3 else "fail"
        other = "fail" if truth == "pass" else "pass"
        rows += [{"item": f"i{i:02d}", "rater": r, "value": truth} for r in ("prim", "h2", "h3")]
        rows.append({"item": f"i{i:02d}", "rater": "judge", "value": truth if judge_agrees else other})
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200


def test_decision_changed_carries_old_and_new(client: TestClient, pid: str) -> None:
    # 20 items decide the fixed-sample rule; the anytime decision (the default) needs more overlap
    assert client.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}}).status_code == 200
    with Receiver() as receiver:
        hook = subscribe(client, pid, receiver.url, ["decision.changed"])
        sender_of(client).run_once()
        assert receiver.received == []  # nothing changed since the subscription
        labels(client, pid, judge_agrees=True)
        first = verified(hook, run_until(client, receiver, 1)[0])["data"]
        assert (first["old"]["decision"], first["new"]["decision"]) == ("insufficient_data", "pass")
        assert first["omega"] == 1.0 and first["label_seq"] == 80
        # no plan: the fixed-sample pass is provisional, and the event says so as the document does
        doc = client.get(f"/projects/{pid}/reliability").json()
        assert doc["provisional"] is True and first["provisional"] is True and first["new"]["provisional"] is True
        assert first["monitoring_mode"] == "fixed"
        labels(client, pid, judge_agrees=False)
        second = verified(hook, run_until(client, receiver, 2)[1])["data"]
        assert (second["old"]["decision"], second["new"]["decision"]) == ("pass", "reject")
        assert second["new"]["omega"] == 0.0 and second["label_seq"] == 100
        sender_of(client).run_once()
        assert len(receiver.received) == 2  # announced once


def test_plan_reached_and_batch_expired(client: TestClient, pid: str) -> None:
    with Receiver() as receiver:
        hook = subscribe(client, pid, receiver.url, ["plan.reached", "batch.expired"])
        r = client.post(
            f"/projects/{pid}/plan",
            json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "random", "seed": 1, "m": 3},
        )
        assert r.status_code == 201, r.text
        batch = client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 3}).json()
        time.sleep(1.1)  # the test app's lease is one second
        expired = verified(hook, run_until(client, receiver, 1)[0])
        assert expired["type"] == "batch.expired" and expired["data"]["batch"] == batch["id"]
        assert expired["data"]["unlabeled"] == batch["items"]
        for rater in ("h2", "h3"):
            items = client.post(f"/projects/{pid}/batches", json={"rater": rater, "size": 3}).json()["items"]
            rows = [{"item": i, "rater": rater, "value": "pass"} for i in items]
            assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
        reached = verified(hook, run_until(client, receiver, 2)[1])
        assert reached["type"] == "plan.reached" and reached["data"]["m_done_min"] == 3
        sender_of(client).run_once()
        assert [json.loads(g.body)["type"] for g in receiver.received] == ["batch.expired", "plan.reached"]


def test_the_decision_is_re_read_once_per_period_for_the_deployment_not_once_per_sender(
    client: TestClient, pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32: three senders (three processes' caches) after a label write re-read the decision
    once per ``webhook_decision_seconds`` between them; each alone would have re-read it."""
    import service.webhooks.watch as watch
    from service.documents.reliability import DocumentCache

    assert client.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}}).status_code == 200
    app = client.app
    period = app.state.settings.model_copy(update={"webhook_decision_seconds": 3600})
    senders = [WebhookSender(app.state.sessions, period, DocumentCache()) for _ in range(3)]
    reads = Counter()
    real = watch.live_decision

    def counted(session, project, documents, *, n_resamples):
        reads[id(documents)] += 1
        return real(session, project, documents, n_resamples=n_resamples)

    with Receiver() as receiver:
        subscribe(client, pid, receiver.url, ["decision.changed"])
        monkeypatch.setattr(watch, "live_decision", counted)
        labels(client, pid, judge_agrees=True)
        for _ in range(3):
            for sender in senders:
                sender.run_once()
        assert sum(reads.values()) == 1 and len(reads) == 1, reads  # one sender's turn, the period not over
        assert len(receiver.wait_for(1, timeout=5)) == 1
        # the period over (as an hour later), the next sender to look takes the next turn
        with session_scope(app.state.sessions, write=True) as session:
            session.execute(update(Job).where(Job.key == watch.DECISION_WATCH).values(run_after=utcnow()))
        labels(client, pid, judge_agrees=False)
        for sender in senders:
            sender.run_once()
        assert sum(reads.values()) == 2, reads
        assert len(receiver.wait_for(2, timeout=5)) == 2


def test_plans_and_leases_are_checked_once_per_period_for_the_deployment_not_once_per_sender(
    client: TestClient, pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32: three senders' rounds check plans reached and batch leases once per
    ``webhook_watch_seconds`` between them, and what the checks saw rides on the periodic row."""
    import service.webhooks.watch as watch
    from service.documents.reliability import DocumentCache

    app = client.app
    period = app.state.settings.model_copy(update={"webhook_watch_seconds": 3600})
    senders = [WebhookSender(app.state.sessions, period, DocumentCache()) for _ in range(3)]
    checks: Counter[str] = Counter()
    real_plan, real_batches = watch._plan_reached, watch._batches_expired

    def plan_counted(sessions, pid, settings, seen):
        checks["plan"] += 1
        return real_plan(sessions, pid, settings, seen)

    def batches_counted(sessions, pid, since, settings):
        checks["batches"] += 1
        return real_batches(sessions, pid, since, settings)

    monkeypatch.setattr(watch, "_plan_reached", plan_counted)
    monkeypatch.setattr(watch, "_batches_expired", batches_counted)
    with Receiver() as receiver:
        subscribe(client, pid, receiver.url, ["plan.reached", "batch.expired"])
        plan(client, pid)
        for _ in range(3):
            for sender in senders:
                sender.run_once()
        assert checks == {"plan": 1, "batches": 1}, checks  # one sender's turn, the period not over
        with session_scope(app.state.sessions) as session:
            turn = session.scalar(select(Job).where(Job.key == watch.EVENT_WATCH))
            assert turn is not None and turn.state == "queued"
            seq = session.get(Project, pid).label_seq
            assert turn.payload == {"plan_checked": {pid: seq}, "drift_checked": {}}
        with session_scope(app.state.sessions, write=True) as session:  # the period over, as an hour later
            session.execute(update(Job).where(Job.key == watch.EVENT_WATCH).values(run_after=utcnow()))
        for sender in senders:
            sender.run_once()
        # the next turn checked the leases again and, from the row's payload, skipped the unmoved plan
        assert checks == {"plan": 2, "batches": 2}, checks
        assert receiver.received == []


def _agreeing_labels(client: TestClient, pid: str, items: range, judge_agrees: bool = True) -> None:
    rows = []
    for i in items:
        truth = "pass" if i % 3 else "fail"
        other = "fail" if truth == "pass" else "pass"
        rows += [{"item": f"i{i:03d}", "rater": r, "value": truth} for r in ("prim", "h2", "h3")]
        rows.append({"item": f"i{i:03d}", "rater": "judge", "value": truth if judge_agrees else other})
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200


def _types(receiver: Receiver) -> list[str]:
    return [json.loads(g.body)["type"] for g in receiver.received]


def test_decision_finalized_is_sent_once_when_the_monitored_decision_leaves_continue(client: TestClient) -> None:
    """docs/method.md §10b: ``decision.finalized`` when the anytime decision first passes, rejects or is
    inconclusive, with its ``label_seq``; once, whatever later writes, a rewrite of it, or another sender (its
    own document cache, as another process) see."""
    from service.documents.reliability import DocumentCache

    pid = create_project(client, items=[f"i{i:03d}" for i in range(200)])
    with Receiver() as receiver:
        hook = subscribe(client, pid, receiver.url, ["decision.finalized"])
        _agreeing_labels(client, pid, range(0, 20))
        sender_of(client).run_once()
        doc = client.get(f"/projects/{pid}/reliability").json()
        assert doc["decision"] == "continue" and receiver.received == []  # open: nothing final to announce
        for start in range(20, 200, 30):
            _agreeing_labels(client, pid, range(start, min(start + 30, 200)))
        final = verified(hook, run_until(client, receiver, 1)[0])
        doc = client.get(f"/projects/{pid}/reliability").json()
        assert final["type"] == "decision.finalized" and doc["decision"] == "pass"
        data = final["data"]
        assert data["decision"] == "pass" and data["provisional"] is False and data["monitoring_mode"] == "anytime"
        assert data["decided_at_label_seq"] == doc["judges"][0]["monitoring"]["decided_at_label_seq"] is not None
        assert data["label_seq"] >= data["decided_at_label_seq"]
        # the judge re-run with other values everywhere (a rewrite), and a second sender: still one event
        _agreeing_labels(client, pid, range(0, 200), judge_agrees=False)
        other = WebhookSender(client.app.state.sessions, client.app.state.settings, DocumentCache())
        for sender in (sender_of(client), other, sender_of(client)):
            sender.run_once()
        assert client.get(f"/projects/{pid}/reliability").json()["decision"] != "continue"
        time.sleep(0.2)
        assert _types(receiver) == ["decision.finalized"]


def test_a_decision_final_at_subscription_is_announced_and_a_provisional_one_is_not(client: TestClient) -> None:
    fixed = create_project(client, items=[f"i{i:03d}" for i in range(20)], decision={"monitoring": "fixed"})
    decided = create_project(client, items=[f"i{i:03d}" for i in range(200)])
    _agreeing_labels(client, fixed, range(20))  # a fixed-sample pass with no plan: provisional
    _agreeing_labels(client, decided, range(200))  # the monitored pass, before anyone listened
    with Receiver() as receiver:
        subscribe(client, fixed, receiver.url, ["decision.finalized"])
        subscribe(client, decided, receiver.url, ["decision.finalized"])
        got = run_until(client, receiver, 1)
        time.sleep(0.2)
        sender_of(client).run_once()
        assert len(receiver.received) == 1 and json.loads(got[0].body)["data"]["project"] == decided
