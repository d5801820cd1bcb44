"""``/reliability`` of a numeric project: the decision on the numbers and their agreement (docs/method.md
§2b, §3d), with each judge's anytime-monitored decision in anytime mode (§8b) and the progress through the plan
in force; and its ``/ranking``, the judges ranked by the decision's alignment score (§3d)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from planner import optional_float
from planner.icc import intraclass_correlations
from planner.intervals import ConfidenceInterval
from planner.score_decision import ScoreRule, ScoreValidation, validate_scores
from planner.score_monitor import ScoreMonitoring
from planner.score_ranking import rank_score_judges
from planner.scores import (
    bland_altman,
    concordance_correlation,
    interval_alpha,
    mean_absolute_error,
    root_mean_squared_error,
)
from service.core.errors import Invalid
from service.core.offload import off_worker
from service.data.models import Project
from service.matrices.ratings import RatingsMatrix, load_ratings
from service.planning.lists import monitoring_budget
from service.planning.plans import current_plan, plan_progress
from service.planning.score_plans import monitored_scores
from service.schemas.documents import (
    IccRead,
    Interval,
    PlanProgress,
    ScoreJudgeRead,
    ScoreMonitoringRead,
    ScorePair,
    ScoreRankingDocument,
    ScoreRaterMonitoringRead,
    ScoreRaterRead,
    ScoreReliabilityDocument,
)

SCORE_NOTE = (
    "CANNOT_ASSESS and INVALID are excluded; the decision is the fixed-sample one (valid once, at the planned "
    "overlap); ICCs are listwise over the items every human rated; intervals are analytic (F, Fisher z, t)"
)


def _interval(ci: ConfidenceInterval) -> Interval:
    return [optional_float(ci.low), optional_float(ci.high)]


def _judge_read(v: ScoreValidation, matrix: RatingsMatrix) -> ScoreJudgeRead:
    return ScoreJudgeRead(
        judge=matrix.raters[v.judge].external_id,
        decision=v.decision,
        reason=v.reason,
        omega=optional_float(v.omega),
        rho=optional_float(v.rho),
        n_items=v.n_items,
        raters=[
            ScoreRaterRead(
                rater=matrix.raters[h.rater].external_id,
                m=h.m,
                d=optional_float(h.d),
                rho_f=optional_float(h.rho_f),
                rho_h=optional_float(h.rho_h),
                p_value=optional_float(h.p_value),
                won=h.won,
                reason=h.reason,
            )
            for h in v.raters
        ],
    )


def _pair(matrix: RatingsMatrix, judge: int, human: int) -> ScorePair:
    a, b = matrix.values[:, judge], matrix.values[:, human]
    ccc, ba = concordance_correlation(a, b), bland_altman(a, b)
    lower_ci, upper_ci = ba.limit_intervals()
    return ScorePair(
        judge=matrix.raters[judge].external_id,
        human=matrix.raters[human].external_id,
        n_items=ba.n_items,
        ccc=optional_float(ccc.statistic),
        ccc_ci=_interval(ccc.confidence_interval()),
        bias=optional_float(ba.bias),
        bias_ci=_interval(ba.confidence_interval()),
        sd=optional_float(ba.sd),
        lower=optional_float(ba.lower),
        lower_ci=_interval(lower_ci),
        upper=optional_float(ba.upper),
        upper_ci=_interval(upper_ci),
        mae=optional_float(mean_absolute_error(a, b).statistic),
        rmse=optional_float(root_mean_squared_error(a, b).statistic),
        reason=ccc.reason or ba.reason,
    )


def score_reliability_document(session: Session, project: Project, criterion: str) -> ScoreReliabilityDocument:
    """The numeric project's live document for ``criterion`` (docs/method.md §2b, §3d)."""
    matrix = load_ratings(session, project, criterion)
    settings = project.decision_settings
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    value_range = project.value_range or {}
    rule: ScoreRule = "alt-test" if settings.rule == "alt-test" else "margin"
    epsilon = settings.resolved_epsilon()
    validations = (
        validate_scores(
            matrix.values,
            judges,
            humans,
            rule=rule,
            epsilon=epsilon,
            value_range=(value_range["min"], value_range["max"]),
            q=settings.q,
            omega_threshold=settings.omega_threshold,
        )
        if judges and humans
        else ()
    )
    rated = (~np.isnan(matrix.values)).sum(axis=1)
    human_values = matrix.values[:, humans]
    by_humans = human_values[(~np.isnan(human_values)).sum(axis=1) >= 2]
    iccs = intraclass_correlations(by_humans) if humans else {}
    alpha = interval_alpha(by_humans) if len(humans) >= 2 else None
    first = validations[0] if validations else None
    plan = current_plan(session, project.id)
    progress = plan_progress(session, project, plan)
    no_decision = "the project has no judge" if not judges else "the project has no human rater"
    return ScoreReliabilityDocument(
        scale="numeric",
        label_seq=matrix.label_seq,
        criterion=criterion,
        value_range=value_range,
        rule=rule,
        epsilon=epsilon,
        q=settings.q,
        omega_threshold=settings.omega_threshold,
        n_items=int((rated >= 2).sum()),
        n_special=matrix.n_special,
        judge=None if first is None else matrix.raters[first.judge].external_id,
        decision="insufficient_data" if first is None else first.decision,
        reason=no_decision if first is None else first.reason,
        omega=None if first is None else optional_float(first.omega),
        rho=None if first is None else optional_float(first.rho),
        judges=[_judge_read(v, matrix) for v in validations],
        icc=[
            IccRead(
                form=form,
                statistic=optional_float(r.statistic),
                ci=_interval(ci),
                approximate=ci.approximate,
                n_items=r.n_items,
                n_dropped=r.n_dropped,
                reason=r.reason,
            )
            for form, r in iccs.items()
            for ci in [r.confidence_interval()]
        ],
        interval_alpha=None if alpha is None else optional_float(alpha.statistic),
        interval_alpha_reason="fewer than two humans" if alpha is None else alpha.reason,
        pairs=[_pair(matrix, j, h) for j in judges for h in humans],
        plan=None if progress is None else PlanProgress.model_validate(progress),
        monitoring=[_monitoring_read(matrix, m) for m in monitored_scores(matrix, project, monitoring_budget(plan))]
        if settings.resolved_monitoring() == "anytime"
        else None,
        note=SCORE_NOTE,
    )


