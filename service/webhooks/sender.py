"""The outbound webhook sender: takes turns at webhook targets, signs deliveries (Standard Webhooks)
and retries them with backoff.

Deliveries ride on the job queue (service.data.jobs): every webhook has one standing job of kind
``webhook`` (its target), and a sender sends a webhook's deliveries only while it holds that
job's lease; every write about a delivery is fenced by the lease's token. At-least-once: a
delivery is marked delivered only after its 2xx, and a sender killed mid-request renews nothing,
so once the target's lease runs out the next claim takes the target over and sends the delivery
again. Never two attempts at once: a turn ends within two thirds of its lease (a budget, then at
most one request timeout), so no sender takes a target over while another's request may be open.
The budget also keeps one slow target from starving the others: after it, the target waits
behind those that waited longer. Turns run side by side, each freeing its place when it ends, and
one project holds at most ``webhook_targets_per_project`` of them, so its slow targets delay other
projects' deliveries by at most a poll period.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import random
import secrets
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import orjson
from sqlalchemy import ColumnElement, exists, func, select, update
from sqlalchemy.orm import Session, aliased, sessionmaker

from service.core.background import PollingThread
from service.core.db import session_scope
from service.core.outbound import OutboundRefused, client, webhook_policy
from service.core.settings import Settings
from service.core.sql import rowcount
from service.data import jobs
from service.data.jobs import worker_name
from service.data.models import Job, Webhook, WebhookDelivery, WebhookEvent, utcnow
from service.documents.reliability import DocumentCache
from service.webhooks.watch import announce_changes

log = logging.getLogger("annoplan.webhooks")


def new_webhook_secret() -> str:
    """A signing secret in the Standard Webhooks form ``whsec_<base64 of 24 random bytes>``."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`` keyed by the secret's bytes (Standard Webhooks)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def retry_delay(attempts: int, *, base: float, cap: float, rng: random.Random) -> float:
    """Seconds before the next try after ``attempts`` failures: ``min(base 2^(attempts-1), cap)`` times U(1/2, 1)."""
    return min(base * 2.0 ** min(attempts - 1, 60), cap) * rng.uniform(0.5, 1.0)


def after_failure(attempts: int, now: datetime, retry_until: datetime, delay: float) -> tuple[str, datetime]:
    """Status and next try after a failed attempt: retried until ``retry_until`` (a last try at it), then failed."""
    if now >= retry_until:
        return "failed", now
    return "pending", min(now + timedelta(seconds=delay), retry_until)


TARGET = "webhook"
"""The job kind of a webhook target: one standing job per webhook (its id the key), whose lease
makes one sender at a time the sender of that webhook's deliveries."""
TARGET_ATTEMPTS = 2**31 - 1
"""A target's job is never given up (each delivery has its own retry window): its attempts count
only the turns in a row that ended with their worker, and a turn that ends resets them."""


def add_target(session: Session, webhook_id: str) -> None:
    """The webhook's target job, in the transaction that adds the webhook."""
    jobs.enqueue(session, TARGET, webhook_id, {}, max_attempts=TARGET_ATTEMPTS)


def has_due_delivery(now: datetime) -> ColumnElement[bool]:
    """Whether the target job's webhook has a pending delivery due at ``now`` (the claim's extra condition)."""
    return exists().where(
        WebhookDelivery.webhook_id == Job.key,
        WebhookDelivery.status == "pending",
        WebhookDelivery.next_attempt_at <= now,
    )


def project_has_room(per_project: int) -> Callable[[datetime], ColumnElement[bool]]:
    """The claim's condition that the target job's project holds fewer than ``per_project`` target turns at
    ``now``, whichever senders hold them (a lease not run out)."""

    def room(now: datetime) -> ColumnElement[bool]:
        mine, theirs, turn = aliased(Webhook), aliased(Webhook), aliased(Job)
        held = (
            select(func.count())
            .select_from(turn)
            .join(theirs, theirs.id == turn.key)
            .join(mine, mine.project_id == theirs.project_id)
            .where(mine.id == Job.key, turn.kind == TARGET, turn.state == "running", turn.lease_until > now)
            .correlate(Job)
            .scalar_subquery()
        )
        return held < per_project

    return room


