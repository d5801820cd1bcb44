"""Agreement coefficients on sparse label matrices, with intervals (docs/method.md §2).

Codes are integers ``0..n_labels-1`` in the project's label order, ``-1``
(``planner.codes.MISSING``) for a cell that was not labeled: ``a``/``b`` of shape
``(n_items,)`` for two raters, ``codes`` of shape ``(n_items, n_raters)`` for several.
``n_labels`` is always passed, never inferred (unused categories change chance agreement).

Every coefficient returns a frozen result with ``statistic``, ``n_items`` (items used),
``defined``, ``reason`` (why undefined, ``""`` when defined) and
``confidence_interval(confidence_level=0.95, *, method, n_resamples=1000, rng=None)``. Undefined is
``defined=False`` with ``statistic`` NaN, never 0. The bootstrap resamples items: items are
grouped into distinct patterns (a table cell, a vector of category counts, a row of codes)
and a replicate is a multinomial draw of pattern multiplicities, so it costs a weighted sum
over patterns, never a pass over items.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

import numpy as np
from scipy.special import ndtri

from planner.bca import JACKKNIFE_MAX_PATTERNS, acceleration, bca_interval, pattern_jackknife
from planner.codes import check_codes
from planner.intervals import (
    AGREEMENT_BELOW_MINORITY,
    ConfidenceInterval,
    approximation_reason,
    optional_float,
    percentile_interval,
)
from planner.patterns import item_patterns
from planner.resampling import ItemResample, Reader, distinct_rows, joint_replicates
from planner.tables import (
    LevelOfMeasurement,
    ac1_terms,
    agreement_weights,
    alpha_terms,
    cell_kappas,
    count_patterns,
    fce_variance,
    fleiss_terms,
    grouped_count_patterns,
    kappa_terms,
    pabak_terms,
    pair_table,
    percent_terms,
    phi_terms,
    scott_terms,
)

Weights = Literal["linear", "quadratic"] | None
# summary_table reads its figures from one stacked product from this many patterns on (the merge
# of every resample into count patterns row by row costs resamples x patterns; below ~2,000 patterns
# it was cheaper than building and reading the stacked map: 0.086 vs 0.11 s at 384 patterns)
_STACKED_ROWS = 2048
_TRANSPOSE_COLUMNS = 2048  # patterns transposed at once by _transposed (a block of resamples stays in cache)
Method = Literal["bootstrap", "bca", "percentile", "delta"]
METHODS = ("bootstrap", "bca", "percentile", "delta")
Scale = Literal["nominal", "ordinal", "interval"]
Rng = int | np.random.Generator | None

_NO_COMMON = "no item labeled by both raters"
_NO_PAIRABLE = "no item has two or more ratings"


def _check_interval_options(confidence_level: float, method: str, n_resamples: int) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class _Resampling:
    """How a result's items are resampled: its statistic on pattern weights ``(B, U)``, the
    number of items of each pattern, and the ratings per label over those items. ``source``: the
    result's pattern of each row it was built from (``-1``: a row it leaves out), when it keeps or
    merges some of them; ``None`` when its patterns are those rows. ``cells``: when the statistic
    reads only sums of the weights, a sparse 0/1 map ``(K, U)`` of its rows to those sums and the
    statistic of the sums ``(B, K)`` (:func:`summary_table` reads several results in one product)."""

    statistic: Callable[[np.ndarray], np.ndarray]
    counts: np.ndarray
    label_counts: np.ndarray
    width: int = 0
    source: np.ndarray | None = None
    cells: tuple[Any, Callable[[np.ndarray], np.ndarray]] | None = None

    def reader(self, resample: ItemResample) -> Reader:
        """How this result reads ``resample`` of the rows it was built from (``joint_replicates``)."""
        own = resample if self.source is None else resample.merged(self.source, self.counts.size)
        return own, self.statistic, self.width

    def accel(self) -> float:
        return acceleration(*pattern_jackknife(self.statistic, self.counts))


def _on_patterns(
    patterns: np.ndarray,
    frequency: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    label_counts: np.ndarray,
    *,
    width: int = 0,
    source: np.ndarray | None = None,
    cells: tuple[Any, Callable[[np.ndarray], np.ndarray]] | None = None,
) -> _Resampling:
    """Resampling of items grouped into distinct ``patterns`` with ``frequency`` items each."""
    return _Resampling(partial(statistic, patterns), frequency, label_counts, width, source, cells)


@dataclass(frozen=True, kw_only=True)
class AgreementResult:
    """A coefficient, the number of items it used, and whether it is defined (docs/method.md §2)."""

    coefficient: str
    statistic: float
    n_items: int
    defined: bool
    reason: str
    _resampling: _Resampling = field(repr=False, compare=False)

    def _standard_error(self) -> float:
        raise ValueError(f"no analytic variance for {self.coefficient}; use method='bootstrap'")

    @property
    def approximate(self) -> bool:
        """Whether an interval of this result falls short of its nominal coverage (``approximate_reason``)."""
        return bool(self.approximate_reason)

    @property
    def approximate_reason(self) -> str:
        """Why an interval of this result is approximate (``approximation_reason``, a minority under 30
        ratings); ``""`` when it is not."""
        counts = self._resampling.label_counts
        return approximation_reason(self.n_items, counts, minority_below=AGREEMENT_BELOW_MINORITY)

    def confidence_interval(
        self,
        confidence_level: float = 0.95,
        *,
        method: Method = "bootstrap",
        n_resamples: int = 1000,
        rng: Rng = None,
    ) -> ConfidenceInterval:
        """An item-bootstrap interval, or ``statistic +- z SE`` (delta) (docs/method.md §2, "Intervals").

        ``"bootstrap"`` is BCa (``planner.bca``) when the interval is ``approximate`` (fewer
        than 100 items or a minority label under 10), where it was measured to cover better,
        and percentile otherwise; ``"bca"`` and ``"percentile"`` ask for one. BCa needs the
        jackknife over at most 4,000 distinct item patterns; beyond that it is percentile.
        The interval says which it is (``method``). Both ends are NaN when the statistic is
        undefined.
        """
        _check_interval_options(confidence_level, method, n_resamples)
        resampling = self._resampling

        def replicates() -> np.ndarray:
            own = ItemResample.draw(resampling.counts, int(resampling.counts.sum()), n_resamples, rng)
            return own.replicates(resampling.statistic, width=resampling.width)

        return self._interval(confidence_level, method, replicates)

    def _interval(
        self, confidence_level: float, method: Method, replicates: Callable[[], np.ndarray]
    ) -> ConfidenceInterval:
        """The interval of :meth:`confidence_interval` from bootstrap ``replicates()`` of the statistic
        (called only when the interval needs them)."""
        approximate = self.approximate
        if method == "delta":
            se = self._standard_error()
            if not self.defined:
                return ConfidenceInterval(np.nan, np.nan, approximate, "delta")
            half = float(ndtri(0.5 + confidence_level / 2.0)) * se
            return ConfidenceInterval(self.statistic - half, self.statistic + half, approximate, "delta")
        bca = method == "bca" or (method == "bootstrap" and approximate)
        bca = bca and self._resampling.counts.size <= JACKKNIFE_MAX_PATTERNS
        if not self.defined:
            return ConfidenceInterval(np.nan, np.nan, approximate, "bca" if bca else "percentile")
        drawn = replicates()
        if bca:
            interval = bca_interval(drawn, self.statistic, self._resampling.accel(), confidence_level)
        else:
            interval = percentile_interval(drawn, confidence_level)
        return replace(interval, approximate=approximate)


@dataclass(frozen=True, kw_only=True)
class KappaResult(AgreementResult):
    """Chance-corrected agreement of two raters from their ``L x L`` table (docs/method.md §2).

    ``p_o``/``p_e`` are the (weighted) observed and chance agreement; ``variance`` and
    ``standard_error`` the large-sample variance where one exists (Fleiss–Cohen–Everitt
    1969 for Cohen's kappa, binomial for PABAK), else NaN. ``table``: counts, rows rater 1.
    """

    p_o: float
    p_e: float
    variance: float
    standard_error: float
    weights: Weights
    table: np.ndarray = field(repr=False, compare=False)

    def _standard_error(self) -> float:
        if self.coefficient not in ("cohen_kappa", "pabak"):
            return super()._standard_error()
        return self.standard_error

    def confidence_interval(
        self,
        confidence_level: float = 0.95,
        *,
        method: Method | None = None,
        n_resamples: int = 1000,
        rng: Rng = None,
    ) -> ConfidenceInterval:
        """By default the delta-method interval, or BCa over the common items when the interval is
        ``approximate`` (at 30 items under a .9/.1 skew the delta interval of kappa covered .867 of
        a nominal .95, BCa .940; docs/method.md §2, "Intervals")."""
        if method is None:
            method = "bootstrap" if self.approximate else "delta"
        return super().confidence_interval(confidence_level, method=method, n_resamples=n_resamples, rng=rng)


@dataclass(frozen=True, kw_only=True)
class ChanceCorrectedResult(AgreementResult):
    """A multi-rater chance-corrected coefficient with its ``p_o`` and ``p_e`` (docs/method.md §2)."""

    p_o: float
    p_e: float


@dataclass(frozen=True, kw_only=True)
class AlphaResult(AgreementResult):
    """Krippendorff's alpha with ``D_o``, ``D_e`` and ``n_values`` pairable values (docs/method.md §2).

    ``n_items`` counts the pairable units (two or more values).
    """

    level_of_measurement: LevelOfMeasurement
    d_o: float
    d_e: float
    n_values: int


@dataclass(frozen=True, kw_only=True)
class BinaryAssociationResult(AgreementResult):
    """Phi of two binary raters, both positive rates and the 2x2 table (docs/method.md §2).

    On binary data phi equals Pearson r, Spearman rho, Kendall tau_b and MCC.
    """

    positive_rate_a: float
    positive_rate_b: float
    table: np.ndarray = field(repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class MeanKappaResult(AgreementResult):
    """Overlap-weighted mean of the defined pairwise Cohen's kappas (docs/method.md §2).

    ``n_items`` counts items with two or more ratings; ``n_pairs`` the defined pairs.
    """

    n_pairs: int
    weights: Weights


@dataclass(frozen=True, eq=False)
class PairwiseResult:
    """A two-rater coefficient over every rater pair (docs/method.md §2).

    ``statistic``, ``n_items`` (overlap of the pair), ``defined`` and ``reason`` are
    ``(n_raters, n_raters)`` arrays, symmetric; on the diagonal ``n_items`` is the number
    of items the rater labeled and the statistic is undefined. ``results[(j, k)]``
    (``j < k``) is the full result of a pair.
    """

    coefficient: str
    statistic: np.ndarray
    n_items: np.ndarray
    defined: np.ndarray
    reason: np.ndarray
    results: dict[tuple[int, int], AgreementResult] = field(repr=False, compare=False)

    def confidence_interval(
        self,
        confidence_level: float = 0.95,
        *,
        method: Method = "bootstrap",
        n_resamples: int = 1000,
        rng: Rng = None,
    ) -> dict[tuple[int, int], ConfidenceInterval]:
        """The interval of every pair ``(j, k)``, ``j < k``; a pair resamples its common items."""
        gen = np.random.default_rng(rng)
        return {
            pair: result.confidence_interval(confidence_level, method=method, n_resamples=n_resamples, rng=gen)
            for pair, result in self.results.items()
        }


@dataclass(frozen=True)
class Estimate:
    """A reported number: its result and the interval computed for it (docs/method.md §2, "Intervals")."""

    result: AgreementResult
    interval: ConfidenceInterval

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form: NaN becomes ``None``."""
        return {
            "coefficient": self.result.coefficient,
            "statistic": optional_float(self.result.statistic),
            "n_items": int(self.result.n_items),
            "defined": bool(self.result.defined),
            "reason": self.result.reason,
            "interval": self.interval.as_list(),
            "interval_method": self.interval.method,
            "approximate": self.interval.approximate,
            "approximate_reason": self.result.approximate_reason,
        }


# --------------------------------------------------------------------------- two raters


def _table_iv(table: object, n_items: int | None) -> tuple[np.ndarray, int]:
    """Validate a square contingency table; return it as floats and its number of items."""
    arr = np.asarray(table, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
        raise ValueError(f"table must be a square L x L array with L >= 2, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError("table entries must be finite and non-negative")
    if n_items is None:
        if not np.all(arr == np.round(arr)):
            raise ValueError(
                "table has fractional entries (proportions); pass n_items= (the number of items they come from)"
            )
        return arr, int(round(arr.sum()))
    if not isinstance(n_items, (int, np.integer)) or n_items < 0:
        raise ValueError(f"n_items must be a non-negative integer, got {n_items!r}")
    return arr, int(n_items)


def _weights_iv(weights: object) -> None:
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")


def _pair_iv(a: object, b: object, n_labels: int) -> np.ndarray:
    """Validate two raters' codes; return the ``L x L`` table of their common items."""
    a_arr = check_codes(a, n_labels, ndim=1)
    b_arr = check_codes(b, n_labels, ndim=1)
    if a_arr.shape != b_arr.shape:
        raise ValueError(f"a and b must have the same length, got {a_arr.size} and {b_arr.size}")
    common = (a_arr >= 0) & (b_arr >= 0)
    return pair_table(a_arr[common], b_arr[common], n_labels)


def _on_table(table: np.ndarray, n_items: int, statistic: Callable[[np.ndarray], np.ndarray]) -> _Resampling:
    """Resampling of the common items: a table cell is a pattern, ``n_items`` items in all."""
    n_labels = table.shape[0]
    scale = n_items / table.sum() if table.sum() else 0.0
    return _Resampling(
        lambda w: statistic(w.reshape(-1, n_labels, n_labels)),
        table.ravel() * scale,
        (table.sum(axis=0) + table.sum(axis=1)) * scale,
    )


def _kappa_reason(table: np.ndarray) -> str:
    if table.sum() == 0:
        return _NO_COMMON
    for rater, margin in (("rater 1", table.sum(axis=1)), ("rater 2", table.sum(axis=0))):
        if np.count_nonzero(margin) == 1:
            return f"{rater} used a single category on the common items (kappa would be 0 whatever the other did)"
    return ""


def _table_result(
    table: np.ndarray,
    n_items: int,
    *,
    coefficient: str,
    terms: Callable[[np.ndarray], tuple[np.ndarray, ...]],
    reason: str,
    variance: Callable[[float, float], float] | None = None,
    weights: Weights = None,
) -> KappaResult:
    """A two-rater result from its table; ``variance(p_o, p_e)`` where one exists."""
    statistic, p_o, p_e = (float(x[0]) for x in terms(table[None]))
    var = variance(p_o, p_e) if variance is not None and not reason and n_items else np.nan
    return KappaResult(
        coefficient=coefficient,
        statistic=np.nan if reason else statistic,
        n_items=n_items,
        defined=not reason,
        reason=reason,
        p_o=p_o,
        p_e=p_e,
        variance=var,
        standard_error=float(np.sqrt(var)),
        weights=weights,
        table=table,
        _resampling=_on_table(table, n_items, lambda t: terms(t)[0]),
    )


def kappa_from_table(table: object, *, weights: Weights = None, n_items: int | None = None) -> KappaResult:
    """Cohen's (weighted) kappa of an ``L x L`` table, rows rater 1 (docs/method.md §2, Cohen's kappa).

    ``kappa = (p_o - p_e) / (1 - p_e)`` with ``p_o = sum_ab v_ab p_ab`` and
    ``p_e = sum_ab v_ab p_a. p_.b``, ``v_ab`` the agreement weight: ``1[a=b]`` (Cohen
    1960), ``1 - |a-b|/(L-1)`` (linear) or ``1 - (a-b)^2/(L-1)^2`` (quadratic; Cohen
    1968). Variance: Fleiss, Cohen & Everitt (1969), general weighted form. ``table``
    holds counts, or proportions together with ``n_items``. A rater with one category on
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
    _weights_iv(weights)
    arr, n = _table_iv(table, n_items)
    return _cohen_from_table(arr, n, weights)


def _cohen_from_table(table: np.ndarray, n_items: int, weights: Weights) -> KappaResult:
    agree = agreement_weights(table.shape[0], weights)
    p = table / table.sum() if table.sum() else table
    return _table_result(
        table,
        n_items,
        coefficient="cohen_kappa",
        terms=partial(kappa_terms, agree=agree),
        reason=_kappa_reason(table),
        variance=lambda p_o, p_e: fce_variance(p, agree, p_o, p_e, n_items),
        weights=weights,
    )


def cohen_kappa(a: object, b: object, *, n_labels: int, weights: Weights = None) -> KappaResult:
    """Cohen's (weighted) kappa of two raters on their common items (docs/method.md §2, Cohen's kappa).

    The table of the items both labeled goes to :func:`kappa_from_table`.

    >>> r = cohen_kappa([0, 1, 2, 3, -1], [1, 2, 3, 4, 0], n_labels=5, weights="linear")
    >>> round(r.statistic, 6), r.n_items
    (0.333333, 4)
    """
    _weights_iv(weights)
    return kappa_from_table(_pair_iv(a, b, n_labels), weights=weights)


def _scott_reason(table: np.ndarray) -> str:
    if table.sum() == 0:
        return _NO_COMMON
    if np.count_nonzero(table.sum(axis=0) + table.sum(axis=1)) == 1:
        return "both raters used the same single category (chance agreement is 1)"
    return ""


def _scott_from_table(table: np.ndarray, n_items: int) -> KappaResult:
    return _table_result(
        table,
        n_items,
        coefficient="scott_pi",
        terms=scott_terms,
        reason=_scott_reason(table),
    )


def scott_pi(a: object, b: object, *, n_labels: int) -> KappaResult:
    """Scott's pi: kappa with the pooled-marginal chance term ``sum_l pbar_l^2`` (docs/method.md §2).

    No analytic variance here: use ``confidence_interval(method="bootstrap")``.

    >>> round(scott_pi([0, 0, 1, 1, 1], [0, 1, 1, 1, 1], n_labels=2).statistic, 4)
    0.5238
    """
    table = _pair_iv(a, b, n_labels)
    return _scott_from_table(table, int(table.sum()))


def _pabak_from_table(table: np.ndarray, n_items: int) -> KappaResult:
    n_labels = table.shape[0]
    return _table_result(
        table,
        n_items,
        coefficient="pabak",
        terms=pabak_terms,
        reason="" if n_items else _NO_COMMON,
        variance=lambda p_o, _: (n_labels / (n_labels - 1)) ** 2 * p_o * (1 - p_o) / n_items,
    )


def pabak(a: object, b: object, *, n_labels: int) -> KappaResult:
    """Prevalence- and bias-adjusted kappa ``(L p_o - 1)/(L - 1)`` (docs/method.md §2, Byrt et al. 1993).

    ``p_e = 1/L``; variance ``(L/(L-1))^2 p_o (1 - p_o) / n`` (binomial ``p_o``).

    >>> round(pabak([1] * 92 + [0] * 8, [1] * 92 + [1] * 8, n_labels=2).statistic, 2)
    0.84
    """
    table = _pair_iv(a, b, n_labels)
    return _pabak_from_table(table, int(table.sum()))


def _percent_from_table(table: np.ndarray, n_items: int) -> AgreementResult:

    def statistic(tables: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.trace(tables, axis1=1, axis2=2) / tables.sum(axis=(1, 2)), dtype=float)

    return AgreementResult(
        coefficient="percent_agreement",
        statistic=float(statistic(table[None])[0]) if n_items else np.nan,
        n_items=n_items,
        defined=n_items > 0,
        reason="" if n_items else _NO_COMMON,
        _resampling=_on_table(table, n_items, statistic),
    )


def binary_association(a: object, b: object) -> BinaryAssociationResult:
    """Phi of two binary raters (codes 0/1, 1 = positive) on their common items (docs/method.md §2).

    Phi equals Pearson r, Spearman rho, Kendall tau_b and MCC on binary data; it is
    undefined when either rater is constant on the common items. Report both raters'
    positive rates next to kappa (kappa paradox).

    >>> r = binary_association([1, 1, 0, 0, 1, -1], [1, 0, 0, 0, 1, 1])
    >>> round(r.statistic, 4), round(r.positive_rate_a, 2), round(r.positive_rate_b, 2)
    (0.6667, 0.6, 0.4)
    """
    table = _pair_iv(a, b, 2)
    n_items = int(table.sum())
    phi, pos_a, pos_b = (float(x[0]) for x in phi_terms(table[None]))
    if n_items == 0:
        reason = _NO_COMMON
    elif np.isnan(phi):
        reason = "a rater used a single category on the common items (phi has zero variance)"
    else:
        reason = ""
    return BinaryAssociationResult(
        coefficient="phi",
        statistic=phi,
        n_items=n_items,
        defined=not reason,
        reason=reason,
        positive_rate_a=pos_a,
        positive_rate_b=pos_b,
        table=table,
        _resampling=_on_table(table, n_items, lambda t: phi_terms(t)[0]),
    )


# --------------------------------------------------------------------------- several raters


def _codes_iv(codes: object, n_labels: int) -> np.ndarray:
    return check_codes(codes, n_labels, ndim=2)


def _with_ratings(
    counts: np.ndarray, frequency: np.ndarray, least: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The count patterns of items with at least ``least`` ratings, their frequencies, and each
    input pattern's row among them (``-1``: left out; ``None`` when all are kept)."""
    keep = counts.sum(axis=1) >= least
    if keep.all():  # the usual case: share the arrays, no copy
        return counts, frequency, None
    return counts[keep], frequency[keep], _kept_rows(keep)


def _kept_rows(keep: np.ndarray) -> np.ndarray:
    """Each row's index among the kept rows, ``-1`` for a row left out."""
    return np.where(keep, np.cumsum(keep) - 1, -1)


def _counts_result(
    counts: np.ndarray,
    frequency: np.ndarray,
    *,
    coefficient: str,
    terms: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, ...]],
    reason: str,
    source: np.ndarray | None,
) -> ChanceCorrectedResult:
    """A multi-rater result from the count patterns of the items it uses."""
    if reason:
        statistic = p_o = p_e = np.nan
    else:
        statistic, p_o, p_e = (float(x[0]) for x in terms(counts, frequency[None].astype(float)))
    return ChanceCorrectedResult(
        coefficient=coefficient,
        statistic=statistic,
        n_items=int(frequency.sum()),
        defined=not reason,
        reason=reason,
        p_o=p_o,
        p_e=p_e,
        _resampling=_on_patterns(counts, frequency, lambda c, w: terms(c, w)[0], frequency @ counts, source=source),
    )


