"""Item bootstraps over distinct patterns (docs/method.md §2, "Intervals").

Items that share a pattern (a row of codes, a vector of per-item sums, a table cell) are
interchangeable for every statistic, so resampling ``n`` items with replacement is a
multinomial draw of pattern multiplicities: a replicate costs a weighted sum over the
patterns, never a pass over the items.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

_CHUNK_CELLS = 500_000  # replicate cells held at once by pattern_bootstrap
_SUMS_CHUNK_CELLS = 2_000_000  # resample weights held at once by bootstrap_sums
_KEY_BLOCK_ROWS = 16_384  # rows keyed at once by distinct_rows (a block stays in cache)
_TAIL_COUNT = 10  # patterns this rare are resampled by drawing items, not by binomials

Replicates = Callable[[int, np.random.Generator], np.ndarray]
"""``replicates(n_resamples, rng)``: bootstrap replicates of a statistic, shape ``(B, ...)``."""


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
    if rows.shape[0] == 0:
        return rows, np.zeros(0, dtype=np.int64)
    if rows.shape[1] == 0:  # every row is the empty row
        return rows[:1], np.array([rows.shape[0] if counts is None else int(np.sum(counts))], dtype=np.int64)
    base = max(2, (int(rows.max()) + 1 if n_values is None else n_values) + 1)
    per_key = max(1, int(62 // np.log2(base)))
    if base >= 2**31:
        distinct, inverse = np.unique(rows, axis=0, return_inverse=True)
        weights = None if counts is None else counts
        frequency = np.bincount(inverse.ravel(), weights=weights, minlength=distinct.shape[0])
        return distinct, frequency.astype(np.int64)
    keys = [_row_keys(rows[:, start : start + per_key], base) for start in range(0, rows.shape[1], per_key)]
    if len(keys) == 1:
        distinct, frequency = distinct_keys(keys[0], counts)
        return _key_digits(distinct, min(per_key, rows.shape[1]), base), frequency
    order = np.lexsort(keys[::-1])  # lexsort's last key is the primary one
    sorted_keys = np.stack([key[order] for key in keys], axis=1)
    first = np.flatnonzero(np.r_[True, np.any(sorted_keys[1:] != sorted_keys[:-1], axis=1)])
    if counts is None:
        frequency = np.diff(np.r_[first, rows.shape[0]])
    else:
        frequency = np.add.reduceat(np.asarray(counts, dtype=np.int64)[order], first)
    return rows[order[first]], frequency


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
    if features.shape[0] == 0:
        return features, counts
    key = _feature_key(features, np.arange(features.shape[1]))
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if not np.array_equal(features[first][inverse], features):
        _, first, inverse = np.unique(features, axis=0, return_index=True, return_inverse=True)
    return features[first], np.bincount(inverse.ravel(), weights=counts).astype(np.int64)


def distinct_feature_rows(
    blocks: Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]], counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`distinct_features` of features computed in column blocks, never held whole.

    ``blocks()`` yields ``(columns, features[:, columns])`` covering every column once (it
    is called twice: keys, then the exact check). Returns the index of one representative
    row per distinct feature row, in the order of :func:`distinct_features`, and the merged
    counts; on a key collision nothing is merged.
    """
    key = sum((_feature_key(part, columns) for columns, part in blocks()), np.zeros(counts.size))
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if not all(np.array_equal(part[first][inverse], part) for _, part in blocks()):
        first, inverse = np.arange(counts.size), np.arange(counts.size)
    return first, np.bincount(inverse.ravel(), weights=counts, minlength=first.size).astype(np.int64)


