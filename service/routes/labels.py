"""Labels: append-only bulk writes and the export of current labels or their history."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse

from service.core.csv_safety import SafeWriter
from service.core.errors import Invalid, echo, error_responses
from service.core.pagination import Page, PageDep, page_of
from service.core.uploads import ContentType, RawBody, bulk_body_doc, parse_rows
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.labels import retract_rows, write_labels
from service.data.queries import LABEL_COLUMNS, label_rows, rater_id
from service.deps import (
    PrincipalDep,
    ProjectForAnnotatorWrite,
    ProjectForPM,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
)
from service.schemas import LabelIn, LabelRow, LabelsAccepted, LabelsRetracted, RetractionIn

router = APIRouter(prefix="/projects/{pid}/labels", tags=["labels"])


@router.post(
    "",
    response_model=LabelsAccepted,
    openapi_extra=bulk_body_doc(LabelIn),
    responses=error_responses(401, 403, 404, 409, 413, 415, 422),
)
def post_labels(
    pid: ProjectId,
    project: ProjectForAnnotatorWrite,
    request: Request,
    body: RawBody,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    content_type: ContentType = None,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Append label events in bulk: JSON array, NDJSON or CSV; all-or-nothing.

    A row equal to its cell's current label counts as a duplicate and writes nothing; a
    different value for a labelled cell is a correction (a new event). Values are the
    project's labels, `CANNOT_ASSESS` (when the project allows abstention) or `INVALID`
    (judges only). An annotator key may only write its own rater.
    """
    rows = parse_rows(body, content_type, LabelIn, max_rows=settings.max_rows)
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, body),
        lambda: (200, write_labels(session, project, principal, rows)),
    )


@router.post(
    "/retractions",
    response_model=LabelsRetracted,
    openapi_extra=bulk_body_doc(RetractionIn),
    responses=error_responses(401, 403, 404, 409, 413, 415, 422),
)
def post_retractions(
    pid: ProjectId,
    project: ProjectForAnnotatorWrite,
    request: Request,
    body: RawBody,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    content_type: ContentType = None,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Withdraw labels in bulk (`item`, `rater`, `criterion` per row): JSON array, NDJSON or CSV; all-or-nothing.

    Each cell with a current label gets a retraction event: the label leaves the current labels and
    every statistic, the history keeps both, and `label_seq` advances. A cell with no current label
    writes nothing (a repeat is a no-op). An annotator key may only retract its own rater's labels.
    """
    rows = parse_rows(body, content_type, RetractionIn, max_rows=settings.max_rows)
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, body),
        lambda: (200, retract_rows(session, project, principal, rows)),
    )


@router.get(
    "",
    response_model=Page[LabelRow],
    responses={
        **error_responses(401, 403, 404, 422),
        200: {"content": {"application/x-ndjson": {}, "text/csv": {}}, "description": "Labels"},
    },
)
def export_labels(
    pid: ProjectId,
    project: ProjectForPM,
    session: ReadSession,
    page: PageDep,
    history: Annotated[bool, Query(description="Every event instead of the current labels.")] = False,
    rater: Annotated[str | None, Query(description="Only this rater (external id).")] = None,
    criterion: Annotated[str | None, Query()] = None,
    since_seq: Annotated[int, Query(ge=0, le=2**63 - 1, description="Only events after this sequence number.")] = 0,
    format: Annotated[
        Literal["json", "ndjson", "csv"], Query(description="json pages; ndjson and csv stream everything.")
    ] = "json",
) -> Page[LabelRow] | StreamingResponse:
    """Export labels (admin, pm): current labels, or `history=true` for every event, by `seq`.

    A retracted label (`POST ./retractions`, a Label Studio deletion or skip) is no longer current; in the history
    its retraction is an event with `retracted` true and `value` null (empty in CSV).
    """
    only_rater = None if rater is None else rater_id(session, project.id, rater)
    if criterion is not None and criterion not in project.criteria:
        raise Invalid(f"unknown criterion {echo(criterion)}; the project has {project.criteria}")
    json = format == "json"
    rows = label_rows(
        session,
        project.id,
        history=history,
        rater_id=only_rater,
        criterion=criterion,
        since_seq=max(since_seq, page.after or 0),
        limit=page.limit + 1 if json else None,
    )
    if json:
        return page_of(rows, page, key=lambda r: r.seq, read=lambda r: LabelRow(**r._asdict()))
    media = "application/x-ndjson" if format == "ndjson" else "text/csv"
    return StreamingResponse(_ndjson(rows) if format == "ndjson" else _csv(rows), media_type=media)


def _ndjson(rows: Sequence[Sequence[Any]]) -> Iterator[bytes]:
    for r in rows:
        yield orjson.dumps(dict(zip(LABEL_COLUMNS, r, strict=True))) + b"\n"


def _csv(rows: Sequence[Sequence[Any]]) -> Iterator[str]:
    buf = io.StringIO()
    writer = SafeWriter(buf)
    writer.writerow(LABEL_COLUMNS)
    for start in range(0, len(rows), 1000):
        writer.writerows(
            [*r[:6], r[6].isoformat() if r[6] else "", "true" if r[7] else "false"] for r in rows[start : start + 1000]
        )
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()
