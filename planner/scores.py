"""Agreement of numeric ratings: ICC, Lin's CCC, Bland-Altman, MAE, RMSE, interval alpha (docs/method.md §2b).

Ratings are floats, ``NaN`` for a rating that was not given: ``ratings`` of shape
``(n_items, n_raters)`` for the intraclass correlations, ``a``/``b`` of shape ``(n_items,)``
for two raters. Every result is frozen and carries ``n_items`` (items used), ``n_dropped``
(items left out because a rating was missing: listwise deletion), ``defined`` and ``reason``
(why undefined, ``""`` when defined). Undefined is ``defined=False`` with NaN, never 0.
Intervals are analytic (F, Fisher z, t) or an item jackknife (interval alpha), not bootstraps;
``confidence_interval`` takes the confidence level like scipy's and returns a
:class:`planner.intervals.ConfidenceInterval`.
Infinite ratings are refused (``ValueError``), and so is a matrix over :data:`MAX_CELLS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
from scipy.special import ndtri
from scipy.stats import t as t_distribution

from planner.intervals import APPROXIMATE_BELOW_ITEMS, ConfidenceInterval

LimitVariance = Literal["1999", "1986"]
MAX_CELLS = 100_000_000
"""The largest ratings matrix (cells) accepted: a few float64 copies of it are held at once (~4 GB)."""

NO_ITEMS = "fewer than two items with every rating present"
ONE_RATER = "fewer than two raters"


def check_level(confidence_level: float) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")


def as_ratings(ratings: object, name: str = "ratings") -> np.ndarray:
    """``ratings`` as a float array; refuses infinities, non-numbers and over-large inputs before any work."""
    array = np.asarray(ratings)
    if array.size > MAX_CELLS:
        raise ValueError(f"{name} has {array.size:,} cells, more than the {MAX_CELLS:,} accepted")
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric (NaN for a missing rating), got dtype {array.dtype}")
    array = array.astype(float, copy=False)
    if np.isinf(array).any():
        raise ValueError(f"{name} holds an infinite rating; use NaN for a missing one")
    return array


def _complete_pairs(a: object, b: object) -> tuple[np.ndarray, np.ndarray, int]:
    """The two raters' ratings on the items both rated, and the number of items dropped."""
    x, y = as_ratings(a, "a"), as_ratings(b, "b")
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-D of one length, got shapes {x.shape} and {y.shape}")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep], int(x.size - keep.sum())


# --------------------------------------------------------------------------- Lin's concordance


@dataclass(frozen=True, kw_only=True)
class ConcordanceResult:
    """Lin's concordance correlation of two raters (docs/method.md §2b).

    ``statistic`` ``rho_c = r C_b``: ``pearson_r`` times the bias correction ``bias_correction``
    ``C_b = 2 / (v + 1/v + u^2)`` (``scale_shift`` ``v = s_a/s_b``, ``location_shift``
    ``u = (mean_a - mean_b)/sqrt(s_a s_b)``, moments with divisor n as in Lin 1989).
    ``z_standard_error``: the SE of ``atanh(rho_c)`` (Lin 1989), NaN where it does not exist
    (``r = 0``, ``|rho_c| = 1`` or ``n < 3``).
    """

    statistic: float
    n_items: int
    n_dropped: int
    defined: bool
    reason: str
    pearson_r: float
    bias_correction: float
    location_shift: float
    scale_shift: float
    z_standard_error: float

    @property
    def approximate(self) -> bool:
        """The z interval is asymptotic; flagged under 100 items."""
        return self.n_items < APPROXIMATE_BELOW_ITEMS

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        """``tanh(atanh(rho_c) +- z_{1-alpha/2} SE_z)`` (Lin 1989; ``method="fisher-z"``). Both ends NaN
        when the statistic or its SE is undefined."""
        check_level(confidence_level)
        if not self.defined or not np.isfinite(self.z_standard_error):
            return ConfidenceInterval(np.nan, np.nan, self.approximate, "fisher-z")
        half = float(ndtri(0.5 + confidence_level / 2.0)) * self.z_standard_error
        centre = float(np.arctanh(self.statistic))
        return ConfidenceInterval(
            float(np.tanh(centre - half)), float(np.tanh(centre + half)), self.approximate, "fisher-z"
        )


