"""Assignment designs: which items each secondary annotator labels, in what order (SPEC.md §5).

Every design returns ``dict[rater_id, np.ndarray]``: for each secondary rater, the item
indices (int64, no duplicates) in the order the rater should label them. Orders are
*prefix-stratified*: items of each stratum are spread evenly along the list, so any
prefix of a list is itself close to proportional and a half-finished panel is still
representative (SPEC.md §5, "Batches").

Configuring one rater when its task starts (the Seq designs, SPEC.md §5): call
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

ENTROPY_THRESHOLD_BITS = 0.5
"""Below this stratum entropy the primary's label is a weak stratum signal (SPEC.md §5)."""

DOMINANT_SHARE = 0.8
"""Share of items that at most ``DOMINANT_CLUSTERS`` clusters may hold before a warning."""

DOMINANT_CLUSTERS = 3


@dataclass(frozen=True)
class DesignChoice:
    """The recommended design with the stratum entropy and the reason (SPEC.md §5, "Choosing")."""

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
    """Items per stratum: largest-remainder proportional allocation of ``m`` (SPEC.md §5, Strat).

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
        raise ValueError(
            f"m is too small to give every stratum min_per_stratum={min_per_stratum} items"
        )
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
    return alloc + (rank < leftover[..., None])


def _interleaved(strata: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Positions that order selected items so every prefix is near-proportional (SPEC.md §5).

    ``strata`` lists the stratum of each selected item, already in within-stratum order.
    The j-th of the c items of a stratum gets the key ``(j + 1/2) / c``; sorting by key
    spreads each stratum evenly along the list (ties broken at random).
    """
    _, inverse, counts = np.unique(strata, return_inverse=True, return_counts=True)
    first = np.argsort(inverse, kind="stable")
    rank = np.empty(strata.size, dtype=np.int64)
    starts = np.cumsum(counts) - counts
    rank[first] = np.arange(strata.size) - np.repeat(starts, counts)
    key = (rank + 0.5) / counts[inverse]
    return np.lexsort((rng.random(strata.size), key))


