"""Agreement by rater pair: the pairwise table, the mean pairwise kappa and the summary table (docs/method.md §2).

Codes as in ``planner.agreement``: ``(n_items, n_raters)`` integers, ``-1`` for missing. Each pair's
table is read from the item patterns at once (sparse products), and its resamples from the same
multinomial pattern draws as the other coefficients.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import numpy as np

from planner.agreement import (
    ac1_from_counts,
    alpha_from_counts,
    codes_iv,
    cohen_from_table,
    kept_rows,
    pabak_from_table,
    percent_from_counts,
    percent_from_table,
    scott_from_table,
    values_iv,
    weights_iv,
)
from planner.agreement_results import (
    AgreementResult,
    Estimate,
    MeanKappaResult,
    PairwiseResult,
    Resampling,
    Rng,
    Scale,
    Weights,
    check_interval_options,
    on_patterns,
)
from planner.patterns import item_patterns
from planner.resampling import ItemResample, distinct_rows, joint_replicates
from planner.tables import (
    agreement_weights,
    cell_kappas,
    grouped_count_patterns,
)

# summary_table reads its figures from one stacked product from this many patterns on (the merge
# of every resample into count patterns row by row costs resamples x patterns; below ~2,000 patterns
# it was cheaper than building and reading the stacked map: 0.086 vs 0.11 s at 384 patterns)
_STACKED_ROWS = 2048
_TRANSPOSE_COLUMNS = 2048  # patterns transposed at once by _transposed (a block of resamples stays in cache)


# --------------------------------------------------------------------------- rater pairs


def _rater_pairs(n_raters: int) -> list[tuple[int, int]]:
    return [(j, k) for j in range(n_raters) for k in range(j + 1, n_raters)]


def _rater_pair_cells(rows: np.ndarray, n_labels: int, rater: int) -> Any:
    """Which cell of each pair ``(rater, k > rater)`` every row fills.

    A sparse 0/1 matrix ``((n_raters - 1 - rater) * L * L, n_rows)``: entry
    ``(pair * L * L + c_j * L + c_k, row)`` is 1 when the row has codes ``c_j``, ``c_k``. Rows
    ``rater`` did not label are empty columns, so a product takes the weights of every row
    as they are (no gathering of the labeled rows' weights for each block of resamples).
    """
    from scipy.sparse import csc_array  # deferred: scipy.sparse costs 0.6 s at import

    labeled = np.flatnonzero(rows[:, rater] >= 0)
    others = rows[labeled, rater + 1 :].astype(np.int32)
    both = others >= 0
    per_row = both.sum(axis=1)
    size = np.int32(n_labels**2)
    pair = np.broadcast_to(np.arange(others.shape[1], dtype=np.int32) * size, others.shape)[both]
    own = np.repeat(rows[labeled, rater].astype(np.int32) * np.int32(n_labels), per_row)
    cell = pair + own + others[both]  # row-major: grouped by row, as CSC columns
    per_column = np.zeros(rows.shape[0] + 1, dtype=np.int32)
    per_column[labeled + 1] = per_row
    shape = (others.shape[1] * n_labels**2, rows.shape[0])
    ones = np.ones(cell.size, dtype=np.float32)  # 0/1 entries; products exact below 2**24 (_pair_tables)
    return csc_array((ones, cell, np.cumsum(per_column, dtype=np.int32)), shape=shape)


def _held_pair_cells(rows: np.ndarray, n_labels: int) -> Any | None:
    """Every rater's :func:`_rater_pair_cells` stacked into one sparse matrix (one product then reads
    the weights once), or None when they would hold more entries than twice the cells of ``rows``
    (they are then rebuilt for each block of resamples).

    Built in CSC order directly: rows with ``m`` labels are taken together, their labeled raters in
    order ``(n, m)``, and each pair of positions ``p < q`` gives the pair ``(j, k)`` of every row; a
    row's pairs come out in increasing cell order, written at the row's column offset.
    """
    from scipy.sparse import csc_array  # deferred, as in _rater_pair_cells

    labeled = rows >= 0
    per_row = np.sum(labeled, axis=1)
    per_column = per_row * (per_row - 1) // 2
    if np.sum(per_column) > 2 * rows.size or rows.shape[1] < 2:
        return None
    n_raters, size = rows.shape[1], n_labels**2
    indptr = np.r_[0, np.cumsum(per_column)]
    index = np.int32 if max(int(indptr[-1]), n_raters**2 * size) < 2**31 else np.int64  # scipy's own choice
    indptr, cell = indptr.astype(index), np.empty(int(indptr[-1]), dtype=index)
    for m in np.unique(per_row[per_row >= 2]):
        members = np.flatnonzero(per_row == m)
        raters = np.nonzero(labeled[members])[1].reshape(-1, m)  # each row's labeled raters, in order
        codes = rows[members[:, None], raters].astype(np.int64)
        first, second = np.triu_indices(m, 1)  # position pairs in lexicographic order: cells increase
        j, k = raters[:, first], raters[:, second]
        pair = j * (2 * n_raters - j - 1) // 2 + (k - j - 1)  # the pair's index in _rater_pairs order
        at = indptr[members][:, None] + np.arange(first.size)
        cell[at] = pair * size + codes[:, first] * n_labels + codes[:, second]
    shape = (n_raters * (n_raters - 1) // 2 * size, rows.shape[0])
    ones = np.ones(cell.size, dtype=np.float32)  # as _rater_pair_cells
    return csc_array((ones, cell, indptr), shape=shape)


def _transposed(weights: np.ndarray, dtype: type) -> np.ndarray:
    """``weights.T`` as a contiguous ``dtype`` array, copied in column blocks that stay in cache
    (one transposing copy of a block of resamples x 100,000 patterns was 3x slower)."""
    out: np.ndarray = np.empty(weights.shape[::-1], dtype=dtype)
    for start in range(0, weights.shape[1], _TRANSPOSE_COLUMNS):
        out[start : start + _TRANSPOSE_COLUMNS] = weights[:, start : start + _TRANSPOSE_COLUMNS].T
    return out


def _pair_tables(
    rows: np.ndarray,
    weights: np.ndarray,
    n_labels: int,
    held: Any | None = None,
) -> np.ndarray:
    """Common-item tables ``(B, n_pairs, L, L)`` of every rater pair ``j < k`` (docs/method.md §2).

    ``rows``: distinct code rows, weighted by item counts ``weights`` ``(B, n_rows)``. One sparse
    product per rater ``j`` sums the tables of its pairs ``(j, k > j)``, so nothing of size
    ``rows x pairs`` is held; ``held``: :func:`_held_pair_cells` of ``rows``, if kept (one product).
    """
    # the weights are item counts (whole numbers): sums exact in float32 below 2**24, and twice as fast
    exact = float(np.max(weights.sum(axis=1), initial=0.0)) < 2**24
    by_row = _transposed(weights, np.float32 if exact else np.float64)
    if held is not None:
        return np.asarray(held @ by_row).T.reshape(weights.shape[0], -1, n_labels, n_labels).astype(float)
    n_raters = rows.shape[1]
    tables = np.zeros((weights.shape[0], n_raters * (n_raters - 1) // 2 * n_labels**2))
    start = 0
    for j in range(n_raters - 1):
        cells = _rater_pair_cells(rows, n_labels, j)
        stop = start + cells.shape[0]
        tables[:, start:stop] = np.asarray(cells @ by_row).T
        start = stop
    return tables.reshape(weights.shape[0], -1, n_labels, n_labels)


_PAIR_COEFFICIENTS: dict[str, Callable[..., AgreementResult]] = {
    "cohen_kappa": cohen_from_table,
    "scott_pi": scott_from_table,
    "pabak": pabak_from_table,
    "percent_agreement": percent_from_table,
}


def pairwise(
    codes: object,
    *,
    n_labels: int,
    coefficient: Literal["cohen_kappa", "scott_pi", "pabak", "percent_agreement"] = "cohen_kappa",
    weights: Weights = None,
) -> PairwiseResult:
    """A two-rater coefficient over all rater pairs, with each pair's overlap (docs/method.md §2).

    ``weights`` applies to ``coefficient="cohen_kappa"`` only.

    >>> codes = [[0, 0, 1], [1, 1, -1], [0, 1, 1], [1, 1, 0]]
    >>> r = pairwise(codes, n_labels=2, coefficient="percent_agreement")
    >>> float(r.statistic[0, 1]), int(r.n_items[0, 2]), int(r.n_items[2, 2])
    (0.75, 3, 3)
    """
    if coefficient not in _PAIR_COEFFICIENTS:
        raise ValueError(f"coefficient must be one of {sorted(_PAIR_COEFFICIENTS)}, got {coefficient!r}")
    weights_iv(weights)
    if weights is not None and coefficient != "cohen_kappa":
        raise ValueError("weights= applies to coefficient='cohen_kappa' only")
    arr = codes_iv(codes, n_labels)
    rows, frequency = distinct_rows(arr, n_labels)
    n_raters = arr.shape[1]
    pairs = _rater_pairs(n_raters)
    tables = np.rint(_pair_tables(rows, frequency[None].astype(float), n_labels)[0])
    tables = tables.astype(np.int64)
    build = _PAIR_COEFFICIENTS[coefficient]
    if coefficient == "cohen_kappa":  # the only coefficient with weights
        build = partial(cohen_from_table, weights=weights)
    results = {pair: build(table, int(table.sum())) for pair, table in zip(pairs, tables)}
    statistic = np.full((n_raters, n_raters), np.nan)
    n_items = np.diag(frequency @ (rows >= 0))
    defined = np.zeros((n_raters, n_raters), dtype=bool)
    reason = np.full((n_raters, n_raters), "same rater", dtype=object)
    for (j, k), result in results.items():
        for row, col in ((j, k), (k, j)):
            statistic[row, col] = result.statistic
            n_items[row, col] = result.n_items
            defined[row, col] = result.defined
            reason[row, col] = result.reason
    return PairwiseResult(coefficient, statistic, n_items, defined, reason, results)


def _mean_kappa_terms(
    rows: np.ndarray,
    weights: np.ndarray,
    *,
    n_labels: int,
    agree: np.ndarray,
    held: Any | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Overlap-weighted mean of the defined pairwise kappas, and how many pairs are defined.

    ``weights`` ``(B, n_rows)`` weigh the distinct code ``rows`` (``held``: see :func:`_pair_tables`).
    """
    return _mean_kappa_of_tables(_pair_tables(rows, weights, n_labels, held), n_labels, agree)


