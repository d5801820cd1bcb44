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
from functools import partial

import numpy as np

from planner.agreement_results import (
    NO_COMMON,
    NO_PAIRABLE,
    AgreementResult,
    AlphaResult,
    BinaryAssociationResult,
    ChanceCorrectedResult,
    KappaResult,
    Resampling,
    Weights,
    on_patterns,
)
from planner.codes import check_codes
from planner.tables import (
    LevelOfMeasurement,
    ac1_terms,
    agreement_weights,
    alpha_terms,
    count_patterns,
    fce_variance,
    fleiss_terms,
    kappa_terms,
    pabak_terms,
    pair_table,
    percent_terms,
    phi_terms,
    scott_terms,
)

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


def weights_iv(weights: object) -> None:
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


def _on_table(table: np.ndarray, n_items: int, statistic: Callable[[np.ndarray], np.ndarray]) -> Resampling:
    """Resampling of the common items: a table cell is a pattern, ``n_items`` items in all."""
    n_labels = table.shape[0]
    scale = n_items / table.sum() if table.sum() else 0.0
    return Resampling(
        lambda w: statistic(w.reshape(-1, n_labels, n_labels)),
        table.ravel() * scale,
        (table.sum(axis=0) + table.sum(axis=1)) * scale,
    )


def _kappa_reason(table: np.ndarray) -> str:
    if table.sum() == 0:
        return NO_COMMON
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
    weights_iv(weights)
    arr, n = _table_iv(table, n_items)
    return cohen_from_table(arr, n, weights)


def cohen_from_table(table: np.ndarray, n_items: int, weights: Weights) -> KappaResult:
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
    weights_iv(weights)
    return kappa_from_table(_pair_iv(a, b, n_labels), weights=weights)


def _scott_reason(table: np.ndarray) -> str:
    if table.sum() == 0:
        return NO_COMMON
    if np.count_nonzero(table.sum(axis=0) + table.sum(axis=1)) == 1:
        return "both raters used the same single category (chance agreement is 1)"
    return ""


def scott_from_table(table: np.ndarray, n_items: int) -> KappaResult:
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
    return scott_from_table(table, int(table.sum()))


def pabak_from_table(table: np.ndarray, n_items: int) -> KappaResult:
    n_labels = table.shape[0]
    return _table_result(
        table,
        n_items,
        coefficient="pabak",
        terms=pabak_terms,
        reason="" if n_items else NO_COMMON,
        variance=lambda p_o, _: (n_labels / (n_labels - 1)) ** 2 * p_o * (1 - p_o) / n_items,
    )


def pabak(a: object, b: object, *, n_labels: int) -> KappaResult:
    """Prevalence- and bias-adjusted kappa ``(L p_o - 1)/(L - 1)`` (docs/method.md §2, Byrt et al. 1993).

    ``p_e = 1/L``; variance ``(L/(L-1))^2 p_o (1 - p_o) / n`` (binomial ``p_o``).

    >>> round(pabak([1] * 92 + [0] * 8, [1] * 92 + [1] * 8, n_labels=2).statistic, 2)
    0.84
    """
    table = _pair_iv(a, b, n_labels)
    return pabak_from_table(table, int(table.sum()))


def percent_from_table(table: np.ndarray, n_items: int) -> AgreementResult:

    def statistic(tables: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(np.trace(tables, axis1=1, axis2=2) / tables.sum(axis=(1, 2)), dtype=float)

    return AgreementResult(
        coefficient="percent_agreement",
        statistic=float(statistic(table[None])[0]) if n_items else np.nan,
        n_items=n_items,
        defined=n_items > 0,
        reason="" if n_items else NO_COMMON,
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
        reason = NO_COMMON
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


def codes_iv(codes: object, n_labels: int) -> np.ndarray:
    return check_codes(codes, n_labels, ndim=2)


def _with_ratings(
    counts: np.ndarray, frequency: np.ndarray, least: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The count patterns of items with at least ``least`` ratings, their frequencies, and each
    input pattern's row among them (``-1``: left out; ``None`` when all are kept)."""
    keep = counts.sum(axis=1) >= least
    if keep.all():  # the usual case: share the arrays, no copy
        return counts, frequency, None
    return counts[keep], frequency[keep], kept_rows(keep)


def kept_rows(keep: np.ndarray) -> np.ndarray:
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
        _resampling=on_patterns(counts, frequency, lambda c, w: terms(c, w)[0], frequency @ counts, source=source),
    )


def percent_from_counts(counts: np.ndarray, frequency: np.ndarray) -> AgreementResult:
    pairable, frequency, source = _with_ratings(counts, frequency, 2)
    n_items = int(frequency.sum())
    statistic = percent_terms(pairable, frequency[None].astype(float))[0] if n_items else np.nan
    return AgreementResult(
        coefficient="percent_agreement",
        statistic=float(statistic),
        n_items=n_items,
        defined=n_items > 0,
        reason="" if n_items else NO_PAIRABLE,
        _resampling=on_patterns(pairable, frequency, percent_terms, frequency @ pairable, source=source),
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
    arr = codes_iv(arr, n_labels)
    return percent_from_counts(*count_patterns(arr, n_labels))


def ac1_from_counts(counts: np.ndarray, frequency: np.ndarray) -> ChanceCorrectedResult:
    rated, frequency, source = _with_ratings(counts, frequency, 1)
    pairable = bool(np.any(rated.sum(axis=1) >= 2))
    return _counts_result(
        rated,
        frequency,
        coefficient="gwet_ac1",
        terms=ac1_terms,
        reason="" if pairable else NO_PAIRABLE,
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
    return ac1_from_counts(*count_patterns(codes_iv(codes, n_labels), n_labels))


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
        reason = NO_PAIRABLE
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
    return _fleiss_from_counts(*count_patterns(codes_iv(codes, n_labels), n_labels))


def values_iv(level_of_measurement: str, values: object, n_labels: int) -> np.ndarray:
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


def alpha_from_counts(
    counts: np.ndarray, frequency: np.ndarray, level_of_measurement: LevelOfMeasurement, values: np.ndarray
) -> AlphaResult:
    pairable, frequency, source = _with_ratings(counts, frequency, 2)

    def statistic(c: np.ndarray, w: np.ndarray) -> np.ndarray:
        return alpha_terms(c, w, level_of_measurement, values)[0]

    alpha, d_o, d_e, n_values = (
        float(x[0]) for x in alpha_terms(pairable, frequency[None].astype(float), level_of_measurement, values)
    )
    if pairable.shape[0] == 0:
        reason = NO_PAIRABLE
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
        _resampling=on_patterns(pairable, frequency, statistic, frequency @ pairable, source=source),
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
    arr = codes_iv(codes, n_labels)
    values_arr = values_iv(level_of_measurement, values, n_labels)
    return alpha_from_counts(*count_patterns(arr, n_labels), level_of_measurement, values_arr)