def _stratified_list(
    strata: np.ndarray,
    quota: np.ndarray,
    priority: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Pick ``quota[s]`` items of each stratum ``s`` (lowest ``priority`` first, ties at random)
    and return them in prefix-stratified order (SPEC.md §5)."""
    by_stratum = np.lexsort((rng.random(strata.size), priority, strata))
    sorted_strata = strata[by_stratum]
    starts = np.searchsorted(sorted_strata, np.arange(quota.size))
    rank = np.arange(strata.size) - starts[sorted_strata]
    chosen = by_stratum[rank < quota[sorted_strata]]
    return chosen[_interleaved(strata[chosen], rng)]


def random_subsets(
    n_items: int, m: int, *, raters: Sequence[Hashable], rng: object = None
) -> dict[Hashable, np.ndarray]:
    """Independent uniform subsets of ``m`` items per rater, in random order (SPEC.md §5, Random).

    >>> lists = random_subsets(10, 4, raters=["a", "b"], rng=0)
    >>> sorted(lists), [len(v) for v in lists.values()]
    (['a', 'b'], [4, 4])
    """
    n_items = _check_n_items(n_items)
    m = _check_m(m, n_items)
    ids = _check_raters(raters)
    gen = np.random.default_rng(rng)
    return {r: gen.permutation(n_items)[:m].astype(np.int64) for r in ids}


def depth_first(n_items: int, m: int, *, raters: Sequence[Hashable]) -> dict[Hashable, np.ndarray]:
    """The first ``m`` items in corpus order, for every rater (SPEC.md §5, Depth-first; a baseline).

    >>> depth_first(10, 3, raters=["a"])["a"].tolist()
    [0, 1, 2]
    """
    n_items = _check_n_items(n_items)
    m = _check_m(m, n_items)
    return {r: np.arange(m, dtype=np.int64) for r in _check_raters(raters)}


def shared_panel(
    n_items: int, m: int, *, raters: Sequence[Hashable], rng: object = None
) -> dict[Hashable, np.ndarray]:
    """One uniform random panel of ``m`` items, the same list for every rater (SPEC.md §5).

    >>> lists = shared_panel(10, 4, raters=["a", "b"], rng=0)
    >>> bool(np.array_equal(lists["a"], lists["b"]))
    True
    """
    n_items = _check_n_items(n_items)
    m = _check_m(m, n_items)
    ids = _check_raters(raters)
    panel = np.random.default_rng(rng).permutation(n_items)[:m].astype(np.int64)
    return {r: panel.copy() for r in ids}


def strat(
    strata: object,
    m: int,
    *,
    raters: Sequence[Hashable],
    n_labels: int | None = None,
    min_per_stratum: int = 0,
    rng: object = None,
) -> dict[Hashable, np.ndarray]:
    """One shared panel drawn proportionally across strata, prefix-stratified (SPEC.md §5, Strat).

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
    gen = np.random.default_rng(rng)
    quota = proportional_allocation(np.bincount(s), m, min_per_stratum=min_per_stratum)
    panel = _stratified_list(s, quota, np.zeros(s.size, dtype=np.int64), gen)
    return {r: panel.copy() for r in ids}


def joint_strata(*features: object) -> np.ndarray:
    """Joint stratum id per item from one or more per-item codes (SPEC.md §5, "Richer strata").

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


def modal_strata(codes: object, *, primary: int, n_labels: int) -> np.ndarray:
    """Per item, the mode of the labels in hand, ties to the primary's label (SPEC.md §5, Seq-Refined).

    ``codes`` has shape ``(n_items, n_raters_in_hand)`` with ``-1`` for missing; a tie not
    involving the primary's label goes to the lowest tied code; an item with no label in
    hand gets its own stratum ``n_labels``.

    >>> modal_strata([[0, 1, 1], [0, 1, -1], [-1, 2, -1], [-1, -1, -1]], primary=0, n_labels=3).tolist()
    [1, 0, 2, 3]
    """
    arr = _check_in_hand(codes, n_labels, primary)
    n_items = arr.shape[0]
    observed = arr != MISSING
    rows = np.repeat(np.arange(n_items), arr.shape[1])[observed.reshape(-1)]
    counts = np.bincount(rows * n_labels + arr[observed], minlength=n_items * n_labels)
    counts = counts.reshape(n_items, n_labels)
    mode = counts.argmax(axis=1)
    top = counts.max(axis=1)
    first = arr[:, primary]
    primary_ties = (first != MISSING) & (counts[np.arange(n_items), np.maximum(first, 0)] == top)
    mode = np.where(primary_ties, first, mode)
    return np.where(top == 0, n_labels, mode).astype(np.int64)


def seq_refined(
    codes: object,
    m: int,
    *,
    primary: int,
    raters: Sequence[Hashable],
    n_labels: int,
    rng: object = None,
) -> dict[Hashable, np.ndarray]:
    """Per rater, an independent subset stratified by the modal label in hand (SPEC.md §5, Seq-Refined).

    Strata come from ``modal_strata(codes, ...)``; counts from ``proportional_allocation``.
    See the module docstring for configuring one rater when its task starts.

    >>> in_hand = np.array([[0, -1], [0, 1], [1, -1], [1, 1]])
    >>> lists = seq_refined(in_hand, 2, primary=0, raters=["r3"], n_labels=2, rng=0)
    >>> sorted(modal_strata(in_hand, primary=0, n_labels=2)[lists["r3"]].tolist())
    [0, 1]
    """
    s = modal_strata(codes, primary=primary, n_labels=n_labels)
    m = _check_m(m, s.size)
    ids = _check_raters(raters)
    gen = np.random.default_rng(rng)
    quota = proportional_allocation(np.bincount(s, minlength=n_labels + 1), m)
    flat = np.zeros(s.size, dtype=np.int64)
    return {r: _stratified_list(s, quota, flat, gen) for r in ids}


def seq_coverage(
    codes: object,
    m: int,
    *,
    primary: int,
    raters: Sequence[Hashable],
    n_labels: int,
    coverage: object = None,
    rng: object = None,
) -> dict[Hashable, np.ndarray]:
    """Seq-Refined with ties inside a stratum broken toward the least-covered items (SPEC.md §5).

    ``coverage`` is, per item, the number of raters already assigned it (default: the
    number of labels in hand per item). Raters in one call are configured in turn, each
    assignment adding one to the coverage of its items.

    >>> in_hand = np.array([[0, -1], [0, 1], [0, -1], [0, 1]])
    >>> sorted(seq_coverage(in_hand, 2, primary=0, raters=["r3"], n_labels=2, rng=0)["r3"].tolist())
    [0, 2]
    """
    arr = _check_in_hand(codes, n_labels, primary)
    s = modal_strata(arr, primary=primary, n_labels=n_labels)
    m = _check_m(m, s.size)
    ids = _check_raters(raters)
    if coverage is None:
        covered = (arr != MISSING).sum(axis=1).astype(np.int64)
    else:
        covered = np.asarray(coverage)
        if covered.shape != s.shape or not np.issubdtype(covered.dtype, np.integer):
            raise ValueError(f"coverage must be one integer count per item, shape ({s.size},)")
        if covered.size and covered.min() < 0:
            raise ValueError("coverage counts must be non-negative")
        covered = covered.astype(np.int64).copy()
    gen = np.random.default_rng(rng)
    quota = proportional_allocation(np.bincount(s, minlength=n_labels + 1), m)
    lists: dict[Hashable, np.ndarray] = {}
    for r in ids:
        lists[r] = _stratified_list(s, quota, covered, gen)
        covered[lists[r]] += 1
    return lists


def stratum_entropy(codes: object, *, n_labels: int) -> float:
    """Entropy ``H = -sum pi_l log2 pi_l`` of the primary's labels, in bits (SPEC.md §5, "Choosing").

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
            f"features must have shape ({n_items},) or ({n_items}, n_features), got {np.shape(features)}"
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


def choose_design(
    primary_codes: object, *, n_labels: int, features: object = None
) -> DesignChoice:
    """Recommend Strat or Seq-Coverage from the primary's stratum entropy (SPEC.md §5, "Choosing").

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
