"""The live reliability document and the judge ranking, cached by the project's label sequence."""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.agreement import summary_table
from planner.decision import Validation, rank_judges, validate_judge
from service.cancellable import off_worker
from service.matrix import LabelMatrix
from service.matrix_store import current_matrix
from service.models import Plan, Project, Rater
from service.monitoring import monitored_decision
from service.planning import (
    certification,
    current_plan,
    feasible_with,
    inclusion_by_item,
    pilot_estimate,
    plan_progress,
)
from service.schemas import DecisionSettings

PROTOCOL_NOTE = (
    "CANNOT_ASSESS and INVALID are excluded (pairs where either side abstains are dropped); "
    "intervals are item bootstraps (BCa where approximate for the coefficients, percentile otherwise)"
)


def num(x: float | None) -> float | None:
    """A JSON number: NaN and infinities become null."""
    return None if x is None or not math.isfinite(x) else float(x)


def document_key(session: Session, project: Project, plan: Plan | None, criterion: str, kind: str) -> str:
    """What a document depends on: labels (``label_seq``), corpus, raters, settings, plan, criterion — its ETag."""
    raters = session.execute(select(func.count(), func.max(Rater.id)).where(Rater.project_id == project.id)).one()
    raw = (
        f"{kind}|{project.id}|{project.label_seq}|{project.item_count}|{tuple(raters)}|{criterion}|"
        f"{sorted(project.decision.items())}|{project.scale}|{plan.id if plan else ''}"
    )
    return '"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'


class DocumentCache:
    """A small thread-safe LRU of computed documents keyed by :func:`document_key`.

    Concurrent requests for the same missing document wait for one computation
    (dashboards polling right after a write would otherwise each compute it).
    """

    def __init__(self, size: int = 64):
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}

    def get(self, key: str) -> Any | None:
        with self._lock:
            doc = self._items.get(key)
            if doc is not None:
                self._items.move_to_end(key)
            return doc

    def put(self, key: str, doc: Any) -> None:
        with self._lock:
            self._items[key] = doc
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def get_or_build(self, key: str, build: Callable[[], Any]) -> Any:
        """The cached document, or the one ``build`` makes — built once however many ask at once."""
        doc = self.get(key)
        if doc is not None:
            return doc
        with self._lock:
            gate = self._building.setdefault(key, threading.Lock())
        with gate:
            doc = self.get(key)
            if doc is None:
                doc = build()
                self.put(key, doc)
        with self._lock:
            self._building.pop(key, None)
        return doc


def _validation(v: Validation, matrix: LabelMatrix, judge: int) -> dict[str, Any]:
    return {
        "judge": matrix.raters[judge].external_id,
        "decision": v.decision,
        "reason": v.reason,
        "omega": num(v.omega),
        "omega_threshold": v.omega_threshold,
        "p_opposite": num(v.p_opposite),
        "rule": v.rule,
        "coefficient": v.coefficient,
        "epsilon": v.epsilon,
        "raters": [
            {
                "rater": matrix.raters[r.rater].external_id,
                "m": r.m,
                "d": num(r.d),
                "rho_f": num(r.rho_f),
                "rho_h": num(r.rho_h),
                "p_value": num(r.p_value),
                "ci": r.ci.as_list(),
                "ci_method": r.ci.method,
                "approximate": r.ci.approximate,
                "won": r.won,
                "reason": r.reason,
            }
            for r in v.raters
        ],
        "human_pool": {
            "estimate": num(v.human_pool.estimate),
            "ci": v.human_pool.ci.as_list(),
            "ci_method": v.human_pool.ci.method,
            "approximate": v.human_pool.ci.approximate,
            "n_raters": v.human_pool.n_raters,
        },
    }


def _rule_options(matrix: LabelMatrix, decision: DecisionSettings) -> dict[str, Any]:
    """The project's decision rule as the planner's keyword arguments."""
    return {
        "n_labels": matrix.n_labels,
        "rule": decision.rule,
        "coefficient": decision.coefficient,
        "epsilon": decision.resolved_epsilon(),
        "q": decision.q,
    }

def judge_validation(
    matrix: LabelMatrix, judge: int, humans: list[int], decision: DecisionSettings, **options: Any
) -> dict[str, Any]:
    """The fixed-sample validation of ``judge`` as the document shows it (docs/method.md §3); pure."""
    v = validate_judge(
        matrix.codes,
        judge=judge,
        humans=humans,
        omega_threshold=decision.omega_threshold,
        inconclusive_level=decision.inconclusive_level,
        **_rule_options(matrix, decision),
        **options,
    )
    return _validation(v, matrix, judge)


def coefficients(human_codes: np.ndarray, **options: Any) -> dict[str, Any]:
    """The human raters' agreement coefficients with intervals (docs/method.md §2); pure."""
    return {k: e.as_dict() for k, e in summary_table(human_codes, **options).items()}

def _recipe_now(
    matrix: LabelMatrix, judge: int, humans: list[int], decision: DecisionSettings, m_now: int, n_resamples: int
) -> dict[str, Any]:
    pilot = pilot_estimate(matrix, judge, humans, decision.rule, n_resamples)
    if pilot is None:
        return {"source": "pilot", "m_cert": None, "reason": "no overlap in hand yet"}
    recipe = certification(
        decision, pilot["mu_d"], pilot["sigma0_sq"], n_items=matrix.raw.shape[0], n_humans=max(len(humans), 2)
    )
    doc = {
        **pilot,
        "m_cert": recipe.m,
        "feasible": recipe.feasible,
        "reason": recipe.reason,
        "more_overlap_needed": None if recipe.m is None else max(0, recipe.m - m_now),
    }
    if not recipe.feasible:
        doc["feasible_with"] = feasible_with(
            decision,
            pilot["mu_d"],
            pilot["sigma0_sq"],
            n_items=matrix.raw.shape[0],
            n_humans=max(len(humans), 2),
            m=recipe.m,
        )
    return doc


