"""Live reliability status and judge ranking, for dashboards that poll."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response

from service.core.errors import Invalid, echo, error_responses
from service.data.models import Project
from service.deps import ProjectForViewer, ProjectId, ReadSession, SettingsDep
from service.documents.looks import looked_reliability
from service.documents.reliability import document_key, ranking_document
from service.documents.scores import score_ranking_document, score_reliability_document
from service.documents.slices import checked_by, score_slices_block, slices_block
from service.planning.plans import current_plan
from service.schemas.documents import (
    RankingDocument,
    ReliabilityDocument,
    ScoreRankingDocument,
    ScoreReliabilityDocument,
)

router = APIRouter(prefix="/projects/{pid}", tags=["reliability"])
Criterion = Annotated[str | None, Query(description="Criterion (default: the project's first).")]
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match")]
By = Annotated[
    str | None,
    Query(
        description="'feature:<name>': add the decision per value of this item feature, corrected across slices "
        "(docs/method.md §3b); default: the project's decision.slices.",
        examples=["feature:language"],
    ),
]
CACHE_HEADERS = {"Cache-Control": "no-cache"}
Document = ReliabilityDocument | ScoreReliabilityDocument | RankingDocument | ScoreRankingDocument
"""What the routes here serve: a label or numeric project's status or ranking."""


def _cached(
    session: ReadSession,
    project: Project,
    criterion: str | None,
    if_none_match: str | None,
    kind: str,
    build: Callable[[str, str], Document],
) -> Response:
    """The document ``build`` makes (a model: validated where it is built), or a 304 when the client's ETag is
    current."""
    name = criterion or project.criteria[0]
    if name not in project.criteria:
        raise Invalid(f"unknown criterion {echo(name)}; the project has {project.criteria}")
    etag = document_key(session, project, current_plan(session, project.id), name, kind)
    headers = {**CACHE_HEADERS, "ETag": etag}
    if if_none_match is not None and etag in [t.strip() for t in if_none_match.split(",")]:
        return Response(status_code=304, headers=headers)
    return Response(served_json(build(name, etag)), media_type="application/json", headers=headers)


def served_json(document: Document) -> bytes:
    """``document`` as served: a label document with the fields its builder set (an optional block such as
    ``slices`` or ``pairwise`` is absent, not null), a numeric one with every field."""
    sparse = isinstance(document, ReliabilityDocument | RankingDocument)
    return document.model_dump_json(exclude_unset=sparse).encode()


@router.get(
    "/reliability",
    response_model=ReliabilityDocument | ScoreReliabilityDocument,
    responses={**error_responses(401, 403, 404, 409, 422), 304: {"description": "Unchanged"}},
)
def get_reliability(
    pid: ProjectId,
    project: ProjectForViewer,
    request: Request,
    session: ReadSession,
    settings: SettingsDep,
    criterion: Criterion = None,
    if_none_match: IfNoneMatch = None,
    by: By = None,
) -> Response:
    """The live status: decision, omega, per-rater margins with intervals, human-pool score,
    coefficients, plan progress and the recipe re-estimated from the labels in hand.

    With `by=feature:<name>` (or the project's `decision.slices`) the document adds `slices`: the
    first judge's decision on each value of the item feature, failing slices first, with
    multiplicity across slices (docs/method.md §3b). A feature no item has, or `by` not of the form
    `feature:<name>`, is a 422.

    A pairwise project (`kind: "pairwise"`) adds `pairwise`: per judge its position consistency and bias, its
    accuracy against the human majority in both answer orders, and the systems named by the items' features
    `system_a`, `system_b` ranked by Bradley-Terry from the judge, the humans and both; the decision reads each
    judge's AB-order labels (docs/method.md §13).

    Cached by the project's `label_seq`; send the `ETag` back in `If-None-Match` for a `304`. A numeric
    project (`scale: "numeric"`) gets the score document instead: the decision on the numbers (alt-test
    with the negative-RMSE alignment, or the margin rule on range-scaled differences), the humans' ICCs
    and interval alpha, and each judge-human pair's CCC, Bland-Altman limits, MAE and RMSE (docs/method.md
    §2b, §3d); with `by`, its `slices` hold the first judge's numeric decision per slice, corrected across
    slices as above.

    A read is a look (docs/method.md §8.3): serving a newly computed label document records the project's
    `opening_seq` when none is stored (its first look, §8.2) and the pass or reject decisions it shows (so a
    later change is marked `rewritten_at`), both after the answer, in the background. It stores nothing else:
    the dashboard's pool-score history is written by the job queue.
    """
    by = by or project.decision_settings.slices
    documents = request.app.state.documents
    n_resamples = settings.bootstrap_resamples
    if project.scale == "numeric" and by is None:
        return _cached(
            session,
            project,
            criterion,
            if_none_match,
            "reliability",
            lambda name, etag: documents.get_or_build(etag, lambda: score_reliability_document(session, project, name)),
        )
    if by is None:
        return _cached(
            session,
            project,
            criterion,
            if_none_match,
            "reliability",
            lambda name, etag: looked_reliability(session, project, documents, name, etag, n_resamples=n_resamples),
        )
    checked_by(by)
    if project.scale == "numeric":

        def with_score_slices(name: str) -> ScoreReliabilityDocument:
            base = score_reliability_document(session, project, name)
            return base.model_copy(update={"slices": score_slices_block(session, project, name, by)})

        return _cached(
            session,
            project,
            criterion,
            if_none_match,
            f"reliability|by={by}",
            lambda name, etag: documents.get_or_build(etag, lambda: with_score_slices(name)),
        )

    def with_slices(name: str, etag: str) -> ReliabilityDocument:
        key = document_key(session, project, current_plan(session, project.id), name, "reliability")
        base = looked_reliability(session, project, documents, name, key, n_resamples=n_resamples)
        block = slices_block(session, project, name, by, n_resamples=n_resamples)
        return base.model_copy(update={"slices": block})

    return _cached(
        session,
        project,
        criterion,
        if_none_match,
        f"reliability|by={by}",
        lambda name, etag: documents.get_or_build(etag, lambda: with_slices(name, etag)),
    )


@router.get(
    "/ranking",
    response_model=RankingDocument | ScoreRankingDocument,
    responses={**error_responses(401, 403, 404, 409, 422), 304: {"description": "Unchanged"}},
)
def get_ranking(
    pid: ProjectId,
    project: ProjectForViewer,
    request: Request,
    session: ReadSession,
    settings: SettingsDep,
    criterion: Criterion = None,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """Judges ranked by score, with pairwise margins, top-1 probabilities and the flip rate.

    A numeric project (`scale: "numeric"`) ranks its judges by the alignment score its decision uses: the
    advantage probability `rho` under the alt-test (negative-RMSE alignment), the mean `d_k` of the
    range-scaled absolute differences under the margin rule, on the items every judge and two humans rated
    (docs/method.md §3d). A ranking past the work bound (resamples x items x judges x humans) is a 422.
    """
    build = score_ranking_document if project.scale == "numeric" else ranking_document
    return _cached(
        session,
        project,
        criterion,
        if_none_match,
        "ranking",
        lambda name, etag: request.app.state.documents.get_or_build(
            etag, lambda: build(session, project, name, n_resamples=settings.bootstrap_resamples)
        ),
    )