def _percent_from_counts(counts: np.ndarray, frequency: np.ndarray) -> AgreementResult:
    pairable, frequency, source = _with_ratings(counts, frequency, 2)
    n_items = int(frequency.sum())
    statistic = percent_terms(pairable, frequency[None].astype(float))[0] if n_items else np.nan
    return AgreementResult(
        coefficient="percent_agreement",
        statistic=float(statistic),
        n_items=n_items,
        defined=n_items > 0,
        reason="" if n_items else _NO_PAIRABLE,
        _resampling=_on_patterns(pairable, frequency, percent_terms, frequency @ pairable, source=source),
    )


def percent_agreement(codes: object, *, n_labels: int | None = None) -> AgreementResult:
    """Observed agreement ``p_o`` of several raters (docs/method.md §2, observed agreement).

    Per item with ``r_i >= 2`` ratings, the share of agreeing rating pairs
    ``sum_l r_il (r_il - 1) / (r_i (r_i - 1))``, averaged over those items; with two
    raters, the share of common items with equal labels. ``n_labels`` only validates.

    >>> round(percent_agreement([[0, 0, 0], [0, 1, -1], [1, 1, 1], [0, 1, 1]]).statistic, 6)
    0.583333
    """
    arr = np.asarray(codes)
    if n_labels is None:
        n_labels = max(2, int(arr.max()) + 1) if arr.size else 2
    arr = _codes_iv(arr, n_labels)
    return _percent_from_counts(*count_patterns(arr, n_labels))