def claim_targets(
    sessions: sessionmaker[Session], *, owner: str, lease_seconds: float, limit: int, per_project: int | None = None
) -> list[jobs.Claimed]:
    """Lease up to ``limit`` webhook targets that have a delivery due, those waiting longest first; with
    ``per_project``, one at a time and only of projects holding fewer than ``per_project`` turns, so one
    project's slow targets cannot take every turn (docs/operations.md, "Fair sharing")."""
    if per_project is None:
        claimed = jobs.claim(
            sessions, [TARGET], owner=owner, lease_seconds=lease_seconds, limit=limit, ready=has_due_delivery
        )
        return [target for target in claimed if not target.exhausted]
    room = project_has_room(per_project)
    taken: list[jobs.Claimed] = []
    for _ in range(limit):  # one per claim: each claim counts the turns the previous ones took
        claimed = jobs.claim(
            sessions,
            [TARGET],
            owner=owner,
            lease_seconds=lease_seconds,
            limit=1,
            ready=lambda now: has_due_delivery(now) & room(now),
        )
        if not claimed:
            break
        taken += [target for target in claimed if not target.exhausted]
    return taken


@dataclass(frozen=True)
class Delivery:
    """A delivery being attempted, with what it needs to be sent."""

    id: int
    attempts: int
    retry_until: datetime
    url: str
    secret: str
    event_id: str
    payload: dict[str, Any]


def next_delivery(sessions: sessionmaker[Session], target: jobs.Claimed) -> Delivery | None:
    """The target's due delivery that waited longest, its attempt counted; None when none is due or
    this sender no longer holds the target (taken over after its lease ran out)."""
    now = utcnow()
    with session_scope(sessions, write=True) as session:
        row = session.execute(
            select(
                WebhookDelivery.id,
                WebhookDelivery.attempts,
                WebhookDelivery.retry_until,
                Webhook.url,
                Webhook.secret,
                WebhookEvent.id,
                WebhookEvent.payload,
            )
            .join(Webhook, Webhook.id == WebhookDelivery.webhook_id)
            .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
            .where(
                WebhookDelivery.webhook_id == target.key,
                WebhookDelivery.status == "pending",
                WebhookDelivery.next_attempt_at <= now,
                jobs.held(TARGET, target.key, target.token),
            )
            .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
            .limit(1)
        ).first()
        if row is None:
            return None
        did, attempts, until, url, secret, eid, payload = row
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == did)
            .values(attempts=WebhookDelivery.attempts + 1, last_attempt_at=now)
        )
    return Delivery(did, attempts + 1, until, url, secret, eid, payload)


def send(http: httpx.Client, delivery: Delivery) -> tuple[int | None, str | None]:
    """POST the signed event; ``(status code, error)`` where error is None for a 2xx.

    The error is a reason of ours: nothing the target answers is kept (docs/operations.md).
    """
    body = orjson.dumps(delivery.payload)
    stamp = int(time.time())
    headers = {
        "content-type": "application/json",
        "user-agent": "annoplan-webhooks",
        "webhook-id": delivery.event_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature(delivery.secret, delivery.event_id, stamp, body),
    }
    try:
        response = http.post(delivery.url, content=body, headers=headers)
    except OutboundRefused as refused:
        return None, refused.reason
    except httpx.HTTPError as error:
        return None, f"the request failed: {type(error).__name__}"
    if 200 <= response.status_code < 300:
        return response.status_code, None
    return response.status_code, f"HTTP {response.status_code}"


def record_outcome(
    sessions: sessionmaker[Session],
    target: jobs.Claimed,
    delivery: Delivery,
    status_code: int | None,
    error: str | None,
    *,
    settings: Settings,
    rng: random.Random,
) -> bool:
    """Store the attempt's outcome if this sender still holds the delivery's target; whether it did."""
    now = utcnow()
    values: dict[str, Any] = {"last_status_code": status_code, "last_error": error}
    if error is None:
        values.update(status="delivered", delivered_at=now)
    else:
        delay = retry_delay(
            delivery.attempts, base=settings.webhook_retry_base_seconds, cap=settings.webhook_retry_cap_seconds, rng=rng
        )
        values["status"], values["next_attempt_at"] = after_failure(delivery.attempts, now, delivery.retry_until, delay)
    with session_scope(sessions, write=True) as session:
        changed = session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery.id, jobs.held(TARGET, target.key, target.token))
            .values(values)
        )
        return bool(rowcount(changed))


