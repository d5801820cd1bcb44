"""Per-human difference paths in arrival order, and the ranks at which the monitor certifies (docs/method.md §8).

The machinery under ``planner.sequential.monitor_judge``: each held-out human's differences ``xi_t``
read in arrival order, the e-BH ranks at which a human is first certified won or lost, and the
decision those ranks give. Shared with the monitor's simulation (``planner.monitor_simulation``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from planner.codes import MISSING
from planner.confidence_sequences import (
    log_e_processes,
)
from planner.list_arrival import PlannedList

_POOL_CHUNK_CELLS = 4_000_000  # item x human x human cells of pool membership held at once
NEVER = np.iinfo(np.int64).max  # arrival rank of a label that has not arrived
_LOOK_CHUNK_CELLS = 1_000_000  # look x human cells of needed e-BH ranks held at once


def _second_smallest(times: np.ndarray) -> np.ndarray:
    """Per row of ``times`` (at least two columns), the second-smallest value (ties count twice)."""
    low = np.minimum(times[:, 0], times[:, 1])
    second: np.ndarray = np.maximum(times[:, 0], times[:, 1])
    for j in range(2, times.shape[1]):
        second = np.minimum(second, np.maximum(low, times[:, j]))
        low = np.minimum(low, times[:, j])
    return second


def block_differences(
    labels: np.ndarray, times: np.ndarray, judge_labels: np.ndarray, judge_times: np.ndarray, rule: str
) -> tuple[np.ndarray, np.ndarray]:
    """Entry rank and ``xi`` of rows labeled by the judge and by every one of ``c >= 2`` humans.

    ``labels`` and ``times`` are ``(rows, c)``. Human ``k`` enters when the judge, ``k`` and
    one other human have labeled the row, i.e. at ``max(t_judge, t_(2), t_k)`` with ``t_(2)``
    the second human to arrive (the first arrival's other is ``t_(2)``; anyone else is at or
    after it); the pool is the other humans present then (docs/method.md §8).
    """
    entry = np.maximum(np.maximum(judge_times, _second_smallest(times))[:, None], times)
    with_judge = labels == judge_labels[:, None]
    if times.shape[1] == 2:  # both enter together and each one's pool is the other
        diff = with_judge[:, ::-1].astype(np.int16) - (labels[:, :1] == labels[:, 1:])
        return entry, (diff.astype(float) if rule == "margin" else np.sign(diff).astype(float))
    size = np.full(entry.shape, -1, dtype=np.int16)  # k itself is always present: not its pool
    judge_agree = -with_judge.astype(np.int16)
    human_agree = np.full(entry.shape, -1, dtype=np.int16)
    for b in range(times.shape[1]):
        present = times[:, b : b + 1] <= entry
        size += present
        judge_agree += present & with_judge[:, b : b + 1]
        human_agree += present & (labels[:, b : b + 1] == labels)
    diff = judge_agree - human_agree
    xi = diff / size if rule == "margin" else np.sign(diff).astype(float)
    return entry, xi


def _flat(a: np.ndarray) -> np.ndarray:
    """``a`` as one dimension in C order (a view when ``a`` is contiguous)."""
    return a.reshape(-1)


def differences(
    codes: np.ndarray,
    order: np.ndarray,
    judge: int,
    humans: list[int],
    rule: str,
    tiebreak: np.ndarray | None = None,
    positions: tuple[np.ndarray | None, ...] | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per held-out human: arrival ranks, ``xi`` and rows of its usable items, in arrival order.

    Only rows with the judge and at least two humans carry a difference. They are grouped by
    their number ``c`` of humans, so each group is a dense ``(rows, c)`` block whose pools
    cost ``c^2`` cells a row, not ``K^2`` (docs/method.md §8). Entries of equal rank are read by
    the human's ``positions`` (its planned list's order, :func:`list_positions`) first, then by
    ``tiebreak`` (None: the row).
    """
    n_humans = len(humans)
    present = (codes != MISSING)[:, humans]
    count = np.zeros(codes.shape[0], dtype=np.int16)
    for k in range(n_humans):
        count += present[:, k]
    rows = np.flatnonzero((codes[:, judge] != MISSING) & (count >= 2))
    by_count = np.argsort(count[rows], kind="stable")  # a radix sort of int16
    bounds = np.searchsorted(count[rows][by_count], np.arange(2, n_humans + 2))
    human_cols = np.asarray(humans)
    parts = []
    for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True), start=2):
        if hi == lo:
            continue
        block = rows[by_count[lo:hi]]
        held = (np.flatnonzero(present[block]) % n_humans).reshape(block.size, c)  # its humans
        cells = block[:, None] * codes.shape[1] + human_cols[held]
        entry, xi = block_differences(
            _flat(codes)[cells], _flat(order)[cells], codes[block, judge], order[block, judge], rule
        )
        parts.append((held.ravel(), np.repeat(block, c), entry.ravel(), xi.ravel()))
    human, item, entry, xi = (
        np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype=np.int64) for i in range(4)
    )
    by_human = np.argsort(human.astype(np.int16), kind="stable")
    ends = np.concatenate([[0], np.cumsum(np.bincount(human, minlength=n_humans))])
    paths = []
    for k in range(n_humans):
        own = by_human[ends[k] : ends[k + 1]]
        ranks = entry[own]
        arrival = distinct_rank_order(ranks)
        if arrival is None:  # equal ranks: the earlier on the human's list, then the smaller tie-break key first
            base = item[own] if tiebreak is None else tiebreak[item[own]]
            listed = positions[k] if positions else None
            arrival = np.lexsort((base, ranks) if listed is None else (base, listed[item[own]], ranks))
        own = own[arrival]
        paths.append((ranks[arrival], xi[own], item[own]))
    return paths


