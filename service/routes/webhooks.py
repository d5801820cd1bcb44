"""Outbound webhooks: subscriptions, their delivery log, and manual redelivery (PMs)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from sqlalchemy import select, update

from service.deps import PrincipalDep, ReadSession, SettingsDep, WriteSession, project_for
from service.errors import NotFound, echo, error_responses
from service.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.models import Webhook, WebhookDelivery, WebhookEvent, new_public_id, utcnow
from service.pagination import PageDep, encode_cursor
from service.routes.projects import ProjectId
from service.schemas import Page
from service.url_guard import checked_webhook_url
from service.watch import record_baseline
from service.webhook_schemas import DeliveryRead, WebhookCreate, WebhookCreated, WebhookRead
from service.webhook_sender import new_webhook_secret

router = APIRouter(prefix="/projects/{pid}/webhooks", tags=["webhooks"])
WebhookId = Annotated[str, Path(description="The webhook's id.")]
DeliveryId = Annotated[int, Path(description="The delivery's id.")]


def _read(hook: Webhook) -> WebhookRead:
    return WebhookRead(id=hook.id, url=hook.url, events=hook.events, created_at=hook.created_at)


def _webhook(session: ReadSession, pid: str, wid: str) -> Webhook:
    hook = session.get(Webhook, wid)
    if hook is None or hook.project_id != pid:
        raise NotFound(f"webhook {echo(wid)} not found")
    return hook


@router.post("", status_code=201, response_model=WebhookCreated, responses=error_responses(401, 403, 404, 409, 422))
def post_webhook(
    pid: ProjectId, body: WebhookCreate, request: Request, session: WriteSession, principal: PrincipalDep,
    settings: SettingsDep, idem: IdempotencyKey = None,
) -> Response:
    """Subscribe a URL to events; the response carries the signing secret, shown this once.

    Deliveries are signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`,
    `webhook-signature: v1,<base64 HMAC-SHA256>`). The host must resolve to public
    addresses only (422 `private_target`) unless the server sets `ANNOPLAN_WEBHOOK_ALLOW_PRIVATE=1`.
    """
    project = project_for(session, principal, pid, "admin", "pm")
    checked_webhook_url(body.url, allow_private=settings.webhook_allow_private)

    def write() -> tuple[int, WebhookCreated]:
        hook = Webhook(id=new_public_id("wh"), project_id=pid, url=body.url, events=list(body.events),
                       secret=new_webhook_secret(), created_at=utcnow())
        session.add(hook)
        session.flush()
        if "decision.changed" in hook.events:
            record_baseline(session, project, request.app.state.documents, n_resamples=settings.bootstrap_resamples)
        return 201, WebhookCreated(**_read(hook).model_dump(), secret=hook.secret)

    return idempotent_write(session, principal, idem, request_fingerprint(request, body.model_dump_json().encode()),
                            write)


@router.get("", response_model=Page[WebhookRead], responses=error_responses(401, 403, 404))
def list_webhooks(pid: ProjectId, session: ReadSession, principal: PrincipalDep) -> Page[WebhookRead]:
    """The project's webhooks (secrets are never shown again)."""
    project_for(session, principal, pid, "admin", "pm")
    hooks = session.scalars(select(Webhook).where(Webhook.project_id == pid).order_by(Webhook.created_at)).all()
    return Page(items=[_read(h) for h in hooks], next_cursor=None)


@router.get("/{wid}", response_model=WebhookRead, responses=error_responses(401, 403, 404))
def get_webhook(pid: ProjectId, wid: WebhookId, session: ReadSession, principal: PrincipalDep) -> WebhookRead:
    """One webhook."""
    project_for(session, principal, pid, "admin", "pm")
    return _read(_webhook(session, pid, wid))


@router.delete("/{wid}", status_code=204, responses=error_responses(401, 403, 404))
def delete_webhook(pid: ProjectId, wid: WebhookId, session: WriteSession, principal: PrincipalDep) -> Response:
    """Unsubscribe: the webhook and its pending deliveries go; nothing more is sent to it."""
    project_for(session, principal, pid, "admin", "pm")
    session.delete(_webhook(session, pid, wid))
    return Response(status_code=204)


def _delivery_read(d: WebhookDelivery, event_type: str) -> DeliveryRead:
    return DeliveryRead(
        id=d.id, event_id=d.event_id, event_type=event_type, status=d.status, attempts=d.attempts,
        next_attempt_at=d.next_attempt_at if d.status == "pending" else None, retry_until=d.retry_until,
        last_attempt_at=d.last_attempt_at, last_status_code=d.last_status_code, last_error=d.last_error,
        delivered_at=d.delivered_at, created_at=d.created_at,
    )


@router.get("/{wid}/deliveries", response_model=Page[DeliveryRead], responses=error_responses(401, 403, 404, 422))
def list_deliveries(
    pid: ProjectId, wid: WebhookId, session: ReadSession, principal: PrincipalDep, page: PageDep,
) -> Page[DeliveryRead]:
    """The delivery log, newest first: status (`pending`, `delivered`, `failed`), attempts, last error."""
    project_for(session, principal, pid, "admin", "pm")
    _webhook(session, pid, wid)
    stmt = (select(WebhookDelivery, WebhookEvent.type).join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
            .where(WebhookDelivery.webhook_id == wid).order_by(WebhookDelivery.id.desc()).limit(page.limit + 1))
    if page.after is not None:
        stmt = stmt.where(WebhookDelivery.id < page.after)
    rows = [_delivery_read(d, t) for d, t in session.execute(stmt)]
    more = len(rows) > page.limit
    rows = rows[: page.limit]
    return Page(items=rows, next_cursor=encode_cursor(rows[-1].id) if more else None)


@router.post("/{wid}/deliveries/{did}/redeliver", status_code=202, response_model=DeliveryRead,
             responses=error_responses(401, 403, 404))
def redeliver(
    pid: ProjectId, wid: WebhookId, did: DeliveryId, session: WriteSession, principal: PrincipalDep,
    settings: SettingsDep,
) -> DeliveryRead:
    """Send a delivery again now (delivered or failed ones too), with a fresh retry window."""
    project_for(session, principal, pid, "admin", "pm")
    _webhook(session, pid, wid)
    row = session.execute(
        select(WebhookDelivery, WebhookEvent.type).join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .where(WebhookDelivery.id == did, WebhookDelivery.webhook_id == wid)
    ).one_or_none()
    if row is None:
        raise NotFound(f"delivery {did} not found")
    now = utcnow()
    window = timedelta(seconds=settings.webhook_retry_window_seconds)
    session.execute(update(WebhookDelivery).where(WebhookDelivery.id == did).values(
        status="pending", next_attempt_at=now, retry_until=now + window,
    ))
    session.refresh(row[0])
    return _delivery_read(row[0], row[1])