def _ac1_from_counts(counts: np.ndarray, frequency: np.ndarray) -> ChanceCorrectedResult:
    rated, frequency, source = _with_ratings(counts, frequency, 1)
    pairable = bool(np.any(rated.sum(axis=1) >= 2))
    return _counts_result(
        rated,
        frequency,
        coefficient="gwet_ac1",
        terms=ac1_terms,
        reason="" if pairable else _NO_PAIRABLE,
        source=source,
    )


def gwet_ac1(codes: object, *, n_labels: int) -> ChanceCorrectedResult:
    """Gwet's AC1, multi-rater with missing ratings (docs/method.md §2, Gwet 2008 and handbook).

    ``p_o``: mean over items with ``r_i >= 2`` of ``sum_l r_il (r_il - 1)/(r_i (r_i - 1))``;
    ``pbar_l``: mean over items with ``r_i >= 1`` of ``r_il / r_i``;
    ``p_e = (1/(L-1)) sum_l pbar_l (1 - pbar_l)``; AC1 ``= (p_o - p_e)/(1 - p_e)``.
    ``n_items`` counts the items with at least one rating (they all enter ``pbar``).

    >>> codes = [[1, 1]] * 91 + [[1, 0]] * 4 + [[0, 1]] * 4 + [[0, 0]]
    >>> round(gwet_ac1(codes, n_labels=2).statistic, 3)
    0.912
    """
    return _ac1_from_counts(*count_patterns(_codes_iv(codes, n_labels), n_labels))