UNLISTED = np.iinfo(np.int32).max  # list position of a row not on a human's planned list


def list_positions(lists: Sequence[PlannedList], humans: list[int], n_items: int) -> tuple[np.ndarray | None, ...]:
    """Per held-out human, each row's position on its planned list (``UNLISTED`` off it), the first key of
    entries of equal arrival rank (docs/method.md §8.2). A human without a list (the primary) reads a row at
    its earliest position on any list: its entries of a listed row come with a secondary's release, so a block
    released at one rank is read in list order (with one secondary, its list's). None: no list at all."""
    by_column = {column: rows[rows >= 0] for column, rows, _ in lists if np.any(rows >= 0)}
    if not by_column:
        return (None,) * len(humans)
    earliest = np.full(n_items, UNLISTED, dtype=np.int32)
    own = {}
    for column, rows in by_column.items():
        position = np.full(n_items, UNLISTED, dtype=np.int32)
        position[rows] = np.arange(rows.size, dtype=np.int32)
        np.minimum(earliest, position, out=earliest)
        own[column] = position
    out: list[np.ndarray | None] = []
    for h in humans:
        position = own.get(h, earliest)
        position.flags.writeable = False
        out.append(position)
    return tuple(out)


def distinct_rank_order(ranks: np.ndarray) -> np.ndarray | None:
    """The permutation sorting distinct ``ranks``, or None when some rank repeats.

    Ranks spanning under ``4 n`` values (``label_seq``) are placed in a table, others sorted.
    """
    if ranks.size == 0:
        return np.zeros(0, dtype=np.int64)
    low = int(ranks.min())
    span = int(ranks.max()) - low + 1
    if span <= 4 * ranks.size:
        slot = np.full(span, -1, dtype=np.int64)
        slot[ranks - low] = np.arange(ranks.size)
        placed = slot[slot >= 0]
        return placed if placed.size == ranks.size else None
    arrival = np.argsort(ranks, kind="stable")
    return None if np.any(np.diff(ranks[arrival]) == 0) else arrival


