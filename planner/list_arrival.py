"""Planned lists read in their own random order: when a listed label arrives for the monitor (docs/method.md §8.2).

A secondary's planned list is an order of items fixed before any of their labels (the plan's random draw).
The monitor reads a listed item's label once every item before it on the list has a label: until then the
label is held back, and from then on it is dated by the latest arrival rank on the list up to it. So the
order in which listed items reach the monitor is the list's, whatever order their labels were uploaded in.
Labels ranked at or before a list's ``since`` (in hand before the list was drawn, or in the opening) are
read as before and hold nothing back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.codes import MISSING

PlannedList = tuple[int, np.ndarray, int]
"""One rater's list: its column, the rows of its items in list order, and its ``since`` rank."""


def listed_arrival(codes: np.ndarray, ranks: np.ndarray, lists: Sequence[PlannedList]) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` and arrival ``ranks`` (``-1``: no label) as the monitor reads them under the planned
    ``lists`` (docs/method.md §8.2): a listed label ranked after its list's ``since`` and behind an
    item of the list without a label is held back (its code missing, its rank ``-1``); one not held
    back takes the largest rank of the labels before it on its list. A row of ``-1`` on a list stands for
    an item with no row (no label at all): a gap. Copies when ``lists`` has an item, else the inputs
    themselves.

    Examples
    --------
    >>> import numpy as np
    >>> codes = np.array([[1], [0], [-1], [1]])
    >>> ranks = np.array([[9], [4], [-1], [2]])
    >>> c, r = listed_arrival(codes, ranks, [(0, np.array([0, 1, 2, 3]), 0)])
    >>> r[:, 0].tolist(), c[:, 0].tolist()
    ([9, 9, -1, -1], [1, 0, -1, -1])
    """
    if not any(rows.size for _, rows, _ in lists):
        return codes, ranks
    codes, ranks = codes.copy(), ranks.copy()
    for column, rows, since in lists:
        known = rows >= 0
        own = np.full(rows.size, -1, dtype=ranks.dtype)
        own[known] = ranks[rows[known], column]
        labeled = own >= 0
        gaps_before: np.ndarray = np.cumsum(~labeled) - ~labeled
        later = labeled & (own > since)
        held = later & (gaps_before > 0)
        dated = np.maximum.accumulate(own)
        ranks[rows[known], column] = np.where(held, -1, np.where(later, dated, own))[known]
        codes[rows[held], column] = MISSING
    return codes, ranks


def lists_within(lists: Sequence[PlannedList], rows: np.ndarray, n_items: int) -> tuple[PlannedList, ...]:
    """``lists`` (on ``n_items`` rows) restricted to ``rows`` (indices), renumbered as rows of the subset
    ``rows`` picks: each list keeps its order and ``since`` (the monitor of a slice, docs/method.md §3b).

    >>> lists_within([(2, np.array([4, 1, 3, 0]), 5)], np.array([0, 3, 4]), 5)[0][1].tolist()
    [2, 1, 0]
    """
    local = np.full(n_items, -1, dtype=np.int64)
    local[rows] = np.arange(rows.size)
    out = []
    for column, listed, since in lists:
        at = local[listed[listed >= 0]]
        out.append((column, at[at >= 0], since))
    return tuple(out)
