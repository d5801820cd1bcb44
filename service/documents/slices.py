"""The reliability document's slices: the decision per value of an item feature, on labels (docs/method.md §3b) or
on a numeric project's numbers (§3d)."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
from sqlalchemy.orm import Session

from planner import optional_float
from planner.list_arrival import lists_within
from planner.score_monitor import ScoreMonitoring
from planner.score_slices import ScoreSliceOutcome, monitor_scores_by_slice, validate_scores_by_slice
from planner.sequential import Monitoring
from planner.slices import SliceMonitoring, SliceValidation, monitor_judge_by_slice, validate_judge_by_slice
from service.core.errors import Invalid, echo
from service.data.models import Project
from service.documents.monitoring import planned_budget
from service.documents.reliability import DocumentCache, document_key
from service.matrices.arrival import arrival_order, monitored_labels, monitored_lists, planned_lists, seeded_item_keys
from service.matrices.matrix import LabelMatrix
from service.matrices.ratings import RatingsMatrix, load_ratings
from service.matrices.store import current_matrix
from service.planning.lists import monitoring_budget
from service.planning.plans import current_plan
from service.planning.strata import MAX_FEATURE_STRATA, feature_name, feature_values
from service.schemas.documents import Slices
from service.schemas.projects import DecisionSettings


def checked_by(by: str) -> str:
    """The feature named by ``by = "feature:<name>"``; 422 otherwise."""
    name = feature_name(by)
    if not name:
        raise Invalid(f"by must be 'feature:<name>', got {echo(by)}")
    return name


def _shown(value: str) -> str:
    """A feature value as the slice is named: a string as itself, any other JSON value as its JSON text."""
    parsed = orjson.loads(value)
    return parsed if isinstance(parsed, str) else value


def _feature_slices(
    session: Session, project: Project, matrix: LabelMatrix | RatingsMatrix, by: str
) -> tuple[np.ndarray, np.ndarray, list[str], dict[str, Any]]:
    """The rows with a value of ``by``'s feature, each one's slice name, the ``slice_epsilon`` values no item
    has, and the block's head; 422 when no item has the feature or it has too many values."""
    name = checked_by(by)
    decision = project.decision_settings
    values, _ = feature_values(session, matrix, name)
    rows = np.array([i for i, v in enumerate(values) if v is not None], dtype=np.int64)
    if rows.size == 0:
        raise Invalid(f"no item has the feature {echo(name)}: upload items with it under 'features' first")
    shown = np.array([_shown(v) for v in values if v is not None], dtype=object)
    n_values = len(set(shown.tolist()))
    if n_values > MAX_FEATURE_STRATA:
        raise Invalid(
            f"the feature {echo(name)} has {n_values} distinct values; slice on at most {MAX_FEATURE_STRATA} "
            "(group its values into a coarser feature)"
        )
    unknown = sorted(set(decision.slice_epsilon or {}) - set(shown.tolist()))
    mode = decision.resolved_monitoring()
    block: dict[str, Any] = {
        "by": by,
        "mode": mode,
        "n_items_without": len(values) - int(rows.size),
        "q": decision.q if mode == "fixed" else None,
        "alpha": decision.alpha_sig if mode == "anytime" else None,
    }
    return rows, shown, unknown, block