def _monitoring_read(matrix: RatingsMatrix, m: ScoreMonitoring) -> ScoreMonitoringRead:
    """A judge's anytime-monitored decision on the numbers (docs/method.md §8b), as the document shows it."""
    return ScoreMonitoringRead(
        judge=matrix.raters[m.judge].external_id,
        decision=m.decision,
        reason=m.reason,
        omega=optional_float(m.omega),
        alpha=m.alpha,
        raters=[
            ScoreRaterMonitoringRead(
                rater=matrix.raters[h.rater].external_id,
                m=h.m,
                estimate=optional_float(h.estimate),
                lower=optional_float(h.lower),
                upper=optional_float(h.upper),
                status=h.status,
                decided_at=h.decided_at,
            )
            for h in m.raters
        ],
    )


def score_ranking_document(
    session: Session, project: Project, criterion: str, *, n_resamples: int
) -> ScoreRankingDocument:
    """The numeric project's judges ranked by the alignment score of its decision (docs/method.md §3d, "Ranking
    score judges"): the project's rule, ``epsilon``, ``q`` and ``omega_threshold``; 422 past the work bound."""
    matrix = load_ratings(session, project, criterion)
    settings = project.decision_settings
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    rule: ScoreRule = "alt-test" if settings.rule == "alt-test" else "margin"
    base: dict[str, Any] = {
        "scale": "numeric",
        "label_seq": matrix.label_seq,
        "criterion": criterion,
        "rule": rule,
        "epsilon": settings.resolved_epsilon(),
    }
    if not judges or len(humans) < 2:
        empty: dict[str, Any] = {"judges": [], "order": [], "margins": [], "flip_share": None}
        return ScoreRankingDocument.model_validate(
            {**base, **empty, "reason": "ranking needs at least one judge and two human raters"}
        )
    value_range = project.value_range or {}
    names = [r.external_id for r in matrix.raters]
    try:
        ranked = off_worker(
            matrix.values.size,
            score_judge_ranking,
            matrix.values,
            names,
            judges,
            humans,
            rule=rule,
            epsilon=settings.resolved_epsilon(),
            value_range=(value_range["min"], value_range["max"]),
            q=settings.q,
            omega_threshold=settings.omega_threshold,
            n_resamples=n_resamples,
            rng=project.label_seq,
        )
    except ValueError as refused:  # the work bound, checked before the replicates are drawn
        raise Invalid(str(refused)) from refused
    doc = {**base, **ranked, "reason": None}
    return ScoreRankingDocument.model_validate(doc)  # the response model is the contract: outside it is a bug


def score_judge_ranking(
    values: np.ndarray, names: list[str], judges: list[int], humans: list[int], **options: Any
) -> dict[str, Any]:
    """The ranking block of the numeric document (``names``: the raters' external ids; docs/method.md §3d); pure."""
    r = rank_score_judges(values, judges, humans, **options)
    by_column = {s.judge: s for s in r.judges}
    return {
        "judges": [
            {
                "judge": names[k],
                "score": optional_float(s.score),
                "ci": s.ci.as_list(),
                "omega": optional_float(s.omega),
                "p_top1": optional_float(s.p_top1),
                "n_raters": s.n_raters,
                "defined": s.defined,
                "reason": s.reason,
            }
            for k in r.order
            for s in [by_column[k]]
        ],
        "order": [names[k] for k in r.order],
        "margins": [
            {
                "better": names[m.better],
                "worse": names[m.worse],
                "margin": optional_float(m.margin),
                "ci": m.ci.as_list(),
                "p_flip": optional_float(m.p_flip),
            }
            for m in r.margins
        ],
        "flip_share": optional_float(r.flip_share),
        "n_items": r.n_items,
    }