def _fleiss_from_counts(counts: np.ndarray, frequency: np.ndarray) -> ChanceCorrectedResult:
    rated, frequency, source = _with_ratings(counts, frequency, 1)
    per_item = np.unique(rated.sum(axis=1))
    if per_item.size > 1:
        raise ValueError(
            "fleiss_kappa needs the same number of ratings on every rated item; found "
            f"{per_item.min()} to {per_item.max()} (pass the complete rows, or use "
            "krippendorff_alpha or gwet_ac1)"
        )
    if per_item.size and per_item[0] < 2:
        raise ValueError("fleiss_kappa needs at least 2 ratings per item")
    if rated.shape[0] == 0:
        reason = _NO_PAIRABLE
    elif np.count_nonzero(rated.sum(axis=0)) == 1:
        reason = "all ratings are in one category (chance agreement is 1)"
    else:
        reason = ""
    return _counts_result(
        rated, frequency, coefficient="fleiss_kappa", terms=fleiss_terms, reason=reason, source=source
    )


def fleiss_kappa(codes: object, *, n_labels: int) -> ChanceCorrectedResult:
    """Fleiss' kappa: items with a fixed number ``m`` of ratings (docs/method.md §2, Fleiss 1971).

    ``Pbar`` = mean over items of ``(sum_l r_il^2 - m)/(m (m - 1))``, chance term
    ``sum_l pbar_l^2`` with ``pbar_l`` the pooled share of category ``l``. Items with no
    rating are skipped; the others must all have ``m >= 2`` ratings (which raters gave
    them may vary).

    >>> round(fleiss_kappa([[0, 0, 0], [0, 1, 0], [1, 1, 1], [0, 1, 1]], n_labels=2).statistic, 6)
    0.333333
    """
    return _fleiss_from_counts(*count_patterns(_codes_iv(codes, n_labels), n_labels))


