"""The Seq designs: a secondary's list configured from the labels in hand when its task starts (docs/method.md §5).

``seq_refined`` stratifies on the modal label of the labels in hand; ``seq_coverage`` also on how
many secondaries were already assigned each item, so overlap spreads before it deepens. Codes
``(n_items, n_raters_in_hand)`` with ``-1`` for missing, as in ``planner.designs``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from planner.codes import MISSING, check_codes
from planner.designs import (
    Rng,
    candidate_thresholds,
    check_m,
    check_raters,
    interleaved,
    proportional_allocation,
    smallest_keys,
    stratum_sizes,
)


def _check_in_hand(codes: object, n_labels: int, primary: int) -> np.ndarray:
    arr = check_codes(codes, n_labels)
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"codes must hold at least one item and one rater, got shape {arr.shape}")
    if not isinstance(primary, (int, np.integer)) or not 0 <= primary < arr.shape[1]:
        raise ValueError(f"primary must be a column index in 0..{arr.shape[1] - 1}, got {primary!r}")
    return arr


def batched_modal_strata(humans: np.ndarray, observed: np.ndarray, *, n_labels: int, primary: int = 0) -> np.ndarray:
    """Per row and item, the mode of the observed labels, ties to the primary's (docs/method.md §5).

    ``humans`` and ``observed`` are rater-major, shape ``(n_raters, T, n_items)``; returns
    ``(T, n_items)``. A tie not involving the primary's label goes to the lowest tied code;
    an item with no observed label gets its own stratum ``n_labels``.
    """
    first = humans[primary]
    top = np.zeros(first.shape, dtype=np.int16)
    lowest = np.zeros(first.shape, dtype=np.int64)  # the lowest code with the top count
    first_count = np.zeros(first.shape, dtype=np.int16)
    for c in range(n_labels):
        count = ((humans == c) & observed).sum(axis=0, dtype=np.int16)
        lowest[count > top] = c
        np.maximum(top, count, out=top)
        first_count[first == c] = count[first == c]
    tie = observed[primary] & (first_count == top)
    mode = np.where(tie, first, lowest)
    return np.where(top == 0, n_labels, mode).astype(np.int64)


def modal_strata(codes: object, *, primary: int, n_labels: int) -> np.ndarray:
    """Per item, the mode of the labels in hand, ties to the primary's label (docs/method.md §5).

    ``codes`` has shape ``(n_items, n_raters_in_hand)`` with ``-1`` for missing; a tie not
    involving the primary's label goes to the lowest tied code; an item with no label in
    hand gets its own stratum ``n_labels``.

    >>> modal_strata([[0, 1, 1], [0, 1, -1], [-1, 2, -1], [-1, -1, -1]], primary=0, n_labels=3).tolist()
    [1, 0, 2, 3]
    """
    arr = _check_in_hand(codes, n_labels, primary)
    by_rater = arr.T[:, None, :]
    modes = batched_modal_strata(by_rater, by_rater != MISSING, n_labels=n_labels, primary=primary)
    return np.asarray(modes[0], dtype=np.int64)


def seq_refined(
    codes: object,
    m: int,
    *,
    primary: int,
    raters: Sequence[Hashable],
    n_labels: int,
    rng: Rng = None,
) -> dict[Hashable, np.ndarray]:
    """Per rater, a subset stratified by the modal label in hand (docs/method.md §5, Seq-Refined).

    Strata come from ``modal_strata(codes, ...)``; counts from ``proportional_allocation``.
    See the module docstring for configuring one rater when its task starts.

    >>> in_hand = np.array([[0, -1], [0, 1], [1, -1], [1, 1]])
    >>> lists = seq_refined(in_hand, 2, primary=0, raters=["r3"], n_labels=2, rng=0)
    >>> sorted(modal_strata(in_hand, primary=0, n_labels=2)[lists["r3"]].tolist())
    [0, 1]
    """
    return _seq_lists(codes, m, primary=primary, raters=raters, n_labels=n_labels, rng=rng)


def seq_coverage(
    codes: object,
    m: int,
    *,
    primary: int,
    raters: Sequence[Hashable],
    n_labels: int,
    assigned: object = None,
    rng: Rng = None,
) -> dict[Hashable, np.ndarray]:
    """Seq-Refined that equalises pairwise overlap between secondaries (docs/method.md §5).

    Strata are the modal label in hand crossed with the set of earlier secondaries already
    assigned the item; proportional allocation over them gives the new rater about
    ``m m_j / n`` items in common with every earlier secondary ``j`` (what independent draws
    give on average, but the same for every pair). ``assigned`` ``(n_items, J)`` marks the
    items each of ``J`` earlier secondaries was assigned (default: their labels in hand,
    every column but the primary's). Raters in one call are configured in turn.

    >>> in_hand = np.array([[0, -1], [0, 1], [0, -1], [0, 1]])
    >>> lists = seq_coverage(in_hand, 2, primary=0, raters=["r3"], n_labels=2, rng=0)
    >>> int(np.isin(lists["r3"], [1, 3]).sum())  # half of r2's items, as m m_j / n = 1
    1
    """
    arr = _check_in_hand(codes, n_labels, primary)
    if assigned is None:
        held = np.delete(arr, primary, axis=1) != MISSING
    else:
        held = np.asarray(assigned)
        if held.ndim != 2 or held.shape[0] != arr.shape[0] or held.dtype != bool:
            raise ValueError(f"assigned must be a boolean matrix ({arr.shape[0]}, n_secondaries)")
    modal = modal_strata(arr, primary=primary, n_labels=n_labels)
    m = check_m(m, modal.size)
    ids = check_raters(raters)
    gen = np.random.default_rng(rng)
    columns = [np.flatnonzero(column) for column in held.T]
    lists: dict[Hashable, np.ndarray] = {}
    for r in ids:
        lists[r] = seq_list(modal, m, n_labels=n_labels, assigned=columns, rng=gen)
        columns.append(lists[r])
    return lists


def seq_list(
    modal: np.ndarray, m: int, *, n_labels: int, assigned: Sequence[np.ndarray] | None = None, rng: Rng = None
) -> np.ndarray:
    """One secondary's Seq-Refined list (``assigned`` None) or Seq-Coverage list, from the modal strata in
    hand ``modal`` (``modal_strata``) and, for Seq-Coverage, the item indices each earlier secondary
    was assigned (docs/method.md §5).

    What ``seq_refined`` and ``seq_coverage`` draw for one rater, for the same ``rng``. Beyond drawing
    one key per item, its cost grows with the items assigned and with ``m``, not with ``n_items``
    (a few comparisons per item): the service keeps ``modal`` per worker and draws a list at a
    rater's first batch.

    >>> seq_list(np.array([0, 0, 1, 1, 2]), 2, n_labels=2, rng=0).tolist()
    [1, 3]
    """
    s = np.asarray(modal)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer) or (s.size and (s.min() < 0 or s.max() > n_labels)):
        raise ValueError(f"modal must be one stratum 0..{n_labels} per item (modal_strata)")
    m = check_m(m, s.size)
    gen = np.random.default_rng(rng)
    held, pattern, width = _assignment_patterns(assigned or [], s.size, n_labels=n_labels)
    codes = s[held].astype(np.int64) * width + pattern
    sizes = np.zeros((n_labels + 1) * width, dtype=np.int64)
    sizes[::width] = [np.count_nonzero(s == label) for label in range(n_labels + 1)]
    np.subtract.at(sizes, codes - pattern, 1)
    np.add.at(sizes, codes, 1)
    if assigned is None:
        quota = proportional_allocation(sizes, m)
    else:
        quota = coverage_quota(sizes.reshape(1, n_labels + 1, width), m)[0]
    key = gen.random((1, s.size))[0]
    chosen = _smallest_coded_keys(s, held, codes, width, sizes, quota, key)
    chosen = chosen[np.lexsort((key[chosen], s[chosen]))]
    return np.asarray(chosen[interleaved(s[chosen])], dtype=np.int64)


def _assignment_patterns(
    assigned: Sequence[np.ndarray], n_items: int, *, n_labels: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """The items some earlier secondary was assigned (sorted), their assignment patterns (bit ``j``: the
    ``j``-th has it; beyond ``MAX_PATTERN_STRATA`` strata, how many have it) and the number of patterns
    per modal label: the Seq-Coverage stratum of an item is ``modal * width + pattern`` (0 for the rest)."""
    n_assigned = len(assigned)
    patterns = (n_labels + 1) * 2**n_assigned <= MAX_PATTERN_STRATA
    width = 2**n_assigned if patterns else n_assigned + 1
    lists = [np.unique(np.asarray(items, dtype=np.int64)) for items in assigned]
    held = np.unique(np.concatenate(lists)) if lists else np.zeros(0, dtype=np.int64)
    if held.size and (held[0] < 0 or held[-1] >= n_items):
        raise ValueError(f"assigned items must be indices 0..{n_items - 1}")
    pattern = np.zeros(held.size, dtype=np.int64)
    for bit, items in enumerate(lists):
        pattern[np.searchsorted(held, items)] += 1 << bit if patterns else 1
    return held, pattern, width


def _smallest_coded_keys(
    modal: np.ndarray,
    held: np.ndarray,
    codes: np.ndarray,
    width: int,
    sizes: np.ndarray,
    quota: np.ndarray,
    key: np.ndarray,
) -> np.ndarray:
    """``smallest_keys`` of the strata ``modal * width`` (items outside ``held``) and ``codes`` (items in
    ``held``), reading the stratum of only the items it may choose: those whose key falls under every
    stratum's candidate threshold, the items held, and whole modal labels whose stratum is taken whole.
    Should those leave a stratum short of its quota, the same over every item."""
    take, threshold, every, sampled = candidate_thresholds(sizes, quota)
    top = float(threshold[sampled].max(initial=0.0))
    whole = [np.flatnonzero(modal == label) for label in np.flatnonzero(every[::width])]
    items = np.unique(np.concatenate([np.flatnonzero(key < top), held, *whole]))
    at = np.minimum(np.searchsorted(held, items), max(held.size - 1, 0))
    inside = (at < held.size) & (held[at] == items) if held.size else np.zeros(items.size, dtype=bool)
    strata = modal[items].astype(np.int64) * width
    strata[inside] = codes[at[inside]]
    if (np.bincount(strata, minlength=sizes.size) < take).any():
        items = np.arange(modal.size)
        strata = modal.astype(np.int64) * width
        strata[held] = codes
    chosen: np.ndarray = items[smallest_keys(strata, sizes, quota, key[items])]
    return chosen


MAX_PATTERN_STRATA = 4096
"""Beyond this many (label, assignment pattern) strata, Seq-Coverage counts who has an item instead."""


def coverage_strata(modal: np.ndarray, assigned: np.ndarray, m: int, *, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """Seq-Coverage strata ``(T, n_items)`` and their quotas ``(T, n_strata)`` for ``m`` items.

    A stratum is a modal label crossed with who already has the item; ``assigned``
    ``(J, T, n_items)`` marks earlier secondaries' items. The pattern (which of the ``J``
    has the item) is used while ``(L + 1) 2^J <= 4096``, else the count of them. Quotas are
    ``coverage_quota`` of the stratum sizes.
    """
    strata, width = coverage_codes(modal, assigned, n_labels=n_labels)
    sizes = stratum_sizes(strata, (n_labels + 1) * width).reshape(strata.shape[0], n_labels + 1, width)
    return strata, coverage_quota(sizes, m)


def coverage_codes(modal: np.ndarray, assigned: np.ndarray, *, n_labels: int) -> tuple[np.ndarray, int]:
    """Seq-Coverage stratum codes ``modal * width + pattern`` ``(T, n_items)`` and ``width``, the
    number of assignment patterns per modal label (see ``coverage_strata``)."""
    n_assigned = assigned.shape[0]
    patterns = (n_labels + 1) * 2**n_assigned <= MAX_PATTERN_STRATA
    width = 2**n_assigned if patterns else n_assigned + 1
    code = np.asarray(modal, dtype=np.int64) * width  # a copy: summed into in place
    for bit, row in enumerate(assigned):
        code += np.left_shift(row, bit, dtype=np.int64) if patterns else row
    return code, width


def coverage_quota(sizes: np.ndarray, m: int) -> np.ndarray:
    """Seq-Coverage quotas ``(T, n_strata)`` from stratum sizes ``(T, L + 1, width)``: proportional
    per modal label first (exactly as Seq-Refined's), then across the patterns within each label."""
    per_label = proportional_allocation(sizes.sum(axis=-1), m)
    return proportional_allocation(sizes, per_label).reshape(sizes.shape[0], -1)


def _seq_lists(
    codes: object,
    m: int,
    *,
    primary: int,
    raters: Sequence[Hashable],
    n_labels: int,
    rng: Rng,
) -> dict[Hashable, np.ndarray]:
    """Seq-Refined lists: each rater stratified by the modal label in hand."""
    s = modal_strata(codes, primary=primary, n_labels=n_labels)
    m = check_m(m, s.size)
    ids = check_raters(raters)
    gen = np.random.default_rng(rng)
    return {r: seq_list(s, m, n_labels=n_labels, rng=gen) for r in ids}
