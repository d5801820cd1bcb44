"""The live reliability document and the judge ranking, cached by the project's label sequence."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner import optional_float
from planner.codes import code_type
from planner.decision import Validation, validate_judge
from planner.patterns import ItemPatterns, item_patterns
from planner.ranking import rank_judges
from planner.rater_pairs import summary_table
from planner.resampling import ItemResample
from service.core import offload as cancellable
from service.core.allocator import returned_free_pages
from service.core.caches import RecentlyUsed
from service.core.offload import Call, off_worker, off_worker_each
from service.data.models import Plan, Project, Rater
from service.documents.monitoring import MONITOR_KEY, decision_in_force, judge_monitorings
from service.documents.pairwise import pairwise_block
from service.documents.shown import mark_rewrites
from service.documents.versions import version_comparisons
from service.matrices.arrival import arrival_order, planned_lists
from service.matrices.matrix import LabelMatrix, RaterColumn, rater_columns
from service.matrices.shared import SharedMatrix
from service.matrices.store import current_matrix
from service.planning.lists import inclusion_by_item
from service.planning.plans import current_plan, plan_progress
from service.planning.sizing import certification, feasible_with, pilot_estimate
from service.schemas.documents import RankingDocument, ReliabilityDocument
from service.schemas.projects import DecisionSettings

T = TypeVar("T")
log = logging.getLogger("annoplan")
BACKGROUND_THREADS = 4
"""Threads per worker for what reads hand over (fresh dashboard documents, the records of a look)."""
PROTOCOL_NOTE = (
    "CANNOT_ASSESS and INVALID are excluded (pairs where either side abstains are dropped); "
    "intervals are item bootstraps (BCa where approximate for the coefficients, percentile otherwise)"
)


def document_lineage(project: Project, plan: Plan | None, criterion: str, kind: str) -> str:
    """What a document depends on besides the data (labels, items, raters): its settings, plan and criterion.

    Documents of one lineage differ only by the data they saw: the newest of them is a valid, if
    older, look at the project (what the dashboard shows while the fresh one is computed).
    """
    return (
        f"{kind}|{project.id}|{criterion}|{sorted(project.decision.items())}|{project.scale}|{plan.id if plan else ''}"
    )


def document_key(session: Session, project: Project, plan: Plan | None, criterion: str, kind: str) -> str:
    """What a document depends on: labels (``label_seq``), corpus, raters, settings, plan, criterion — its ETag."""
    raters = session.execute(
        select(Rater.id, Rater.kind).where(Rater.project_id == project.id).order_by(Rater.id)
    ).all()  # each rater's kind too: a human made the judge (no label written) is another document
    raw = f"{document_lineage(project, plan, criterion, kind)}|{project.label_seq}|{project.item_count}|{raters}"
    return '"' + hashlib.sha256(raw.encode()).hexdigest()[:32] + '"'


class DocumentCache:
    """A small thread-safe LRU of computed documents keyed by :func:`document_key`, the newest document of
    each lineage (:func:`document_lineage`), and this worker's background work.

    Concurrent requests for the same missing document wait for one computation
    (dashboards polling right after a write would otherwise each compute it).
    """

    def __init__(self, size: int = 64):
        self._items: OrderedDict[str, Any] = OrderedDict()
        self._newest: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()
        self._building: dict[str, threading.Lock] = {}
        self._pending: dict[str, Future[Any]] = {}
        self._background: ThreadPoolExecutor | None = None
        self._closed = False

    def get(self, key: str) -> Any | None:
        with self._lock:
            doc = self._items.get(key)
            if doc is not None:
                self._items.move_to_end(key)
            return doc

    def put(self, key: str, doc: Any, *, lineage: str | None = None) -> None:
        with self._lock:
            self._items[key] = doc
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            if lineage is not None:
                kept = self._newest.get(lineage)
                if kept is None or kept[1].label_seq <= doc.label_seq:
                    self._newest[lineage] = (key, doc)
                self._newest.move_to_end(lineage)
                while len(self._newest) > self._size:
                    self._newest.popitem(last=False)

    def newest(self, lineage: str) -> tuple[str, Any] | None:
        """The key and document of ``lineage`` with the highest label_seq computed in this worker, if any."""
        with self._lock:
            return self._newest.get(lineage)

    def get_or_build(self, key: str, build: Callable[[], Any], *, lineage: str | None = None) -> Any:
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
                self.put(key, doc, lineage=lineage)
        with self._lock:
            self._building.pop(key, None)
        return doc

    def in_background(self, name: str, work: Callable[[], T]) -> Future[T]:
        """``work()`` done by a background thread of this worker: once, however many ask under ``name`` while
        it is pending. Reads hand it what they must not wait for (a document build, a history write)."""
        with self._lock:
            pending = self._pending.get(name)
            if pending is not None:
                return pending
            closed = self._closed
            if not closed:
                if self._background is None:
                    self._background = ThreadPoolExecutor(BACKGROUND_THREADS, thread_name_prefix="annoplan-documents")
                future = self._background.submit(work)
                self._pending[name] = future
        if closed:  # asked by background work that close() waits for: done here, before the worker ends
            done: Future[T] = Future()
            try:
                done.set_result(work())
            except Exception as exc:
                done.set_exception(exc)
            return done
        future.add_done_callback(lambda _: self._forget(name, future))
        return future

    def _forget(self, name: str, future: Future[Any]) -> None:
        with self._lock:
            if self._pending.get(name) is future:
                del self._pending[name]
        if not future.cancelled() and future.exception() is not None:
            log.warning("background work %s failed: %r", name, future.exception())
        returned_free_pages()  # what the work freed leaves the worker's resident memory (service.core.allocator)

    def settle(self) -> None:
        """Wait until the background work handed over so far is done (its errors were logged)."""
        with self._lock:
            pending = list(self._pending.values())
        wait(pending)

    def close(self) -> None:
        """Wait for the background work that runs (a worker shutting down); work handed over after is done in the
        thread that hands it."""
        with self._lock:
            background, self._background, self._closed = self._background, None, True
        if background is not None:
            background.shutdown(wait=True, cancel_futures=True)


def _validation(v: Validation, raters: list[RaterColumn], judge: int) -> dict[str, Any]:
    return {
        "judge": raters[judge].external_id,
        "decision": v.decision,
        "reason": v.reason,
        "omega": optional_float(v.omega),
        "omega_threshold": v.omega_threshold,
        "p_opposite": optional_float(v.p_opposite),
        "rule": v.rule,
        "coefficient": v.coefficient,
        "epsilon": v.epsilon,
        "raters": [
            {
                "rater": raters[r.rater].external_id,
                "m": r.m,
                "d": optional_float(r.d),
                "rho_f": optional_float(r.rho_f),
                "rho_h": optional_float(r.rho_h),
                "p_value": optional_float(r.p_value),
                "ci": r.ci.as_list(),
                "ci_method": r.ci.method,
                "approximate": r.ci.approximate,
                "won": r.won,
                "reason": r.reason,
            }
            for r in v.raters
        ],
        "human_pool": {
            "estimate": optional_float(v.human_pool.estimate),
            "ci": v.human_pool.ci.as_list(),
            "ci_method": v.human_pool.ci.method,
            "approximate": v.human_pool.ci.approximate,
            "n_raters": v.human_pool.n_raters,
        },
    }


def _rule_options(n_labels: int, decision: DecisionSettings) -> dict[str, Any]:
    """The project's decision rule as the planner's keyword arguments."""
    return {
        "n_labels": n_labels,
        "rule": decision.rule,
        "coefficient": decision.coefficient,
        "epsilon": decision.resolved_epsilon(),
        "q": decision.q,
    }


def judge_validation(
    raters: list[RaterColumn],
    patterns: ItemPatterns,
    judge: int,
    humans: list[int],
    decision: DecisionSettings,
    **options: Any,
) -> dict[str, Any]:
    """The fixed-sample validation of ``judge`` on the item ``patterns`` of a matrix with columns ``raters``
    as the document shows it (docs/method.md §3); pure."""
    v = validate_judge(
        patterns,
        judge=judge,
        humans=humans,
        omega_threshold=decision.omega_threshold,
        inconclusive_level=decision.inconclusive_level,
        **_rule_options(patterns.n_labels, decision),
        **options,
    )
    return _validation(v, raters, judge)


def coefficients(human_codes: np.ndarray | ItemPatterns, **options: Any) -> dict[str, Any]:
    """The human raters' agreement coefficients with intervals (docs/method.md §2); pure."""
    return {k: e.as_dict() for k, e in summary_table(human_codes, **options).items()}