def _ccc_z_variance(rho_c: float, r: float, u: float, n: int) -> float:
    """Lin (1989) variance of ``atanh(rho_c)`` (docs/method.md §2b)."""
    if n < 3 or r == 0.0 or abs(rho_c) >= 1.0:
        return float("nan")
    one_minus = 1.0 - rho_c**2
    first = (1.0 - r**2) * rho_c**2 / (one_minus * r**2)
    second = 2.0 * rho_c**3 * (1.0 - rho_c) * u**2 / (r * one_minus**2)
    third = rho_c**4 * u**4 / (2.0 * r**2 * one_minus**2)
    return (first + second - third) / (n - 2)


def concordance_correlation(a: np.ndarray, b: np.ndarray) -> ConcordanceResult:
    """Lin's CCC ``2 s_ab / (s_a^2 + s_b^2 + (mean_a - mean_b)^2)`` on the items both rated (docs/method.md §2b).

    Items where either rating is NaN are dropped (``n_dropped``). Undefined with fewer than two
    such items or when both raters are constant and equal (0/0); a constant rater with a shift
    gives ``rho_c = 0`` (defined) but no Pearson ``r``, so no interval.

    >>> r = concordance_correlation(np.array([1.0, 2.0, 3.0, 4.0]), np.array([2.0, 3.0, 4.0, 5.0]))
    >>> round(r.statistic, 4), r.pearson_r
    (0.7143, 1.0)
    """
    x, y, n_dropped = _complete_pairs(a, b)
    n = x.size
    nan = float("nan")
    if n < 2:
        return ConcordanceResult(
            statistic=nan,
            n_items=n,
            n_dropped=n_dropped,
            defined=False,
            reason="fewer than two items rated by both",
            pearson_r=nan,
            bias_correction=nan,
            location_shift=nan,
            scale_shift=nan,
            z_standard_error=nan,
        )
    mean_x, mean_y = float(x.mean()), float(y.mean())
    dx, dy = x - mean_x, y - mean_y
    var_x, var_y = float(np.dot(dx, dx)) / n, float(np.dot(dy, dy)) / n
    cov = float(np.dot(dx, dy)) / n
    denominator = var_x + var_y + (mean_x - mean_y) ** 2
    if denominator == 0.0:
        return ConcordanceResult(
            statistic=nan,
            n_items=n,
            n_dropped=n_dropped,
            defined=False,
            reason="0/0: both raters give one and the same rating throughout",
            pearson_r=nan,
            bias_correction=nan,
            location_shift=nan,
            scale_shift=nan,
            z_standard_error=nan,
        )
    rho_c = 2.0 * cov / denominator
    if var_x > 0.0 and var_y > 0.0:
        sd_product = float(np.sqrt(var_x * var_y))
        r = cov / sd_product
        r = min(1.0, max(-1.0, r))
        scale = float(np.sqrt(var_x / var_y))
        shift = (mean_x - mean_y) / float(np.sqrt(sd_product))
        correction = 2.0 / (scale + 1.0 / scale + shift**2)
        se = float(np.sqrt(_ccc_z_variance(rho_c, r, shift, n)))
    else:
        r = correction = shift = scale = se = nan
    return ConcordanceResult(
        statistic=rho_c,
        n_items=n,
        n_dropped=n_dropped,
        defined=True,
        reason="",
        pearson_r=r,
        bias_correction=correction,
        location_shift=shift,
        scale_shift=scale,
        z_standard_error=se,
    )


# --------------------------------------------------------------------------- Bland-Altman