def _values_iv(level_of_measurement: str, values: object, n_labels: int) -> np.ndarray:
    if level_of_measurement not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(
            f"level_of_measurement must be 'nominal', 'ordinal', 'interval' or 'ratio', got {level_of_measurement!r}"
        )
    if values is None:
        return np.arange(n_labels, dtype=float)
    if level_of_measurement in ("nominal", "ordinal"):
        raise ValueError("values= applies to level_of_measurement 'interval' or 'ratio' only")
    arr = np.asarray(values, dtype=float)
    if arr.shape != (n_labels,) or not np.all(np.isfinite(arr)):
        raise ValueError(f"values must be {n_labels} finite numbers, one per code")
    if level_of_measurement == "ratio" and np.any(arr < 0):
        raise ValueError("ratio values must be non-negative")
    return arr


def _alpha_from_counts(
    counts: np.ndarray, frequency: np.ndarray, level_of_measurement: LevelOfMeasurement, values: np.ndarray
) -> AlphaResult:
    pairable, frequency, source = _with_ratings(counts, frequency, 2)

    def statistic(c: np.ndarray, w: np.ndarray) -> np.ndarray:
        return alpha_terms(c, w, level_of_measurement, values)[0]

    alpha, d_o, d_e, n_values = (
        float(x[0]) for x in alpha_terms(pairable, frequency[None].astype(float), level_of_measurement, values)
    )
    if pairable.shape[0] == 0:
        reason = _NO_PAIRABLE
    elif not d_e > 0:
        reason = "expected disagreement D_e is 0 (all pairable values are equal)"
    else:
        reason = ""
    return AlphaResult(
        coefficient="krippendorff_alpha",
        statistic=np.nan if reason else alpha,
        n_items=int(frequency.sum()),
        defined=not reason,
        reason=reason,
        level_of_measurement=level_of_measurement,
        d_o=d_o,
        d_e=d_e,
        n_values=int(round(n_values)),
        _resampling=_on_patterns(pairable, frequency, statistic, frequency @ pairable, source=source),
    )


