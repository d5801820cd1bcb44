"""Webhook subscriptions and their delivery log: the queries behind the webhook routes."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from service.core.errors import Conflict, NotFound, echo
from service.core.pagination import PageParams
from service.data.models import Job, Webhook, WebhookDelivery, WebhookEvent, new_public_id, utcnow
from service.webhooks.sender import TARGET, add_target, new_webhook_secret


def add_webhook(session: Session, project_id: str, url: str, events: list[str]) -> Webhook:
    """A new subscription with a fresh signing secret, and its target on the job queue."""
    hook = Webhook(
        id=new_public_id("wh"),
        project_id=project_id,
        url=url,
        events=events,
        secret=new_webhook_secret(),
        created_at=utcnow(),
    )
    session.add(hook)
    session.flush()
    add_target(session, hook.id)
    return hook


def remove_webhook(session: Session, hook: Webhook) -> None:
    """Delete the subscription (its deliveries cascade) and its target: nothing more is sent to it."""
    session.execute(delete(Job).where(Job.kind == TARGET, Job.key == hook.id))
    session.delete(hook)


def project_webhooks(session: Session, project_id: str) -> list[Webhook]:
    """The project's webhooks, oldest first."""
    return list(
        session.scalars(
            select(Webhook).where(Webhook.project_id == project_id).order_by(Webhook.created_at, Webhook.id)
        )
    )


def project_webhook(session: Session, project_id: str, wid: str) -> Webhook:
    """One webhook of the project; 404 otherwise."""
    hook = session.get(Webhook, wid)
    if hook is None or hook.project_id != project_id:
        raise NotFound(f"webhook {echo(wid)} not found")
    return hook


def deliveries_page(session: Session, wid: str, page: PageParams) -> list[tuple[WebhookDelivery, str]]:
    """Up to ``page.limit + 1`` deliveries of the webhook with their event type, newest first."""
    stmt = (
        select(WebhookDelivery, WebhookEvent.type)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .where(WebhookDelivery.webhook_id == wid)
        .order_by(WebhookDelivery.id.desc())
        .limit(page.limit + 1)
    )
    if page.after is not None:
        stmt = stmt.where(WebhookDelivery.id < page.after)
    return [(d, t) for d, t in session.execute(stmt)]


def schedule_redelivery(session: Session, wid: str, did: int, *, window_seconds: float) -> tuple[WebhookDelivery, str]:
    """Make the delivery due now with a fresh retry window; the delivery and its event type.

    404 when it is not the webhook's; 409 while a sender takes its turn at the webhook (an outcome it
    records would overwrite the request).
    """
    row = session.execute(
        select(WebhookDelivery, WebhookEvent.type)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .where(WebhookDelivery.id == did, WebhookDelivery.webhook_id == wid)
    ).one_or_none()
    if row is None:
        raise NotFound(f"delivery {did} not found")
    now = utcnow()
    turn = session.scalar(select(Job.lease_until).where(Job.kind == TARGET, Job.key == wid, Job.state == "running"))
    if turn is not None and turn > now:
        raise Conflict(
            "a sender is sending this webhook's deliveries right now; redeliver this one once its turn is logged",
            code="delivery_in_flight",
        )
    session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.id == did)
        .values(
            status="pending",
            next_attempt_at=now,
            retry_until=now + timedelta(seconds=window_seconds),
        )
    )
    session.refresh(row[0])
    return row[0], row[1]
