"""What the dashboard plots: margins per judge, pool score over label_seq, progress, reliability vs overlap."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from planner import optional_float
from planner.rules import COEFFICIENTS
from planner.simulate import simulate
from service.core.errors import AppError
from service.dashboard.svg import Chart
from service.data.models import CurrentLabel, Plan, Project, Rater
from service.documents import history as pool_scores
from service.documents.history_replays import HistoryReplay
from service.documents.looks import shown_reliability
from service.documents.reliability import DocumentCache
from service.planning.plans import current_plan
from service.planning.selective import selective_evaluation
from service.schemas.documents import JudgeValidation, RaterMargin, RaterMonitoring, ReliabilityDocument
from service.schemas.selective import SelectiveCreate, SelectiveRead

CURVE_RHOS = (0.02, 0.05, 0.1, 0.15, 0.25, 0.35, 0.5)
MARGIN_QUANTITY = {
    "margin": (
        "d_k",
        "d_k = S(judge; H_k) - S(r_k; H_k)",
        "the judge's agreement with the other humans minus held-out human k's",
    ),
    "alt-test": ("rho_f - rho_h", "rho_f - rho_h", "the judge's advantage probability minus held-out human k's"),
}
"""Per rule, the compared quantity: its short name, its formula and what it means."""


def overlap_curve(project: Project, plan: Plan | None) -> list[tuple[float, float | None]]:
    """Simulated reliability of the human-pool score against overlap rate ``(rho, reliability)``, for the plan in
    force, at the rates of ``CURVE_RHOS`` and the plan's own ``m / n`` (docs/method.md §6)."""
    if plan is None:
        return []
    recipe = plan.recipe
    moments = recipe.get("moments", {})
    coefficient = project.decision.get("coefficient", "po")
    n_items = min(int(recipe.get("n_items", 500)), 1000)
    # The plan's own rate is one of the points, so the curve reads its reliability; a small corpus has no
    # item per secondary at the lowest rates: those points are left out.
    planned = {plan.m / int(recipe["n_items"])} if plan.m and recipe.get("n_items") else set()
    rhos = [rho for rho in sorted(set(CURVE_RHOS) | planned) if round(rho * n_items) >= 1 and rho <= 1]
    if not rhos:
        return []
    result = simulate(
        n_items=n_items,
        n_humans=max(int(recipe.get("n_humans", 3)), 2),
        n_labels=len(project.labels),
        p_h=moments.get("p_h", 0.85),
        p_j=moments.get("p_j", 0.9),
        rho=rhos,
        design=plan.design,
        coefficient=coefficient if coefficient in COEFFICIENTS else "po",
        delta=project.target.get("delta", 0.05),
        trials=100,
        rng=plan.seed % 2**32,
    )
    return [(c.rho, optional_float(c.reliability)) for c in result.cells]


def margin_estimate(rater: RaterMargin, rule: str) -> float | None:
    """The plotted quantity of one held-out rater: ``d_k``, or ``rho_f - rho_h`` under the alt-test (its interval's)."""
    if rule != "alt-test":
        return optional_float(rater.d)
    if rater.rho_f is None or rater.rho_h is None:
        return None
    return float(rater.rho_f - rater.rho_h)


FIXED_ONLY = "valid at the planned overlap only"
"""What a fixed-sample interval says wherever it is shown beside an anytime decision (docs/method.md §11)."""


def anytime(validation: JudgeValidation) -> bool:
    """Whether the judge's decision is the monitored one (its per-rater intervals are confidence sequences)."""
    return validation.monitoring is not None and validation.monitoring.mode == "anytime"


def status_text(rater: RaterMonitoring) -> str:
    """A monitored human's status as the dashboard says it: won/lost/open, and when the band does not tell
    the same, that the e-values decide (docs/method.md §8)."""
    if rater.band_agrees:
        return rater.status
    if rater.status == "open":
        return "open (band clear of -epsilon, e-values not yet at their threshold)"
    return f"{rater.status} (by the e-values; the band still crosses -epsilon)"