def slices_block(session: Session, project: Project, criterion: str, by: str, *, n_resamples: int) -> Slices:
    """The first judge's decision per slice of ``by`` in the project's mode, as the document shows it (§3b)."""
    decision = project.decision_settings
    matrix = current_matrix(session, project, criterion)
    rows, shown, unknown, block = _feature_slices(session, project, matrix, by)
    mode = block["mode"]
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    if not judges or len(humans) < 2:
        why = "no judge rater yet" if not judges else "fewer than two human raters"
        correction = _anytime_correction(decision) if mode == "anytime" else "none"
        return Slices.model_validate({**block, "correction": correction, "headline": why, "failing": [], "slices": []})
    epsilons = {k: v for k, v in (decision.slice_epsilon or {}).items() if k not in unknown}
    codes = matrix.codes[rows]
    if mode == "anytime":
        # the main monitor's order (docs/method.md §8.2)
        arrival = arrival_order(project, matrix.label_seq, planned_lists(session, project, matrix))
        listed, ranks = monitored_labels(matrix, arrival, judges[0], humans)
        monitored = monitor_judge_by_slice(
            listed[rows],
            shown,
            judge=judges[0],
            humans=humans,
            n_labels=matrix.n_labels,
            order=ranks[rows],
            tiebreak=seeded_item_keys(matrix.raw.shape[0], arrival.seed)[rows],
            lists=lists_within(monitored_lists(arrival), rows, matrix.raw.shape[0]),  # list order within ties
            rule=decision.rule,
            epsilon=decision.resolved_epsilon(),
            slice_epsilon=epsilons,
            alpha=decision.alpha_sig,
            omega_threshold=decision.omega_threshold,
            multiplicity=decision.multiplicity,
            budget=planned_budget(current_plan(session, project.id)),
        )
        out = {**block, **_monitored(monitored, matrix, decision, epsilons)}
    else:
        fixed = validate_judge_by_slice(
            codes,
            shown,
            judge=judges[0],
            humans=humans,
            n_labels=matrix.n_labels,
            rule=decision.rule,
            coefficient=decision.coefficient,
            epsilon=decision.resolved_epsilon(),
            slice_epsilon=epsilons,
            omega_threshold=decision.omega_threshold,
            q=decision.q,
            inconclusive_level=decision.inconclusive_level,
            n_resamples=n_resamples,
            rng=matrix.label_seq,
        )
        out = {**block, **_fixed(fixed, matrix)}
    if unknown:
        out["headline"] += f" (slice_epsilon names values no item has: {', '.join(echo(v) for v in unknown)})"
    return Slices.model_validate(out)


def _anytime_correction(decision: DecisionSettings) -> str:
    """How anytime slices of labels are corrected: one e-BH over every slice's humans, or Bonferroni (§3b)."""
    return "e-bh-joint" if decision.multiplicity == "e-bh" else "bonferroni-slices"


def cached_slices(
    session: Session, project: Project, documents: DocumentCache, criterion: str, by: str, *, n_resamples: int
) -> Slices:
    """:func:`slices_block` from ``documents`` under its own key (labels, settings, plan, criterion, ``by``)."""
    key = document_key(session, project, current_plan(session, project.id), criterion, f"slices|{by}")
    block: Slices = documents.get_or_build(
        key, lambda: slices_block(session, project, criterion, by, n_resamples=n_resamples)
    )
    return block


def _status(won: bool | None) -> str:
    """A fixed-mode human's status: skipped (not used), won or lost after the correction."""
    return "skipped" if won is None else ("won" if won else "lost")


def _fixed(s: SliceValidation, matrix: LabelMatrix) -> dict[str, Any]:
    return {
        "correction": s.correction,
        "headline": s.headline,
        "failing": list(s.failing),
        "slices": [
            {
                "value": o.value,
                "n_items": o.n_items,
                "epsilon": o.epsilon,
                "decision": o.decision,
                "reason": o.reason,
                "omega": optional_float(o.omega),
                "d": optional_float(o.d),
                "raters": [
                    {
                        "rater": matrix.raters[r.rater].external_id,
                        "n": r.m,
                        "d": optional_float(r.d if s.overall.rule == "margin" else r.rho_f - r.rho_h),
                        "p_value": optional_float(r.p_value),
                        "status": _status(r.won),
                    }
                    for r in o.raters
                ],
            }
            for o in s.slices
        ],
    }


def _too_small_row(value: str, n_items: int, epsilon: float) -> dict[str, Any]:
    """A monitored slice with too few usable items to decide on: undefined, with the reason."""
    return {
        "value": value,
        "n_items": n_items,
        "epsilon": epsilon,
        "decision": "insufficient_data",
        "reason": f"{n_items} usable items < the minimum slice size",
        "omega": None,
        "d": None,
        "raters": [],
    }


def _monitored_row(
    value: str, n_items: int, m: Monitoring | None, matrix: LabelMatrix, epsilon: float
) -> dict[str, Any]:
    if m is None:
        return _too_small_row(value, n_items, epsilon)
    won = [r.status == "won" for r in m.raters]
    d = np.array([r.d for r in m.raters], dtype=float)
    return {
        "value": value,
        "n_items": n_items,
        "epsilon": m.epsilon,
        "decision": m.decision,
        "reason": m.reason,
        "omega": float(np.mean(won)) if won else None,
        "d": optional_float(float(np.nanmean(d))) if np.isfinite(d).any() else None,
        "raters": [
            {
                "rater": matrix.raters[r.rater].external_id,
                "n": r.n,
                "d": optional_float(r.d),
                "p_value": None,
                "status": r.status,
            }
            for r in m.raters
        ],
    }


