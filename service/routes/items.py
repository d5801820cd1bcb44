"""The corpus: bulk upsert and listing of items."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.core.errors import error_responses
from service.core.pagination import Page, PageDep, page_of
from service.core.uploads import ContentType, RawBody, bulk_body_doc, parse_rows
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.items import upsert_items
from service.data.models import Item
from service.data.queries import items_page
from service.deps import (
    PrincipalDep,
    ProjectForPM,
    ProjectForPMWrite,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
)
from service.schemas.items import ItemIn, ItemRead, ItemsUpserted

router = APIRouter(prefix="/projects/{pid}/items", tags=["items"])


@router.post(
    "",
    response_model=ItemsUpserted,
    openapi_extra=bulk_body_doc(ItemIn),
    responses=error_responses(401, 403, 404, 413, 415, 422),
)
def post_items(
    pid: ProjectId,
    project: ProjectForPMWrite,
    request: Request,
    body: RawBody,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    content_type: ContentType = None,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Bulk upsert by `external_id`: a JSON array, NDJSON, or CSV (extra CSV columns become features).

    All-or-nothing: one bad row rejects the request and nothing is written.
    """
    rows = parse_rows(body, content_type, ItemIn, max_rows=settings.max_rows, csv_extra="features")
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, body),
        lambda: (200, upsert_items(session, project, rows)),
    )


@router.get("", response_model=Page[ItemRead], responses=error_responses(401, 403, 404, 422))
def list_items(pid: ProjectId, project: ProjectForPM, session: ReadSession, page: PageDep) -> Page[ItemRead]:
    """Items in corpus order (admin, pm)."""
    return page_of(items_page(session, project.id, page), page, key=lambda item: item.id, read=item_read)


def item_read(item: Item) -> ItemRead:
    """The public view of an item."""
    return ItemRead(
        id=str(item.id), external_id=item.external_id, position=item.position, features=item.features, text=item.text
    )
