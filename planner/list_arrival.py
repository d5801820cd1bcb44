"""Planned lists read in their own random order: when a listed label arrives for the monitor (docs/method.md §8.2).

A secondary's planned list is an order of items fixed before any of their labels (the plan's random draw).
The monitor reads a listed item's label once the item and every item before it on the list are complete (the
secondary's label, the judge's and another human's: what the item's entry needs): until then the label is held
back, and from then on it is dated by the latest completion rank on the list up to it. So the order in which
listed items reach the secondary's path is the list's, whatever order anyone's labels were uploaded in.
Items complete at or before a list's ``since`` (in hand before the list was drawn, or in the opening) are
read as before and hold nothing back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.codes import MISSING

PlannedList = tuple[int, np.ndarray, int]
"""One rater's list: its column, the rows of its items in list order, and its ``since`` rank."""


def listed_arrival(
    codes: np.ndarray, ranks: np.ndarray, lists: Sequence[PlannedList], *, judge: int, humans: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` and arrival ``ranks`` (``-1``: no label) as the monitor reads them under the planned
    ``lists`` (docs/method.md §8.2 rule 4). A listed item is *complete* when it holds the listed human's
    label, the ``judge``'s and another of the ``humans``' (the labels its entry needs), at the largest of
    their ranks (the other human's: the earliest one present). A listed label is held back (its code
    missing, its rank ``-1``) until its item and every item before it on its list are complete, and from then
    on takes the largest completion rank on its list up to it. An item complete by the list's ``since`` is
    read as it came and holds nothing back. A row of ``-1`` on a list stands for an item with no row: a gap. The
    lists are read again until none changes (a secondary's held label is not another's "other human").
    Copies when ``lists`` has an item, else the inputs themselves.

    Examples
    --------
    >>> import numpy as np
    >>> codes = np.array([[1, 1, 1], [0, 0, 1], [-1, 1, 0], [1, 1, 0]])  # the listed human, the judge, one other
    >>> ranks = np.array([[9, 1, 1], [4, 12, 1], [-1, 1, 1], [2, 1, 1]])
    >>> c, r = listed_arrival(codes, ranks, [(0, np.array([0, 1, 2, 3]), 0)], judge=1, humans=[0, 2])
    >>> r[:, 0].tolist(), c[:, 0].tolist()
    ([9, 12, -1, -1], [1, 0, -1, -1])
    """
    if not any(rows.size for _, rows, _ in lists):
        return codes, ranks
    out_codes, out_ranks = codes.copy(), ranks.copy()
    for _ in range(1 + sum(rows.size for _, rows, _ in lists)):  # a pass only holds more back, dates later
        changed = False
        for column, rows, since in lists:
            others = [h for h in humans if h != column]
            read = _list_read(codes, ranks, out_codes, out_ranks, column, rows, since, judge, others)
            known = rows[rows >= 0]
            before = out_codes[known, column].copy(), out_ranks[known, column].copy()
            out_codes[known, column], out_ranks[known, column] = read
            changed |= not (np.array_equal(before[0], read[0]) and np.array_equal(before[1], read[1]))
        if not changed:
            break
    return out_codes, out_ranks


def _list_read(
    codes: np.ndarray,
    ranks: np.ndarray,
    now_codes: np.ndarray,
    now_ranks: np.ndarray,
    column: int,
    rows: np.ndarray,
    since: int,
    judge: int,
    others: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """The codes and ranks of one list's labels (its known rows, in list order) as the monitor reads them: its
    own labels as given (``codes``, ``ranks``), the judge's and the other humans' as read now (``now_*``)."""
    known = rows >= 0
    at = rows[known]
    own = np.full(rows.size, -1, dtype=ranks.dtype)
    own[known] = ranks[at, column]
    own_code = np.full(rows.size, MISSING, dtype=codes.dtype)
    own_code[known] = codes[at, column]
    judge_rank = np.full(rows.size, -1, dtype=ranks.dtype)
    judge_rank[known] = np.where(now_codes[at, judge] != MISSING, now_ranks[at, judge], -1)
    other = np.full(rows.size, -1, dtype=ranks.dtype)
    if others:
        cells = np.ix_(at, np.asarray(others, dtype=np.int64))
        present = now_codes[cells] != MISSING
        earliest = np.min(np.where(present, now_ranks[cells], np.iinfo(ranks.dtype).max), axis=1)
        other[known] = np.where(present.any(axis=1), earliest, -1)
    complete = (own >= 0) & (judge_rank >= 0) & (other >= 0)
    completed = np.where(complete, np.maximum(np.maximum(own, judge_rank), other), -1)
    early = complete & (completed <= since)  # complete before the list was read in its order: read as it came
    gaps_before: np.ndarray = np.cumsum(~complete) - ~complete
    held = (own >= 0) & ~early & (~complete | (gaps_before > 0))
    dated = np.maximum.accumulate(completed)
    read_rank = np.where(held, -1, np.where(complete & ~early, dated, own))
    read_code = np.where(held, MISSING, own_code)
    return read_code[known], read_rank[known]


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
