"""Imports of label files from other tools and the generic long format, and its export."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from service.core.csv_safety import SafeWriter
from service.core.errors import Invalid, TooLarge, error_responses
from service.core.parquet import PARQUET, ColumnType, parquet_file, pyarrow
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
from service.integrations.scores import GENERIC_COLUMNS, ImportSummary, Score, generic_rows, write_scores
from service.integrations.sources import Roles, inspect_scores, langfuse_scores, langsmith_scores, promptfoo_scores
from service.schemas.raters import RaterKind

router = APIRouter(prefix="/projects/{pid}", tags=["integrations"])


GENERIC_PARQUET: list[tuple[str, ColumnType]] = [
    (c, "double" if c == "confidence" else "string") for c in GENERIC_COLUMNS
]
"""The generic export's Parquet columns: text, and the confidence as a number."""


def _generic_body_doc() -> dict[str, Any]:
    """The generic import's OpenAPI body: the bulk types, and a Parquet file."""
    doc = bulk_body_doc(GenericRow)
    doc["requestBody"]["content"][PARQUET] = {
        "schema": {"type": "string", "format": "binary", "description": "a Parquet file with the columns of the rows"}
    }
    return doc


@router.post(
    "/import/generic",
    response_model=ImportSummary,
    openapi_extra=_generic_body_doc(),
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
    """Import labels in the generic long format (admin, pm): CSV, JSON array, NDJSON or Parquet rows of
    `item, rater, kind, value[, criterion, confidence]`; all-or-nothing.

    Items and raters the project lacks are created (`kind`: `judge`, `primary` or `human`); a
    rater's kind must agree across its rows and with the project. Values map as in the Label
    Studio import (`label_map`, the equal label, the label equal ignoring case). `confidence`
    (0 to 1) is a judge label's confidence. A row equal to its cell's current label writes nothing.

    A Parquet file (`application/vnd.apache.parquet`; a server with the `dataframes` extra, else 415) is
    read by column name (other columns are ignored); numbers and booleans in its text columns read as
    text (`1.0` as `1`), and its uncompressed columns are bounded as a body is.
    """
    scores = generic_scores(body, content_type, max_rows=settings.max_rows, max_bytes=settings.max_body_bytes)
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
        200: {
            "content": {"text/csv": {}, "application/x-ndjson": {}, PARQUET: {}},
            "description": "Current labels",
        },
    },
    response_class=StreamingResponse,
)
def export_generic(
    pid: ProjectId,
    project: ProjectForPM,
    session: ReadSession,
    format: Annotated[
        Literal["csv", "ndjson", "parquet"],
        Query(
            description="CSV (the default), NDJSON rows, or one Parquet file (a server with the `dataframes` extra)."
        ),
    ] = "csv",
) -> Response:
    """The project's current labels in the generic long format (admin, pm): `item, rater, kind,
    value, criterion, confidence`, in label order; `POST .../import/generic` reads it back.

    In Parquet the columns are strings but `confidence`, a double; without pyarrow on the server it is a 422.
    """
    pa = pyarrow() if format == "parquet" else None
    if format == "parquet" and pa is None:
        raise Invalid("format 'parquet' needs pyarrow on the server (install annoplan[dataframes])")
    rows = generic_rows(session, project)
    if pa is not None:
        return Response(parquet_file(pa, GENERIC_PARQUET, rows), media_type=PARQUET)
    if format == "ndjson":
        return StreamingResponse(_ndjson(rows), media_type="application/x-ndjson")
    return StreamingResponse(_csv(rows), media_type="text/csv")


def _ndjson(rows: Sequence[Sequence[str | float | None]]) -> Iterator[bytes]:
    for r in rows:
        yield orjson.dumps(dict(zip(GENERIC_COLUMNS, r, strict=True))) + b"\n"


def _csv(rows: Sequence[Sequence[str | float | None]]) -> Iterator[str]:
    buf = io.StringIO()
    writer = SafeWriter(buf)
    writer.writerow(GENERIC_COLUMNS)
    for start in range(0, len(rows), 1000):
        writer.writerows(rows[start : start + 1000])
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    yield buf.getvalue()


ScorerNames = Annotated[list[Annotated[str, Query(max_length=200)]], Query(max_length=100)]


def _roles(
    judges: Annotated[
        ScorerNames, Query(description="Scorers (assertion types or metrics, scorer names) to import as judges.")
    ] = [],  # noqa: B006 (FastAPI copies query defaults)
    humans: Annotated[ScorerNames, Query(description="Scorers to import as humans.")] = [],  # noqa: B006
    api_source: Annotated[
        RaterKind | None, Query(description="The kind of API-sourced scores (Langfuse `API`, LangSmith `api`).")
    ] = None,
    score: Annotated[str | None, Query(max_length=200, description="Import only scores of this name (key).")] = None,
) -> Roles:
    return Roles(frozenset(judges), frozenset(humans), api_source, score)


