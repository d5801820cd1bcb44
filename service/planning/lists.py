"""Planned lists: which items a plan gives each secondary rater, in labeling order, and with what
probability an item entered them (for inverse-probability weights)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.designs import depth_first, disjoint, random_subsets
from planner.seq_designs import seq_list
from service.core.errors import Conflict, Invalid
from service.core.sql import insert_many, integer_rows
from service.data.models import Assignment, Plan, Project, Rater, table_of
from service.data.projects import lock_project
from service.matrices.matrix import LabelMatrix
from service.matrices.modal_strata import modal_in_hand
from service.matrices.score_bins import list_matrix

PANELS = ("strat", "neyman")
SEQUENTIAL = ("seq-refined", "seq-coverage")  # lists drawn at a secondary's first batch, from the labels in hand


def primary_strata(matrix: LabelMatrix) -> np.ndarray:
    """Per item, the primary's label, or an extra stratum ``L`` where it has none yet."""
    primary = matrix.columns("primary")
    if not primary:
        return np.full(matrix.raw.shape[0], matrix.n_labels, dtype=np.int64)
    codes = matrix.codes[:, primary[0]]
    return np.where(codes < 0, matrix.n_labels, codes)


@dataclass(frozen=True)
class ListCorpus:
    """The labels in hand as drawing a non-sequential list reads them: the matrix, and its primary
    strata and the argsort of its item ids, each computed once for every secondary a plan gives a list."""

    matrix: LabelMatrix

    @cached_property
    def strata(self) -> np.ndarray:
        """``primary_strata`` of the matrix."""
        return primary_strata(self.matrix)

    @cached_property
    def sorter(self) -> np.ndarray:
        """The argsort of the matrix's item ids."""
        return np.argsort(self.matrix.item_ids)


def monitoring_budget(plan: Plan | None) -> int | None:
    """Usable overlap per secondary at which an open monitored decision becomes inconclusive: the plan's
    simulated budget (docs/method.md §8.1), else its ``m`` (None: no plan)."""
    if plan is None:
        return None
    simulated = (plan.recipe or {}).get("monitoring") or {}
    budget = simulated.get("budget")
    return int(budget) if budget else plan.m


def list_target(plan: Plan, project: Project) -> int:
    """Items a secondary's list holds at least: the plan's ``m`` (at most the corpus)."""
    return min(plan.m or 0, project.item_count)


def _planned_items(
    session: Session, plan: Plan, rater: Rater, project: Project, corpus: ListCorpus | None, m: int
) -> np.ndarray:
    """Item ids of ``rater``'s list of ``m`` items under ``plan``, in labeling order, from ``corpus``
    (default: the labels in hand).

    A sequential design reads the modal strata of the labels in hand that this worker keeps
    (``service.matrices.modal_strata``) and the items already assigned, not the label matrix.
    """
    m = min(m, project.item_count)
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    rater_seed = np.random.default_rng([plan.seed, zlib.crc32(rater.external_id.encode())])
    if plan.design in PANELS:
        return np.asarray(plan.params["panel"], dtype=np.int64)
    if plan.design in SEQUENTIAL:
        if session.scalar(select(Rater.id).where(Rater.project_id == project.id, Rater.kind == "primary")) is None:
            raise Conflict(
                "sequential designs stratify on labels in hand: add the primary rater and its labels first",
                code="no_primary",
            )
        in_hand = modal_in_hand(session, project, project.criteria[0])
        coverage = plan.design == "seq-coverage"
        assigned = _assigned_items(session, plan.project_id, in_hand.item_ids, in_hand.sorter) if coverage else None
        index = seq_list(in_hand.modal, m, n_labels=len(project.labels), assigned=assigned, rng=rater_seed)
        items: np.ndarray = in_hand.item_ids[index]
        return items
    corpus = corpus or ListCorpus(list_matrix(session, project))
    n_items = corpus.matrix.raw.shape[0]
    if plan.design == "random":
        index = random_subsets(n_items, m, raters=[0], strata=corpus.strata, rng=rater_seed)[0]
    elif plan.design == "depth-first":
        index = depth_first(n_items, m, raters=[0])[0]
    else:
        coverage = _assigned(session, plan.project_id, corpus).sum(axis=1)
        index = disjoint(corpus.strata, m, raters=[0], coverage=coverage, rng=rater_seed)[0]
    items = corpus.matrix.item_ids[index]
    return items


def _assigned_items(
    session: Session, project_id: str, item_ids: np.ndarray, sorter: np.ndarray | None = None
) -> list[np.ndarray]:
    """Per secondary holding assignments (in rater id order), the rows in ``item_ids`` (``sorter``: its
    argsort, when known) of its items; items outside ``item_ids`` are left out."""
    rows = integer_rows(
        session,
        ("a.item_id", "a.rater_id"),
        "assignments a JOIN raters r ON r.id = a.rater_id WHERE a.project_id = ? AND r.kind = 'human'",
        (project_id,),
    )
    raters, column = np.unique(rows[:, 1], return_inverse=True)
    position, found = _positions(item_ids, rows[:, 0], sorter)
    return [position[found & (column == j)] for j in range(raters.size)]


