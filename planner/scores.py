"""Agreement of numeric ratings: ICC, Lin's CCC, Bland-Altman, MAE, RMSE, interval alpha (docs/method.md §2b).

Ratings are floats, ``NaN`` for a rating that was not given: ``ratings`` of shape
``(n_items, n_raters)`` for the intraclass correlations, ``a``/``b`` of shape ``(n_items,)``
for two raters. Every result is frozen and carries ``n_items`` (items used), ``n_dropped``
(items left out because a rating was missing: listwise deletion), ``defined`` and ``reason``
(why undefined, ``""`` when defined). Undefined is ``defined=False`` with NaN, never 0.
Intervals are analytic (F, Fisher z, t), not bootstraps; ``confidence_interval`` takes the
confidence level like scipy's and returns a :class:`planner.intervals.ConfidenceInterval`.
Infinite ratings are refused (``ValueError``), and so is a matrix over :data:`MAX_CELLS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
from scipy.special import ndtri
from scipy.stats import f as f_distribution
from scipy.stats import t as t_distribution

from planner.intervals import APPROXIMATE_BELOW_ITEMS, ConfidenceInterval, percentile_interval
from planner.resampling import ItemResample

IccForm = Literal["1,1", "2,1", "3,1", "1,k", "2,k", "3,k"]
ICC_FORMS: tuple[IccForm, ...] = get_args(IccForm)
LimitVariance = Literal["1999", "1986"]
MAX_CELLS = 100_000_000
"""The largest ratings matrix (cells) accepted: a few float64 copies of it are held at once (~4 GB)."""

_NO_ITEMS = "fewer than two items with every rating present"
_ONE_RATER = "fewer than two raters"


def _check_level(confidence_level: float) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")


def _as_ratings(ratings: object, name: str = "ratings") -> np.ndarray:
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
    x, y = _as_ratings(a, "a"), _as_ratings(b, "b")
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"a and b must be 1-D of one length, got shapes {x.shape} and {y.shape}")
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep], int(x.size - keep.sum())


# --------------------------------------------------------------------------- intraclass correlation


@dataclass(frozen=True)
class MeanSquares:
    """The two-way ANOVA of a complete ``n x k`` matrix (docs/method.md §2b): rows (items), columns
    (raters), residual, and within-item (columns + residual pooled)."""

    n_items: int
    n_raters: int
    rows: float
    columns: float
    error: float
    within: float


def mean_squares(ratings: np.ndarray) -> MeanSquares:
    """Mean squares of a complete float matrix ``(n, k)``, ``n, k >= 2`` (docs/method.md §2b).

    The residual is summed from ``x - row mean - column mean + grand mean`` (not by subtraction of
    sums of squares), and a sum of squares within rounding of the ratings' magnitude
    (``n k (16 eps max|x|)^2``) is 0: an exactly additive or constant matrix keeps its zero mean
    squares after ``a x + b``, instead of 1e-30 residues that would make an ICC of 1e16.

    >>> mean_squares(np.array([[1.0, 2.0], [3.0, 5.0]]))
    MeanSquares(n_items=2, n_raters=2, rows=6.25, columns=2.25, error=0.25, within=1.25)
    """
    n, k = ratings.shape
    grand = ratings.mean()
    row_means = ratings.mean(axis=1)
    column_means = ratings.mean(axis=0)
    ss_rows = k * float(np.square(row_means - grand).sum())
    ss_columns = n * float(np.square(column_means - grand).sum())
    residual = ratings - row_means[:, None] - column_means[None, :] + grand
    ss_error = float(np.square(residual).sum())
    noise = n * k * (16.0 * np.finfo(float).eps * float(np.abs(ratings).max())) ** 2
    ss_rows, ss_columns, ss_error = (value if value > noise else 0.0 for value in (ss_rows, ss_columns, ss_error))
    return MeanSquares(
        n_items=n,
        n_raters=k,
        rows=ss_rows / (n - 1),
        columns=ss_columns / (k - 1),
        error=ss_error / ((n - 1) * (k - 1)),
        within=(ss_columns + ss_error) / (n * (k - 1)),
    )


def _icc_point(form: IccForm, ms: MeanSquares) -> float:
    """ICC ``form`` from the mean squares (Shrout & Fleiss 1979; docs/method.md §2b); NaN at 0/0."""
    n, k = ms.n_items, ms.n_raters
    r, c, e, w = ms.rows, ms.columns, ms.error, ms.within
    model, unit = form.split(",")
    numerator = r - (w if model == "1" else e)
    if unit == "k":
        denominator = r + (c - e) / n if model == "2" else r
    else:
        denominator = r + (k - 1) * (w if model == "1" else e) + (k * (c - e) / n if model == "2" else 0.0)
    # a denominator that cancels to rounding error of the mean squares is 0: its quotient would be noise
    return numerator / denominator if abs(denominator) > 1e-9 * max(r, c, e, w) else float("nan")


def _f_test(form: IccForm, ms: MeanSquares) -> tuple[float, int, int]:
    """The F statistic of ``H0: ICC = 0`` and its degrees of freedom (model 1: rows / within; 2, 3: rows / error)."""
    n, k = ms.n_items, ms.n_raters
    denominator = ms.within if form[0] == "1" else ms.error
    df2 = n * (k - 1) if form[0] == "1" else (n - 1) * (k - 1)
    if denominator == 0.0:
        return (float("inf") if ms.rows > 0.0 else float("nan")), n - 1, df2
    return ms.rows / denominator, n - 1, df2


def _spearman_brown(single: float, k: int) -> float:
    """The ``k``-rater form of a single-rater limit, ``k rho / (1 + (k - 1) rho)``; ``-inf`` at and below the
    pole ``rho = -1/(k - 1)`` (its limit from above), where the formula would divide by zero or flip sign."""
    denominator = 1.0 + (k - 1) * single
    return k * single / denominator if denominator > 0.0 else float("-inf")


def _model2_limit(f_star: float, ms: MeanSquares, spread: float) -> float:
    """``n (MSR - F* MSE) / (F* spread + n MSR)``, the model 2 lower limit at ``F*`` (the upper limit is it at
    ``1 / F*``; docs/method.md §2b). Past ``F* = 1`` it is divided through by ``F*``: a Satterthwaite ``v``
    near 0 puts ``F*`` near 1e305, where ``F* spread`` overflows to inf at one scale of the ratings and not
    at another (the limit read -0.0 instead of -n MSE / spread)."""
    n, r, e = ms.n_items, ms.rows, ms.error
    if f_star > 1.0:
        return n * (r / f_star - e) / (spread + n * r / f_star)
    return n * (r - f_star * e) / (f_star * spread + n * r)


def _icc_limits(
    form: IccForm, ms: MeanSquares, f_value: float, df1: int, df2: int, level: float
) -> tuple[float, float]:
    """F-based limits (Shrout & Fleiss 1979; McGraw & Wong 1996, Tables 7-8; docs/method.md §2b)."""
    n, k = ms.n_items, ms.n_raters
    upper_tail = 0.5 + level / 2.0
    model, unit = form.split(",")
    if model in ("1", "3"):
        f_low = f_value / float(f_distribution.ppf(upper_tail, df1, df2))
        f_high = f_value * float(f_distribution.ppf(upper_tail, df2, df1))
        if unit == "1":  # (F - 1)/(F + k - 1), written so that F = inf gives 1
            return 1.0 - k / (f_low + k - 1), 1.0 - k / (f_high + k - 1)
        return 1.0 - 1.0 / f_low, 1.0 - 1.0 / f_high
    # model 2: Satterthwaite degrees of freedom v for a MSC + b MSE
    rho = _icc_point("2,1", ms)
    r, c, e = ms.rows, ms.columns, ms.error
    spread = k * c + (k * n - k - n) * e
    if r == 0.0:  # no item variance: both limits are -n MSE / spread whatever F* (and v may be 0)
        low = -n * e / spread if spread > 0.0 else float("nan")
        return (_spearman_brown(low, k), _spearman_brown(low, k)) if unit == "k" else (low, low)
    a_coef = k * rho / (n * (1.0 - rho))
    b_coef = 1.0 + k * rho * (n - 1) / (n * (1.0 - rho))
    v = (a_coef * c + b_coef * e) ** 2 / ((a_coef * c) ** 2 / (k - 1) + (b_coef * e) ** 2 / ((n - 1) * (k - 1)))
    f_star_low = float(f_distribution.ppf(upper_tail, n - 1, v))
    f_star_high = float(f_distribution.ppf(upper_tail, v, n - 1))
    low = _model2_limit(f_star_low, ms, spread)
    high = _model2_limit(1.0 / f_star_high, ms, spread)
    if unit == "k":
        return _spearman_brown(low, k), _spearman_brown(high, k)
    return low, high


@dataclass(frozen=True, kw_only=True)
class IccResult:
    """An intraclass correlation of a complete matrix (docs/method.md §2b).

    ``form``: ``"1,1"`` one-way random, ``"2,1"`` two-way random (absolute agreement),
    ``"3,1"`` two-way mixed (consistency); ``",k"`` the reliability of the mean of the
    ``n_raters`` ratings. ``n_items`` items had every rating; ``n_dropped`` items with a missing
    one were left out (listwise). ``f_statistic``/``df1``/``df2``/``p_value``: the F test of
    ``ICC = 0``. ``mean_squares``: the ANOVA it is read from (None when undefined before it).
    """

    form: IccForm
    statistic: float
    n_items: int
    n_raters: int
    n_dropped: int
    defined: bool
    reason: str
    f_statistic: float
    df1: int
    df2: int
    p_value: float
    mean_squares: MeanSquares | None = field(repr=False)

    @property
    def approximate(self) -> bool:
        """Model 2's interval is a Satterthwaite approximation, flagged under 100 items; models 1 and 3
        are exact under the normal model."""
        return self.form[0] == "2" and self.n_items < APPROXIMATE_BELOW_ITEMS

    def confidence_interval(self, confidence_level: float = 0.95) -> ConfidenceInterval:
        """The F-based interval (``method="F"``; docs/method.md §2b). Both ends NaN when undefined or
        when F is 0/0; ``[1, 1]`` when the error (model 1: within-item) mean square is 0 and items vary.

        The limits come from F quantiles and need not bracket the point: with ``F < 1`` the model 2
        point can fall outside them (and ``ICC(2,k)`` can exceed 1, as its formula allows)."""
        _check_level(confidence_level)
        ms = self.mean_squares
        if not self.defined or ms is None:
            return ConfidenceInterval(np.nan, np.nan, self.approximate, "F")
        if (ms.within if self.form[0] == "1" else ms.error) <= 0.0:
            # no error: the limits tend to 1 as F -> inf when items vary; with no item variance F is 0/0
            ends = 1.0 if ms.rows > 0.0 else np.nan
            return ConfidenceInterval(ends, ends, self.approximate, "F")
        low, high = _icc_limits(self.form, ms, self.f_statistic, self.df1, self.df2, confidence_level)
        return ConfidenceInterval(float(low), float(high), self.approximate, "F")


def _check_form(form: str) -> IccForm:
    if form not in ICC_FORMS:
        raise ValueError(f"form must be one of {ICC_FORMS}, got {form!r}")
    return form


def intraclass_correlations(ratings: np.ndarray) -> dict[IccForm, IccResult]:
    """All six ICCs of ``ratings`` ``(n_items, n_raters)`` from one ANOVA (docs/method.md §2b).

    Items with a missing (NaN) rating are dropped (listwise; ``n_dropped`` says how many): the
    ANOVA models need a complete matrix. Undefined (NaN, with a reason) with fewer than two
    complete items or two raters, or when the ICC is 0/0 (every item rated alike and no item
    variance).

    >>> shrout_fleiss = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]])
    >>> {form: round(r.statistic, 2) for form, r in intraclass_correlations(shrout_fleiss).items()}
    {'1,1': 0.17, '2,1': 0.29, '3,1': 0.71, '1,k': 0.44, '2,k': 0.62, '3,k': 0.91}
    """
    matrix = _as_ratings(ratings)
    if matrix.ndim != 2:
        raise ValueError(f"ratings must be 2-D (n_items, n_raters), got shape {matrix.shape}")
    complete = ~np.isnan(matrix).any(axis=1)
    n_dropped = int(matrix.shape[0] - complete.sum())
    matrix = matrix[complete]
    n, k = matrix.shape
    reason = _ONE_RATER if k < 2 else _NO_ITEMS if n < 2 else ""
    results: dict[IccForm, IccResult] = {}
    ms = mean_squares(matrix) if not reason else None
    for form in ICC_FORMS:
        if ms is None:
            results[form] = IccResult(
                form=form,
                statistic=np.nan,
                n_items=n,
                n_raters=k,
                n_dropped=n_dropped,
                defined=False,
                reason=reason,
                f_statistic=np.nan,
                df1=max(n - 1, 0),
                df2=0,
                p_value=np.nan,
                mean_squares=None,
            )
            continue
        value = _icc_point(form, ms)
        f_value, df1, df2 = _f_test(form, ms)
        p_value = float(f_distribution.sf(f_value, df1, df2)) if np.isfinite(f_value) else np.nan
        if np.isinf(f_value):
            p_value = 0.0
        undefined = "" if np.isfinite(value) else "the ICC's denominator is 0 (no variance between items)"
        results[form] = IccResult(
            form=form,
            statistic=value,
            n_items=n,
            n_raters=k,
            n_dropped=n_dropped,
            defined=not undefined,
            reason=undefined,
            f_statistic=f_value,
            df1=df1,
            df2=df2,
            p_value=p_value,
            mean_squares=ms,
        )
    return results


def intraclass_correlation(ratings: np.ndarray, form: IccForm = "2,1") -> IccResult:
    """One ICC of ``ratings`` ``(n_items, n_raters)``; see :func:`intraclass_correlations` (docs/method.md §2b).

    >>> r = intraclass_correlation(np.array([[1.0, 2.0], [3.0, 5.0], [2.0, np.nan]]), "3,1")
    >>> round(r.statistic, 4), r.n_items, r.n_dropped
    (0.9231, 2, 1)
    """
    return intraclass_correlations(ratings)[_check_form(form)]


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
        _check_level(confidence_level)
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
        _check_level(confidence_level)
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
    ratings. ``confidence_interval`` is a percentile item bootstrap (``planner.resampling``).
    """

    statistic: float
    n_items: int
    n_values: int
    defined: bool
    reason: str
    _features: np.ndarray = field(repr=False, compare=False)

    @property
    def approximate(self) -> bool:
        """A percentile bootstrap from fewer than 100 items is flagged approximate."""
        return self.n_items < APPROXIMATE_BELOW_ITEMS

    def confidence_interval(
        self, confidence_level: float = 0.95, *, n_resamples: int = 1000, rng: int | np.random.Generator | None = None
    ) -> ConfidenceInterval:
        """Percentile interval over ``n_resamples`` item resamples; both ends NaN when undefined."""
        _check_level(confidence_level)
        if not self.defined:
            return ConfidenceInterval(np.nan, np.nan, self.approximate, "percentile")
        resample = ItemResample.draw(np.ones(self.n_items, dtype=np.int64), self.n_items, n_resamples, rng)
        interval = percentile_interval(_alpha_from_sums(resample.sums(self._features)), confidence_level)
        return ConfidenceInterval(interval.low, interval.high, self.approximate, "percentile")


def interval_alpha(ratings: np.ndarray) -> IntervalAlphaResult:
    """Krippendorff's alpha, interval metric, on real-valued ``ratings`` ``(n_items, n_raters)`` (docs/method.md §2b).

    Sparse: every item with two or more ratings counts, NaN cells are skipped (no listwise
    deletion). Per item ``u`` with ``n_u`` ratings, sum ``S1_u`` and sum of squares ``S2_u``:
    ``alpha = 1 - (N - 1) sum_u d_u / (2 (N T2 - T1^2))``, ``d_u = 2 (n_u S2_u - S1_u^2)/(n_u - 1)``.

    >>> round(interval_alpha(np.array([[1.0, 1.0], [2.0, 3.0], [3.0, 3.0], [np.nan, 5.0]])).statistic, 4)
    0.8276
    """
    matrix = _as_ratings(ratings)
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
