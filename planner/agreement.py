"""Agreement coefficients on sparse label matrices, with intervals (SPEC.md §2).

Codes are integer arrays: ``a``/``b`` of shape ``(n_items,)`` for two raters, ``codes`` of
shape ``(n_items, n_raters)`` for several; values ``0..n_labels-1`` in the project's label
order and ``-1`` (``planner.codes.MISSING``) for a cell that was not labeled. Every
coefficient returns a frozen result with ``statistic``, ``n_items`` (items used),
``defined``, ``reason`` (why undefined; ``""`` when defined) and
``confidence_interval(...)``. An undefined coefficient has ``statistic`` NaN, never 0.

Bootstrap intervals resample items: items are grouped into distinct patterns (a table
cell, a vector of category counts, a row of codes) and one replicate is a multinomial
draw of pattern multiplicities, so a replicate is a weighted sum over a few patterns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from scipy.special import ndtri

from planner.codes import check_codes
from planner.intervals import ConfidenceInterval, percentile_interval

Weights = Literal["linear", "quadratic"] | None
Method = Literal["bootstrap", "delta"]

_CHUNK_CELLS = 2_000_000  # resample weights held at once (n_resamples x n_patterns)


# --------------------------------------------------------------------------- resampling


def _patterns(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a non-negative int array ``(n, k)`` and the count of each."""
    if rows.shape[0] == 0:
        return rows, np.zeros(0, dtype=np.int64)
    base = int(rows.max()) + 1
    if rows.shape[1] * np.log2(max(base, 2)) < 62:
        keys = rows @ (base ** np.arange(rows.shape[1], dtype=np.int64))
        _, first, counts = np.unique(keys, return_index=True, return_counts=True)
        return rows[first], counts
    distinct, counts = np.unique(rows, axis=0, return_counts=True)
    return distinct, counts