def _assigned(session: Session, project_id: str, corpus: ListCorpus) -> np.ndarray:
    """``(n_items, n_secondaries)`` (matrix item order): which secondary has been assigned which item."""
    held = _assigned_items(session, project_id, corpus.matrix.item_ids, corpus.sorter)
    out = np.zeros((corpus.matrix.item_ids.size, len(held)), dtype=bool)
    for j, rows in enumerate(held):
        out[rows, j] = True
    return out


def _positions(
    item_ids: np.ndarray, wanted: np.ndarray, sorter: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Row of each ``wanted`` item id in ``item_ids`` (``sorter``: its argsort, when known), and whether
    it is there at all."""
    if item_ids.size == 0:
        return np.zeros(wanted.size, dtype=np.int64), np.zeros(wanted.size, dtype=bool)
    sorter = np.argsort(item_ids) if sorter is None else sorter
    at = sorter[np.minimum(np.searchsorted(item_ids, wanted, sorter=sorter), item_ids.size - 1)]
    return at, item_ids[at] == wanted


def ensure_assignments(
    session: Session, plan: Plan, rater: Rater, corpus: ListCorpus | None = None, *, target: int | None = None
) -> None:
    """Give a secondary ``rater`` its list of ``plan.m`` items (``target``: that many, an extension past ``m``
    while the monitored decision is open, docs/method.md §8.1): items already assigned stay; new ones, drawn
    by the plan's design for a list of ``target`` items, are appended, none twice.

    ``corpus``: the labels in hand as a plan being stored read them, else read now.

    A list already that long is left alone, so this is cheap on every batch request. The primary
    has no list: its batches read the corpus through a cursor (service/planning/batches.py).
    """
    if rater.kind == "judge":
        raise Invalid("judges label every item themselves; they get no batches")
    project = session.get(Project, plan.project_id)
    assert project is not None
    target = min(list_target(plan, project) if target is None else target, project.item_count)
    held = session.scalar(select(func.count()).where(Assignment.rater_id == rater.id)) or 0
    if held >= target:
        return
    # One list is extended at a time per project: concurrent batch requests and a re-plan
    # would otherwise append the same items (sequential and coverage-aware designs also read what is in hand).
    lock_project(session, project.id)
    project = session.get(Project, plan.project_id, populate_existing=True)  # the labels in hand under the lock
    assert project is not None
    existing = {
        item: pos
        for item, pos in session.execute(
            select(Assignment.item_id, Assignment.position).where(Assignment.rater_id == rater.id)
        )
    }
    drawn = _planned_items(session, plan, rater, project, corpus, target)
    planned = [int(i) for i in drawn if int(i) not in existing]
    planned = planned[: max(0, target - len(existing))]
    start = max(existing.values(), default=-1) + 1
    probability = _inclusion(plan, project.item_count, target)
    insert_many(
        session,
        table_of(Assignment),
        ("project_id", "rater_id", "item_id", "plan_id", "position", "inclusion_probability"),
        [(plan.project_id, rater.id, item, plan.id, start + k, probability(item)) for k, item in enumerate(planned)],
    )


def _inclusion(plan: Plan, n_items: int, size: int | None = None) -> Callable[[int], float | None]:
    """Item id -> the probability that the design put it on a secondary's list of ``size`` items (default
    ``plan.m``; None: not a probability sample)."""
    if plan.design in PANELS:
        by_item = dict(zip(plan.params["panel"], plan.params.get("panel_inclusion") or [], strict=False))
        return by_item.get
    if plan.design == "random" and n_items:
        share = min((plan.m or 0) if size is None else size, n_items) / n_items
        return lambda item: share
    return lambda item: None


def plan_inclusion(session: Session, plan: Plan | None) -> dict[int, float] | None:
    """Item id -> probability of entering the overlap, for the items a Neyman plan gave the humans
    (docs/method.md §9); None when the plan draws items with equal probability (no weights needed)."""
    if plan is None or plan.design != "neyman":
        return None
    rows = session.execute(
        select(Assignment.item_id, Assignment.inclusion_probability)
        .join(Rater, Rater.id == Assignment.rater_id)
        .where(Assignment.plan_id == plan.id, Rater.kind == "human")
    )
    return {int(item): float(p) for item, p in rows if p is not None}


def inclusion_by_item(session: Session, plan: Plan | None, matrix: LabelMatrix) -> np.ndarray | None:
    """Per item (matrix order), its probability of entering the overlap under a Neyman plan, for
    inverse-probability weights (docs/method.md §9); items off the plan count as certain.
    None when the plan draws items with equal probability (no weights needed)."""
    by_item = plan_inclusion(session, plan)
    if by_item is None:
        return None
    items = np.fromiter(by_item.keys(), dtype=np.int64, count=len(by_item))
    probability = np.fromiter(by_item.values(), dtype=float, count=len(by_item))
    out = np.ones(matrix.item_ids.size)
    position, found = _positions(matrix.item_ids, items)
    out[position[found]] = probability[found]
    return out
