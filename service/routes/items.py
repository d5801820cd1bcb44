"""The corpus: bulk upsert and listing of items."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select

from service.deps import (
    PrincipalDep,
    ReadSession,
    SettingsDep,
    WriteSession,
    project_for,
)
from service.errors import error_responses
from service.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.item_store import upsert_items
from service.models import Item
from service.pagination import PageDep, encode_cursor
from service.routes.projects import ProjectId
from service.schemas import ItemIn, ItemRead, ItemsUpserted, Page
from service.uploads import ContentType, RawBody, bulk_body_doc, parse_rows

router = APIRouter(prefix="/projects/{pid}/items", tags=["items"])


@router.post(
    "",
    response_model=ItemsUpserted,
    openapi_extra=bulk_body_doc(ItemIn),
    responses=error_responses(401, 403, 404, 413, 415, 422),
)
def post_items(
    pid: ProjectId, request: Request, body: RawBody, session: WriteSession, principal: PrincipalDep,
    settings: SettingsDep, content_type: ContentType = None, idem: IdempotencyKey = None,
) -> JSONResponse:
    """Bulk upsert by `external_id`: a JSON array, NDJSON, or CSV (extra CSV columns become features).

    All-or-nothing: one bad row rejects the request and nothing is written.
    """
    rows = parse_rows(body, content_type, ItemIn, max_rows=settings.max_rows, csv_extra="features")
    project = project_for(session, principal, pid, "admin", "pm")
    return idempotent_write(
        session, principal, idem, request_fingerprint(request, body),
        lambda: (200, upsert_items(session, project, rows)),
    )


@router.get("", response_model=Page[ItemRead], responses=error_responses(401, 403, 404, 422))
def list_items(pid: ProjectId, session: ReadSession, principal: PrincipalDep, page: PageDep) -> Page[ItemRead]:
    """Items in corpus order (admin, pm)."""
    project_for(session, principal, pid, "admin", "pm")
    stmt = select(Item).where(Item.project_id == pid).order_by(Item.id).limit(page.limit + 1)
    if page.after is not None:
        stmt = stmt.where(Item.id > page.after)
    rows = list(session.scalars(stmt))
    more = len(rows) > page.limit
    rows = rows[: page.limit]
    return Page(
        items=[ItemRead(id=str(r.id), external_id=r.external_id, position=r.position, features=r.features, text=r.text) for r in rows],
        next_cursor=encode_cursor(rows[-1].id) if more else None,
    )
