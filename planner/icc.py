"""Intraclass correlations: the six Shrout-Fleiss / McGraw-Wong forms, with F-based intervals (docs/method.md §2b).

``ratings`` of shape ``(n_items, n_raters)``, ``NaN`` where a rating was not given (items with one left
out: listwise deletion), checked as in ``planner.scores``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

import numpy as np
from scipy.stats import f as f_distribution

from planner.intervals import APPROXIMATE_BELOW_ITEMS, ConfidenceInterval
from planner.scores import (
    NO_ITEMS,
    ONE_RATER,
    as_ratings,
    check_level,
)

IccForm = Literal["1,1", "2,1", "3,1", "1,k", "2,k", "3,k"]
ICC_FORMS: tuple[IccForm, ...] = get_args(IccForm)
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
        check_level(confidence_level)
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
    matrix = as_ratings(ratings)
    if matrix.ndim != 2:
        raise ValueError(f"ratings must be 2-D (n_items, n_raters), got shape {matrix.shape}")
    complete = ~np.isnan(matrix).any(axis=1)
    n_dropped = int(matrix.shape[0] - complete.sum())
    matrix = matrix[complete]
    n, k = matrix.shape
    reason = ONE_RATER if k < 2 else NO_ITEMS if n < 2 else ""
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
