"""Item bootstraps over distinct patterns (docs/method.md §2, "Intervals").

Items that share a pattern (a row of codes, a vector of per-item sums, a table cell) are
interchangeable for every statistic, so resampling ``n`` items with replacement is a
multinomial draw of pattern multiplicities: a replicate costs a weighted sum over the
patterns, never a pass over the items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np

_CHUNK_CELLS = 4_000_000  # replicate cells a statistic reads at once (joint_replicates)
_WIDTH_COPIES = 8  # a statistic's own per-resample array is held in about this many copies
_BLOCK_CELLS = 4_000_000  # pattern multiplicities drawn at once (a block of ItemResample)
_HELD_CELLS = 8_000_000  # an ItemResample this small is drawn once and held (64 MB of float64)
_KEY_BLOCK_ROWS = 16_384  # rows keyed at once by distinct_rows (a block stays in cache)
_TAIL_COUNT = 10  # patterns this rare are resampled by drawing items, not by Poisson variates


def distinct_keys(keys: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct non-negative int keys in increasing order, and their frequencies.

    ``counts``: how many items each key stands for (default one); a frequency sums them.

    >>> [v.tolist() for v in distinct_keys(np.array([5, 1, 5, 0]))]
    [[0, 1, 5], [1, 1, 2]]
    >>> [v.tolist() for v in distinct_keys(np.array([5, 1, 5]), np.array([2, 3, 4]))]
    [[1, 5], [3, 6]]
    """
    if keys.size and keys.max() < 4 * keys.size + 2**16:
        frequency = np.bincount(keys, weights=counts)
        distinct = np.flatnonzero(frequency)
        return distinct, frequency[distinct].astype(np.int64, copy=False)
    if counts is None:
        distinct, frequency = np.unique(keys, return_counts=True)
        return distinct, frequency
    distinct, inverse = np.unique(keys, return_inverse=True)
    return distinct, np.bincount(inverse, weights=counts, minlength=distinct.size).astype(np.int64)


