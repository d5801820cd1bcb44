"""Imports of label files from other tools and the generic long format, and its export."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Annotated, Literal

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from service.core.csv_safety import SafeWriter
from service.core.errors import error_responses
from service.core.uploads import ContentType, RawBody, bulk_body_doc
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.deps import (
    PrincipalDep,
    ProjectForPM,
    ProjectForPMWrite,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
)
from service.integrations.generic import GenericRow, generic_scores
from service.integrations.scores import GENERIC_COLUMNS, ImportSummary, generic_rows, write_scores

router = APIRouter(prefix="/projects/{pid}", tags=["integrations"])


@router.post(
    "/import/generic",
    response_model=ImportSummary,
    openapi_extra=bulk_body_doc(GenericRow),
    responses=error_responses(401, 403, 404, 409, 413, 415, 422),
)
def import_generic(
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
    """Import labels in the generic long format (admin, pm): CSV, JSON array or NDJSON rows of
    `item, rater, kind, value[, criterion, confidence]`; all-or-nothing.

    Items and raters the project lacks are created (`kind`: `judge`, `primary` or `human`); a
    rater's kind must agree across its rows and with the project. Values map as in the Label
    Studio import (`label_map`, the equal label, the label equal ignoring case). `confidence`
    (0 to 1) is checked and not stored. A row equal to its cell's current label writes nothing.
    """
    scores = generic_scores(body, content_type, max_rows=settings.max_rows)
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, body),
        lambda: (200, write_scores(session, project, principal, scores, strict_names=True)),
    )


@router.get(
    "/export/generic",
    responses={
        **error_responses(401, 403, 404, 422),
        200: {"content": {"text/csv": {}, "application/x-ndjson": {}}, "description": "Current labels"},
    },
    response_class=StreamingResponse,
)
def export_generic(
    pid: ProjectId,
    project: ProjectForPM,
    session: ReadSession,
    format: Annotated[Literal["csv", "ndjson"], Query(description="CSV (the default) or NDJSON rows.")] = "csv",
) -> StreamingResponse:
    """The project's current labels in the generic long format (admin, pm): `item, rater, kind,
    value, criterion`, in label order; `POST .../import/generic` reads it back."""
    rows = generic_rows(session, project)
    if format == "ndjson":
        return StreamingResponse(_ndjson(rows), media_type="application/x-ndjson")
    return StreamingResponse(_csv(rows), media_type="text/csv")


def _ndjson(rows: Sequence[Sequence[str]]) -> Iterator[bytes]:
    for r in rows:
        yield orjson.dumps(dict(zip(GENERIC_COLUMNS, r, strict=True))) + b"\n"


def _csv(rows: Sequence[Sequence[str]]) -> Iterator[str]:
    buf = io.StringIO()
    writer = SafeWriter(buf)
    writer.writerow(GENERIC_COLUMNS)
    for start in range(0, len(rows), 1000):
        writer.writerows(rows[start : start + 1000])
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()