class WebhookSender(PollingThread):
    """The background sender of a job worker (or of an api process that runs jobs), started and
    stopped with it: it announces changes, then takes turns at the webhook targets that have a
    delivery due, ``webhook_targets_at_once`` at a time."""

    thread_name = "annoplan-webhooks"

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, documents: DocumentCache):
        lease = settings.webhook_lease_seconds
        # a turn starts no delivery after its budget and waits at most a timeout for the one in
        # flight, so it ends within two thirds of its lease: no other sender takes the target over meanwhile
        timeout = min(settings.webhook_timeout_seconds, lease / 3)
        self.budget = min(settings.webhook_target_budget_seconds, lease / 3)
        super().__init__(poll_seconds=settings.webhook_poll_seconds, stop_seconds=self.budget + timeout + 5, log=log)
        self.sessions = sessions
        self.settings = settings
        self.documents = documents
        self.timeout = timeout
        self.at_once = settings.webhook_targets_at_once
        self.per_project = min(settings.webhook_targets_per_project, self.at_once)
        self.rng = random.Random()
        self.owner = worker_name("webhooks")
        self._client: httpx.Client | None = None
        self._turns: ThreadPoolExecutor | None = None

    def _http(self) -> httpx.Client:
        """The sender's one HTTP client (its SSL context is built once, not per round), closed by :meth:`stop`."""
        if self._client is None:
            self._client = client(webhook_policy(self.settings))
        return self._client

    def run_once(self) -> int:
        """One round: announce changes the outbox should carry, then take turns at the targets with
        deliveries due until none is left; deliveries attempted."""
        announce_changes(self.sessions, self.settings, self.documents, owner=self.owner)
        if self._turns is None:
            self._turns = ThreadPoolExecutor(self.at_once, thread_name_prefix="annoplan-webhook-turn")
        attempted = 0
        running: set[Future[int]] = set()
        while not self.stopping:
            # a turn that ends frees its place at once, and a target that becomes due meanwhile (another
            # project's) is claimed within a poll period, not after the slowest turn in progress
            free = self.at_once - len(running)
            targets = (
                claim_targets(
                    self.sessions,
                    owner=self.owner,
                    lease_seconds=self.settings.webhook_lease_seconds,
                    limit=free,
                    per_project=self.per_project,
                )
                if free
                else []
            )
            running |= {self._turns.submit(self.turn, target) for target in targets}
            if not running:
                break
            done, running = wait(running, timeout=self.poll_seconds, return_when=FIRST_COMPLETED)
            attempted += sum(turn.result() for turn in done)
        for turn in as_completed(running):  # stopping: the turns in progress end within their budget
            attempted += turn.result()
        return attempted

    def turn(self, target: jobs.Claimed) -> int:
        """Send the target's due deliveries one after another until none is due or its budget is
        spent (a slow target then waits behind the others), then hand it back; deliveries attempted."""
        started = time.monotonic()
        attempted = 0
        try:
            while not self.stopping and time.monotonic() - started < self.budget:
                delivery = next_delivery(self.sessions, target)
                if delivery is None:
                    break
                status_code, error = send(self._http(), delivery)
                attempted += 1
                if not record_outcome(
                    self.sessions, target, delivery, status_code, error, settings=self.settings, rng=self.rng
                ):
                    break  # another sender holds the target now
        finally:
            with session_scope(self.sessions, write=True) as session:
                jobs.hand_back(session, target)
        return attempted

    def stop(self) -> None:
        """Finish the turns in progress (each bounded by its budget and a timeout), end the thread and
        close the HTTP client."""
        super().stop()
        if self._turns is not None:
            self._turns.shutdown(wait=True)
            self._turns = None
        if self._client is not None:
            self._client.close()
            self._client = None
