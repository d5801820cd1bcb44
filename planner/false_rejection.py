"""False-rejection rates of the margin rule at ``m`` items (normal, corrected, exact), and ``m`` (docs/method.md §4)."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr, ndtri

from planner.rules import DEFAULT_EPSILON
from planner.xi_moments import (
    XiLattice,
)

# --------------------------------------------------------------------------- recipes


def moments_iv(sigma0_sq: float, alpha_sig: float) -> None:
    if not (np.isfinite(sigma0_sq) and sigma0_sq >= 0):
        raise ValueError(f"sigma0_sq must be a finite number >= 0, got {sigma0_sq!r}")
    if not 0.0 < alpha_sig < 1.0:
        raise ValueError(f"alpha_sig must be in (0, 1), got {alpha_sig!r}")


def false_rejection_rate(
    m: int | np.ndarray, mu_d: float, sigma0_sq: float, *, epsilon: float, critical_z: float = 0.0
) -> float | np.ndarray:
    """Per-rater false-rejection rate ``Phi(z - (mu_d + eps) sqrt(m) / sigma0)`` (docs/method.md §4).

    ``critical_z = 0`` is the margin rule's ``Pr[d_k < -eps]``; the alt-test's rate of a
    human not won uses its BY quantile (``alt_test_quantile``). Zero variance gives 0
    or 1 (and 0.5 exactly at ``mu_d + eps = 0``).

    >>> round(float(false_rejection_rate(117, 0.035, 0.2188, epsilon=0.05)), 4)
    0.0247
    """
    moments_iv(sigma0_sq, 0.5)
    m = np.asarray(m, dtype=float)
    if np.any(m < 0):
        raise ValueError(f"m must be >= 0, got {m!r}")
    gap = (mu_d + epsilon) * np.sqrt(m)
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(gap == 0, 0.0, gap / math.sqrt(sigma0_sq))
    rate = ndtr(critical_z - shift)
    return float(rate) if rate.ndim == 0 else rate


EXACT_M_MAX = 30_000  # the exact convolution's reach (~2 s at the top); beyond it the corrected normal form
EXACT_CURVE = 4000  # a recipe's FR curve is exact up to here, or up to 1.3 m when that is further
_TRIM = 1e-17  # lattice probabilities this small are dropped while convolving


def _cut(m: np.ndarray, epsilon: float, pool_size: int) -> np.ndarray:
    """``c(m)``: the largest integer ``S = s m d_k`` with ``d_k < -epsilon``."""
    return np.ceil(-epsilon * m * pool_size - 1e-9) - 1.0


def corrected_false_rejection_rate(
    m: int | np.ndarray, mu_d: float, sigma_sq: float, *, epsilon: float, pool_size: int = 1
) -> np.ndarray:
    """Continuity-corrected per-rater FR on the lattice of ``s m d_k`` (docs/method.md §4, item 1).

    ``FR(m) = Phi((c(m) + 1/2 - s m mu_d) / (s sigma_s sqrt(m)))``, ``c(m) = ceil(-eps m s) - 1``.

    By hand at ``m = 117``: ``c = ceil(-5.85) - 1 = -6``,
    ``z = (-5.5 - 4.095)/(0.46773 sqrt(117)) = -1.8965``:

    >>> round(float(corrected_false_rejection_rate(117, 0.035, 0.218775, epsilon=0.05)), 4)
    0.0289
    """
    moments_iv(sigma_sq, 0.5)
    m = np.asarray(m, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (_cut(m, epsilon, pool_size) + 0.5 - pool_size * m * mu_d) / (pool_size * math.sqrt(sigma_sq) * np.sqrt(m))
    return np.asarray(ndtr(z), dtype=float)


def exact_false_rejection_rates(lattice: XiLattice, m_max: int, *, epsilon: float) -> np.ndarray:
    """``Pr[d_k < -eps]`` at ``m = 1..m_max``: the ``m``-fold convolution of the item lattice.

    docs/method.md §4, item 1. ``s m d_k`` is a sum of ``m`` independent draws of
    ``s xi``; probabilities below 1e-17 at either end are dropped as the sum grows. Above
    ``m = 30,000`` the continuity-corrected normal form takes over.

    >>> from planner.xi_moments import xi_lattice
    >>> round(float(exact_false_rejection_rates(xi_lattice(0.85, 0.9, n_labels=2), 117, epsilon=0.05)[-1]), 4)
    0.0285
    """
    s = lattice.pool_size
    exact_max = min(m_max, EXACT_M_MAX)
    rates = np.empty(m_max)
    pmf, low = np.array([1.0]), 0  # pmf[j] = P(S = low + j)
    cuts = _cut(np.arange(1, exact_max + 1, dtype=float), epsilon, s)
    for m in range(1, exact_max + 1):
        pmf, low = np.convolve(pmf, lattice.probabilities), low - s
        keep = np.flatnonzero(pmf > _TRIM)
        pmf, low = pmf[keep[0] : keep[-1] + 1], low + int(keep[0])
        upto = int(cuts[m - 1]) - low + 1
        rates[m - 1] = float(pmf[: max(upto, 0)].sum())
    if m_max > exact_max:
        rest = np.arange(exact_max + 1, m_max + 1)
        rates[exact_max:] = corrected_false_rejection_rate(
            rest, lattice.mu_d, lattice.variance, epsilon=epsilon, pool_size=s
        )
    return np.minimum(rates, 1.0)


def enveloped_m(rates: np.ndarray, target: float) -> int | float:
    """Smallest ``m`` with ``rates[m'-1] <= target`` for every ``m' >= m`` on the grid ``1..M``.

    docs/method.md §4, item 1 (the monotone envelope of a zig-zagging rate); ``inf`` when
    the last rate misses the target.

    >>> enveloped_m(np.array([0.5, 0.02, 0.03, 0.01, 0.02]), 0.025)
    4
    """
    above = np.flatnonzero(rates > target)
    if above.size == 0:
        return 1
    if above[-1] == rates.size - 1:
        return math.inf
    return int(above[-1]) + 2


def m_needed(z: float, variance: float, gap: float) -> int | float:
    """``ceil(z^2 variance / gap^2)``, at least 1; ``inf`` when ``gap <= 0`` or the ratio overflows."""
    if gap <= 0:
        return math.inf
    ratio = (z / gap) ** 2 * variance if gap > 1e-150 else math.inf
    return max(1, math.ceil(ratio - 1e-9)) if math.isfinite(ratio) else math.inf


def m_cert(mu_d: float, sigma0_sq: float, *, epsilon: float | None = None, alpha_sig: float = 0.05) -> int | float:
    """Overlap for per-rater FR ``<= alpha_sig/2`` (docs/method.md §4, item 2).

    ``m_cert = ceil(z_{1-alpha_sig/2}^2 sigma0^2 / (mu_d + eps)^2)``; ``math.inf`` when
    ``mu_d + eps <= 0``: no overlap certifies a judge that is expected to fail.

    >>> from planner.xi_moments import prior_moments
    >>> m_cert(*prior_moments(0.85, 0.90, n_labels=2))
    117
    >>> m_cert(-0.1, 0.2)
    inf
    """
    moments_iv(sigma0_sq, alpha_sig)
    epsilon = DEFAULT_EPSILON["margin"] if epsilon is None else epsilon
    return m_needed(float(ndtri(1.0 - alpha_sig / 2.0)), sigma0_sq, mu_d + epsilon)


def m_rank(variance: float, delta_min: float, *, n_judges: int, alpha_sig: float = 0.05) -> int | float:
    """Overlap to order ``J`` judges ``delta_min`` apart (docs/method.md §4, item 3).

    ``m_rank = ceil(z_{1-alpha_sig/(J-1)}^2 sigma_Delta^2 / Delta_min^2)``: one-sided,
    Bonferroni over the ``J - 1`` adjacent pairs; ``variance`` is the largest per-item
    variance of an adjacent pair's margin (``paired_variance``).

    >>> m_rank(0.2, 0.05, n_judges=2)  # ceil(1.6449^2 0.2 / 0.05^2) = ceil(216.5)
    217
    """
    moments_iv(variance, alpha_sig)
    sigma0_sq = variance
    if not (np.isfinite(delta_min) and delta_min > 0):
        raise ValueError(f"delta_min must be a finite number > 0, got {delta_min!r}")
    if not isinstance(n_judges, (int, np.integer)) or n_judges < 2:
        raise ValueError(f"n_judges must be an integer >= 2, got {n_judges!r}")
    z = float(ndtri(1.0 - alpha_sig / (n_judges - 1)))
    return m_needed(z, sigma0_sq, delta_min)
