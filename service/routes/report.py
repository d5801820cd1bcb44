"""The protocol-aware report (docs/method.md §7) as JSON, CSV (the per-criterion tables) or an HTML page."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import HTMLResponse, Response

from service.core.errors import error_responses
from service.deps import ProjectForViewer, ProjectId, ReadSession
from service.reporting.render import CSV_COLUMNS, report_csv, report_html
from service.reporting.report import ReportOptions, cached_report, report_key
from service.schemas.report import Costs, Handling, Level, Report, Rule

router = APIRouter(prefix="/projects/{pid}/report", tags=["report"])


@router.get(
    "",
    response_model=Report,
    responses={
        200: {
            "description": "The report: JSON (default), the per-criterion tables as CSV, or an HTML page.",
            "content": {
                "text/csv": {"schema": {"type": "string"}, "example": ",".join(CSV_COLUMNS) + "\r\n"},
                "text/html": {"schema": {"type": "string"}},
            },
        },
        304: {"description": "Unchanged: the ETag sent in If-None-Match is the report's."},
        **error_responses(401, 403, 404, 422),
    },
)
def get_report(
    pid: ProjectId,
    project: ProjectForViewer,
    session: ReadSession,
    request: Request,
    response: Response,
    handling: Annotated[
        Handling | None, Query(description="How CANNOT_ASSESS is handled (docs/method.md §7); default: the project's.")
    ] = None,
    recode_to: Annotated[
        str | None, Query(description="The label CANNOT_ASSESS is recoded to; required for handling=recode.")
    ] = None,
    positive: Annotated[
        str | None,
        Query(
            description=(
                "The positive (MET) label; default the project's decision.positive_label, else the last of two labels."
            )
        ),
    ] = None,
    costs: Annotated[
        Costs, Query(description="Disagreement costs over the scored categories (kappa weights).")
    ] = "nominal",
    aggregation: Annotated[
        Level | None, Query(description="How criteria are aggregated (docs/method.md §7); default: the project's.")
    ] = None,
    rule: Annotated[
        Rule, Query(description="aggregation=item: an item is positive when all / any of its criteria are.")
    ] = "all",
    criterion: Annotated[str | None, Query(description="Report one criterion only.")] = None,
    fmt: Annotated[Literal["json", "csv", "html"], Query(alias="format", description="Response format.")] = "json",
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Report | Response:
    """Each judge against the primary human, per criterion and aggregated, under a declared protocol.

    Per table: the full verdict table (CANNOT_ASSESS and INVALID rows and columns), both
    marginals, abstention/invalid rates and coverage, phi, kappa with interval next to both
    positive rates, accuracy, F1 of the positive label, and under exclusion the Manski and
    sharp bounds; then a checklist of the reporting items of docs/method.md §7. Undefined values are
    null with a reason. Aggregates only, no per-item data: viewers may read it. Computed once per
    labels, raters, settings and query in a worker; send the ETag back in If-None-Match for a 304.
    """
    declared = project.decision_settings
    if handling is None:
        handling, recode_to = declared.handling, recode_to or declared.recode_to
    options = ReportOptions(
        handling=handling,
        recode_to=recode_to,
        positive=positive,
        costs=costs,
        aggregation=aggregation or declared.aggregation,
        rule=rule,
        criterion=criterion,
    )
    etag = report_key(session, project, options)  # one per format: the body differs, the statistics do not
    headers = {"Cache-Control": "no-cache", "ETag": etag[:-1] + f'-{fmt}"'}
    if if_none_match is not None and headers["ETag"] in [t.strip() for t in if_none_match.split(",")]:
        return Response(status_code=304, headers=headers)
    report = cached_report(session, project, options, request.app.state.documents, etag)
    if fmt == "csv":
        return Response(report_csv(report), media_type="text/csv; charset=utf-8", headers=headers)
    if fmt == "html":
        return HTMLResponse(report_html(report), headers=headers)
    response.headers.update(headers)
    return report