def margins_chart(validation: JudgeValidation, number: int) -> Chart:
    """Per held-out rater, the compared quantity and its interval, with -epsilon and 0 marked: in anytime
    mode its confidence sequence now and status, else the fixed-sample interval (valid at the planned
    overlap only)."""
    rule = validation.rule
    _, symbol, meaning = MARGIN_QUANTITY[rule]
    epsilon = validation.epsilon or 0.0
    marks = ((-epsilon, f"-epsilon = {-epsilon:g}"), (0.0, "0"))
    monitoring = validation.monitoring if anytime(validation) else None
    if monitoring is not None:
        return Chart(
            id=f"margins-{number}",
            kind="interval",
            title=f"{symbol} per held-out rater with its confidence sequence now (valid at every look), judge "
            f"{validation.judge}: {meaning}",
            x_label=symbol,
            y_label="held-out rater",
            columns=("rater", "estimate", "cs_low", "cs_high", "n", "status", "reason"),
            rows=tuple(
                (r.rater, r.d, *r.cs, r.n, status_text(r), "" if r.n else "no usable item yet")
                for r in monitoring.raters
            ),
            marks=marks,
        )
    return Chart(
        id=f"margins-{number}",
        kind="interval",
        title=f"{symbol} per held-out rater with its fixed-sample 95% interval ({FIXED_ONLY}), judge "
        f"{validation.judge}: {meaning}",
        x_label=symbol,
        y_label="held-out rater",
        columns=("rater", "estimate", "ci_low", "ci_high", "m", "won", "reason"),
        rows=tuple(
            (r.rater, margin_estimate(r, rule), *(r.ci or [None, None]), r.m, r.won, r.reason)
            for r in validation.raters
        ),
        marks=marks,
    )


def sequences_chart(validation: JudgeValidation, number: int) -> Chart:
    """Per held-out rater, the confidence sequence of its margin against its overlap items so far (the n the
    sequence is indexed by; docs/method.md §8), with the label_seq of each look in the CSV."""
    raters = validation.monitoring.raters if validation.monitoring else []
    epsilon = validation.epsilon or 0.0
    name = MARGIN_QUANTITY[validation.rule][0]
    return Chart(
        id=f"sequences-{number}",
        kind="band",
        title=f"confidence sequence of {name} per held-out rater over its overlap items, judge "
        f"{validation.judge}: valid at every look at once",
        x_label="overlap items n (items the judge and the rater both labeled, with the other humans)",
        y_label=name,
        columns=("rater", "n", "label_seq", "lower", "upper"),
        rows=tuple((r.rater, p.n, p.label_seq, p.lower, p.upper) for r in raters for p in r.band),
        marks=((-epsilon, f"-epsilon = {-epsilon:g}"), (0.0, "0")),
    )


def dashboard_charts(doc: ReliabilityDocument, history: list[Any], curve: list[Any]) -> tuple[Chart, ...]:
    """Every chart of the dashboard, in page order: margins and sequences per judge, then the project's."""
    plan = doc.plan
    charts = [c for k, v in enumerate(doc.judges) for c in (margins_chart(v, k + 1), sequences_chart(v, k + 1))]
    charts.append(
        Chart(
            id="pool-history",
            kind="line",
            title="human-pool score (mean over held-out humans of their agreement with the others) over label_seq",
            x_label="label_seq",
            y_label="human-pool score",
            columns=("label_seq", "pool_score"),
            rows=tuple(history),
            y_range=(min([0.0] + [y for _, y in history if y is not None]), 1.0),
        )
    )
    charts.append(
        Chart(
            id="progress",
            kind="bars",
            title="planned overlap done per secondary annotator (items labeled of the plan's list)",
            x_label="items labeled",
            y_label="secondary annotator",
            columns=("rater", "done", "target"),
            rows=tuple((r.rater, r.done, plan.m_target or 0) for r in plan.raters) if plan else (),
        )
    )
    n_items = doc.n_items
    m_plan = plan.m_target if plan else None
    charts.append(
        Chart(
            id="overlap-curve",
            kind="line",
            title="reliability of the human-pool score vs overlap items per secondary, simulated for the plan in force "
            f"on {min(n_items, 1000):,} items at the same rates",
            x_label=f"overlap items m per secondary (rho = m / {n_items:,} items)",
            y_label="P(|sparse - full| <= delta)",
            columns=("overlap_items", "reliability", "rho"),
            rows=tuple((round(rho * n_items), reliability, rho) for rho, reliability in curve),
            y_range=(0.0, 1.0),
            target=0.95,
            marks=((float(m_plan), f"plan: m = {m_plan}, rho = {m_plan / n_items:.2f}"),) if m_plan and n_items else (),
        )
    )
    return tuple(charts)


