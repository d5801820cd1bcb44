"""The transactional outbox of outbound webhooks: events written in the transaction of their change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.data.models import Webhook, WebhookDelivery, WebhookEvent, new_public_id, utcnow

EVENTS = (
    "decision.changed",
    "decision.finalized",
    "plan.created",
    "plan.reached",
    "batch.expired",
    "certificate.created",
    "judge.drifted",
)


def emit(
    session: Session,
    project_id: str,
    event_type: str,
    data: dict[str, Any],
    *,
    retry_window_seconds: float,
    dedupe_key: str | None = None,
) -> str | None:
    """Queue ``event_type`` for every webhook of the project subscribed to it; the event id, or None.

    Nothing is written when no webhook listens, or when an event with ``dedupe_key`` exists
    already (an event announced once however many senders notice it). The caller's
    transaction commits the event with the change it announces, or neither.
    """
    assert event_type in EVENTS, event_type
    hooks = [
        wid
        for wid, events in session.execute(select(Webhook.id, Webhook.events).where(Webhook.project_id == project_id))
        if event_type in events
    ]
    if not hooks:
        return None
    if dedupe_key is not None and session.scalar(
        select(WebhookEvent.id).where(WebhookEvent.project_id == project_id, WebhookEvent.dedupe_key == dedupe_key)
    ):
        return None
    now = utcnow()
    event = WebhookEvent(
        id=new_public_id("msg"),
        project_id=project_id,
        type=event_type,
        dedupe_key=dedupe_key,
        created_at=now,
        payload={"type": event_type, "timestamp": now.isoformat(), "data": {"project": project_id, **data}},
    )
    session.add(event)
    session.flush()
    until = now + timedelta(seconds=retry_window_seconds)
    session.add_all(
        WebhookDelivery(
            webhook_id=wid,
            event_id=event.id,
            status="pending",
            attempts=0,
            next_attempt_at=now,
            retry_until=until,
            created_at=now,
        )
        for wid in hooks
    )
    session.flush()
    return event.id
