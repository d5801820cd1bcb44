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
from dataclasses import dataclass, field

import numpy as np

from planner.codes import MISSING, check_codes
from planner.neyman import neyman_allocation

Rng = int | np.random.Generator | None

DESIGNS = ("random", "depth-first", "shared-panel", "strat", "disjoint", "seq-refined", "seq-coverage")
"""Design names shared by the served lists and the simulator's masks (docs/method.md §5)."""

SHARED_PANELS = ("depth-first", "shared-panel", "strat", "neyman")
"""Designs that give every secondary the same items."""

ENTROPY_THRESHOLD_BITS = 0.5
"""Below this stratum entropy the primary's label is a weak stratum signal (docs/method.md §5)."""

DOMINANT_SHARE = 0.8
"""Share of items that at most ``DOMINANT_CLUSTERS`` clusters may hold before a warning."""

DOMINANT_CLUSTERS = 3


def design_pool_size(design: str, n_humans: int) -> int:
    """Held-in labels ``s`` on an overlap item of a held-out human (docs/method.md §4, item 2).

    ``K - 1`` on a shared panel; 1 otherwise (``disjoint`` subsets, or mostly so: the
    conservative choice, since the variance falls with ``s``).

    >>> design_pool_size("strat", 4), design_pool_size("random", 4)
    (3, 1)
    """
    return n_humans - 1 if design in SHARED_PANELS else 1


@dataclass(frozen=True)
class DesignChoice:
    """The recommended design with the stratum entropy and the reason (docs/method.md §5, "Choosing")."""

    design: str
    entropy: float
    reason: str
    warnings: tuple[str, ...] = field(default_factory=tuple)


def _check_raters(raters: Sequence[Hashable]) -> list[Hashable]:
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


def _check_m(m: int, n_items: int) -> int:
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


def _interleaved(strata: np.ndarray) -> np.ndarray:
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
    return np.asarray(chosen[_interleaved(strata[chosen])], dtype=np.int64)


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
    m = _check_m(m, n_items)
    ids = _check_raters(raters)
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
    m = _check_m(m, n_items)
    return {r: np.arange(m, dtype=np.int64) for r in _check_raters(raters)}


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
    m = _check_m(m, n_items)
    ids = _check_raters(raters)
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
    m = _check_m(m, s.size)
    ids = _check_raters(raters)
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
    m = _check_m(m, s.size)
    ids = _check_raters(raters)
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
    m = _check_m(m, s.size)
    ids = _check_raters(raters)
    covered = _coverage_counts(coverage, s.size)
    gen = np.random.default_rng(rng)
    sizes = np.bincount(s)
    quota = proportional_allocation(sizes, m)
    lists: dict[Hashable, np.ndarray] = {}
    for r in ids:
        key = gen.random(s.size)
        # stratified_masks' choice (least covered, then lowest key), sorting only the items near the quota
        mask = np.zeros(s.size, dtype=bool)
        mask[_smallest_keys(s, sizes, quota, key + covered)] = True
        lists[r] = _prefix_list(mask, s, key)
        covered += mask
    return lists


def _coverage_counts(coverage: object, n_items: int) -> np.ndarray:
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
    m = _check_m(m, modal.size)
    ids = _check_raters(raters)
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
    m = _check_m(m, s.size)
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
    return np.asarray(chosen[_interleaved(s[chosen])], dtype=np.int64)


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
    """``_smallest_keys`` of the strata ``modal * width`` (items outside ``held``) and ``codes`` (items in
    ``held``), reading the stratum of only the items it may choose: those whose key falls under every
    stratum's candidate threshold, the items held, and whole modal labels whose stratum is taken whole.
    Should those leave a stratum short of its quota, the same over every item."""
    take, threshold, every, sampled = _candidate_thresholds(sizes, quota)
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
    chosen: np.ndarray = items[_smallest_keys(strata, sizes, quota, key[items])]
    return chosen


_CANDIDATE_MARGIN = 6.0  # standard deviations of a stratum's count under its key threshold