def needed_ranks(log_e: np.ndarray, n_humans: int, alpha: float, multiplicity: str) -> np.ndarray:
    """Smallest e-BH rank ``j`` with ``e >= K / (alpha j)`` per prefix (``K + 1``: none).

    Bonferroni certifies only at rank 1 (``e >= K / alpha``).
    """
    ratio = np.minimum(log_e, 700.0)  # K / alpha exp(-min(log_e, 700)) (1 - 1e-12), in place
    np.negative(ratio, out=ratio)
    np.exp(ratio, out=ratio)
    ratio *= n_humans / alpha
    ratio *= 1.0 - 1e-12
    np.ceil(ratio, out=ratio)
    ranks: np.ndarray = np.minimum(ratio, n_humans + 1, out=ratio).astype(np.int64)
    if multiplicity == "bonferroni":
        ranks = np.where(ranks == 1, 1, n_humans + 1)
    return ranks


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort, which beats hashing for arrival ranks)."""
    ordered = np.sort(values, kind="stable")  # a merge when ``values`` are sorted runs
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if ordered.size else ordered


def n_distinct(values: np.ndarray) -> int:
    """How many distinct values: a table when they span under ``4 n`` (``label_seq``), else a sort."""
    if values.size == 0:
        return 0
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span > 4 * values.size:
        return int(_distinct(values).size)
    seen = np.zeros(span, dtype=bool)
    seen[values - low] = True
    return int(np.count_nonzero(seen))


def first_certified(
    times: list[np.ndarray], ranks: list[np.ndarray], n_humans: int, start: list[int] | None = None
) -> np.ndarray:
    """Arrival rank at which e-BH first certifies each human (``NEVER``: not yet).

    The certified set only changes when some human's needed rank changes, so e-BH is
    evaluated at those looks only: at each, ``k* = max{j : #{k : rank_k <= j} >= j}`` and
    the humans with ``rank_k <= k*`` are certified. ``start``: each human's needed rank before
    ``times`` (paths continued after a look; ``K + 1``, none, by default).
    """
    start = [n_humans + 1] * n_humans if start is None else start
    changes = []
    for t, r, before in zip(times, ranks, start, strict=True):
        moved = np.flatnonzero(r != np.concatenate([[before], r[:-1]]))  # a rank other than the one before
        changes.append((t[moved], r[moved]))
    first = np.full(n_humans, NEVER, dtype=np.int64)
    looks = _distinct(np.concatenate([c[0] for c in changes])) if changes else np.zeros(0)
    if looks.size == 0:
        return first
    j = np.arange(1, n_humans + 1)
    step = max(1, _LOOK_CHUNK_CELLS // n_humans)
    for at in range(0, looks.size, step):  # a chunk of looks at a time: a family of every slice's humans is long
        these = looks[at : at + step]
        state = np.empty((these.size, n_humans), dtype=np.int64)
        for k, ((t, r), before) in enumerate(zip(changes, start, strict=True)):
            state[:, k] = np.concatenate([[before], r])[np.searchsorted(t, these, side="right")]
        # at least j humans need a rank <= j exactly when the j-th smallest needed rank is <= j
        k_star = np.max(np.where(np.sort(state, axis=1) <= j, j, 0), axis=1)
        certified = state <= k_star[:, None]
        hit = certified.any(axis=0) & (first == NEVER)
        first[hit] = these[np.argmax(certified, axis=0)[hit]]
    return first


def certifications(
    paths: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    item_weights: list[np.ndarray | None],
    *,
    n_humans: int,
    epsilon: float,
    alpha: float,
    multiplicity: str,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
    """Per human of ``paths`` (``differences``), the log e-processes won/lost and the arrival
    ranks at which each is first certified won and lost (docs/method.md §8)."""
    null_mean = (1.0 - epsilon) / 2.0
    log_inv_a = math.log(n_humans / alpha)
    processes = [
        log_e_processes((xi + 1.0) / 2.0, null_mean, log_inv_a, w)
        for (_, xi, _), w in zip(paths, item_weights, strict=True)
    ]
    times = [t for t, _, _ in paths]
    first_won = first_certified(times, [needed_ranks(w, n_humans, alpha, multiplicity) for w, _ in processes], n_humans)
    first_lost = first_certified(
        times, [needed_ranks(lo, n_humans, alpha, multiplicity) for _, lo in processes], n_humans
    )
    return processes, first_won, first_lost


def monitor_decision(
    first_won: np.ndarray,
    first_lost: np.ndarray,
    needed: int,
    n_humans: int,
    n_looks: int,
    counts: list[int],
    budget: int | None,
) -> tuple[str, str, int | None]:
    """First look at which the certified counts decide, or why there is no decision yet.

    A human counts from its first certification on; one certified both ways at the same
    look counts for neither.
    """
    if n_humans < 2:
        return "insufficient_data", "fewer than two humans", None
    if n_looks == 0:
        return "insufficient_data", "no item is labeled by the judge and two humans yet", None
    won_at = np.where(first_won < first_lost, first_won, NEVER)
    lost_at = np.where(first_lost < first_won, first_lost, NEVER)
    pass_at = np.sort(won_at)[needed - 1] if needed >= 1 else -1
    lost_needed = n_humans - needed + 1
    reject_at = np.sort(lost_at)[lost_needed - 1] if lost_needed <= n_humans else NEVER
    if pass_at < reject_at:
        return "pass", f"{needed} of {n_humans} humans certified won", int(pass_at)
    if reject_at < pass_at:
        return "reject", f"{lost_needed} of {n_humans} humans certified lost", int(reject_at)
    if budget is not None and min(counts) >= budget:
        return "inconclusive", f"every human reached the budget of {budget} items undecided", None
    return "continue", "not enough humans certified yet", None


def row_order(codes: np.ndarray) -> np.ndarray:
    """Arrival ranks when items arrive in row order (all labels of a row at once)."""
    return np.broadcast_to(np.arange(codes.shape[0], dtype=np.int64)[:, None], codes.shape)