def _recipe_now(
    patterns: ItemPatterns,
    judge: int,
    humans: list[int],
    decision: DecisionSettings,
    m_now: int,
    n_resamples: int,
) -> dict[str, Any]:
    pilot = pilot_estimate(patterns, patterns.n_labels, judge, humans, decision.rule, n_resamples)
    if pilot is None:
        return {"source": "pilot", "m_cert": None, "reason": "no overlap in hand yet"}
    recipe = certification(
        decision, pilot["mu_d"], pilot["sigma0_sq"], n_items=patterns.n_items, n_humans=max(len(humans), 2)
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
            n_items=patterns.n_items,
            n_humans=max(len(humans), 2),
            m=recipe.m,
        )
    return doc


def reliability_document(
    session: Session, project: Project, criterion: str, *, n_resamples: int
) -> ReliabilityDocument:
    """The live status of `GET /reliability`: decision, rater margins, pool score, coefficients, progress, recipe."""
    decision = project.decision_settings
    matrix = current_matrix(session, project, criterion)
    judges = matrix.columns("judge")
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
    doc["estimator"] = estimator_in_force(decision, matrix.raters)
    # Two computations: the monitoring and every other statistic. From OFF_WORKER_CELLS on each
    # runs in a child process of its own, at once: the statistics' child reads the item patterns (a
    # few thousand rows, built here), the monitoring's the matrix from shared memory; a worker keeping
    # monitorings brings its own up to date in the request beside the statistics' child.
    cells = matrix.raw.size
    humans = matrix.columns("primary", "human")
    states = session.info.get(MONITOR_KEY)
    arrival = arrival_order(project, matrix.label_seq, planned_lists(session, project, matrix))
    statistics: Call = (
        document_statistics,
        (item_patterns(matrix.codes, matrix.n_labels, inclusion=inclusion), matrix.raters, decision),
        {"scale": project.scale, "n_resamples": n_resamples, "seed": seed},
    )
    if isinstance(states, RecentlyUsed):
        with ThreadPoolExecutor(1, thread_name_prefix="document-statistics") as beside:
            waiting = beside.submit(off_worker_each, cells, statistics)
            blocks = judge_monitorings(
                matrix,
                judges,
                humans,
                decision,
                plan,
                inclusion,
                arrival,
                kept=(states, document_lineage(project, plan, criterion, "monitoring")),
            )
            [stats] = waiting.result()
    else:
        with _handed_over(matrix, cells) as handed:
            monitorings: Call = (
                judge_monitorings,
                (handed, judges, humans, decision, _planned(plan), inclusion, arrival),
                {},
            )
            stats, blocks = off_worker_each(cells, statistics, monitorings)
    validations = [
        fixed | decision_in_force(block, matrix, decision, fixed, plan)
        for fixed, block in zip(stats["judges"], blocks, strict=True)
    ]
    mark_rewrites(session, project.id, criterion, matrix.label_seq, validations)
    doc["monitoring_mode"] = decision.resolved_monitoring()
    if validations:
        doc.update(validations[0])
    else:
        why = "no judge rater yet" if not judges else "fewer than two human raters"
        doc.update(
            {
                "judge": None,
                "decision": "insufficient_data",
                "reason": why,
                "omega": None,
                "fixed_omega": None,
                "raters": [],
                "human_pool": {
                    "estimate": None,
                    "ci": [None, None],
                    "ci_method": "percentile",
                    "approximate": False,
                    "n_raters": 0,
                },
                "provisional": False,
                "fixed_decision": "insufficient_data",
                "monitoring": None,
            }
        )
    doc["coefficients"] = stats["coefficients"]
    doc["coefficients_population"] = "human raters (primary and secondaries): the human ceiling"
    doc["plan"] = plan_progress(session, project, plan)
    doc["recipe_now"] = stats["recipe_now"] or {"source": "pilot", "m_cert": None, "reason": doc.get("reason", "")}
    doc["judges"] = validations
    if project.kind == "pairwise":
        doc["pairwise"] = pairwise_block(session, project, matrix, n_resamples=n_resamples, seed=seed)
    versions = version_comparisons(session, project, criterion, n_resamples=n_resamples, seed=seed)
    if versions is not None:
        doc["versions"] = [comparison.model_dump(mode="json") for comparison in versions]
    return ReliabilityDocument.model_validate(doc)  # the response model is the contract: outside it is a bug