def _smallest_keys(strata: np.ndarray, sizes: np.ndarray, quota: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Indices of the ``quota[h]`` items of lowest ``key`` in each stratum ``h`` of ``sizes[h]`` items
    (all of a smaller one): ``stratified_masks`` of one row without priority, by sorting only the items
    whose key falls under a per-stratum threshold that leaves each stratum its quota with a wide
    margin, and every item of a stratum whose threshold would reach past half of it (else, should a
    stratum fall short, every item)."""
    take, threshold, every, sampled = _candidate_thresholds(sizes, quota)
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


def _candidate_thresholds(
    sizes: np.ndarray, quota: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per stratum of ``sizes[h]`` items: the items to take, the key under which its candidates fall,
    whether every item is a candidate (small strata) and whether candidates are sampled by key."""
    take = np.minimum(quota, sizes)
    threshold = (take + _CANDIDATE_MARGIN * np.sqrt(take) + 10) / np.maximum(sizes, 1)
    every = (take > 0) & ((take == sizes) | (threshold >= 0.5))
    return take, threshold, every, (take > 0) & ~every


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
    sizes = _stratum_sizes(strata, (n_labels + 1) * width).reshape(strata.shape[0], n_labels + 1, width)
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
    m = _check_m(m, s.size)
    ids = _check_raters(raters)
    gen = np.random.default_rng(rng)
    return {r: seq_list(s, m, n_labels=n_labels, rng=gen) for r in ids}


def design_masks(design: str, humans: np.ndarray, m: int, *, n_labels: int, rng: np.random.Generator) -> np.ndarray:
    """Observation masks ``(K, T, n_items)`` of a design over ``T`` trials (docs/method.md §5).

    ``humans`` holds every human's labels, rater-major ``(K, T, n_items)``, row 0 the
    primary, who sees every item. Secondaries ``1..K-1`` get ``m`` items each, drawn by the
    same selection steps (and the same random draws, in the same order) as the served
    designs ``random_subsets``, ``depth_first``, ``shared_panel``, ``strat``, ``disjoint``,
    ``seq_refined`` and ``seq_coverage`` (the Seq designs configure each secondary from
    the labels of the primary and the secondaries before it).
    """
    n_humans, trials, n_items = humans.shape
    mask = np.zeros(humans.shape, dtype=bool)
    mask[0] = True
    if design == "depth-first":
        mask[1:, :, :m] = True
    elif design == "shared-panel":
        mask[1:] = uniform_masks(rng.random((trials, n_items)), m)
    elif design == "strat":
        sizes = _stratum_sizes(humans[0], n_labels)
        key = rng.random((trials, n_items))
        mask[1:] = stratified_masks(humans[0], proportional_allocation(sizes, m), key)
    elif design == "random":
        for k in range(1, n_humans):
            mask[k] = uniform_masks(rng.random((trials, n_items)), m)
    elif design == "disjoint":
        quota = proportional_allocation(_stratum_sizes(humans[0], n_labels), m)
        for k in range(1, n_humans):
            coverage = mask[1:].sum(axis=0)
            mask[k] = stratified_masks(humans[0], quota, rng.random((trials, n_items)), coverage)
    else:
        for k in range(1, n_humans):
            modal = batched_modal_strata(humans, mask, n_labels=n_labels)
            if design == "seq-coverage":
                strata, quota = coverage_strata(modal, mask[1:k], m, n_labels=n_labels)
            else:
                strata, quota = modal, proportional_allocation(_stratum_sizes(modal, n_labels + 1), m)
            mask[k] = stratified_masks(strata, quota, rng.random((trials, n_items)))
    return mask


def _stratum_sizes(strata: np.ndarray, n_strata: int) -> np.ndarray:
    """Items per stratum in each row of ``strata`` ``(T, n_items)``: shape ``(T, n_strata)``."""
    trials = strata.shape[0]
    keys = (np.arange(trials)[:, None] * n_strata + strata).ravel()
    return np.bincount(keys, minlength=trials * n_strata).reshape(trials, n_strata)


def stratum_entropy(codes: object, *, n_labels: int) -> float:
    """Entropy ``H = -sum pi_l log2 pi_l`` of the primary's labels, in bits (docs/method.md §5, "Choosing").

    Missing codes (``-1``) are ignored; NaN when no label is observed.

    >>> stratum_entropy([0, 0, 1, 1], n_labels=2)
    1.0
    >>> round(stratum_entropy([0] * 9 + [1], n_labels=2), 4)
    0.469
    """
    arr = check_codes(codes, n_labels, ndim=1)
    labels = arr[arr != MISSING]
    if labels.size == 0:
        return float("nan")
    share = np.bincount(labels, minlength=n_labels) / labels.size
    share = share[share > 0]
    return float(max(0.0, -(share * np.log2(share)).sum()))


def _cluster_warnings(features: object, n_items: int) -> list[str]:
    arr = np.asarray(features)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != n_items or arr.shape[1] == 0:
        raise ValueError(
            f"features must have shape ({n_items},) or ({n_items}, n_features), got {np.asarray(features).shape}"
        )
    groups = joint_strata(*arr.T)
    sizes = np.sort(np.bincount(groups))[::-1]
    top = sizes[:DOMINANT_CLUSTERS].sum() / n_items
    if top < DOMINANT_SHARE:
        return []
    few = min(DOMINANT_CLUSTERS, sizes.size)
    return [
        f"clustered strata: {few} feature cluster(s) hold {top:.0%} of the items; items in a "
        "cluster share difficulty, so stratify on the clusters (joint_strata) or raise the overlap"
    ]


def choose_design(primary_codes: object, *, n_labels: int, features: object = None) -> DesignChoice:
    """Recommend Strat or Seq-Coverage from the primary's stratum entropy (docs/method.md §5, "Choosing").

    ``features`` (optional, shape ``(n_items,)`` or ``(n_items, n_features)``) are per-item
    codes such as cluster ids; when a few clusters hold most items a warning says so.

    >>> choose_design([0, 1] * 50, n_labels=2).design
    'strat'
    >>> choose_design([0] * 95 + [1] * 5, n_labels=2).design
    'seq-coverage'
    """
    arr = check_codes(primary_codes, n_labels, ndim=1)
    if not np.any(arr != MISSING):
        raise ValueError("primary_codes must hold at least one observed label")
    entropy = stratum_entropy(arr, n_labels=n_labels)
    warnings = tuple(_cluster_warnings(features, arr.size)) if features is not None else ()
    if entropy < ENTROPY_THRESHOLD_BITS:
        return DesignChoice(
            "seq-coverage",
            entropy,
            f"stratum entropy {entropy:.3f} bits < {ENTROPY_THRESHOLD_BITS} bits: the primary's "
            "label is a weak stratum signal, so configure each rater from the labels in hand "
            "and spread coverage (consider more overlap too)",
            warnings,
        )
    return DesignChoice(
        "strat",
        entropy,
        f"stratum entropy {entropy:.3f} bits >= {ENTROPY_THRESHOLD_BITS} bits: stratify one "
        "shared panel on the primary's label",
        warnings,
    )