def _mean_kappa_of_tables(tables: np.ndarray, n_labels: int, agree: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_mean_kappa_terms` of the pair tables ``(B, n_pairs, L, L)``."""
    overlap = tables.sum(axis=(2, 3))
    tables, overlap = tables[:, overlap.any(axis=0)], overlap[:, overlap.any(axis=0)]  # kappa NaN
    batch, n_pairs = tables.shape[:2]
    kappa = cell_kappas(tables.reshape(-1, n_labels**2), agree).reshape(batch, n_pairs)
    usable = np.isfinite(kappa)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(usable, overlap, 0.0).sum(axis=1)
        return np.where(usable, kappa * overlap, 0.0).sum(axis=1) / total, usable.sum(axis=1)


def _mean_kappa_from_patterns(
    rows: np.ndarray, frequency: np.ndarray, n_labels: int, weights: Weights
) -> MeanKappaResult:
    pairable = (rows >= 0).sum(axis=1) >= 2
    source = None
    if not pairable.all():  # otherwise keep the patterns' own rows: no copy
        rows, frequency, source = rows[pairable], frequency[pairable], kept_rows(pairable)
    agree = agreement_weights(n_labels, weights)
    held = _held_pair_cells(rows, n_labels)
    terms = partial(_mean_kappa_terms, n_labels=n_labels, agree=agree, held=held)

    def of_cells(cells: np.ndarray) -> np.ndarray:
        return _mean_kappa_of_tables(cells.reshape(cells.shape[0], -1, n_labels, n_labels), n_labels, agree)[0]

    if rows.shape[0]:
        mean, n_pairs = (x[0] for x in terms(rows, frequency[None].astype(float)))
    else:
        mean, n_pairs = np.nan, 0
    if rows.shape[0] == 0:
        reason = "no two raters labeled a common item"
    elif n_pairs == 0:
        reason = "no rater pair has a defined kappa (each pair lacks common items or has a one-category rater)"
    else:
        reason = ""
    return MeanKappaResult(
        coefficient="mean_pairwise_kappa",
        statistic=float(mean),
        n_items=int(frequency.sum()),
        defined=not reason,
        reason=reason,
        n_pairs=int(n_pairs),
        weights=weights,
        _resampling=on_patterns(
            rows,
            frequency,
            lambda r, w: terms(r, w)[0],
            np.bincount(
                rows[rows >= 0], weights=np.broadcast_to(frequency[:, None], rows.shape)[rows >= 0], minlength=n_labels
            ),
            width=len(_rater_pairs(rows.shape[1])) * n_labels**2,
            source=source,
            cells=None if held is None else (held, of_cells),
        ),
    )


def mean_pairwise_kappa(codes: object, *, n_labels: int, weights: Weights = None) -> MeanKappaResult:
    """Overlap-weighted mean of pairwise Cohen's kappa over all rater pairs (docs/method.md §2).

    ``sum_jk m_jk kappa_jk / sum_jk m_jk`` over the pairs whose kappa is defined
    (``m_jk`` = common items); undefined pairs are left out, never averaged in as 0.
    The bootstrap resamples whole items, so all pairs move together.

    >>> codes = [[0, 0, 1], [1, 1, -1], [0, 1, 1], [1, 1, 0]]
    >>> r = mean_pairwise_kappa(codes, n_labels=2)
    >>> round(r.statistic, 4), r.n_pairs
    (-0.19, 3)
    """
    weights_iv(weights)
    return _mean_kappa_from_patterns(*distinct_rows(codes_iv(codes, n_labels), n_labels), n_labels, weights)


_SCALE_WEIGHTS: dict[str, Weights] = {"nominal": None, "ordinal": "linear", "interval": "quadratic"}


def summary_table(
    codes: object,
    *,
    n_labels: int,
    scale: Scale = "nominal",
    values: object = None,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    rng: Rng = None,
    resample: ItemResample | None = None,
) -> dict[str, Estimate]:
    """The agreement figures reported for a whole matrix, with bootstrap intervals (docs/method.md §2).

    Keys: ``"po"`` (:func:`percent_agreement`), ``"kappa"`` (:func:`mean_pairwise_kappa`:
    overlap-weighted mean of pairwise Cohen's kappa; unweighted for ``scale="nominal"``,
    linear weights for ``"ordinal"``, quadratic for ``"interval"``, on code positions),
    ``"alpha"`` (:func:`krippendorff_alpha` at the scale's level; ``values`` for
    ``"interval"`` only) and ``"ac1"`` (:func:`gwet_ac1`). Intervals are item bootstraps at
    ``confidence_level``, BCa where they are approximate and percentile otherwise
    (``confidence_interval(method="bootstrap")``); undefined figures get a NaN interval. All four
    read one resample of the items: ``resample`` (``planner.resampling.ItemResample`` over the
    rows of ``item_patterns(codes, n_labels)``, e.g. shared with other statistics) or
    ``n_resamples`` drawn from ``rng``. Each figure's resamples are those of the items it uses, so
    their number varies from resample to resample (a figure's own ``confidence_interval`` keeps
    it fixed).

    >>> codes = [[0, 0, 0], [0, 1, -1], [1, 1, 1], [0, 1, 1]]
    >>> table = summary_table(codes, n_labels=2, n_resamples=200, rng=0)
    >>> sorted(table), round(table["alpha"].result.statistic, 6)
    (['ac1', 'alpha', 'kappa', 'po'], 0.333333)
    """
    if scale not in _SCALE_WEIGHTS:
        raise ValueError(f"scale must be 'nominal', 'ordinal' or 'interval', got {scale!r}")
    check_interval_options(confidence_level, "bootstrap", n_resamples)
    alpha_values = values_iv(scale, values, n_labels)
    patterns = item_patterns(codes, n_labels)
    if resample is None:
        resample = ItemResample.draw(patterns.counts, patterns.n_items, n_resamples, rng)
    elif not np.array_equal(resample.view_counts, patterns.counts):
        raise ValueError("resample must be drawn over the item patterns of codes")
    if patterns.inclusion is not None:  # rows repeat across inclusion groups: merge them
        patterns, merged = patterns.grouped(list(range(patterns.n_raters)))
        resample = resample.merged(merged, patterns.counts.size)
    counts, frequency, to_counts = grouped_count_patterns(patterns.rows, n_labels, patterns.counts)
    by_counts = resample.merged(to_counts, frequency.size)
    results = {
        "po": percent_from_counts(counts, frequency),
        "kappa": _mean_kappa_from_patterns(patterns.rows, patterns.counts, n_labels, _SCALE_WEIGHTS[scale]),
        "alpha": alpha_from_counts(counts, frequency, scale, alpha_values),
        "ac1": ac1_from_counts(counts, frequency),
    }
    defined = [key for key, result in results.items() if result.defined]
    stacked = resample.n_rows >= _STACKED_ROWS and "kappa" in defined
    if stacked and results["kappa"]._resampling.cells is not None:
        merges = {key: None if key == "kappa" else to_counts for key in defined}
        drawn = dict(
            zip(
                defined,
                _summed_replicates(resample, [(results[key]._resampling, merges[key]) for key in defined]),
                strict=True,
            )
        )
    else:
        readers = [results[key]._resampling.reader(resample if key == "kappa" else by_counts) for key in defined]
        drawn = dict(zip(defined, joint_replicates(readers) if readers else [], strict=True))
    return {
        key: Estimate(result, result._interval(confidence_level, "bootstrap", partial(drawn.__getitem__, key)))
        for key, result in results.items()
    }


def _summed_replicates(resample: ItemResample, parts: list[tuple[Resampling, np.ndarray | None]]) -> list[np.ndarray]:
    """Each part's statistic on every resample of ``resample``'s rows, from one sparse product of
    the weights (docs/method.md §2, "Intervals"). A part is a result's resampling and the
    result's row of each of ``resample``'s rows (None: they are its rows). The part's sums (its
    ``cells``, else its rows' weights) are stacked in one map of ``resample``'s rows: the weights
    are transposed once per block and read once, instead of merged per part and row by row."""
    from scipy.sparse import csc_array, eye_array, vstack  # deferred, as in _rater_pair_cells

    n_rows = resample.n_rows
    maps, statistics = [], []
    for part, merge in parts:
        rows = np.arange(n_rows) if merge is None else merge
        if part.source is not None:  # the part's own rows: some left out (-1) or merged
            rows = np.where(rows >= 0, part.source[np.maximum(rows, 0)], -1)
        identity = merge is None and part.source is None
        if not identity:
            kept = np.flatnonzero(rows >= 0)
            ones = np.ones(kept.size, dtype=np.float32)
            to_part = csc_array((ones, (rows[kept], kept)), shape=(part.counts.size, n_rows))
        if part.cells is None:
            maps.append(eye_array(n_rows, dtype=np.float32, format="csc") if identity else to_part)
            statistics.append(part.statistic)
        else:
            maps.append(part.cells[0] if identity else csc_array(part.cells[0] @ to_part))
            statistics.append(part.cells[1])
    # multiplicities are whole numbers summing to at most n_items: float32 sums are exact below 2**24
    dtype = np.float32 if resample.n_items < 2**24 else np.float64
    stacked = csc_array(vstack(maps, format="csc", dtype=dtype))
    bounds = np.cumsum([0] + [m.shape[0] for m in maps])

    def replicates(weights: np.ndarray) -> np.ndarray:
        sums = np.asarray(stacked @ _transposed(weights, dtype)).T
        return np.stack(
            [
                statistic(np.ascontiguousarray(sums[:, a:b], dtype=float))
                for statistic, a, b in zip(statistics, bounds[:-1], bounds[1:], strict=True)
            ],
            axis=1,
        )

    drawn = resample.replicates(replicates, width=int(bounds[-1]))
    return [np.ascontiguousarray(column) for column in drawn.T]  # as joint_replicates: each contiguous