def estimator_in_force(decision: DecisionSettings, raters: list[RaterColumn]) -> str:
    """The project's estimator, or ``"paired"`` on a matrix (columns ``raters``) without a primary: PPI reads
    the judge-primary agreement on every item (docs/method.md §9)."""
    return decision.estimator if rater_columns(raters, "primary") else "paired"


@contextmanager
def _handed_over(matrix: LabelMatrix, cells: int) -> Iterator[LabelMatrix | SharedMatrix]:
    """``matrix`` as :func:`~service.core.offload.off_worker_each` hands it to its computations: itself in
    place, in shared memory (:class:`~service.matrices.shared.SharedMatrix`) for child processes."""
    if cells < cancellable.OFF_WORKER_CELLS:
        yield matrix
        return
    with SharedMatrix(matrix) as shared:
        yield shared


def _planned(plan: Plan | None) -> Plan | None:
    """What the monitored decision reads of the plan in force (its ``m`` and recipe), detached from the session."""
    return None if plan is None else Plan(m=plan.m, recipe=plan.recipe)


def document_statistics(
    weighted: ItemPatterns,
    raters: list[RaterColumn],
    decision: DecisionSettings,
    *,
    scale: str,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Every statistic of the reliability document but the monitoring: per judge the fixed-sample validation,
    the human coefficients and the recipe re-estimated from the pilot in hand (docs/method.md §2-§4), from
    the item patterns of a matrix with columns ``raters`` (``weighted``: with the panel's inclusion when the
    plan weights; :func:`~planner.patterns.item_patterns`); pure."""
    judges, humans = rater_columns(raters, "judge"), rater_columns(raters, "primary", "human")
    primary = rater_columns(raters, "primary")
    if len(humans) < 2:
        return {"judges": [], "coefficients": {}, "recipe_now": None}
    # Every statistic below reads these few thousand patterns, not the million rows. One resample of the
    # items serves every interval: each statistic reads it merged into its own patterns.
    resample = ItemResample.draw(weighted.counts, weighted.n_items, n_resamples, seed)
    patterns, merged = (weighted, None) if weighted.inclusion is None else weighted.grouped(list(range(len(raters))))
    validations = []
    for j in judges:
        fixed = judge_validation(
            raters,
            weighted,
            j,
            humans,
            decision,
            n_resamples=n_resamples,
            resample=resample,
            estimator=estimator_in_force(decision, raters),
            primary=primary[0] if primary else None,
        )
        validations.append(fixed)
    human_patterns, to_humans = patterns.grouped(humans)
    if merged is not None:
        to_humans = to_humans[merged]
    stats = coefficients(
        human_patterns,
        n_labels=weighted.n_labels,
        scale=scale,
        resample=resample.merged(to_humans, human_patterns.counts.size),
    )
    m_now = min((r["m"] for r in validations[0]["raters"]), default=0) if validations else 0
    recipe = _recipe_now(patterns, judges[0], humans, decision, m_now, min(n_resamples, 200)) if judges else None
    return {"judges": validations, "coefficients": stats, "recipe_now": recipe}


def ranking_document(session: Session, project: Project, criterion: str, *, n_resamples: int) -> RankingDocument:
    """Judges ranked by score with intervals, top-1 probabilities and flip rates (docs/method.md §3)."""
    decision = project.decision_settings
    matrix = current_matrix(session, project, criterion)
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    base = {
        "label_seq": matrix.label_seq,
        "criterion": criterion,
        "rule": decision.rule,
        "coefficient": decision.coefficient,
    }
    if not judges or len(humans) < 2:
        return RankingDocument.model_validate(
            {
                **base,
                "judges": [],
                "order": [],
                "margins": [],
                "flip_share": None,
                "reason": "ranking needs at least one judge and two human raters",
            }
        )
    codes = matrix.codes.astype(code_type(matrix.n_labels), copy=False)
    names = [r.external_id for r in matrix.raters]
    doc = {
        **base,
        **off_worker(
            matrix.raw.size,
            judge_ranking,
            codes,
            matrix.n_labels,
            names,
            judges,
            humans,
            decision,
            n_resamples=n_resamples,
            rng=project.label_seq,
        ),
    }
    return RankingDocument.model_validate(doc)  # the response model is the contract: outside it is a bug


def judge_ranking(
    codes: np.ndarray,
    n_labels: int,
    names: list[str],
    judges: list[int],
    humans: list[int],
    decision: DecisionSettings,
    **options: Any,
) -> dict[str, Any]:
    """The judges' ranking block of the document (``names``: the raters' external ids; docs/method.md §3); pure."""
    r = rank_judges(codes, judges=judges, humans=humans, **_rule_options(n_labels, decision), **options)
    name = {k: names[k] for k in judges}
    return {
        "judges": [
            {
                "judge": name[s.judge],
                "score": optional_float(s.score),
                "ci": s.ci.as_list(),
                "omega": optional_float(s.omega),
                "p_top1": optional_float(s.p_top1),
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
                "margin": optional_float(m.margin),
                "ci": m.ci.as_list(),
                "p_flip": optional_float(m.p_flip),
            }
            for m in r.margins
        ],
        "flip_share": optional_float(r.flip_share),
        "n_items": r.n_items,
    }