@dataclass(frozen=True, kw_only=True)
class BlandAltmanResult:
    """Bland-Altman bias and limits of agreement of ``a - b`` (docs/method.md §2b).

    ``bias`` the mean difference, ``sd`` its standard deviation (divisor n - 1), ``lower``/``upper``
    ``bias -+ multiplier sd``. ``limit_variance``: ``"1999"`` takes
    ``Var(limit) = (1/n + multiplier^2/(2(n-1))) sd^2`` (Bland & Altman 1999), ``"1986"`` the
    approximation ``3 sd^2/n`` of the 1986 paper. Undefined with fewer than two items.
    """

    bias: float
    sd: float
    lower: float
    upper: float
    multiplier: float
    n_items: int
    n_dropped: int
    defined: bool
    reason: str
    limit_variance: LimitVariance

    @property
    def approximate(self) -> bool:
        """The limits' intervals are approximate (normal differences, a first-order variance);
        flagged under 100 items."""
        return self.n_items < APPROXIMATE_BELOW_ITEMS

    def _t(self, confidence_level: float) -> float:
        check_level(confidence_level)
        return float(t_distribution.ppf(0.5 + confidence_level / 2.0, self.n_items - 1)) if self.defined else np.nan

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        """The bias's t interval ``bias +- t_{n-1} sd/sqrt(n)`` (``method="t"``; exact for normal differences)."""
        half = self._t(confidence_level) * self.sd / np.sqrt(self.n_items) if self.defined else np.nan
        return ConfidenceInterval(float(self.bias - half), float(self.bias + half), False, "t")

    def limit_standard_error(self) -> float:
        """The approximate SE of either limit (``limit_variance``; docs/method.md §2b)."""
        if not self.defined:
            return float("nan")
        n = self.n_items
        if self.limit_variance == "1986":
            return float(np.sqrt(3.0 * self.sd**2 / n))
        return float(self.sd * np.sqrt(1.0 / n + self.multiplier**2 / (2.0 * (n - 1))))

    def limit_intervals(self, confidence_level: float = 0.95) -> tuple[ConfidenceInterval, ConfidenceInterval]:
        """Intervals of the lower and upper limits, ``limit +- t_{n-1} SE`` (Bland & Altman 1986/1999;
        ``method="t"``)."""
        half = self._t(confidence_level) * self.limit_standard_error()
        return (
            ConfidenceInterval(float(self.lower - half), float(self.lower + half), self.approximate, "t"),
            ConfidenceInterval(float(self.upper - half), float(self.upper + half), self.approximate, "t"),
        )


def limits_of_agreement(
    bias: float, sd: float, n_items: int, *, multiplier: float = 1.96, limit_variance: LimitVariance = "1999"
) -> BlandAltmanResult:
    """Bland-Altman limits from a published summary (mean difference, its SD, n) (docs/method.md §2b).

    >>> pefr = limits_of_agreement(-2.1, 38.8, 17, multiplier=2.0)
    >>> round(pefr.lower, 1), round(pefr.upper, 1)
    (-79.7, 75.5)
    """
    if not np.isfinite(bias) or not np.isfinite(sd) or sd < 0:
        raise ValueError(f"bias must be finite and sd finite and >= 0, got {bias!r}, {sd!r}")
    if not np.isfinite(multiplier) or multiplier <= 0:
        raise ValueError(f"multiplier must be positive, got {multiplier!r}")
    if limit_variance not in get_args(LimitVariance):
        raise ValueError(f"limit_variance must be one of {get_args(LimitVariance)}, got {limit_variance!r}")
    defined = n_items >= 2
    return BlandAltmanResult(
        bias=float(bias) if defined else np.nan,
        sd=float(sd) if defined else np.nan,
        lower=float(bias - multiplier * sd) if defined else np.nan,
        upper=float(bias + multiplier * sd) if defined else np.nan,
        multiplier=float(multiplier),
        n_items=int(n_items),
        n_dropped=0,
        defined=defined,
        reason="" if defined else "fewer than two items rated by both",
        limit_variance=limit_variance,
    )


