"""A simulated rate against a promise with the Monte Carlo error inside it (issue 29, docs/method.md §6).

One-sided exact (Clopper-Pearson) bounds at ``Phi(2) = .977``, the level of 2 SE: ``kept`` when the
upper bound is within the promise, ``broken`` when the lower bound is above it. A rate given as a share
of ``trials`` (ties counted half are allowed: the bound is the beta quantile at ``rate * trials``).
"""

from __future__ import annotations

from scipy.stats import beta, norm

LEVEL = float(norm.cdf(2.0))


def upper_bound(rate: float, trials: int) -> float:
    """One-sided upper bound on the true rate at ``LEVEL``; 1 when every trial failed.

    By hand: no failure in 100 trials gives ``1 - (1 - .977)^(1/100) = .0371``.

    >>> round(upper_bound(0.0, 100), 4)
    0.0371
    """
    failures = rate * trials
    return 1.0 if failures >= trials else float(beta.ppf(LEVEL, failures + 1, trials - failures))


def lower_bound(rate: float, trials: int) -> float:
    """One-sided lower bound on the true rate at ``LEVEL``; 0 when no trial failed."""
    failures = rate * trials
    return 0.0 if failures <= 0 else float(beta.ppf(1.0 - LEVEL, failures, trials - failures + 1))


def kept(rate: float, trials: int, promise: float) -> bool:
    """The promise holds with the Monte Carlo error inside it."""
    return upper_bound(rate, trials) <= promise


def broken(rate: float, trials: int, promise: float) -> bool:
    """The promise fails by more than the Monte Carlo error."""
    return lower_bound(rate, trials) > promise
