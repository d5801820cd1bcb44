"""Labels: append-only bulk writes and the export of current labels or their history."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from service.core.csv_safety import SafeWriter
from service.core.errors import Invalid, echo, error_responses
from service.core.pagination import Page, PageDep, page_of
from service.core.parquet import PARQUET, ColumnType, parquet_file, pyarrow
from service.core.uploads import ContentType, RawBody, bulk_body_doc, parse_rows
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.labels import as_seen_by, retract_rows, write_labels
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
from service.schemas.labels import LabelIn, LabelRow, LabelsAccepted, RetractionIn, RetractionsRead

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
    (judges only). An annotator key may only write its own rater, and gets `label_seq` null. In a pairwise
    project a judge's label names the `order` it was shown the answers (`AB` or `BA`, a column of a CSV),
    and the item holds its label in each order; an order anywhere else, or a judge's label without one: 422.
    """
    rows = parse_rows(body, content_type, LabelIn, max_rows=settings.max_rows)
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, body),
        lambda: (200, as_seen_by(principal, write_labels(session, project, principal, rows))),
    )


@router.post(
    "/retractions",
    response_model=RetractionsRead,
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
    writes nothing (a repeat is a no-op). An annotator key may only retract its own rater's labels. A pairwise
    judge's row with `order` withdraws that order's label, without it both orders'.
    """
    rows = parse_rows(body, content_type, RetractionIn, max_rows=settings.max_rows)
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, body),
        lambda: (200, as_seen_by(principal, retract_rows(session, project, principal, rows))),
    )


@router.get(
    "",
    response_model=Page[LabelRow],
    responses={
        **error_responses(401, 403, 404, 422),
        200: {
            "content": {"application/x-ndjson": {}, "text/csv": {}, PARQUET: {}},
            "description": "Labels",
        },
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
        Literal["json", "ndjson", "csv", "parquet"],
        Query(
            description="json pages; ndjson and csv stream everything; parquet is everything as one Parquet file "
            "(the columns of the CSV, typed; a server installed with the `dataframes` extra, else 422)."
        ),
    ] = "json",
) -> Page[LabelRow] | Response:
    """Export labels (admin, pm): current labels, or `history=true` for every event, by `seq`.

    A retracted label (`POST ./retractions`, a Label Studio deletion or skip) is no longer current; in the history
    its retraction is an event with `retracted` true and `value` null (empty in CSV).
    """
    arrow = pyarrow() if format == "parquet" else None
    if format == "parquet" and arrow is None:
        raise Invalid("format 'parquet' needs pyarrow on the server (install annoplan[dataframes])")
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
    if arrow is not None:
        return Response(parquet_file(arrow, LABELS_PARQUET, rows), media_type=PARQUET)
    media = "application/x-ndjson" if format == "ndjson" else "text/csv"
    return StreamingResponse(_ndjson(rows) if format == "ndjson" else _csv(rows), media_type=media)


LABELS_PARQUET: list[tuple[str, ColumnType]] = [
    *((c, "string") for c in LABEL_COLUMNS[:4]),
    (LABEL_COLUMNS[4], "int64"),
    (LABEL_COLUMNS[5], "string"),
    (LABEL_COLUMNS[6], "timestamp"),
    (LABEL_COLUMNS[7], "bool"),
    (LABEL_COLUMNS[8], "string"),
]
"""The label export's Parquet columns: strings, an int64 seq, a UTC timestamp, a boolean and the order."""


def _ndjson(rows: Sequence[Sequence[Any]]) -> Iterator[bytes]:
    for r in rows:
        yield orjson.dumps(dict(zip(LABEL_COLUMNS, r, strict=True))) + b"\n"


def _csv(rows: Sequence[Sequence[Any]]) -> Iterator[str]:
    buf = io.StringIO()
    writer = SafeWriter(buf)
    writer.writerow(LABEL_COLUMNS)
    for start in range(0, len(rows), 1000):
        writer.writerows(
            [*r[:6], r[6].isoformat() if r[6] else "", "true" if r[7] else "false", r[8] or ""]
            for r in rows[start : start + 1000]
        )
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()
