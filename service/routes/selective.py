"""Selective evaluation: the judges' confidence thresholds with a disagreement guarantee."""

from __future__ import annotations

from fastapi import APIRouter

from service.core.errors import error_responses
from service.deps import ProjectForPMWrite, ProjectId, WriteSession
from service.planning.selective import selective_evaluation
from service.schemas.selective import SelectiveCreate, SelectiveRead

router = APIRouter(prefix="/projects/{pid}", tags=["selective"])


@router.post("/selective", response_model=SelectiveRead, responses=error_responses(401, 403, 404, 409, 422))
def post_selective(
    pid: ProjectId, project: ProjectForPMWrite, body: SelectiveCreate, session: WriteSession
) -> SelectiveRead:
    """Calibrate each judge's confidence threshold, cascade cheapest first (docs/method.md §3c).

    On the items with a human majority and every cascade judge's label with a `confidence`, the
    threshold `lambda` of each judge is chosen by fixed-sequence exact binomial tests so that,
    with probability at least `1 - delta`, its disagreement with the human majority on the items
    it keeps is at most `alpha`. Reports the thresholds, the coverage, the guarantee and the
    coverage curve; applied to the corpus, the items no judge keeps are escalated, and with
    `escalate_to` appended to those humans' planned lists (their next batches). `alpha` or
    `delta` outside (0, 1), an unknown judge or rater: 422, nothing written; `escalate_to`
    without a plan, or with a Neyman/strat panel: 409.
    """
    return selective_evaluation(session, project, body)