def reliability_document(session: Session, project: Project, criterion: str, *, n_resamples: int) -> dict[str, Any]:
    """The live status of API.md: decision, per-rater margins, pool score, coefficients, progress, recipe."""
    decision = DecisionSettings(**project.decision)
    matrix = current_matrix(session, project, criterion)
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    seed = project.label_seq
    doc: dict[str, Any] = {
        "label_seq": matrix.label_seq,
        "n_items": int(matrix.raw.shape[0]),
        "criterion": criterion,
        "protocol": {
            "scale": project.scale,
            "handling": "exclude",
            "aggregation": "per criterion",
            "resampling_unit": "item",
            "note": PROTOCOL_NOTE,
        },
        "rule": decision.rule,
        "coefficient": decision.coefficient,
        "omega_threshold": decision.omega_threshold,
    }
    plan = current_plan(session, project.id)
    inclusion = inclusion_by_item(session, plan, matrix)
    doc["weighting"] = "none" if inclusion is None else "ht"
    primary = matrix.columns("primary")
    estimator = decision.estimator if primary else "paired"
    doc["estimator"] = estimator
    validations = []
    cells = matrix.raw.size  # from OFF_WORKER_CELLS on, the statistics run off the web worker
    for j in judges:
        if len(humans) >= 2:
            fixed = off_worker(
                cells,
                judge_validation,
                matrix,
                j,
                humans,
                decision,
                n_resamples=n_resamples,
                rng=seed,
                inclusion=inclusion,
                estimator=estimator,
                primary=primary[0] if primary else None,
            )
            validations.append(
                fixed
                | monitored_decision(matrix, j, humans, decision, fixed, plan, inclusion=inclusion)
            )
    doc["monitoring_mode"] = decision.resolved_monitoring()
    if validations:
        doc.update({k: v for k, v in validations[0].items()})
    else:
        why = "no judge rater yet" if not judges else "fewer than two human raters"
        doc.update(
            {
                "judge": None,
                "decision": "insufficient_data",
                "reason": why,
                "omega": None,
                "raters": [],
                "human_pool": {
                    "estimate": None, "ci": [None, None], "ci_method": "percentile", "approximate": False, "n_raters": 0
                },
                "provisional": False,
                "fixed_decision": "insufficient_data",
                "monitoring": None,
            }
        )
    human_codes = matrix.codes[:, humans] if humans else np.empty((matrix.raw.shape[0], 0), dtype=np.int64)
    if len(humans) >= 2:
        doc["coefficients"] = off_worker(
            cells, coefficients, human_codes, n_labels=matrix.n_labels, scale=project.scale,
            n_resamples=n_resamples, rng=seed,
        )
    else:
        doc["coefficients"] = {}
    doc["coefficients_population"] = "human raters (primary and secondaries): the human ceiling"
    doc["plan"] = plan_progress(session, project, plan)
    m_now = min((r["m"] for r in doc["raters"]), default=0)
    doc["recipe_now"] = (
        off_worker(cells, _recipe_now, matrix, judges[0], humans, decision, m_now, min(n_resamples, 200))
        if judges and len(humans) >= 2
        else {"source": "pilot", "m_cert": None, "reason": doc.get("reason", "")}
    )
    doc["judges"] = validations
    return doc


def ranking_document(session: Session, project: Project, criterion: str, *, n_resamples: int) -> dict[str, Any]:
    """Judges ranked by score with intervals, top-1 probabilities and flip rates (docs/method.md §3)."""
    decision = DecisionSettings(**project.decision)
    matrix = current_matrix(session, project, criterion)
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    base = {
        "label_seq": matrix.label_seq,
        "criterion": criterion,
        "rule": decision.rule,
        "coefficient": decision.coefficient,
    }
    if not judges or len(humans) < 2:
        return {
            **base,
            "judges": [],
            "order": [],
            "margins": [],
            "flip_share": None,
            "reason": "ranking needs at least one judge and two human raters",
        }
    return {**base, **off_worker(matrix.raw.size, judge_ranking, matrix, judges, humans, decision,
                                 n_resamples=n_resamples, rng=project.label_seq)}


def judge_ranking(
    matrix: LabelMatrix, judges: list[int], humans: list[int], decision: DecisionSettings, **options: Any
) -> dict[str, Any]:
    """The judges' ranking block of the document (docs/method.md §3); pure."""
    r = rank_judges(matrix.codes, judges=judges, humans=humans, **_rule_options(matrix, decision), **options)
    name = {k: matrix.raters[k].external_id for k in judges}
    return {
        "judges": [
            {
                "judge": name[s.judge],
                "score": num(s.score),
                "ci": s.ci.as_list(),
                "omega": num(s.omega),
                "p_top1": num(s.p_top1),
                "n_raters": s.n_raters,
                "defined": s.defined,
                "reason": s.reason,
            }
            for s in r.judges
        ],
        "order": [name[k] for k in r.order],
        "margins": [
            {
                "better": name[m.better],
                "worse": name[m.worse],
                "margin": num(m.margin),
                "ci": m.ci.as_list(),
                "p_flip": num(m.p_flip),
            }
            for m in r.margins
        ],
        "flip_share": num(r.flip_share),
        "n_items": r.n_items,
    }
