"""The arrival order the anytime monitor reads a project's labels in (docs/method.md §8.2).

Each current label's arrival rank is the ``label_seq`` of the write that gave its cell a first label (a
correction keeps it); every label of the opening (in hand at the first look) shares one rank; a secondary's
labels of its planned list are read in the list's order, each once its item holds the judge's and another
human's label (``planner.list_arrival``); ties are read in the
project's seeded item order. /reliability, its slices and the batches' list extension read this one order,
so they show one monitored decision.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from planner.list_arrival import PlannedList, listed_arrival
from service.core.caches import RecentlyUsed
from service.core.sql import integer_rows
from service.data.models import Project
from service.matrices.matrix import LabelMatrix

FIRST_LOOKS: RecentlyUsed[str, int] = RecentlyUsed(4096)
"""This worker's first look (its ``label_seq``) of each project whose opening is not stored yet: the write is
done in the background, best effort, and until it lands (or after it failed) the monitor still reads the
labels in hand at that look as the opening, and the next document retries the write with it."""


@dataclass(frozen=True)
class ArrivalOrder:
    """How the monitor orders a project's labels (docs/method.md §8.2): the labels ranked at or before
    ``opening`` (the first look) share that rank, the secondaries' labels of their planned ``lists`` are read
    in list order (``planner.list_arrival``), and ties are read in the item order ``seed`` draws."""

    opening: int
    seed: int
    lists: tuple[PlannedList, ...] = ()


def arrival_order(project: Project, label_seq: int, lists: tuple[PlannedList, ...] = ()) -> ArrivalOrder:
    """The project's :class:`ArrivalOrder` for a document at ``label_seq`` with the secondaries' planned
    ``lists`` (:func:`planned_lists`): the stored opening, else this worker's first look not stored yet
    (``FIRST_LOOKS``); before any look, every label in hand is the opening (this document is the first look)."""
    opening = project.opening_seq if project.opening_seq is not None else FIRST_LOOKS.get(project.id)
    return ArrivalOrder(opening=label_seq if opening is None else opening, seed=order_seed(project), lists=lists)


RANDOM_ORDER_DESIGNS = ("random", "disjoint", "strat", "neyman", "seq-refined", "seq-coverage")
"""Designs that give each secondary a list in an order drawn at random before any of its labels (within the
list's strata, docs/method.md §5); not ``depth-first``, whose list is the corpus's own order (§8.2)."""


def listed_items(session: Session, project: Project) -> list[tuple[int, np.ndarray, int]]:
    """Each secondary's planned list (docs/method.md §8.2): its rater id, its item ids in list order, and the
    ``label_seq`` of the plan that first gave it items (labels ranked at or before it were in hand before the
    list was drawn). Only items a design of ``RANDOM_ORDER_DESIGNS`` listed."""
    designs = ", ".join(f"'{d}'" for d in RANDOM_ORDER_DESIGNS)
    rows = integer_rows(
        session,
        ("a.rater_id", "a.item_id", "p.label_seq", "a.position"),
        "assignments a JOIN raters r ON r.id = a.rater_id JOIN plans p ON p.id = a.plan_id "
        f"WHERE a.project_id = ? AND r.kind = 'human' AND p.design IN ({designs})",
        (project.id,),
    )
    if rows.size == 0:
        return []
    rows = rows[np.lexsort((rows[:, 3], rows[:, 0]))]  # by rater, then list position
    raters, starts = np.unique(rows[:, 0], return_index=True)
    ends = np.append(starts[1:], rows.shape[0])
    return [(int(r), rows[a:b, 1], int(rows[a:b, 2].min())) for r, a, b in zip(raters, starts, ends, strict=True)]


def planned_lists(session: Session, project: Project, matrix: LabelMatrix) -> tuple[PlannedList, ...]:
    """:func:`listed_items` as the monitor reads them: each list's column in ``matrix`` and the rows of its
    items in list order; items no longer in the corpus are left out."""
    lists = listed_items(session, project)
    if not lists or matrix.item_ids.size == 0:
        return ()
    column_of = {r.id: k for k, r in enumerate(matrix.raters)}
    sorter = np.argsort(matrix.item_ids)
    planned = []
    for rater, items, since in lists:
        at = sorter[np.minimum(np.searchsorted(matrix.item_ids, items, sorter=sorter), matrix.item_ids.size - 1)]
        if rater in column_of:
            planned.append((column_of[rater], at[matrix.item_ids[at] == items], since))
    return tuple(planned)


def first_look(project_id: str, label_seq: int) -> int:
    """The ``label_seq`` of this worker's first look of a project whose opening is not stored yet, counting a
    look at ``label_seq`` now (the earliest one: ``FIRST_LOOKS``)."""
    kept = FIRST_LOOKS.get(project_id)
    first = label_seq if kept is None else min(kept, label_seq)
    FIRST_LOOKS.put(project_id, first)
    return first


def order_seed(project: Project) -> int:
    """The project's item-order seed: its own, or (projects made before seeds) a hash of its id."""
    if project.order_seed is not None:
        return project.order_seed
    return int.from_bytes(hashlib.sha256(project.id.encode()).digest()[:7], "big")


@functools.lru_cache(maxsize=8)
def seeded_item_keys(n_items: int, seed: int) -> np.ndarray:
    """Each row's key in the seeded item order (docs/method.md §8.2): a splitmix64 hash of ``(seed, row)``, a
    bijection of the row (distinct keys), so sorting by it is a pseudo-random permutation fixed by ``seed``
    and a row keeps its key as the corpus grows. Read-only, kept for the last few ``(n_items, seed)``."""
    with np.errstate(over="ignore"):
        z = np.arange(n_items, dtype=np.uint64) + np.uint64(seed % 2**64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    z.flags.writeable = False
    return z


def monitored_ranks(matrix: LabelMatrix, arrival: ArrivalOrder) -> np.ndarray:
    """The arrival ranks the monitor reads before its planned lists (docs/method.md §8.2): every label ranked
    at or before the opening at the opening's rank, the others at their own (-1 where no label)."""
    order = matrix.order
    if (
        np.issubdtype(order.dtype, np.signedinteger)
        and 0 <= arrival.opening <= np.iinfo(order.dtype).max
        and int(order.min(initial=0)) >= -1
    ):  # read unsigned, -1 is the largest value and stays itself: one pass, no mask
        unsigned = np.maximum(order.view(f"u{order.dtype.itemsize}"), arrival.opening)
        out: np.ndarray = unsigned.view(order.dtype)
        return out
    ranks: np.ndarray = np.maximum(order, arrival.opening)
    np.putmask(ranks, order < 0, -1)  # a masked maximum (``where=``) costs twice these two passes
    return ranks


def monitored_lists(arrival: ArrivalOrder) -> tuple[PlannedList, ...]:
    """The planned lists as the monitor reads them (``monitor_judge``'s ``lists``): a label in the opening is
    read as the opening, not in list order (each list's ``since`` at least the opening)."""
    return tuple((column, rows, max(since, arrival.opening)) for column, rows, since in arrival.lists)


def monitored_labels(
    matrix: LabelMatrix, arrival: ArrivalOrder, judge: int, humans: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The codes and arrival ranks the monitor of ``judge`` against ``humans`` (columns) reads (docs/method.md
    §8.2): :func:`monitored_ranks`, with the secondaries' listed labels in list order (held back behind a listed
    item without the labels its entry needs: code missing, rank -1). For a monitor of some rows alone (the
    slices); the whole matrix's passes ``monitored_lists``."""
    lists = monitored_lists(arrival)
    return listed_arrival(matrix.codes, monitored_ranks(matrix, arrival), lists, judge=judge, humans=humans)
