"""The protocol-aware report (docs/method.md §7) as JSON, CSV (the per-criterion tables) or an HTML page."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from service.core.errors import Invalid, echo, error_responses
from service.data.models import Project
from service.deps import ProjectForViewer, ProjectId, ReadSession
from service.reporting.render import CSV_COLUMNS, report_csv, report_html
from service.reporting.report import ReportOptions, cached_report, report_key
from service.reporting.scores import score_report, score_report_csv, score_report_html
from service.schemas.report import Costs, Handling, Level, Report, Rule
from service.schemas.scores import ScoreReport

router = APIRouter(prefix="/projects/{pid}/report", tags=["report"])


@router.get(
    "",
    response_model=Report | ScoreReport,
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
) -> Report | ScoreReport | Response:
    """Each judge against the primary human, per criterion and aggregated, under a declared protocol.

    Per table: the full verdict table (CANNOT_ASSESS and INVALID rows and columns), both
    marginals, abstention/invalid rates and coverage, phi, kappa with interval next to both
    positive rates, accuracy, F1 of the positive label, and under exclusion the Manski and
    sharp bounds; then a checklist of the reporting items of docs/method.md §7. Undefined values are
    null with a reason. Aggregates only, no per-item data: viewers may read it. Computed once per
    labels, raters, settings and query in a worker; send the ETag back in If-None-Match for a 304.

    A numeric project (`scale: "numeric"`) gets the score report instead: per criterion each judge's
    fixed-sample decision on the numbers, the humans' ICCs and interval alpha, and each judge-human pair's
    CCC, Bland-Altman bias and limits, MAE and RMSE (docs/method.md §2b, §3d; CSV: one row per pair). The
    label options (handling other than exclude, recode_to, positive, costs, aggregation, rule) are a 422 there.
    """
    if project.scale == "numeric":
        given = {
            "handling": handling not in (None, "exclude"),
            "recode_to": recode_to is not None,
            "positive": positive is not None,
            "costs": costs != "nominal",
            "aggregation": aggregation is not None,
            "rule": rule != "all",
        }
        if any(given.values()):
            names = ", ".join(name for name, on in given.items() if on)
            raise Invalid(f"a numeric project's report has no label options: {names} apply to label scales only")
        return _score_report(project, session, request, criterion, fmt, if_none_match)
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


def _score_report(
    project: Project,
    session: ReadSession,
    request: Request,
    criterion: str | None,
    fmt: str,
    if_none_match: str | None,
) -> ScoreReport | Response:
    """The numeric project's report, cached per its ETag as the label report is."""
    if criterion is not None and criterion not in project.criteria:
        raise Invalid(f"unknown criterion {echo(criterion)}; the project has {project.criteria}")
    criteria = [criterion] if criterion is not None else list(project.criteria)
    options = ReportOptions(handling="exclude", criterion=criterion)
    etag = report_key(session, project, options)
    headers = {"Cache-Control": "no-cache", "ETag": etag[:-1] + f'-{fmt}"'}
    if if_none_match is not None and headers["ETag"] in [t.strip() for t in if_none_match.split(",")]:
        return Response(status_code=304, headers=headers)
    report: ScoreReport = request.app.state.documents.get_or_build(
        etag, lambda: score_report(session, project, criteria)
    )
    if fmt == "csv":
        return Response(score_report_csv(report), media_type="text/csv; charset=utf-8", headers=headers)
    if fmt == "html":
        return HTMLResponse(score_report_html(report), headers=headers)
    return JSONResponse(report.model_dump(mode="json"), headers=headers)