def _feature_key(features: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """A weighted row sum of ``features`` (the columns ``columns`` of a wider row)."""
    return np.asarray(np.sum(features * np.sqrt(columns + 2.0), axis=1))


def pattern_bootstrap(
    statistic: Callable[[np.ndarray], np.ndarray],
    counts: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
    *,
    width: int = 0,
) -> np.ndarray:
    """``statistic(weights)`` on item resamples, weights ``(B, n_patterns)``.

    ``counts[u]`` items share pattern ``u``; drawing the ``n = sum(counts)`` items with
    replacement gives pattern multiplicities ``Multinomial(n, counts / n)``
    (:func:`resampled_multiplicities`). Resamples go in blocks of at most ``_CHUNK_CELLS``
    cells of ``max(n_patterns, width)`` (``width``: the statistic's own per-replicate
    array size).
    """
    counts = np.rint(np.asarray(counts, dtype=float)).astype(np.int64)
    block = max(1, _CHUNK_CELLS // max(1, counts.size, width))
    blocks = resampled_multiplicities(
        counts, int(counts.sum()), n_resamples, rng, block=block, dtype=np.float64
    )
    return np.concatenate([statistic(weights) for weights in blocks])


def pattern_replicates(
    patterns: np.ndarray,
    frequency: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    width: int = 0,
) -> Replicates:
    """Item-bootstrap replicates of ``statistic(patterns, weights)`` (docs/method.md §2).

    ``width``: cells per replicate of the statistic's largest array, to size the blocks.
    """

    def replicates(n_resamples: int, rng: np.random.Generator) -> np.ndarray:
        return pattern_bootstrap(
            partial(statistic, patterns), frequency, n_resamples, rng, width=width
        )

    return replicates


def bootstrap_sums(
    features: np.ndarray,
    counts: np.ndarray,
    n_items: int,
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """Feature sums ``(n_resamples, P)`` over item resamples (docs/method.md §2, "Intervals").

    ``features`` ``(G, P)`` are per-item quantities of ``G`` kept patterns with
    ``counts``; the other ``n_items - sum(counts)`` items contribute nothing (resamples
    from :func:`resampled_multiplicities`). Products run in float64, so a sum computed for a
    subset of the columns differs from the whole product by rounding (~1e-16) only, far
    inside the decision rules' tolerance (``planner.rules.TOLERANCE``).
    """
    sums = np.zeros((n_resamples, features.shape[1]))
    by_feature = np.ascontiguousarray(features.T, dtype=np.float64)  # (P, G): BLAS-friendly
    block = max(1, _SUMS_CHUNK_CELLS // max(1, counts.size))
    blocks = resampled_multiplicities(counts, n_items, n_resamples, rng, block=block, dtype=np.float64)
    for start, weights in zip(range(0, n_resamples, block), blocks, strict=True):
        sums[start : start + block] = (by_feature @ weights.T).T
    return sums


def resampled_multiplicities(
    counts: np.ndarray,
    n_items: int,
    n_resamples: int,
    rng: np.random.Generator,
    *,
    block: int,
    dtype: type[np.floating[Any]],
) -> Iterator[np.ndarray]:
    """Pattern multiplicities ``(rows, G)`` of item resamples, ``block`` rows at a time.

    docs/method.md §2, "Intervals". ``counts[u]`` kept items share pattern ``u``; the
    other ``n_items - sum(counts)`` items belong to no pattern. Resampling ``n_items``
    items puts ``Binomial(n_items, n_kept/n_items)`` draws on the kept items; those split
    multinomially over patterns. Common patterns get their multiplicities by binomial
    splitting, rare ones (at most ``_TAIL_COUNT`` items) by drawing items, which is the
    same multinomial at a lower cost when most patterns are rare.
    """
    n_patterns = counts.size
    n_kept = int(counts.sum())
    if n_kept == 0:
        for start in range(0, n_resamples, block):
            yield np.zeros((min(block, n_resamples - start), n_patterns), dtype=dtype)
        return
    on_kept = rng.binomial(n_items, n_kept / n_items, size=n_resamples)
    common = counts > _TAIL_COUNT
    n_common = int(counts[common].sum())
    on_common = rng.binomial(on_kept, n_common / n_kept)
    on_rare = on_kept - on_common
    common_idx = np.flatnonzero(common)
    common_p = counts[common] / max(n_common, 1)
    rare_items = np.repeat(np.flatnonzero(~common), counts[~common])
    for start in range(0, n_resamples, block):
        stop = min(start + block, n_resamples)
        weights = np.zeros((stop - start, n_patterns), dtype=dtype)
        if common_idx.size:
            weights[:, common_idx] = rng.multinomial(on_common[start:stop], common_p)
        for row, n_draws in zip(weights, on_rare[start:stop], strict=True):
            if rare_items.size:
                picks = rng.integers(0, rare_items.size, size=n_draws, dtype=np.uint32)
                row += np.bincount(rare_items[picks], minlength=n_patterns)
        yield weights