def distinct_rows(
    rows: np.ndarray, n_values: int | None = None, *, counts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of an int array ``(n, k)`` with values ``-1..n_values-1``, and frequencies.

    Rows come out in lexicographic order (as ``np.unique(rows, axis=0)``), so the result
    does not depend on the order of the input rows. Runs of columns are read as one
    integer in base ``n_values + 1`` (first column most significant) that fits in int64;
    one such key per row goes through :func:`distinct_keys`, several are sorted together.
    ``counts``: how many items each input row stands for (default one); a frequency sums them.

    >>> rows, freq = distinct_rows(np.array([[1, -1], [0, 2], [1, -1]]))
    >>> rows.tolist(), freq.tolist()
    ([[0, 2], [1, -1]], [1, 2])
    """
    distinct, frequency, _ = _distinct_rows(rows, n_values, counts, with_groups=False)
    return distinct, frequency


def grouped_rows(
    rows: np.ndarray, n_values: int | None = None, *, counts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`distinct_rows`, and each input row's index among the distinct rows.

    >>> rows, freq, groups = grouped_rows(np.array([[1, -1], [0, 2], [1, -1]]))
    >>> rows.tolist(), freq.tolist(), groups.tolist()
    ([[0, 2], [1, -1]], [1, 2], [1, 0, 1])
    """
    distinct, frequency, groups = _distinct_rows(rows, n_values, counts, with_groups=True)
    assert groups is not None
    return distinct, frequency, groups


def _distinct_rows(
    rows: np.ndarray, n_values: int | None, counts: np.ndarray | None, *, with_groups: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    if rows.shape[0] == 0:
        return rows, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if rows.shape[1] == 0:  # every row is the empty row
        total = rows.shape[0] if counts is None else int(np.sum(counts))
        return rows[:1], np.array([total], dtype=np.int64), np.zeros(rows.shape[0], dtype=np.int64)
    base = max(2, (int(rows.max()) + 1 if n_values is None else n_values) + 1)
    per_key = max(1, int(62 // np.log2(base)))
    if base >= 2**31:
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        weights = None if counts is None else counts
        frequency = np.bincount(inverse.ravel(), weights=weights, minlength=distinct.shape[0])
        return distinct, frequency.astype(np.int64), inverse.ravel()
    keys = [_row_keys(rows[:, start : start + per_key], base) for start in range(0, rows.shape[1], per_key)]
    if len(keys) == 1:
        distinct, frequency = distinct_keys(keys[0], counts)
        groups = np.searchsorted(distinct, keys[0]) if with_groups else None
        return _key_digits(distinct, min(per_key, rows.shape[1]), base), frequency, groups
    order = np.lexsort(keys[::-1])  # lexsort's last key is the primary one
    sorted_keys = np.stack([key[order] for key in keys], axis=1)
    starts = np.r_[True, np.any(sorted_keys[1:] != sorted_keys[:-1], axis=1)]
    first = np.flatnonzero(starts)
    if counts is None:
        frequency = np.diff(np.r_[first, rows.shape[0]])
    else:
        frequency = np.add.reduceat(np.asarray(counts, dtype=np.int64)[order], first)
    groups = None
    if with_groups:
        groups = np.empty(rows.shape[0], dtype=np.int64)
        groups[order] = np.cumsum(starts) - 1
    return rows[order[first]], frequency, groups


def _row_keys(rows: np.ndarray, base: int) -> np.ndarray:
    """One int64 per row: its values plus one as digits in ``base``, first column most significant.

    Column by column over blocks of rows that stay in cache, in int32 when the keys fit, so
    a compact (int8) matrix is read without a copy."""
    n_rows, n_columns = rows.shape
    digits = np.int64(base) ** np.arange(n_columns, dtype=np.int64)
    dtype = np.int32 if int(digits[-1]) * base < 2**31 else np.int64
    keys = np.empty(n_rows, dtype=np.int64)
    for start in range(0, n_rows, _KEY_BLOCK_ROWS):
        block = rows[start : start + _KEY_BLOCK_ROWS]
        key: np.ndarray = np.zeros(block.shape[0], dtype=dtype)
        for column in block.T:
            np.multiply(key, base, out=key)
            np.add(key, column, out=key, casting="unsafe")
        keys[start : start + block.shape[0]] = key
    return keys + int(digits.sum())


def _key_digits(keys: np.ndarray, n_columns: int, base: int) -> np.ndarray:
    """Rows ``(len(keys), n_columns)`` whose :func:`_row_keys` are ``keys``."""
    digits = np.int64(base) ** np.arange(n_columns - 1, -1, -1, dtype=np.int64)
    return np.asarray(keys[:, None] // digits % base - 1)


def distinct_features(features: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge patterns with identical per-item quantities, summing their counts.

    Rows are matched on a weighted row sum and the match is checked exactly; a collision
    (never seen in practice) falls back to sorting whole rows.

    >>> f, c = distinct_features(np.array([[1.0, 0.5], [0.0, 1.0], [1.0, 0.5]]), np.array([2, 1, 3]))
    >>> f.tolist(), c.tolist()
    ([[0.0, 1.0], [1.0, 0.5]], [1, 5])
    """
    merged, frequency, _ = grouped_features(features, counts)
    return merged, frequency


def grouped_features(features: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`distinct_features`, and each input row's index among the merged rows."""
    if features.shape[0] == 0:
        return features, counts, np.zeros(0, dtype=np.int64)
    key = _feature_key(features, np.arange(features.shape[1]))
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if not np.array_equal(features[first][inverse], features):
        _, first, inverse = np.unique(features, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    return features[first], np.bincount(inverse, weights=counts).astype(np.int64), inverse


def distinct_feature_rows(
    blocks: Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]], counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`grouped_features` of features computed in column blocks, never held whole.

    ``blocks()`` yields ``(columns, features[:, columns])`` covering every column once (it
    is called twice: keys, then the exact check). Returns the index of one representative
    row per distinct feature row, in the order of :func:`distinct_features`, the merged
    counts and each row's merged row; on a key collision nothing is merged.
    """
    key = sum((_feature_key(part, columns) for columns, part in blocks()), np.zeros(counts.size))
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if not all(np.array_equal(part[first][inverse], part) for _, part in blocks()):
        first, inverse = np.arange(counts.size), np.arange(counts.size)
    inverse = inverse.ravel()
    return first, np.bincount(inverse, weights=counts, minlength=first.size).astype(np.int64), inverse


def _feature_key(features: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """A weighted row sum of ``features`` (the columns ``columns`` of a wider row)."""
    return np.asarray(np.sum(features * np.sqrt(columns + 2.0), axis=1))


def bootstrap_sums(
    features: np.ndarray,
    counts: np.ndarray,
    n_items: int,
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Feature sums ``(n_resamples, P)`` over item resamples (docs/method.md §2, "Intervals").

    ``features`` ``(G, P)`` are per-item quantities of ``G`` kept patterns with
    ``counts``; the other ``n_items - sum(counts)`` items contribute nothing.
    """
    return ItemResample.draw(counts, n_items, n_resamples, rng).sums(features)


@dataclass(frozen=True, eq=False)
class ItemResample:
    """``n_resamples`` item resamples as multiplicities of item patterns (docs/method.md §2, "Intervals").

    ``n_items`` items are drawn with replacement; ``counts[u]`` of them share drawn pattern ``u``
    (the others belong to none). The multiplicities are drawn once, from one seed taken from the
    caller's generator, and read in blocks of rows: every reader sees the same resamples, so
    several statistics read one resample of the items (their intervals are drawn jointly). Small
    draws are held; large ones are replayed from the seed block by block (the same numbers, never
    the whole ``(B, G)`` array at once; :func:`joint_replicates` reads several statistics in one
    pass). :meth:`merged` views the same resamples through a coarser grouping of the rows: a
    group's multiplicity is the sum of its rows'. Build it with :meth:`draw`.
    """

    counts: np.ndarray  # (G,) items of each drawn pattern
    n_items: int
    n_resamples: int
    seed: int
    held: tuple[np.ndarray, ...] | None = None
    parent: ItemResample | None = None  # the view this one merges (None: the drawn patterns)
    groups: np.ndarray | None = None  # each parent row's row in this view (-1: none)
    n_rows: int = 0

    @classmethod
    def draw(
        cls, counts: np.ndarray, n_items: int, n_resamples: int, rng: int | np.random.Generator | None
    ) -> ItemResample:
        """Resamples of ``n_items`` items grouped into patterns with ``counts`` items each.

        >>> r = ItemResample.draw(np.array([3, 1]), 5, 4, 0)
        >>> w = np.concatenate(list(r.blocks()))
        >>> w.shape, bool(np.all(w.sum(axis=1) <= 5))
        ((4, 2), True)
        """
        counts = np.asarray(counts, dtype=np.int64)
        if n_resamples < 1:
            raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
        seed = int(np.random.default_rng(rng).integers(2**63))
        resample = cls(counts, int(n_items), int(n_resamples), seed, n_rows=counts.size)
        if n_resamples * counts.size > _HELD_CELLS:
            return resample
        held = tuple(resample._drawn())
        for block in held:
            block.flags.writeable = False  # shared by every reader
        return replace(resample, held=held)

    @property
    def view_counts(self) -> np.ndarray:
        """Items of each row of this view."""
        if self.parent is None or self.groups is None:
            return self.counts
        kept = self.groups >= 0
        return np.bincount(self.groups[kept], weights=self.parent.view_counts[kept], minlength=self.n_rows).astype(
            np.int64
        )

    def merged(self, groups: np.ndarray, n_rows: int) -> ItemResample:
        """These resamples over ``n_rows`` groups of this view's rows: ``groups[u]`` is row ``u``'s
        group, ``-1`` for a row no group reads.

        >>> r = ItemResample.draw(np.array([3, 1, 2]), 6, 2, 0)
        >>> m = r.merged(np.array([0, -1, 0]), 1)
        >>> w, v = np.concatenate(list(r.blocks())), np.concatenate(list(m.blocks()))
        >>> bool(np.array_equal(v[:, 0], w[:, 0] + w[:, 2])), m.view_counts.tolist()
        (True, [5])
        """
        groups = np.asarray(groups, dtype=np.int64)
        if groups.shape != (self.n_rows,):
            raise ValueError(f"groups must give each of the {self.n_rows} rows a group, got shape {groups.shape}")
        return replace(self, held=None, parent=self, groups=groups, n_rows=int(n_rows))

    def blocks(self) -> Iterator[np.ndarray]:
        """The multiplicities ``(rows, n_rows)`` of consecutive resamples, float64; a block holds at
        most about ``_BLOCK_CELLS`` drawn cells."""
        for block in self._base()._drawn_blocks():
            yield self._read(block, {})

    def replicates(self, statistic: Callable[[np.ndarray], np.ndarray], *, width: int = 0) -> np.ndarray:
        """``statistic(weights)`` on every resample (:func:`joint_replicates` of one statistic)."""
        return joint_replicates([(self, statistic, width)])[0]

    def sums(self, features: np.ndarray) -> np.ndarray:
        """Sums of the rows' ``features`` ``(n_rows, P)`` over every resample, ``(n_resamples, P)``."""
        by_feature = np.ascontiguousarray(features.T, dtype=np.float64)  # (P, G): BLAS-friendly
        out = np.zeros((self.n_resamples, features.shape[1]))
        start = 0
        for block in self.blocks():
            out[start : start + block.shape[0]] = (by_feature @ block.T).T
            start += block.shape[0]
        return out

    def _base(self) -> ItemResample:
        return self if self.parent is None else self.parent._base()

    def _drawn_blocks(self) -> Iterator[np.ndarray]:
        return iter(self.held) if self.held is not None else self._drawn()

    def _read(self, block: np.ndarray, merged: dict[int, np.ndarray]) -> np.ndarray:
        """This view of a block of drawn multiplicities; ``merged``: the views of it read so far."""
        if self.parent is None or self.groups is None:
            return block
        if id(self) not in merged:
            above = self.parent._read(block, merged)
            groups = np.where(self.groups >= 0, self.groups, self.n_rows)  # one more row for the left out
            rows = np.empty((above.shape[0], self.n_rows))
            for row, weights in zip(rows, above, strict=True):  # a bincount per row beats add.reduceat
                row[:] = np.bincount(groups, weights=weights, minlength=self.n_rows + 1)[: self.n_rows]
            merged[id(self)] = rows
        return merged[id(self)]

    def _drawn(self) -> Iterator[np.ndarray]:
        rng = np.random.default_rng(self.seed)
        block = max(1, _BLOCK_CELLS // max(1, self.counts.size))
        return resampled_multiplicities(self.counts, self.n_items, self.n_resamples, rng, block=block)


Reader = tuple[ItemResample, Callable[[np.ndarray], np.ndarray], int]
"""A view of a resample, a statistic of its weights ``(rows, n_rows)``, and the statistic's own
cells per resample (``width``, to size its pieces)."""


def joint_replicates(readers: list[Reader]) -> list[np.ndarray]:
    """Each reader's statistic on its view of one resample, ``(n_resamples, ...)`` each, in one pass
    over the drawn blocks (a replayed resample is drawn once for all; a view read by several
    readers is merged once per block). Statistics get pieces of at most ``_CHUNK_CELLS`` cells of
    ``max(n_rows, _WIDTH_COPIES * width)``."""
    base = readers[0][0]._base()
    if any(view._base() is not base for view, _, _ in readers):
        raise ValueError("joint_replicates reads views of one resample")
    out: list[list[np.ndarray]] = [[] for _ in readers]
    for block in base._drawn_blocks():
        merged: dict[int, np.ndarray] = {}
        for pieces, (view, statistic, width) in zip(out, readers, strict=True):
            weights = view._read(block, merged)
            step = max(1, _CHUNK_CELLS // max(1, view.n_rows, _WIDTH_COPIES * width))
            pieces.extend(statistic(weights[start : start + step]) for start in range(0, weights.shape[0], step))
    return [np.concatenate(pieces) for pieces in out]


def resampled_multiplicities(
    counts: np.ndarray, n_items: int, n_resamples: int, rng: np.random.Generator, *, block: int
) -> Iterator[np.ndarray]:
    """Pattern multiplicities ``(rows, G)`` (float64) of item resamples, ``block`` rows at a time.

    docs/method.md §2, "Intervals". ``counts[u]`` kept items share pattern ``u``; the other
    ``n_items - sum(counts)`` items belong to no pattern. Resampling ``n_items`` items puts
    ``Binomial(n_items, n_kept/n_items)`` draws on the kept items, split binomially between
    common patterns (more than ``_TAIL_COUNT`` items) and rare ones. The common patterns'
    ``m`` draws are :func:`_common_multiplicities`; the rare ones' are drawn item by item.
    Both are exact multinomials.
    """
    n_patterns = counts.size
    n_kept = int(counts.sum())
    if n_kept == 0:
        for start in range(0, n_resamples, block):
            yield np.zeros((min(block, n_resamples - start), n_patterns))
        return
    on_kept = rng.binomial(n_items, n_kept / n_items, size=n_resamples)
    common = counts > _TAIL_COUNT
    n_common = int(counts[common].sum())
    on_common = rng.binomial(on_kept, n_common / n_kept)
    on_rare = on_kept - on_common
    common_idx = np.flatnonzero(common)
    common_items = np.repeat(np.arange(common_idx.size, dtype=np.int32), counts[common])
    rare_items = np.repeat(np.flatnonzero(~common), counts[~common])  # each item's pattern
    for start in range(0, n_resamples, block):
        stop = min(start + block, n_resamples)
        on_common_patterns = None  # drawn first: the same stream as before rows were written whole
        if common_idx.size:
            on_common_patterns = _common_multiplicities(on_common[start:stop], counts[common], common_items, rng)
        # every row is written whole below when there are rare items (their counts are 0 on the
        # common patterns, which are then set): no zero fill, no read-modify-write
        weights = np.empty((stop - start, n_patterns)) if rare_items.size else np.zeros((stop - start, n_patterns))
        for row, n_draws in zip(weights, on_rare[start:stop], strict=True):
            if rare_items.size:  # measured faster than counting per item and summing per pattern
                # int64 picks are the same numbers as uint32 ones (one 32-bit draw each); int64 indices
                # and patterns are gathered and counted without casts (about 20% of the draw)
                picks = rng.integers(0, rare_items.size, size=n_draws, dtype=np.int64)
                row[:] = np.bincount(rare_items[picks], minlength=n_patterns)
        if on_common_patterns is not None:
            weights[:, common_idx] = on_common_patterns
        yield weights


def _common_multiplicities(
    draws: np.ndarray, counts: np.ndarray, items: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """``Multinomial(draws[b], counts / sum(counts))`` per row ``b``, exactly (docs/method.md §2).

    Independent ``Poisson(lam_b p_u)`` counts are, given their total ``T_b``, a multinomial of
    ``T_b`` draws; ``lam_b = draws[b] - sqrt(draws[b])`` keeps ``T_b`` below ``draws[b]`` in 5
    rows of 6, where the missing draws are added item by item (``items``: each item's pattern);
    a total above ``draws[b]`` loses a uniformly random subset of its draws. Either way the
    result is ``draws[b]`` independent draws (any ``lam_b`` would do; this one keeps the
    corrections small): one Poisson variate per pattern instead of numpy's conditional
    binomials, about twice as fast.
    """
    share = counts / counts.sum()
    lam = np.maximum(draws - np.sqrt(draws), 0.0)
    weights: np.ndarray = rng.poisson(lam[:, None] * share[None, :])
    missing = draws - weights.sum(axis=1)
    short = np.maximum(missing, 0)
    if short.any():
        picks = items[rng.integers(0, items.size, size=int(short.sum()))]
        rows = np.repeat(np.arange(draws.size), short)
        weights += np.bincount(rows * counts.size + picks, minlength=weights.size).reshape(weights.shape)
    for b in np.flatnonzero(missing < 0):
        dropped = rng.choice(int(weights[b].sum()), size=int(-missing[b]), replace=False, shuffle=False)
        weights[b] -= np.bincount(np.searchsorted(np.cumsum(weights[b]), dropped, side="right"), minlength=counts.size)
    return weights