def krippendorff_alpha(
    codes: object, *, n_labels: int, level_of_measurement: LevelOfMeasurement = "nominal", values: object = None
) -> AlphaResult:
    """Krippendorff's alpha ``1 - D_o/D_e`` via the coincidence matrix (docs/method.md §2).

    Units with one value are dropped. Metrics: nominal ``1[c!=k]``, ordinal
    ``(sum_{g=c..k} n_g - (n_c + n_k)/2)^2`` over codes in order, interval
    ``(v_c - v_k)^2`` and ratio ``((v_c - v_k)/(v_c + v_k))^2`` on ``values`` (the number
    each code stands for; default ``0..L-1``).

    >>> codes = [[0, 0, 0], [0, 1, -1], [1, 1, 1], [0, 1, 1]]
    >>> round(krippendorff_alpha(codes, n_labels=2).statistic, 6)
    0.333333
    """
    arr = _codes_iv(codes, n_labels)
    values_arr = _values_iv(level_of_measurement, values, n_labels)
    return _alpha_from_counts(*count_patterns(arr, n_labels), level_of_measurement, values_arr)


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
    "cohen_kappa": _cohen_from_table,
    "scott_pi": _scott_from_table,
    "pabak": _pabak_from_table,
    "percent_agreement": _percent_from_table,
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
    _weights_iv(weights)
    if weights is not None and coefficient != "cohen_kappa":
        raise ValueError("weights= applies to coefficient='cohen_kappa' only")
    arr = _codes_iv(codes, n_labels)
    rows, frequency = distinct_rows(arr, n_labels)
    n_raters = arr.shape[1]
    pairs = _rater_pairs(n_raters)
    tables = np.rint(_pair_tables(rows, frequency[None].astype(float), n_labels)[0])
    tables = tables.astype(np.int64)
    build = _PAIR_COEFFICIENTS[coefficient]
    if coefficient == "cohen_kappa":  # the only coefficient with weights
        build = partial(_cohen_from_table, weights=weights)
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
        rows, frequency, source = rows[pairable], frequency[pairable], _kept_rows(pairable)
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
        _resampling=_on_patterns(
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
    _weights_iv(weights)
    return _mean_kappa_from_patterns(*distinct_rows(_codes_iv(codes, n_labels), n_labels), n_labels, weights)


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
    _check_interval_options(confidence_level, "bootstrap", n_resamples)
    alpha_values = _values_iv(scale, values, n_labels)
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
        "po": _percent_from_counts(counts, frequency),
        "kappa": _mean_kappa_from_patterns(patterns.rows, patterns.counts, n_labels, _SCALE_WEIGHTS[scale]),
        "alpha": _alpha_from_counts(counts, frequency, scale, alpha_values),
        "ac1": _ac1_from_counts(counts, frequency),
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


def _summed_replicates(resample: ItemResample, parts: list[tuple[_Resampling, np.ndarray | None]]) -> list[np.ndarray]:
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
