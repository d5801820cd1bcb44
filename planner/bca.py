"""BCa bootstrap intervals over item patterns (docs/method.md §2, "Intervals").

The bias-corrected and accelerated interval (Efron 1987; Efron & Tibshirani 1993, §14.3)
reads the bootstrap replicates at shifted quantiles: ``z0`` corrects the median bias of the
replicates, ``a`` (the acceleration) the change of the statistic's standard error with its
value, estimated by the jackknife over the resampling unit (items). Items sharing a pattern
are interchangeable, so the jackknife needs one value per distinct pattern: the statistic
with one item of that pattern left out, weighted by how many items share it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import ndtr, ndtri

from planner.intervals import ConfidenceInterval, percentile_interval

JACKKNIFE_MAX_PATTERNS = 4000
"""More distinct patterns than this and the jackknife (patterns^2 cells) is not computed."""
TIE_TOLERANCE = 1e-9
"""Relative difference below which a replicate ties with the estimate: the same table summed in
another order differs in the last bits, and an exact comparison would then move ``z0``."""
_CHUNK_CELLS = 500_000  # leave-one-out weight cells held at once


def pattern_jackknife(
    statistic: Callable[[np.ndarray], np.ndarray], counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-item-out values of ``statistic(weights)`` per pattern, and the patterns' counts.

    ``counts[u]`` items share pattern ``u``; leaving one of them out gives the weights
    ``counts - e_u``. Only patterns with a positive count are returned.

    >>> values, weights = pattern_jackknife(lambda w: w @ np.array([0.0, 1.0]) / w.sum(axis=1), np.array([3, 1]))
    >>> values.tolist(), weights.tolist()
    ([0.3333333333333333, 0.0], [3.0, 1.0])
    """
    counts = np.asarray(counts, dtype=float)
    present = np.flatnonzero(counts > 0)
    step = max(1, _CHUNK_CELLS // max(1, counts.size))
    parts = []
    for start in range(0, present.size, step):
        rows = present[start : start + step]
        weights = np.repeat(counts[None], rows.size, axis=0)
        weights[np.arange(rows.size), rows] -= 1.0
        parts.append(np.asarray(statistic(np.maximum(weights, 0.0)), dtype=float))
    values = np.concatenate(parts) if parts else np.zeros(0)
    return values, counts[present]


def acceleration(values: np.ndarray, weights: np.ndarray) -> float:
    """Jackknife acceleration ``a = sum w u^3 / (6 (sum w u^2)^(3/2))``, ``u = mean - value``.

    Efron & Tibshirani (1993) eq. 14.15, with each value counted ``w`` times; values where
    the statistic is undefined are left out; 0 when the values do not vary.

    By hand for values 1, 2, 4: ``u = 4/3, 1/3, -5/3``, ``sum u^3 = -60/27``,
    ``sum u^2 = 42/9``, ``a = -(60/27)/(6 (42/9)^1.5) = -0.036739``:

    >>> round(acceleration(np.array([1.0, 2.0, 4.0]), np.array([1.0, 1.0, 1.0])), 6)
    -0.036739
    """
    finite = np.isfinite(values)
    values, weights = values[finite], weights[finite]
    if weights.sum() == 0:
        return 0.0
    u = weights @ values / weights.sum() - values
    spread = float(weights @ u**2)
    return float(weights @ u**3) / (6.0 * spread**1.5) if spread > 0 else 0.0


def bca_interval(
    replicates: np.ndarray,
    estimate: float,
    accel: float,
    confidence_level: float,
) -> ConfidenceInterval:
    """BCa interval from bootstrap ``replicates`` of ``estimate`` (docs/method.md §2, "Intervals").

    ``z0 = Phi^-1(share of replicates below the estimate, ties counted half)``, a tie being equality up
    to rounding (:data:`TIE_TOLERANCE`); the ends are
    the replicates' quantiles at ``Phi(z0 + (z0 + z)/(1 - a (z0 + z)))`` for ``z = -+z_{1-tail}``.
    Undefined replicates are left out. When every replicate falls on one side of the estimate
    (``z0`` infinite) the percentile interval is returned, labelled so.

    >>> reps = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    >>> bca_interval(reps, 0.5, 0.0, 0.5)  # no bias, no acceleration: the percentile interval
    ConfidenceInterval(low=0.3, high=0.7, approximate=False, method='bca')
    """
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    finite = np.asarray(replicates, dtype=float)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0 or not np.isfinite(estimate):
        return ConfidenceInterval(np.nan, np.nan, method="bca")
    tied = np.abs(finite - estimate) <= TIE_TOLERANCE * max(1.0, abs(estimate))
    below = (np.count_nonzero((finite < estimate) & ~tied) + 0.5 * np.count_nonzero(tied)) / finite.size
    if not 0.0 < below < 1.0:
        return percentile_interval(finite, confidence_level)
    z0 = float(ndtri(below))
    z = float(ndtri(0.5 + confidence_level / 2.0))
    shifted = z0 + np.array([-z, z])
    stretch = 1.0 - accel * shifted  # <= 0: the adjusted level runs off to 0 or 1
    with np.errstate(divide="ignore"):
        levels = np.where(stretch > 0, ndtr(z0 + shifted / stretch), (shifted > 0).astype(float))
    low, high = np.quantile(finite, levels)
    return ConfidenceInterval(float(low), float(high), method="bca")
