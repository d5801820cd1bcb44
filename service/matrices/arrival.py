"""The arrival order the anytime monitor reads a project's labels in (docs/method.md §8.2).

Each current label's arrival rank is the ``label_seq`` of the write that gave its cell a first label (a
correction keeps it); every label of the opening (in hand at the first look) shares one rank; ties are read
in the project's seeded item order. /reliability, its slices and the batches' list extension read this one
order, so they show one monitored decision.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import numpy as np

from service.core.caches import RecentlyUsed
from service.data.models import Project
from service.matrices.matrix import LabelMatrix

FIRST_LOOKS: RecentlyUsed[str, int] = RecentlyUsed(4096)
"""This worker's first look (its ``label_seq``) of each project whose opening is not stored yet: the write is
done in the background, best effort, and until it lands (or after it failed) the monitor still reads the
labels in hand at that look as the opening, and the next document retries the write with it."""


@dataclass(frozen=True)
class ArrivalOrder:
    """How the monitor orders a project's labels (docs/method.md §8.2): the labels ranked at or before
    ``opening`` (the first look) share that rank, and ties are read in the item order ``seed`` draws."""

    opening: int
    seed: int


def arrival_order(project: Project, label_seq: int) -> ArrivalOrder:
    """The project's :class:`ArrivalOrder` for a document at ``label_seq``: the stored opening, else this
    worker's first look not stored yet (``FIRST_LOOKS``); before any look, every label in hand is the opening
    (this document is the first look)."""
    opening = project.opening_seq if project.opening_seq is not None else FIRST_LOOKS.get(project.id)
    return ArrivalOrder(opening=label_seq if opening is None else opening, seed=order_seed(project))


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
    """The arrival ranks the monitor reads (docs/method.md §8.2): every label ranked at or before the opening
    at the opening's rank, the others at their own (-1 where no label)."""
    ranks: np.ndarray = np.maximum(matrix.order, arrival.opening)
    np.putmask(ranks, matrix.order < 0, -1)  # a masked maximum (``where=``) costs twice these two passes
    return ranks