def _bootstrap(
    statistic: Callable[[np.ndarray], np.ndarray],
    counts: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """``statistic(weights)`` on multinomial resamples of items grouped by pattern.

    ``counts[u]`` items share pattern ``u``; resampling the ``sum(counts)`` items with
    replacement gives pattern multiplicities ``Multinomial(sum(counts), counts/sum)``.
    """
    total = int(round(float(np.sum(counts))))
    pvals = np.asarray(counts, dtype=float) / total
    chunk = max(1, _CHUNK_CELLS // max(1, pvals.size))
    parts = [
        statistic(rng.multinomial(total, pvals, size=min(chunk, n_resamples - start)))
        for start in range(0, n_resamples, chunk)
    ]
    return np.concatenate(parts)


# --------------------------------------------------------------------------- results


def _check_interval_options(level: float, method: str, n_resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if method not in ("bootstrap", "delta"):
        raise ValueError(f"method must be 'bootstrap' or 'delta', got {method!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")


@dataclass(frozen=True, kw_only=True)
class AgreementResult:
    """An agreement coefficient and the items it used (SPEC.md §2).

    ``confidence_interval`` resamples items (percentile bootstrap, SPEC.md §2,
    "Intervals"); ``method="delta"`` is available where an analytic variance exists.
    """

    statistic: float
    n_items: int
    defined: bool
    reason: str
    _replicates: Callable[[int, np.random.Generator], np.ndarray] = field(
        repr=False, compare=False
    )

    def _standard_error(self) -> float:
        raise ValueError(f"no analytic variance for {type(self).__name__}; use method='bootstrap'")

    def confidence_interval(
        self,
        level: float = 0.95,
        *,
        method: Method = "bootstrap",
        n_resamples: int = 1000,
        rng: int | np.random.Generator | None = None,
    ) -> ConfidenceInterval:
        """Two-sided interval: item bootstrap percentiles, or statistic +- z * SE (delta)."""
        _check_interval_options(level, method, n_resamples)
        if method == "delta":
            se = self._standard_error()
            if not (self.defined and np.isfinite(se)):
                return ConfidenceInterval(np.nan, np.nan)
            half = float(ndtri(0.5 + level / 2.0)) * se
            return ConfidenceInterval(self.statistic - half, self.statistic + half)
        if not self.defined:
            return ConfidenceInterval(np.nan, np.nan)
        return percentile_interval(self._replicates(n_resamples, np.random.default_rng(rng)), level)


@dataclass(frozen=True, kw_only=True)
class KappaResult(AgreementResult):
    """Chance-corrected agreement of two raters from their ``L x L`` table (SPEC.md §2).

    ``p_o``/``p_e`` are the (weighted) observed and chance agreement; ``variance`` and
    ``standard_error`` are the large-sample Fleiss–Cohen–Everitt (1969) values where one
    exists (Cohen's kappa, PABAK), else NaN. ``table`` holds the counts (rows rater 1).
    """

    coefficient: str
    p_o: float
    p_e: float
    variance: float
    standard_error: float
    weights: Weights
    table: np.ndarray = field(repr=False, compare=False)

    def _standard_error(self) -> float:
        if np.isnan(self.standard_error) and self.defined:
            return super()._standard_error()
        return self.standard_error

    def confidence_interval(
        self,
        level: float = 0.95,
        *,
        method: Method = "delta",
        n_resamples: int = 1000,
        rng: int | np.random.Generator | None = None,
    ) -> ConfidenceInterval:
        """Delta-method interval by default (FCE 1969 SE); ``"bootstrap"`` resamples items."""
        return super().confidence_interval(
            level, method=method, n_resamples=n_resamples, rng=rng
        )


# --------------------------------------------------------------------------- kappa


def _agreement_weights(n_labels: int, weights: Weights) -> np.ndarray:
    """Agreement weights ``1 - w_ab``: Cohen 1968 linear / quadratic (SPEC.md §2)."""
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    if weights is None:
        return np.eye(n_labels)
    gap = np.abs(np.subtract.outer(np.arange(n_labels), np.arange(n_labels))) / (n_labels - 1)
    return 1.0 - (gap if weights == "linear" else gap**2)


def _kappa_terms(tables: np.ndarray, agree: np.ndarray) -> tuple[np.ndarray, ...]:
    """Kappa, p_o, p_e, row and column marginals of tables ``(B, L, L)`` (SPEC.md §2).

    A replicate whose table is empty or has a one-category marginal gets kappa NaN.
    """
    total = tables.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = tables / total[:, None, None]
        rows, cols = p.sum(axis=2), p.sum(axis=1)
        p_o = np.einsum("bij,ij->b", p, agree)
        p_e = np.einsum("bi,ij,bj->b", rows, agree, cols)
        kappa = (p_o - p_e) / (1.0 - p_e)
    degenerate = (total == 0) | (rows.max(axis=1) == 1.0) | (cols.max(axis=1) == 1.0)
    kappa[degenerate] = np.nan
    return kappa, p_o, p_e, rows, cols


def _fce_variance(p: np.ndarray, agree: np.ndarray, p_o: float, p_e: float, n: int) -> float:
    """Fleiss, Cohen & Everitt (1969) large-sample variance of (weighted) kappa (SPEC.md §2)."""
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    row_mean = agree @ cols  # wbar_i. = sum_j p_.j w_ij
    col_mean = rows @ agree  # wbar_.j = sum_i p_i. w_ij
    g = agree * (1.0 - p_e) - np.add.outer(row_mean, col_mean) * (1.0 - p_o)
    spread = np.sum(p * g**2) - (p_o * p_e - 2.0 * p_e + p_o) ** 2
    return float(max(spread, 0.0) / (n * (1.0 - p_e) ** 4))


def _table_iv(table: object, n_items: int | None) -> tuple[np.ndarray, int]:
    """Validate a square contingency table; return it as floats and the item count."""
    arr = np.asarray(table, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
        raise ValueError(f"table must be a square L x L array with L >= 2, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("table entries must be finite and non-negative")
    whole = bool(np.all(arr == np.round(arr)))
    if n_items is None:
        if not whole:
            raise ValueError(
                "table has fractional entries (proportions); pass n_items= "
                "(the number of items they come from)"
            )
        return arr, int(round(arr.sum()))
    if not isinstance(n_items, (int, np.integer)) or n_items < 0:
        raise ValueError(f"n_items must be a non-negative integer, got {n_items!r}")
    return arr, int(n_items)


def _undefined_kappa_reason(table: np.ndarray) -> str:
    if table.sum() == 0:
        return "no item labeled by both raters"
    if np.count_nonzero(table.sum(axis=1)) == 1:
        return "rater 1 used a single category on the common items (kappa would be 0 whatever rater 2 did)"
    if np.count_nonzero(table.sum(axis=0)) == 1:
        return "rater 2 used a single category on the common items (kappa would be 0 whatever rater 1 did)"
    return ""


def kappa_from_table(
    table: object, *, weights: Weights = None, n_items: int | None = None
) -> KappaResult:
    """Cohen's (weighted) kappa of an ``L x L`` table, rows rater 1 (SPEC.md §2, Cohen's kappa).

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o = sum_ab v_ab p_ab`` and
    ``p_e = sum_ab v_ab p_a. p_.b``, ``v_ab`` the agreement weight: ``1[a=b]`` (Cohen
    1960), ``1 - |a-b|/(L-1)`` (linear) or ``1 - (a-b)^2/(L-1)^2`` (quadratic; Cohen
    1968). The variance is Fleiss, Cohen & Everitt (1969), weighted form. ``table`` holds
    counts, or proportions together with ``n_items``. A rater with a single category on
    the common items makes kappa undefined (it would be 0 whatever the other rater did).

    >>> r = kappa_from_table([[91, 4], [4, 1]])
    >>> round(r.p_o, 3), round(r.p_e, 3), round(r.statistic, 3)
    (0.92, 0.905, 0.158)
    >>> t = [[20, 5, 1], [6, 30, 7], [2, 8, 21]]
    >>> round(kappa_from_table(t, weights="quadratic").statistic, 4)
    0.6664
    >>> kappa_from_table([[5, 0], [3, 0]]).defined
    False
    """
    arr, n = _table_iv(table, n_items)
    n_labels = arr.shape[0]
    agree = _agreement_weights(n_labels, weights)
    kappa, p_o, p_e, _, _ = _kappa_terms(arr[None], agree)
    reason = _undefined_kappa_reason(arr)
    if reason or n == 0:
        variance = np.nan
    else:
        variance = _fce_variance(arr / arr.sum(), agree, float(p_o[0]), float(p_e[0]), n)
    cells = arr.ravel()

    def replicates(n_resamples: int, rng: np.random.Generator) -> np.ndarray:
        def statistic(w: np.ndarray) -> np.ndarray:
            return _kappa_terms(w.reshape(-1, n_labels, n_labels).astype(float), agree)[0]

        return _bootstrap(statistic, cells / cells.sum() * n, n_resamples, rng)

    return KappaResult(
        coefficient="cohen_kappa" if weights is None else f"cohen_kappa_{weights}",
        statistic=float(kappa[0]) if not reason else np.nan,
        n_items=n,
        defined=not reason,
        reason=reason,
        p_o=float(p_o[0]) if n else np.nan,
        p_e=float(p_e[0]) if n else np.nan,
        variance=variance,
        standard_error=float(np.sqrt(variance)),
        weights=weights,
        table=arr,
        _replicates=replicates,
    )


def _pair_iv(a: object, b: object, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate two raters' code vectors; return the codes on their common items."""
    a_arr = check_codes(a, n_labels, ndim=1)
    b_arr = check_codes(b, n_labels, ndim=1)
    if a_arr.shape != b_arr.shape:
        raise ValueError(f"a and b must have the same length, got {a_arr.size} and {b_arr.size}")
    common = (a_arr >= 0) & (b_arr >= 0)
    return a_arr[common], b_arr[common]


def _pair_table(a: np.ndarray, b: np.ndarray, n_labels: int) -> np.ndarray:
    """``L x L`` counts of the common items, rows ``a`` (SPEC.md §2)."""
    return np.bincount(a * n_labels + b, minlength=n_labels**2).reshape(n_labels, n_labels)


def cohen_kappa(a: object, b: object, *, n_labels: int, weights: Weights = None) -> KappaResult:
    """Cohen's (weighted) kappa of two raters on their common items (SPEC.md §2, Cohen's kappa).

    ``a``, ``b``: codes of shape ``(n_items,)``, ``-1`` for missing; the table of the
    items both labeled goes to :func:`kappa_from_table`.

    >>> r = cohen_kappa([0, 1, 2, 3], [1, 2, 3, 4], n_labels=5, weights="linear")
    >>> round(r.statistic, 6), r.n_items
    (0.333333, 4)
    """
    a_c, b_c = _pair_iv(a, b, n_labels)
    _agreement_weights(n_labels, weights)
    return kappa_from_table(_pair_table(a_c, b_c, n_labels), weights=weights)
