"""Assignment designs: which items each secondary annotator labels, in what order (docs/method.md §5).

Every design returns ``dict[rater_id, np.ndarray]``: for each secondary rater, the item
indices (int64, no duplicates) in the order the rater should label them. Orders are
*prefix-stratified*: items of each stratum are spread evenly along the list, so any
prefix of a list is itself close to proportional and a half-finished panel is still
representative (docs/method.md §5, "Batches").

Configuring one rater when its task starts (the Seq designs, docs/method.md §5): call
``seq_refined(codes, m, primary=p, raters=[rater_id], n_labels=L)`` with ``codes`` the
labels in hand at that moment, shape ``(n_items, n_raters_in_hand)`` with ``-1`` for
missing (the primary's column plus every secondary's column collected so far). For
``seq_coverage`` pass also ``coverage``: per item, how many secondaries have already been
*assigned* the item (labeled or not yet); by default it is counted from ``codes``.
Passing several raters in one call configures them from the same labels in hand;
``seq_coverage`` then counts each rater's assignment as coverage for the next.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from planner.neyman import neyman_allocation

Rng = int | np.random.Generator | None

DESIGNS = ("random", "depth-first", "shared-panel", "strat", "disjoint", "seq-refined", "seq-coverage")
"""Design names shared by the served lists and the simulator's masks (docs/method.md §5)."""

SHARED_PANELS = ("depth-first", "shared-panel", "strat", "neyman")
"""Designs that give every secondary the same items."""


def design_pool_size(design: str, n_humans: int) -> int:
    """Held-in labels ``s`` on an overlap item of a held-out human (docs/method.md §4, item 2).

    ``K - 1`` on a shared panel; 1 otherwise (``disjoint`` subsets, or mostly so: the
    conservative choice, since the variance falls with ``s``).

    >>> design_pool_size("strat", 4), design_pool_size("random", 4)
    (3, 1)
    """
    return n_humans - 1 if design in SHARED_PANELS else 1


def check_raters(raters: Sequence[Hashable]) -> list[Hashable]:
    if isinstance(raters, (str, bytes)) or not isinstance(raters, Sequence):
        raise ValueError("raters must be a sequence of rater ids (e.g. a list of strings)")
    ids = list(raters)
    if not ids:
        raise ValueError("raters must name at least one rater")
    try:
        unique = len(set(ids))
    except TypeError:
        raise ValueError("rater ids must be hashable") from None
    if unique != len(ids):
        raise ValueError("rater ids must be unique")
    return ids


def check_m(m: int, n_items: int) -> int:
    if not isinstance(m, (int, np.integer)) or isinstance(m, bool):
        raise ValueError(f"m must be an integer, got {m!r}")
    if not 1 <= m <= n_items:
        raise ValueError(f"m must lie in 1..{n_items} (the number of items), got {m}")
    return int(m)


def _check_n_items(n_items: int) -> int:
    if not isinstance(n_items, (int, np.integer)) or isinstance(n_items, bool) or n_items < 1:
        raise ValueError(f"n_items must be a positive integer, got {n_items!r}")
    return int(n_items)


def _check_strata(strata: object, n_labels: int | None) -> np.ndarray:
    arr = np.asarray(strata)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"strata must be one code per item (1-D, non-empty), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError("strata must be integer codes (use joint_strata to encode features)")
    arr = arr.astype(np.int64)
    if arr.min() < 0:
        raise ValueError("strata must be non-negative codes; an item without a stratum is not allowed")
    if n_labels is not None and arr.max() >= n_labels:
        raise ValueError(f"strata must lie in 0..{n_labels - 1}, found {arr.max()}")
    return arr