def bland_altman(
    a: np.ndarray, b: np.ndarray, *, multiplier: float = 1.96, limit_variance: LimitVariance = "1999"
) -> BlandAltmanResult:
    """Bias and limits of agreement of ``a - b`` on the items both rated (Bland & Altman 1986; docs/method.md §2b).

    Items where either rating is NaN are dropped (``n_dropped``).

    >>> r = bland_altman(np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 2.0]), multiplier=2.0)
    >>> r.bias, r.sd, r.lower, r.upper
    (1.0, 1.0, -1.0, 3.0)
    """
    x, y, n_dropped = _complete_pairs(a, b)
    difference = x - y
    n = difference.size
    bias = float(difference.mean()) if n else np.nan
    sd = float(difference.std(ddof=1)) if n >= 2 else np.nan
    result = limits_of_agreement(
        bias if n >= 2 else 0.0, sd if n >= 2 else 0.0, n, multiplier=multiplier, limit_variance=limit_variance
    )
    return BlandAltmanResult(
        bias=result.bias,
        sd=result.sd,
        lower=result.lower,
        upper=result.upper,
        multiplier=result.multiplier,
        n_items=n,
        n_dropped=n_dropped,
        defined=result.defined,
        reason=result.reason,
        limit_variance=limit_variance,
    )


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True, kw_only=True)
class ErrorResult:
    """A mean error between two raters (``"mae"`` or ``"rmse"``) on the items both rated (docs/method.md §2b)."""

    coefficient: Literal["mae", "rmse"]
    statistic: float
    n_items: int
    n_dropped: int
    defined: bool
    reason: str


def _error(a: np.ndarray, b: np.ndarray, coefficient: Literal["mae", "rmse"]) -> ErrorResult:
    x, y, n_dropped = _complete_pairs(a, b)
    if x.size == 0:
        return ErrorResult(
            coefficient=coefficient,
            statistic=np.nan,
            n_items=0,
            n_dropped=n_dropped,
            defined=False,
            reason="no item rated by both",
        )
    difference = x - y
    if coefficient == "mae":
        value = float(np.abs(difference).mean())
    else:
        value = float(np.sqrt(np.dot(difference, difference) / difference.size))
    return ErrorResult(
        coefficient=coefficient, statistic=value, n_items=x.size, n_dropped=n_dropped, defined=True, reason=""
    )


def mean_absolute_error(a: np.ndarray, b: np.ndarray) -> ErrorResult:
    """``mean |a - b|`` over the items both rated (docs/method.md §2b).

    >>> mean_absolute_error(np.array([1.0, 2.0, np.nan]), np.array([2.0, 4.0, 1.0])).statistic
    1.5
    """
    return _error(a, b, "mae")


def root_mean_squared_error(a: np.ndarray, b: np.ndarray) -> ErrorResult:
    """``sqrt(mean (a - b)^2)`` over the items both rated (docs/method.md §2b).

    >>> root_mean_squared_error(np.array([0.0, 0.0, 0.0, 0.0]), np.array([1.0, -1.0, 1.0, -1.0])).statistic
    1.0
    """
    return _error(a, b, "rmse")


# --------------------------------------------------------------------------- Krippendorff's interval alpha


def _alpha_from_sums(sums: np.ndarray) -> np.ndarray:
    """Interval alpha from column sums ``(..., 4)`` of the units' ``(d_u, n_u, S1_u, S2_u)`` (docs/method.md §2b)."""
    d, n_values, s1, s2 = sums[..., 0], sums[..., 1], sums[..., 2], sums[..., 3]
    expected = 2.0 * (n_values * s2 - s1**2)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = 1.0 - d * (n_values - 1.0) / expected
    return np.where(expected > 0.0, value, np.nan)


