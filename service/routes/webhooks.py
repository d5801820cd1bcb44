"""Outbound webhooks: subscriptions, their delivery log, and manual redelivery (PMs)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from service.core.errors import error_responses
from service.core.outbound import checked, webhook_policy
from service.core.pagination import Page, PageDep, encode_cursor
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.models import Webhook, WebhookDelivery
from service.deps import (
    PrincipalDep,
    ProjectForPM,
    ProjectForPMWrite,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
)
from service.schemas.webhooks import DeliveryRead, WebhookCreate, WebhookCreated, WebhookRead
from service.webhooks.store import (
    add_webhook,
    deliveries_page,
    project_webhook,
    project_webhooks,
    remove_webhook,
    schedule_redelivery,
)
from service.webhooks.watch import DECISION_EVENTS, record_baseline

router = APIRouter(prefix="/projects/{pid}/webhooks", tags=["webhooks"])
WebhookId = Annotated[str, Path(description="The webhook's id.")]
DeliveryId = Annotated[int, Path(description="The delivery's id.")]


def _read(hook: Webhook) -> WebhookRead:
    return WebhookRead(id=hook.id, url=hook.url, events=hook.events, created_at=hook.created_at)


def _delivery_read(d: WebhookDelivery, event_type: str) -> DeliveryRead:
    return DeliveryRead(
        id=d.id,
        event_id=d.event_id,
        event_type=event_type,
        status=d.status,
        attempts=d.attempts,
        next_attempt_at=d.next_attempt_at if d.status == "pending" else None,
        retry_until=d.retry_until,
        last_attempt_at=d.last_attempt_at,
        last_status_code=d.last_status_code,
        last_error=d.last_error,
        delivered_at=d.delivered_at,
        created_at=d.created_at,
    )


@router.post("", status_code=201, response_model=WebhookCreated, responses=error_responses(401, 403, 404, 409, 422))
def post_webhook(
    pid: ProjectId,
    project: ProjectForPMWrite,
    body: WebhookCreate,
    request: Request,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    idem: IdempotencyKey = None,
) -> Response:
    """Subscribe a URL to events; the response carries the signing secret, shown this once.

    Deliveries are signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`,
    `webhook-signature: v1,<base64 HMAC-SHA256>`). The host must resolve to public
    addresses only (422 `private_target`) unless the server sets `ANNOPLAN_OUTBOUND_ALLOW_PRIVATE=1`;
    each delivery checks again, on the address it connects to (docs/operations.md).
    """
    checked(body.url, webhook_policy(settings))

    def write() -> tuple[int, WebhookCreated]:
        hook = add_webhook(session, project.id, body.url, list(body.events))
        if DECISION_EVENTS & set(hook.events):
            record_baseline(
                session,
                project,
                request.app.state.documents,
                n_resamples=settings.bootstrap_resamples,
                retry_window_seconds=settings.webhook_retry_window_seconds,
            )
        return 201, WebhookCreated(**_read(hook).model_dump(), secret=hook.secret)

    return idempotent_write(
        session, principal, idem, request_fingerprint(request, body.model_dump_json().encode()), write
    )


@router.get("", response_model=Page[WebhookRead], responses=error_responses(401, 403, 404))
def list_webhooks(pid: ProjectId, project: ProjectForPM, session: ReadSession) -> Page[WebhookRead]:
    """The project's webhooks (secrets are never shown again)."""
    return Page(items=[_read(h) for h in project_webhooks(session, project.id)], next_cursor=None)


@router.get("/{wid}", response_model=WebhookRead, responses=error_responses(401, 403, 404))
def get_webhook(pid: ProjectId, wid: WebhookId, project: ProjectForPM, session: ReadSession) -> WebhookRead:
    """One webhook."""
    return _read(project_webhook(session, project.id, wid))


@router.delete("/{wid}", status_code=204, responses=error_responses(401, 403, 404))
def delete_webhook(pid: ProjectId, wid: WebhookId, project: ProjectForPMWrite, session: WriteSession) -> Response:
    """Unsubscribe: the webhook and its pending deliveries go; nothing more is sent to it."""
    remove_webhook(session, project_webhook(session, project.id, wid))
    return Response(status_code=204)


@router.get("/{wid}/deliveries", response_model=Page[DeliveryRead], responses=error_responses(401, 403, 404, 422))
def list_deliveries(
    pid: ProjectId,
    wid: WebhookId,
    project: ProjectForPM,
    session: ReadSession,
    page: PageDep,
) -> Page[DeliveryRead]:
    """The delivery log, newest first: status (`pending`, `delivered`, `failed`), attempts, last error."""
    project_webhook(session, project.id, wid)
    rows = [_delivery_read(d, t) for d, t in deliveries_page(session, wid, page)]
    more = len(rows) > page.limit
    rows = rows[: page.limit]
    return Page(items=rows, next_cursor=encode_cursor(rows[-1].id) if more else None)


@router.post(
    "/{wid}/deliveries/{did}/redeliver",
    status_code=202,
    response_model=DeliveryRead,
    responses=error_responses(401, 403, 404, 409),
)
def redeliver(
    pid: ProjectId,
    wid: WebhookId,
    did: DeliveryId,
    project: ProjectForPMWrite,
    session: WriteSession,
    settings: SettingsDep,
) -> DeliveryRead:
    """Send a delivery again now (delivered or failed ones too), with a fresh retry window.

    409 `delivery_in_flight` while a sender is working on it.
    """
    project_webhook(session, project.id, wid)
    delivery, event_type = schedule_redelivery(session, wid, did, window_seconds=settings.webhook_retry_window_seconds)
    return _delivery_read(delivery, event_type)
