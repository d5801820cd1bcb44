"""Count tables and the vectorised formulas of docs/method.md §2 behind ``planner.agreement``.

Every ``*_terms`` function evaluates a coefficient on a batch of ``B`` replicates at once:
either ``B`` contingency tables ``(B, L, L)``, or per-item category counts ``(U, L)``
(one row per distinct item pattern) with item weights ``(B, U)`` (pattern multiplicities
of a bootstrap replicate; all ones for the point estimate). A replicate where the
coefficient is undefined gets NaN. No array of shape ``(n_items, L, L)`` is ever built.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from planner.resampling import distinct_keys, distinct_rows

LevelOfMeasurement = Literal["nominal", "ordinal", "interval", "ratio"]


def item_counts(codes: np.ndarray, n_labels: int) -> np.ndarray:
    """Per-item category counts ``(n_items, L)`` of codes ``(n_items, n_raters)``, -1 skipped."""
    n_items = codes.shape[0]
    counts = np.zeros((n_items, n_labels + 1), dtype=np.int64)
    rows = np.arange(n_items)
    for column in codes.T:  # loop over raters (few), vectorised over items
        counts[rows, column + 1] += 1
    return counts[:, 1:]


def count_patterns(codes: np.ndarray, n_labels: int, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Distinct per-item count vectors ``(U, L)`` of ``codes (n_items, n_raters)``, and frequencies.

    ``counts``: how many items each row of ``codes`` stands for (default one).

    An item's counts are read as the digits of one integer in base ``n_raters + 1`` (a
    table lookup and a row sum: one pass over the matrix). When that integer would not fit
    in int64 (many labels), items are grouped by their sorted codes (the same multiset of
    labels), which keeps memory at the size of ``codes``.
    """
    distinct, frequency, _ = _count_patterns(codes, n_labels, counts, with_groups=False)
    return distinct, frequency