def proportional_allocation(sizes: object, m: object, *, min_per_stratum: int = 0) -> np.ndarray:
    """Items per stratum: largest-remainder proportional allocation of ``m`` (docs/method.md §5, Strat).

    ``sizes`` has shape ``(..., n_strata)`` (stratum sizes; leading axes are independent
    problems, e.g. trials) and ``m`` a scalar or one total per problem. Each stratum first
    receives ``min(min_per_stratum, size)``; strata whose proportional share falls below
    that floor are held at it and the rest of ``m`` is shared proportionally among the
    others. Fractional shares are floored and the remaining items go to the largest
    remainders (ties to the lower stratum index). Every count is within one item of its
    share ``m * size / sum(sizes)`` when ``min_per_stratum`` is 0.

    >>> proportional_allocation([50, 30, 20], 7).tolist()
    [4, 2, 1]
    >>> proportional_allocation([90, 9, 1], 10, min_per_stratum=1).tolist()
    [8, 1, 1]
    """
    size = np.asarray(sizes, dtype=np.int64)
    if size.ndim < 1 or size.shape[-1] == 0 or (size.size and size.min() < 0):
        raise ValueError("sizes must be non-negative stratum sizes, shape (..., n_strata)")
    total = np.broadcast_to(np.asarray(m, dtype=np.int64), size.shape[:-1])
    n = size.sum(axis=-1)
    if np.any(total < 0) or np.any(total > n):
        raise ValueError("m must lie between 0 and the total size of the strata")
    if not isinstance(min_per_stratum, (int, np.integer)) or min_per_stratum < 0:
        raise ValueError(f"min_per_stratum must be a non-negative integer, got {min_per_stratum!r}")
    floor_ = np.minimum(min_per_stratum, size)
    if np.any(floor_.sum(axis=-1) > total):
        raise ValueError(f"m is too small to give every stratum min_per_stratum={min_per_stratum} items")
    fixed = np.zeros(size.shape, dtype=bool)
    for _ in range(size.shape[-1]):
        free = np.where(fixed, 0, size)
        budget = total - np.where(fixed, floor_, 0).sum(axis=-1)
        free_total = free.sum(axis=-1)
        share = budget[..., None] * free / np.maximum(free_total, 1)[..., None]
        newly = ~fixed & (share < floor_)
        if not newly.any():
            break
        fixed |= newly
    quota = np.where(fixed, floor_, share)
    alloc = np.where(fixed, floor_, np.floor(quota)).astype(np.int64)
    remainder = np.where(fixed, -1.0, quota - alloc)
    leftover = total - alloc.sum(axis=-1)
    order = np.argsort(-remainder, axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(size.shape[-1]), axis=-1)
    return np.asarray(alloc + (rank < leftover[..., None]), dtype=np.int64)