RolesDep = Annotated[Roles, Depends(_roles)]
Criterion = Annotated[
    str | None,
    Query(description="The criterion of scores whose name is not one (needed when the project has several)."),
]
Primary = Annotated[str | None, Query(description="External id of the human rater to make the project's primary.")]


@dataclass
class ToolImport:
    """One import request of a tool's file: what to write with, and where (the routes' shared dependencies)."""

    project: ProjectForPMWrite
    request: Request
    body: RawBody
    session: WriteSession
    principal: PrincipalDep
    settings: SettingsDep
    roles: RolesDep
    criterion: Criterion = None
    primary: Primary = None
    idem: IdempotencyKey = None

    def written(self, read: Callable[[bytes, Roles], list[Score]]) -> JSONResponse:
        """Read the file, bound it, and write its scores in one transaction (idempotent with a key)."""
        scores = read(self.body, self.roles)
        limit = self.settings.max_rows
        if len(scores) > limit:
            raise TooLarge(f"{len(scores)} scores in one request; the limit is {limit}", code="too_many_rows")
        return idempotent_write(
            self.session,
            self.principal,
            self.idem,
            request_fingerprint(self.request, self.body),
            lambda: (
                200,
                write_scores(
                    self.session,
                    self.project,
                    self.principal,
                    scores,
                    criterion=self.criterion,
                    primary=self.primary,
                    skipped=self.roles.skipped_list(),
                ),
            ),
        )


ToolImportDep = Annotated[ToolImport, Depends()]


IMPORT_ERRORS = error_responses(401, 403, 404, 409, 413, 422)


@router.post("/import/promptfoo", response_model=ImportSummary, responses=IMPORT_ERRORS)
def import_promptfoo(pid: ProjectId, call: ToolImportDep) -> JSONResponse:
    """Import a promptfoo results file (`promptfoo eval -o results.json`; admin, pm).

    Each result (a test case's output) is an item: `<testIdx>`, or `<testIdx>:<promptIdx>:<provider>`
    when the file has several prompts or providers. Each graded assertion is a rater
    `promptfoo-<metric or type>` whose label is `pass` or `fail`: model-graded types
    (`llm-rubric`, `g-eval`, `factuality`, ...) are judges, `human` ratings humans, deterministic
    checks are skipped; other types are a 422 unless named in `judges` or `humans`.
    """
    return call.written(promptfoo_scores)


@router.post("/import/inspect", response_model=ImportSummary, responses=IMPORT_ERRORS)
def import_inspect(pid: ProjectId, call: ToolImportDep) -> JSONResponse:
    """Import an Inspect AI eval log (a `.json` log, or a `.eval` zip log as sent; admin, pm).

    Each sample is an item (`<id>`, or `<id>#<epoch>` with several epochs); each scorer a rater
    `inspect-<scorer>`: `model_graded_qa` and `model_graded_fact` are judges, deterministic
    scorers (`match`, `includes`, `choice`, ...) are skipped, others are a 422 unless named in
    `judges` or `humans`. Values `C`, `I`, `P`, `N` read as `correct`, `incorrect`, `partial`,
    `noanswer`.
    """
    return call.written(lambda body, roles: inspect_scores(body, roles, max_bytes=20 * call.settings.max_body_bytes))


@router.post("/import/langfuse", response_model=ImportSummary, responses=IMPORT_ERRORS)
def import_langfuse(pid: ProjectId, call: ToolImportDep) -> JSONResponse:
    """Import Langfuse scores (a `GET /api/public/scores` page or its `data` array; admin, pm).

    The item is the trace (`<traceId>/<observationId>` for an observation's score). `EVAL` scores
    are the judge `langfuse-eval`, `ANNOTATION` scores the human `langfuse-user-<authorUserId>`,
    `API` scores need `api_source`. A score name that is a project criterion labels it; else the
    file must hold one name (pick it with `score`).
    """
    return call.written(langfuse_scores)


@router.post("/import/langsmith", response_model=ImportSummary, responses=IMPORT_ERRORS)
def import_langsmith(pid: ProjectId, call: ToolImportDep) -> JSONResponse:
    """Import LangSmith feedback (an array of `list_feedback` records, or `{"feedback": [...]}`; admin, pm).

    The item is the run (`run_id`). `model` feedback is the judge `langsmith-model`, `app`
    feedback the human `langsmith-user-<feedback_source.user_id>`, `api` feedback needs
    `api_source`. The label is `value` when it is text, else `score`. Keys map to criteria as
    Langfuse score names do.
    """
    return call.written(langsmith_scores)