@dataclass(frozen=True, kw_only=True)
class IntervalAlphaResult:
    """Krippendorff's alpha with the interval metric on the rating values (docs/method.md §2b).

    ``n_items``: units with two or more ratings (the others carry no pair); ``n_values``: their
    ratings. ``confidence_interval`` is an item jackknife on Fisher's z of an intraclass correlation.
    """

    statistic: float
    n_items: int
    n_values: int
    defined: bool
    reason: str
    _features: np.ndarray = field(repr=False, compare=False)

    @property
    def approximate(self) -> bool:
        """The jackknife interval is asymptotic; flagged under 100 items."""
        return self.n_items < APPROXIMATE_BELOW_ITEMS

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        """Back from ``z -+ t_{n-1, 1-a/2} SE_jack(z)``, ``z = log((1 + (k - 1) alpha) /
        (1 - alpha)) / 2`` with ``k = n_values / n_items``, ``SE_jack`` over the ``n`` items left out one at
        a time (docs/method.md §2b; ``method="jackknife-z"``). Both ends NaN when alpha is undefined or 1,
        there are fewer than two items, or an item left out leaves alpha outside ``(-1/(k-1), 1)``."""
        check_level(confidence_level)
        n = self.n_items
        undefined = ConfidenceInterval(np.nan, np.nan, self.approximate, "jackknife-z")
        if not self.defined or n < 2:
            return undefined
        k = self.n_values / n
        alphas = np.append(_alpha_from_sums(self._features.sum(axis=0) - self._features), self.statistic)
        if not np.all((alphas < 1.0) & (1.0 + (k - 1.0) * alphas > 0.0)):  # NaN fails too
            return undefined
        z = 0.5 * np.log((1.0 + (k - 1.0) * alphas) / (1.0 - alphas))
        left_out, centre = z[:-1], z[-1]
        se = np.sqrt((n - 1) / n * np.sum((left_out - left_out.mean()) ** 2))
        half = float(t_distribution.ppf(0.5 + confidence_level / 2.0, n - 1)) * se
        ends = np.exp(2.0 * np.array([centre - half, centre + half]))
        low, high = (ends - 1.0) / (ends + k - 1.0)
        return ConfidenceInterval(float(low), float(high), self.approximate, "jackknife-z")


def interval_alpha(ratings: np.ndarray) -> IntervalAlphaResult:
    """Krippendorff's alpha, interval metric, on real-valued ``ratings`` ``(n_items, n_raters)`` (docs/method.md §2b).

    Sparse: every item with two or more ratings counts, NaN cells are skipped (no listwise
    deletion). Per item ``u`` with ``n_u`` ratings, sum ``S1_u`` and sum of squares ``S2_u``:
    ``alpha = 1 - (N - 1) sum_u d_u / (2 (N T2 - T1^2))``, ``d_u = 2 (n_u S2_u - S1_u^2)/(n_u - 1)``.

    >>> round(interval_alpha(np.array([[1.0, 1.0], [2.0, 3.0], [3.0, 3.0], [np.nan, 5.0]])).statistic, 4)
    0.8276
    """
    matrix = as_ratings(ratings)
    if matrix.ndim != 2:
        raise ValueError(f"ratings must be 2-D (n_items, n_raters), got shape {matrix.shape}")
    present = ~np.isnan(matrix)
    per_item = present.sum(axis=1)
    pairable = per_item >= 2
    values = matrix[pairable]
    counts = per_item[pairable].astype(float)
    n_values = int(counts.sum())
    empty = np.zeros((0, 4))
    if values.shape[0] == 0:
        return IntervalAlphaResult(
            statistic=np.nan,
            n_items=0,
            n_values=0,
            defined=False,
            reason="no item has two or more ratings",
            _features=empty,
        )
    centred = values - np.nanmean(values)  # alpha is shift-invariant; centring keeps N T2 - T1^2 accurate
    s1 = np.nansum(centred, axis=1)
    s2 = np.nansum(centred**2, axis=1)
    d = 2.0 * (counts * s2 - s1**2) / (counts - 1.0)
    features = np.column_stack([np.maximum(d, 0.0), counts, s1, s2])
    value = float(_alpha_from_sums(features.sum(axis=0)))
    undefined = "" if np.isfinite(value) else "every rating has the same value: no expected disagreement"
    return IntervalAlphaResult(
        statistic=value,
        n_items=int(values.shape[0]),
        n_values=n_values,
        defined=not undefined,
        reason=undefined,
        _features=features,
    )