def _count_patterns(
    codes: np.ndarray, n_labels: int, counts: np.ndarray | None, *, with_groups: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    base = codes.shape[1] + 1
    if n_labels * np.log2(base) >= 62:
        multisets, frequency = distinct_rows(np.sort(codes, axis=1), n_labels, counts=counts)
        return item_counts(multisets, n_labels), frequency, None
    place = np.append(np.int64(base) ** np.arange(n_labels, dtype=np.int64), 0)  # -1 picks 0
    keys = np.einsum("ij->i", place[codes])
    distinct, frequency = distinct_keys(keys, counts)
    groups = np.searchsorted(distinct, keys) if with_groups else None  # each row's count vector
    return distinct[:, None] // place[:-1] % base, frequency, groups


def grouped_count_patterns(
    codes: np.ndarray, n_labels: int, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`count_patterns` of distinct code rows ``codes`` with ``counts`` items each, and each
    row's index among the count vectors (what merges the rows' resamples into theirs).

    >>> c, f, groups = grouped_count_patterns(np.array([[0, 1], [1, 0], [1, 1]]), 2, np.array([2, 3, 4]))
    >>> c.tolist(), f.tolist(), groups.tolist()
    ([[1, 1], [0, 2]], [5, 4], [0, 0, 1])
    """
    distinct, frequency, groups = _count_patterns(codes, n_labels, counts, with_groups=True)
    if groups is not None:
        return distinct, frequency, groups
    _, groups = np.unique(  # many labels: count vectors matched whole
        np.concatenate([distinct, item_counts(codes, n_labels)]), axis=0, return_inverse=True
    )
    groups = groups.ravel()
    return distinct, frequency, np.argsort(groups[: distinct.shape[0]])[groups[distinct.shape[0] :]]


def pair_table(a: np.ndarray, b: np.ndarray, n_labels: int) -> np.ndarray:
    """``L x L`` counts of paired codes, rows ``a`` (no missing codes allowed here)."""
    return np.bincount(a * n_labels + b, minlength=n_labels**2).reshape(n_labels, n_labels)


def agreement_weights(n_labels: int, weights: str | None) -> np.ndarray:
    """Agreement weights ``1 - w_ab``, ``w`` linear or quadratic (docs/method.md §2, Cohen 1968)."""
    if weights is None:
        return np.eye(n_labels)
    gap = np.abs(np.subtract.outer(np.arange(n_labels), np.arange(n_labels))) / (n_labels - 1)
    return 1.0 - (gap if weights == "linear" else gap**2)


def _proportions(tables: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(tables / tables.sum(axis=(1, 2))[:, None, None], dtype=float)


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` with NaN where ``den`` is 0 (undefined, never 0).

    >>> ratio(np.array([1.0, 1.0]), np.array([2.0, 0.0])).tolist()
    [0.5, nan]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan), dtype=float)


def two_rater_coefficient(agree: np.ndarray, row: np.ndarray, col: np.ndarray, coefficient: str) -> np.ndarray:
    """Two-rater kappa, nominal alpha or AC1 from sufficient sums (docs/method.md §2).

    ``agree`` is the number of agreeing common items, ``row``/``col`` the two raters'
    category counts on them (last axis ``L``); leading axes broadcast. kappa
    ``(n a - sum r c) / (n^2 - sum r c)`` (Cohen 1960); alpha
    ``1 - 2 (n - a)(2n - 1) / ((2n)^2 - sum (r + c)^2)`` (coincidences of two raters);
    AC1 ``(a/n - p_e) / (1 - p_e)``, ``p_e = sum pbar (1 - pbar) / (L - 1)`` (Gwet 2008).
    NaN where the coefficient is undefined (zero denominator).

    >>> table = np.array([[91, 4], [4, 1]])
    >>> args = np.trace(table), table.sum(axis=1), table.sum(axis=0)
    >>> [round(float(two_rater_coefficient(*args, c)), 3) for c in ("kappa", "ac1")]
    [0.158, 0.912]
    """
    n = row.sum(axis=-1)
    if coefficient == "kappa":
        chance = np.sum(row * col, axis=-1)
        return ratio(n * agree - chance, n * n - chance)
    if coefficient == "alpha":
        pairable = 2.0 * n
        expected = pairable * pairable - np.sum((row + col) ** 2, axis=-1)
        return 1.0 - ratio(2.0 * (n - agree) * (pairable - 1.0), expected)
    pbar = ratio(row + col, 2.0 * n[..., None])
    chance = np.sum(pbar * (1.0 - pbar), axis=-1) / (row.shape[-1] - 1)
    return ratio(ratio(agree, n) - chance, 1.0 - chance)


def _one_category(margins: np.ndarray) -> np.ndarray:
    """Whether each row of ``margins`` ``(B, L)`` has at most one non-zero category (exact)."""
    return np.asarray(np.count_nonzero(margins, axis=1) <= 1)


def kappa_terms(tables: np.ndarray, agree: np.ndarray) -> tuple[np.ndarray, ...]:
    """Cohen's (weighted) kappa, ``p_o``, ``p_e`` of tables ``(B, L, L)`` (docs/method.md §2).

    NaN when the table is empty or a rater used one category (kappa is then 0 whatever
    the other rater did).
    """
    p = _proportions(tables)
    rows, cols = p.sum(axis=2), p.sum(axis=1)
    p_o = np.einsum("bij,ij->b", p, agree)
    p_e = np.einsum("bi,ij,bj->b", rows, agree, cols)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = (p_o - p_e) / (1.0 - p_e)
    kappa[_one_category(tables.sum(axis=2)) | _one_category(tables.sum(axis=1))] = np.nan
    return kappa, p_o, p_e


def cell_kappas(cells: np.ndarray, agree: np.ndarray) -> np.ndarray:
    """Cohen's (weighted) kappa of tables given as rows of their ``L * L`` cells ``(N, L * L)``, row-major.

    :func:`kappa_terms`' kappa (docs/method.md §2), NaN where it is, computed from the cell
    counts by small products (one division at the end instead of proportions first; the same
    value up to float rounding, ~1e-16): the mean pairwise kappa reads a million tables per
    1,000 resamples of 50 raters, where reductions over axes of length ``L`` dominated.
    """
    n_labels = agree.shape[0]
    eye = np.eye(n_labels)
    row_sums, col_sums = cells @ np.repeat(eye, n_labels, axis=0), cells @ np.tile(eye, (n_labels, 1))  # (N, L)
    ones = np.ones(n_labels)
    n = row_sums @ ones
    agreeing = cells @ agree.ravel()
    chance = ((row_sums @ agree) * col_sums) @ ones  # sum_ij r_i w_ij c_j
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = (n * agreeing - chance) / (n * n - chance)
    one_category = ((row_sums > 0) @ ones <= 1) | ((col_sums > 0) @ ones <= 1)
    return np.asarray(np.where(one_category, np.nan, kappa))


def fce_variance(p: np.ndarray, agree: np.ndarray, p_o: float, p_e: float, n: int) -> float:
    """Fleiss, Cohen & Everitt (1969) variance of (weighted) kappa (docs/method.md §2, Cohen's kappa)."""
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    row_mean = agree @ cols  # wbar_i. = sum_j p_.j w_ij
    col_mean = rows @ agree  # wbar_.j = sum_i p_i. w_ij
    g = agree * (1.0 - p_e) - np.add.outer(row_mean, col_mean) * (1.0 - p_o)
    spread = np.sum(p * g**2) - (p_o * p_e - 2.0 * p_e + p_o) ** 2
    return float(max(spread, 0.0) / (n * (1.0 - p_e) ** 4))


def scott_terms(tables: np.ndarray) -> tuple[np.ndarray, ...]:
    """Scott's pi, ``p_o``, ``p_e = sum pbar^2`` with pooled marginals (docs/method.md §2)."""
    p = _proportions(tables)
    pooled = (p.sum(axis=2) + p.sum(axis=1)) / 2.0
    p_o = np.trace(p, axis1=1, axis2=2)
    p_e = np.sum(pooled**2, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pi = (p_o - p_e) / (1.0 - p_e)
    pi[_one_category(tables.sum(axis=2) + tables.sum(axis=1))] = np.nan
    return pi, p_o, p_e


def pabak_terms(tables: np.ndarray) -> tuple[np.ndarray, ...]:
    """PABAK ``(L p_o - 1)/(L - 1)``, ``p_o``, ``p_e = 1/L`` (docs/method.md §2, Byrt et al. 1993)."""
    n_labels = tables.shape[1]
    p = _proportions(tables)
    p_o = np.trace(p, axis1=1, axis2=2)
    return (n_labels * p_o - 1.0) / (n_labels - 1.0), p_o, np.full_like(p_o, 1.0 / n_labels)


def phi_terms(tables: np.ndarray) -> tuple[np.ndarray, ...]:
    """Phi of 2x2 tables, and both raters' positive rates (docs/method.md §2, binary verdicts)."""
    p = _proportions(tables)
    pos_a, pos_b = p[:, 1, :].sum(axis=1), p[:, :, 1].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        phi = (p[:, 1, 1] - pos_a * pos_b) / np.sqrt(pos_a * (1 - pos_a) * pos_b * (1 - pos_b))
    phi[_one_category(tables.sum(axis=2)) | _one_category(tables.sum(axis=1))] = np.nan
    return phi, pos_a, pos_b


def percent_terms(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Mean over items with >= 2 ratings of the share of agreeing rating pairs (docs/method.md §2)."""
    rated = counts.sum(axis=1)
    pairable = rated >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(pairable, (counts * (counts - 1)).sum(axis=1) / (rated * (rated - 1)), 0.0)
        return np.asarray((weights @ share) / (weights @ pairable.astype(float)), dtype=float)


def ac1_terms(counts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Gwet's AC1, ``p_o``, ``p_e``, multi-rater form with missing ratings (docs/method.md §2)."""
    n_labels = counts.shape[1]
    rated = counts.sum(axis=1)
    p_o = percent_terms(counts, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = counts / rated[:, None]
        pbar = (weights @ shares) / (weights @ (rated >= 1).astype(float))[:, None]
        p_e = np.sum(pbar * (1.0 - pbar), axis=1) / (n_labels - 1)
        return (p_o - p_e) / (1.0 - p_e), p_o, p_e


def fleiss_terms(counts: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Fleiss' kappa, ``Pbar``, ``Pbar_e``; items share one number of ratings (docs/method.md §2)."""
    per_item = int(counts[0].sum())
    agreement = ((counts**2).sum(axis=1) - per_item) / (per_item * (per_item - 1))
    n_items = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = (weights @ agreement) / n_items
        shares = (weights @ counts) / (n_items * per_item)[:, None]
        p_e = np.sum(shares**2, axis=1)
        kappa = (p_o - p_e) / (1.0 - p_e)
    kappa[_one_category(weights @ counts)] = np.nan
    return kappa, p_o, p_e


def coincidences(counts: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Coincidence matrices ``(B, L, L)`` (docs/method.md §2, Krippendorff's alpha).

    Unit ``u`` with ``n_u >= 2`` values adds ``(n_uc n_uk - 1[c=k] n_uc) / (n_u - 1)``;
    ``counts`` must hold pairable units only.
    """
    n_labels = counts.shape[1]
    values = counts.astype(float)  # float matrix products go to BLAS; int ones do not
    scaled = weights / (values.sum(axis=1) - 1.0)
    out = np.empty((weights.shape[0], n_labels, n_labels))
    for c in range(n_labels):  # L matrix products; never a (units, L, L) array
        out[:, c, :] = (scaled * values[:, c]) @ values
    out[:, np.arange(n_labels), np.arange(n_labels)] -= scaled @ values
    return out


def distances(level_of_measurement: LevelOfMeasurement, values: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Squared distances ``delta_ck`` ``(B, L, L)`` of Krippendorff's metrics (docs/method.md §2).

    ``totals`` ``(B, L)`` are the pairable value counts ``n_c`` the ordinal metric uses.
    """
    n_labels = values.size
    if level_of_measurement == "nominal":
        return (1.0 - np.eye(n_labels))[None]
    gap = np.subtract.outer(values, values)
    if level_of_measurement == "interval":
        return np.asarray(gap**2, dtype=float)[None]
    if level_of_measurement == "ratio":
        total = np.add.outer(values, values)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(gap == 0, 0.0, (gap / total) ** 2)[None]
    index = np.arange(n_labels)
    low, high = np.minimum.outer(index, index), np.maximum.outer(index, index)
    cumulative = np.cumsum(totals, axis=1)
    between = cumulative[:, high] - cumulative[:, low] + totals[:, low]
    return np.asarray((between - (totals[:, :, None] + totals[:, None, :]) / 2.0) ** 2, dtype=float)


def alpha_terms(
    counts: np.ndarray, weights: np.ndarray, level_of_measurement: LevelOfMeasurement, values: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Krippendorff's alpha ``1 - D_o/D_e``, ``D_o``, ``D_e``, ``N`` (docs/method.md §2).

    ``counts``: pairable units only. NaN when no unit is pairable or ``D_e = 0``.
    """
    observed = coincidences(counts, weights)
    totals = weights @ counts  # n_c: each pairable value counted once
    n_values = totals.sum(axis=1)
    delta = distances(level_of_measurement, values, totals)
    with np.errstate(invalid="ignore", divide="ignore"):
        d_o = np.sum(delta * observed, axis=(1, 2)) / n_values
        expected = np.einsum("bck,bc,bk->b", np.broadcast_to(delta, observed.shape), totals, totals)
        d_e = expected / (n_values * (n_values - 1))
        alpha = 1.0 - d_o / d_e
    alpha[~(d_e > 0)] = np.nan
    return alpha, d_o, d_e, n_values