def selective_calibration(session: Session, project: Project) -> SelectiveRead | str:
    """The judges' cascade calibrated at the defaults (alpha .1, delta .1, docs/method.md §3c) for the dashboard,
    or why it is not (no judge label carries a confidence, no human rater, ...). Writes nothing."""
    confident = (
        select(CurrentLabel.item_id)
        .join(Rater, Rater.id == CurrentLabel.rater_id)
        .where(Rater.project_id == project.id, Rater.kind == "judge", CurrentLabel.confidence.is_not(None))
    )
    if session.scalar(confident.limit(1)) is None:
        return "no judge label carries a confidence"
    try:
        return selective_evaluation(session, project, SelectiveCreate())
    except AppError as error:
        return error.detail


def selective_chart(calibrated: SelectiveRead | str) -> Chart:
    """The first judge's coverage at each candidate threshold, its calibrated one marked (§3c)."""
    if not isinstance(calibrated, SelectiveRead):
        return Chart(id="selective-coverage", kind="line", title="", x_label="", y_label="", columns=(), rows=())
    curve, first = calibrated.curve, calibrated.stages[0]
    at = first.threshold
    return Chart(
        id="selective-coverage",
        kind="line",
        title=f"selective evaluation: share of the calibration items {first.judge} keeps (confidence >= lambda); "
        f"{calibrated.guarantee}",
        x_label="confidence threshold lambda",
        y_label="coverage",
        columns=("threshold", "coverage", "risk", "upper_bound"),
        rows=tuple(zip(curve.thresholds, curve.coverage, curve.risk, curve.upper_bound, strict=True)),
        y_range=(0.0, 1.0),
        marks=((at, f"calibrated lambda = {at:.3f}"),) if at is not None else (),
    )


def project_charts(
    session: Session, project: Project, documents: DocumentCache, *, n_resamples: int, wait: float
) -> tuple[ReliabilityDocument, str, tuple[Chart, ...], HistoryReplay | None]:
    """The reliability document shown (:func:`~service.documents.looks.shown_reliability`), its ETag, every
    dashboard chart (history and curve cached with it) and the history's replay while it is under way."""
    doc, etag = shown_reliability(session, project, documents, n_resamples=n_resamples, wait=wait)
    plan = current_plan(session, project.id)
    history = pool_scores.pool_score_history(
        session,
        project,
        project.criteria[0],
        (doc.label_seq, doc.human_pool.estimate),
        wait=wait,
    )
    curve_key = f"curve|{plan.id if plan else ''}|{sorted(project.decision.items())}|{project.target}"
    curve = documents.get_or_build(curve_key, lambda: overlap_curve(project, plan))
    selective_key = f"selective|{project.id}|{project.label_seq}|{project.criteria[0]}"
    calibrated = documents.get_or_build(selective_key, lambda: selective_calibration(session, project))
    charts = (*dashboard_charts(doc, history.points, curve), selective_chart(calibrated))
    return doc, etag, charts, history.replay