def interleaved(strata: np.ndarray) -> np.ndarray:
    """Positions that order selected items so every prefix is near-proportional (docs/method.md §5).

    ``strata`` lists the stratum of each selected item, already in within-stratum order.
    The j-th of the c items of a stratum gets the key ``(j + 1/2) / c``; sorting by key
    spreads each stratum evenly along the list (equal keys: lower stratum first).
    """
    _, inverse, counts = np.unique(strata, return_inverse=True, return_counts=True)
    first = np.argsort(inverse, kind="stable")
    rank = np.empty(strata.size, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    rank[first] = np.arange(strata.size) - np.repeat(starts, counts)
    key = (rank + 0.5) / counts[inverse]
    return np.lexsort((strata, key))


def stratified_masks(
    strata: np.ndarray, quota: np.ndarray, key: np.ndarray, priority: np.ndarray | None = None
) -> np.ndarray:
    """Per row, ``quota[s]`` items of each stratum ``s``: lowest ``priority``, then ``key``.

    ``key`` holds i.i.d. uniform draws in ``[0, 1)``; ``priority`` non-negative integers.

    ``strata`` and ``key`` have shape ``(T, n_items)`` (one row per trial, or one row for a
    served design), ``quota`` ``(T, n_strata)``. Returns the boolean masks ``(T, n_items)``.
    This is the selection step of every stratified design (docs/method.md §5).

    >>> stratified_masks(np.array([[0, 0, 1, 1]]), np.array([[1, 1]]), np.array([[.9, .1, .2, .8]]))
    array([[False,  True,  True, False]])
    """
    trials, n_items = strata.shape
    n_strata = quota.shape[-1]
    cells = np.arange(trials)[:, None] * n_strata + strata  # (row, stratum) of every item
    sizes = np.bincount(cells.ravel(), minlength=trials * n_strata).reshape(trials, n_strata)
    take = np.minimum(quota, sizes)
    whole = (take == sizes) & (take > 0)  # strata taken whole (or not at all): no order needed
    mask = whole.ravel()[cells] if whole.any() else np.zeros((trials, n_items), dtype=bool)
    partial = np.flatnonzero(((take > 0) & (take < sizes)).any(axis=1))
    if partial.size == 0:
        return mask
    span = 1.0
    if priority is not None:
        key = key + priority
        span += float(priority.max())
    order = np.argsort(strata[partial] * span + key[partial], axis=1)  # stratum, then priority, key
    # each stratum is a block of the sorted row; its first ``take`` positions are chosen
    block_size, block_take = sizes[partial].ravel(), take[partial].ravel()
    row_start = np.arange(partial.size).repeat(n_strata) * n_items
    block_starts = row_start + np.cumsum(sizes[partial], axis=1).ravel() - block_size
    first = np.repeat(block_starts, block_take)
    position = first + np.arange(first.size) - np.repeat(np.cumsum(block_take) - block_take, block_take)
    rows = np.zeros((partial.size, n_items), dtype=bool)
    rows.reshape(-1)[position - position % n_items + order.reshape(-1)[position]] = True
    mask[partial] = rows
    return mask


def uniform_masks(key: np.ndarray, m: int) -> np.ndarray:
    """Per row of i.i.d. ``key`` ``(T, n_items)``, the uniform subset of its ``m`` smallest keys.

    >>> uniform_masks(np.array([[0.3, 0.1, 0.7, 0.2]]), 2).astype(int).tolist()
    [[0, 1, 0, 1]]
    """
    return np.asarray(key <= np.partition(key, m - 1, axis=1)[:, m - 1 : m])


def _prefix_list(mask: np.ndarray, strata: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The items of one ``mask`` row in prefix-stratified order (within a stratum by ``key``)."""
    chosen = np.flatnonzero(mask)
    chosen = chosen[np.lexsort((key[chosen], strata[chosen]))]
    return np.asarray(chosen[interleaved(strata[chosen])], dtype=np.int64)


def _order_strata(strata: object, n_items: int) -> np.ndarray:
    """Strata that order a list (one stratum for all when none are given)."""
    if strata is None:
        return np.zeros(n_items, dtype=np.int64)
    s = _check_strata(strata, None)
    if s.size != n_items:
        raise ValueError(f"strata must give one code per item ({n_items}), got {s.size}")
    return s


def random_subsets(
    n_items: int, m: int, *, raters: Sequence[Hashable], strata: object = None, rng: Rng = None
) -> dict[Hashable, np.ndarray]:
    """Independent uniform subsets of ``m`` items per rater (docs/method.md §5, Random).

    Each list is in random order, prefix-stratified on ``strata`` (e.g. the primary's
    label) when given.

    >>> lists = random_subsets(10, 4, raters=["a", "b"], rng=0)
    >>> sorted(lists), [len(v) for v in lists.values()]
    (['a', 'b'], [4, 4])
    """
    n_items = _check_n_items(n_items)
    m = check_m(m, n_items)
    ids = check_raters(raters)
    order = _order_strata(strata, n_items)
    gen = np.random.default_rng(rng)
    lists = {}
    for r in ids:
        key = gen.random((1, n_items))
        lists[r] = _prefix_list(uniform_masks(key, m)[0], order, key[0])
    return lists


def depth_first(n_items: int, m: int, *, raters: Sequence[Hashable]) -> dict[Hashable, np.ndarray]:
    """The first ``m`` items in corpus order, for every rater (docs/method.md §5; a baseline).

    >>> depth_first(10, 3, raters=["a"])["a"].tolist()
    [0, 1, 2]
    """
    n_items = _check_n_items(n_items)
    m = check_m(m, n_items)
    return {r: np.arange(m, dtype=np.int64) for r in check_raters(raters)}


def shared_panel(
    n_items: int, m: int, *, raters: Sequence[Hashable], strata: object = None, rng: Rng = None
) -> dict[Hashable, np.ndarray]:
    """One uniform random panel of ``m`` items, the same list for every rater (docs/method.md §5).

    In random order, prefix-stratified on ``strata`` when given.

    >>> lists = shared_panel(10, 4, raters=["a", "b"], rng=0)
    >>> bool(np.array_equal(lists["a"], lists["b"]))
    True
    """
    n_items = _check_n_items(n_items)
    m = check_m(m, n_items)
    ids = check_raters(raters)
    key = np.random.default_rng(rng).random((1, n_items))
    panel = _prefix_list(uniform_masks(key, m)[0], _order_strata(strata, n_items), key[0])
    return {r: panel.copy() for r in ids}


def strat(
    strata: object,
    m: int,
    *,
    raters: Sequence[Hashable],
    n_labels: int | None = None,
    min_per_stratum: int = 0,
    rng: Rng = None,
) -> dict[Hashable, np.ndarray]:
    """One shared panel drawn proportionally across strata, prefix-stratified (docs/method.md §5).

    ``strata`` is one code per item: the primary's label (``0..n_labels-1``) or a joint
    stratum id from ``joint_strata``. Stratum counts follow ``proportional_allocation``.

    >>> primary = np.array([0] * 6 + [1] * 4)
    >>> panel = strat(primary, 5, raters=["a", "b"], rng=1)
    >>> np.bincount(primary[panel["a"]]).tolist(), bool(np.array_equal(panel["a"], panel["b"]))
    ([3, 2], True)
    """
    s = _check_strata(strata, n_labels)
    m = check_m(m, s.size)
    ids = check_raters(raters)
    key = np.random.default_rng(rng).random((1, s.size))
    quota = proportional_allocation(np.bincount(s), m, min_per_stratum=min_per_stratum)
    mask = stratified_masks(s[None], quota[None], key)
    panel = _prefix_list(mask[0], s, key[0])
    return {r: panel.copy() for r in ids}


def neyman(
    strata: object,
    m: int,
    *,
    sds: object,
    raters: Sequence[Hashable],
    min_per_stratum: int = 2,
    rng: Rng = None,
) -> tuple[dict[Hashable, np.ndarray], np.ndarray]:
    """One shared panel with ``n_h ∝ N_h S_h`` per stratum, and every item's inclusion
    probability ``n_h / N_h`` (docs/method.md §9).

    ``strata`` (one code ``0..H-1`` per item) must be known before any overlap: the
    judge-primary agreement, the cell (primary label, judge label), or a supplied item
    feature; ``sds`` holds ``S_h``, the standard deviation of a secondary's agreement with
    the primary in each stratum (prior or pilot). Counts follow
    ``planner.neyman.neyman_allocation``; the panel is prefix-stratified like Strat's.
    Estimates from it must weight items by ``1 / inclusion``.

    >>> agree = np.array([0] * 20 + [1] * 80)
    >>> lists, inclusion = neyman(agree, 20, sds=[0.49, 0.37], raters=["a"], rng=0)
    >>> np.bincount(agree[lists["a"]]).tolist(), inclusion[[0, -1]].tolist()
    ([5, 15], [0.25, 0.1875])
    """
    s = _check_strata(strata, None)
    m = check_m(m, s.size)
    ids = check_raters(raters)
    sd = np.asarray(sds, dtype=float)
    sizes = np.bincount(s, minlength=sd.size if sd.ndim == 1 else 0)
    if sd.shape != (sizes.size,):
        raise ValueError(f"sds must give one S_h per stratum 0..{sizes.size - 1}, got shape {sd.shape}")
    quota = neyman_allocation(sizes, sd, m, min_per_stratum=min_per_stratum)
    key = np.random.default_rng(rng).random((1, s.size))
    panel = _prefix_list(stratified_masks(s[None], quota[None], key)[0], s, key[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        inclusion = np.where(sizes > 0, quota / np.maximum(sizes, 1), 1.0)[s]
    return {r: panel.copy() for r in ids}, inclusion


def disjoint(
    strata: object,
    m: int,
    *,
    raters: Sequence[Hashable],
    n_labels: int | None = None,
    coverage: object = None,
    rng: Rng = None,
) -> dict[Hashable, np.ndarray]:
    """Per rater, ``m`` items drawn proportionally across strata, avoiding items other
    secondaries already have: subsets are disjoint while ``m (K - 1) <= n`` (docs/method.md §5).

    ``strata``: the primary's label per item (or ``joint_strata``); ``coverage``: per item,
    how many secondaries are already assigned it (default none). Raters in one call are
    configured in turn; each list is prefix-stratified.

    >>> primary = np.array([0] * 6 + [1] * 4)
    >>> lists = disjoint(primary, 5, raters=["a", "b"], rng=0)
    >>> sorted(lists["a"].tolist() + lists["b"].tolist()) == list(range(10))
    True
    """
    s = _check_strata(strata, n_labels)
    m = check_m(m, s.size)
    ids = check_raters(raters)
    covered = coverage_counts(coverage, s.size)
    gen = np.random.default_rng(rng)
    sizes = np.bincount(s)
    quota = proportional_allocation(sizes, m)
    lists: dict[Hashable, np.ndarray] = {}
    for r in ids:
        key = gen.random(s.size)
        # stratified_masks' choice (least covered, then lowest key), sorting only the items near the quota
        mask = np.zeros(s.size, dtype=bool)
        mask[smallest_keys(s, sizes, quota, key + covered)] = True
        lists[r] = _prefix_list(mask, s, key)
        covered += mask
    return lists


def coverage_counts(coverage: object, n_items: int) -> np.ndarray:
    """``coverage`` as a fresh int64 array of one non-negative count per item (zeros by default)."""
    if coverage is None:
        return np.zeros(n_items, dtype=np.int64)
    covered = np.asarray(coverage)
    if covered.shape != (n_items,) or not np.issubdtype(covered.dtype, np.integer):
        raise ValueError(f"coverage must be one integer count per item, shape ({n_items},)")
    if covered.size and covered.min() < 0:
        raise ValueError("coverage counts must be non-negative")
    return covered.astype(np.int64).copy()


def joint_strata(*features: object) -> np.ndarray:
    """Joint stratum id per item from one or more per-item codes (docs/method.md §5, "Richer strata").

    Each distinct combination of feature values becomes one stratum, numbered ``0..S-1``
    in sorted order of the combinations.

    >>> joint_strata([0, 1, 0, 1], ["x", "x", "y", "x"]).tolist()
    [0, 2, 1, 2]
    """
    if not features:
        raise ValueError("joint_strata needs at least one feature")
    columns = [np.asarray(f) for f in features]
    n = columns[0].shape[0] if columns[0].ndim == 1 else -1
    if any(c.ndim != 1 or c.shape[0] != n for c in columns) or n == 0:
        raise ValueError("every feature must be a non-empty 1-D array with one value per item")
    codes = [np.unique(c, return_inverse=True)[1].reshape(-1) for c in columns]
    _, joint = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
    return joint.reshape(-1).astype(np.int64)


_CANDIDATE_MARGIN = 6.0  # standard deviations of a stratum's count under its key threshold


def smallest_keys(strata: np.ndarray, sizes: np.ndarray, quota: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Indices of the ``quota[h]`` items of lowest ``key`` in each stratum ``h`` of ``sizes[h]`` items
    (all of a smaller one): ``stratified_masks`` of one row without priority, by sorting only the items
    whose key falls under a per-stratum threshold that leaves each stratum its quota with a wide
    margin, and every item of a stratum whose threshold would reach past half of it (else, should a
    stratum fall short, every item)."""
    take, threshold, every, sampled = candidate_thresholds(sizes, quota)
    top = float(threshold[sampled].max(initial=0.0))
    candidates = np.flatnonzero(key < top)
    candidates = candidates[sampled[strata[candidates]] & (key[candidates] < threshold[strata[candidates]])]
    if every.any():
        candidates = np.union1d(candidates, np.flatnonzero(every[strata]))
    if (np.bincount(strata[candidates], minlength=quota.size) < take).any():
        candidates = np.flatnonzero(take[strata] > 0)
    ranked = candidates[np.lexsort((key[candidates], strata[candidates]))]
    stratum = strata[ranked]
    starts = np.searchsorted(stratum, np.arange(quota.size))
    rank = np.arange(ranked.size) - starts[stratum]
    return np.sort(ranked[rank < take[stratum]])


def candidate_thresholds(sizes: np.ndarray, quota: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per stratum of ``sizes[h]`` items: the items to take, the key under which its candidates fall,
    whether every item is a candidate (small strata) and whether candidates are sampled by key."""
    take = np.minimum(quota, sizes)
    threshold = (take + _CANDIDATE_MARGIN * np.sqrt(take) + 10) / np.maximum(sizes, 1)
    every = (take > 0) & ((take == sizes) | (threshold >= 0.5))
    return take, threshold, every, (take > 0) & ~every


def stratum_sizes(strata: np.ndarray, n_strata: int) -> np.ndarray:
    """Items per stratum in each row of ``strata`` ``(T, n_items)``: shape ``(T, n_strata)``."""
    trials = strata.shape[0]
    keys = (np.arange(trials)[:, None] * n_strata + strata).ravel()
    return np.bincount(keys, minlength=trials * n_strata).reshape(trials, n_strata)
