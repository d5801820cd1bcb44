"""The outbound webhook sender: claims due deliveries, signs them (Standard Webhooks) and retries with backoff.

At-least-once: a delivery is claimed with a lease (``SELECT ... FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's single writer makes the claim atomic there) and its outcome recorded
after the request; a sender killed mid-request leaves the lease to expire, and the delivery
is sent again. A lease outlives the request timeout, so no two senders hold one delivery.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import random
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import orjson
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from service.core.background import PollingThread
from service.core.db import session_scope
from service.core.outbound import OutboundRefused, client, webhook_policy
from service.core.settings import Settings
from service.data.jobs import worker_name
from service.data.models import Webhook, WebhookDelivery, WebhookEvent, utcnow
from service.documents.reliability import DocumentCache
from service.webhooks.watch import Seen, announce_changes

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


@dataclass(frozen=True)
class Claimed:
    """A delivery this sender holds the lease of, with what it needs to send it."""

    id: int
    token: str
    attempts: int
    retry_until: datetime
    url: str
    secret: str
    event_id: str
    payload: dict[str, Any]


def _due(now: datetime) -> Any:
    return (
        (WebhookDelivery.status == "pending")
        & (WebhookDelivery.next_attempt_at <= now)
        & or_(WebhookDelivery.lease_until.is_(None), WebhookDelivery.lease_until < now)
    )


def claim_due(sessions: sessionmaker[Session], *, lease_seconds: float, limit: int) -> list[Claimed]:
    """Lease up to ``limit`` due deliveries to this sender; rows other senders hold are skipped."""
    now = utcnow()
    with session_scope(sessions) as session:  # a cheap read first: SQLite's write lock only when there is work
        if session.scalar(select(WebhookDelivery.id).where(_due(now)).limit(1)) is None:
            return []
    token = secrets.token_hex(16)
    with session_scope(sessions, write=True) as session:
        ids = session.scalars(
            select(WebhookDelivery.id)
            .where(_due(now))
            .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).all()
        if not ids:
            return []
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(ids))
            .values(
                lease_until=now + timedelta(seconds=lease_seconds),
                lease_token=token,
                attempts=WebhookDelivery.attempts + 1,
                last_attempt_at=now,
            )
        )
        rows = session.execute(
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
            .where(WebhookDelivery.id.in_(ids))
        ).all()
    return [Claimed(d, token, a, until, url, secret, eid, payload) for d, a, until, url, secret, eid, payload in rows]


def send(http: httpx.Client, delivery: Claimed) -> tuple[int | None, str | None]:
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
    delivery: Claimed,
    status_code: int | None,
    error: str | None,
    *,
    settings: Settings,
    rng: random.Random,
) -> None:
    """Store the attempt's outcome and release the lease (only if this sender still holds it)."""
    now = utcnow()
    values: dict[str, Any] = {
        "lease_until": None,
        "lease_token": None,
        "last_status_code": status_code,
        "last_error": error,
    }
    if error is None:
        values.update(status="delivered", delivered_at=now)
    else:
        delay = retry_delay(
            delivery.attempts, base=settings.webhook_retry_base_seconds, cap=settings.webhook_retry_cap_seconds, rng=rng
        )
        values["status"], values["next_attempt_at"] = after_failure(delivery.attempts, now, delivery.retry_until, delay)
    with session_scope(sessions, write=True) as session:
        session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery.id, WebhookDelivery.lease_token == delivery.token)
            .values(values)
        )


class WebhookSender(PollingThread):
    """The background sender of one server process, started and stopped by the app's lifespan."""

    thread_name = "annoplan-webhooks"

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, documents: DocumentCache):
        timeout = min(settings.webhook_timeout_seconds, settings.webhook_lease_seconds / 3)
        # stopping waits for the request in flight
        super().__init__(poll_seconds=settings.webhook_poll_seconds, stop_seconds=timeout + 5, log=log)
        self.sessions = sessions
        self.settings = settings
        self.documents = documents
        self.timeout = timeout
        # claimed deliveries are sent one after another: all of them must finish inside the lease
        self.batch = max(1, int(settings.webhook_lease_seconds / (2 * self.timeout)))
        self.rng = random.Random()
        self._seen = Seen()
        self.owner = worker_name("webhooks")
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        """The sender's one HTTP client (its SSL context is built once, not per round), closed by :meth:`stop`."""
        if self._client is None:
            self._client = client(webhook_policy(self.settings))
        return self._client

    def run_once(self) -> int:
        """One round: announce changes the outbox should carry, then send what is due; deliveries attempted."""
        announce_changes(self.sessions, self.settings, self.documents, self._seen, owner=self.owner)
        attempted = 0
        while not self.stopping:
            claimed = claim_due(self.sessions, lease_seconds=self.settings.webhook_lease_seconds, limit=self.batch)
            if not claimed:
                break
            for delivery in claimed:
                status_code, error = send(self._http(), delivery)
                record_outcome(self.sessions, delivery, status_code, error, settings=self.settings, rng=self.rng)
                attempted += 1
        return attempted

    def stop(self) -> None:
        """Finish the request in flight (bounded by the timeout), end the thread and close the HTTP client."""
        super().stop()
        if self._client is not None:
            self._client.close()
            self._client = None