def _monitored(
    s: SliceMonitoring, matrix: LabelMatrix, decision: DecisionSettings, epsilons: dict[str, float]
) -> dict[str, Any]:
    base = decision.resolved_epsilon()
    return {
        "correction": s.correction,
        "headline": s.headline,
        "failing": list(s.failing),
        "slices": [_monitored_row(v, n, m, matrix, epsilons.get(v, base)) for v, n, m in s.slices],
    }


def score_slices_block(session: Session, project: Project, criterion: str, by: str) -> Slices:
    """A numeric project's first judge's decision per slice of ``by`` in the project's mode (docs/method.md §3d,
    "Slices of score judges"): §3b's block with the numbers' decision in each slice."""
    decision = project.decision_settings
    matrix = load_ratings(session, project, criterion)
    rows, shown, unknown, block = _feature_slices(session, project, matrix, by)
    mode = block["mode"]
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    if not judges or len(humans) < 2:
        why = "no judge rater yet" if not judges else "fewer than two human raters"
        correction = "bonferroni-slices" if mode == "anytime" else "none"
        return Slices.model_validate({**block, "correction": correction, "headline": why, "failing": [], "slices": []})
    epsilons = {k: v for k, v in (decision.slice_epsilon or {}).items() if k not in unknown}
    value_range = project.value_range or {}
    common: dict[str, Any] = {
        "judge": judges[0],
        "humans": humans,
        "rule": "alt-test" if decision.rule == "alt-test" else "margin",
        "value_range": (value_range["min"], value_range["max"]),
        "epsilon": decision.resolved_epsilon(),
        "slice_epsilon": epsilons,
        "omega_threshold": decision.omega_threshold,
    }
    if mode == "anytime":
        monitored = monitor_scores_by_slice(
            matrix.values[rows],
            matrix.order[rows],
            shown,
            alpha=decision.alpha_sig,
            budget=monitoring_budget(current_plan(session, project.id)),
            **common,
        )
        base = decision.resolved_epsilon()
        out = {
            **block,
            "correction": "bonferroni-slices",
            "headline": monitored.headline,
            "failing": list(monitored.failing),
            "slices": [_score_monitored_row(v, n, m, matrix, epsilons.get(v, base)) for v, n, m in monitored.slices],
        }
    else:
        fixed = validate_scores_by_slice(matrix.values[rows], shown, q=decision.q, **common)
        out = {
            **block,
            "correction": fixed.correction,
            "headline": fixed.headline,
            "failing": list(fixed.failing),
            "slices": [_score_fixed_row(o, matrix, fixed.overall.rule) for o in fixed.slices],
        }
    if unknown:
        out["headline"] += f" (slice_epsilon names values no item has: {', '.join(echo(v) for v in unknown)})"
    return Slices.model_validate(out)


def _score_fixed_row(o: ScoreSliceOutcome, matrix: RatingsMatrix, rule: str) -> dict[str, Any]:
    return {
        "value": o.value,
        "n_items": o.n_items,
        "epsilon": o.epsilon,
        "decision": o.decision,
        "reason": o.reason,
        "omega": optional_float(o.omega),
        "d": optional_float(o.d),
        "raters": [
            {
                "rater": matrix.raters[r.rater].external_id,
                "n": r.m,
                "d": optional_float(r.d if rule == "margin" else r.rho_f - r.rho_h),
                "p_value": optional_float(r.p_value),
                "status": _status(r.won),
            }
            for r in o.raters
        ],
    }


def _score_monitored_row(
    value: str, n_items: int, m: ScoreMonitoring | None, matrix: RatingsMatrix, epsilon: float
) -> dict[str, Any]:
    if m is None:
        return _too_small_row(value, n_items, epsilon)
    estimates = np.array([r.estimate for r in m.raters], dtype=float)
    return {
        "value": value,
        "n_items": n_items,
        "epsilon": m.epsilon,
        "decision": m.decision,
        "reason": m.reason,
        "omega": optional_float(m.omega),
        "d": optional_float(float(np.nanmean(estimates))) if np.isfinite(estimates).any() else None,
        "raters": [
            {
                "rater": matrix.raters[r.rater].external_id,
                "n": r.m,
                "d": optional_float(r.estimate),
                "p_value": None,
                "status": r.status,
            }
            for r in m.raters
        ],
    }
