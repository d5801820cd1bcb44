"""Significance machinery: the alt-test's t-test and BY (docs/method.md §3), e-BH (§8).

Both functions work on arrays with any leading axes (replicates, trials, judges); the last
axis of ``by_rejections`` holds the family of held-out humans.
"""

from __future__ import annotations

import numpy as np


def alt_test_p_values(diff_sum: np.ndarray, abs_sum: np.ndarray, m: np.ndarray, epsilon: float) -> np.ndarray:
    """One-sided t-test p-values of ``W_h - W_f`` against ``epsilon`` (docs/method.md §3).

    ``diff_sum`` and ``abs_sum`` are the sums of ``W_h - W_f`` and ``|W_h - W_f|`` over
    the ``m`` items of ``O_k``. ``H0: rho_f <= rho_h - epsilon``; p from the t
    distribution with ``m - 1`` df; zero variance gives ``t = -inf`` (p 0) below
    ``epsilon`` and p 1 otherwise; NaN (undefined) when ``m < 2``.

    >>> alt_test_p_values(np.array([0.0]), np.array([0.0]), np.array([40.0]), 0.1).tolist()
    [0.0]
    """
    from scipy import stats  # deferred: importing scipy.stats costs seconds, and most callers never get here

    with np.errstate(divide="ignore", invalid="ignore"):
        mean = diff_sum / m
        spread = m * abs_sum - diff_sum * diff_sum  # m^2 (m - 1)/m * variance, exact in sums
        t = (mean - epsilon) / np.sqrt(spread / (m * m * (m - 1.0)))
        p = stats.t.cdf(t, np.maximum(m - 1.0, 1.0))
    flat = spread <= 0
    p = np.where(flat, np.where(mean < epsilon, 0.0, 1.0), p)
    return np.asarray(np.where(m >= 2, p, np.nan), dtype=float)


def weighted_alt_test_p_values(
    sums: tuple[np.ndarray, np.ndarray],
    square_sums: tuple[np.ndarray, np.ndarray, np.ndarray],
    n: np.ndarray,
    epsilon: float,
) -> np.ndarray:
    """The alt-test's p-values when item ``i`` carries the weight ``w_i`` (docs/method.md §9).

    ``sums`` = ``(sum w x, sum w)`` and ``square_sums`` = ``(sum w^2 x,
    sum w^2 |x|, sum w^2)`` for ``x = W_h - W_f`` in ``{-1, 0, 1}`` over the ``n`` items of
    ``O_k``. Hajek mean ``x_w = sum w x / sum w``, linearised variance
    ``n/(n - 1) sum w^2 (x - x_w)^2 / (sum w)^2``, ``t = (x_w - epsilon)/SE`` on ``n - 1`` df;
    equal weights give ``alt_test_p_values``. Zero variance and ``n < 2`` as there.
    """
    from scipy import stats  # deferred, as in alt_test_p_values

    (diff, total), (diff2, absd2, total2) = sums, square_sums
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = diff / total
        spread = absd2 - 2.0 * mean * diff2 + mean * mean * total2  # sum w^2 (x - x_w)^2, as x^2 = |x|
        flat = spread <= 1e-12 * np.maximum(total2, 1e-300)
        t = (mean - epsilon) / np.sqrt(n / (n - 1.0) * spread / (total * total))
        p = stats.t.cdf(t, np.maximum(n - 1.0, 1.0))
    p = np.where(flat, np.where(mean < epsilon, 0.0, 1.0), p)
    return np.asarray(np.where(n >= 2, p, np.nan), dtype=float)


def by_rejections(p: np.ndarray, tested: np.ndarray, q: float) -> np.ndarray:
    """Benjamini–Yekutieli step-up over the tested p-values of the last axis (docs/method.md §3).

    Rejects the ``r`` smallest p-values, ``r`` the largest rank with
    ``p_(r) <= r q / (m H_m)``, ``m`` the number tested, ``H_m = sum_{i<=m} 1/i``.

    >>> by_rejections(np.array([0.32693, 0.03359, 0.00258]), np.ones(3, bool), 0.05).tolist()
    [False, False, True]
    """
    width = p.shape[-1]
    ranks = np.arange(1, width + 1)
    harmonic = np.concatenate([[1.0], np.cumsum(1.0 / ranks)])
    n_tested = tested.sum(axis=-1, keepdims=True)
    values = np.where(tested, p, np.inf)
    order = np.argsort(values, axis=-1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = ranks * q / (n_tested * harmonic[n_tested])
    return _step_up(order, ordered <= bound)


def _step_up(order: np.ndarray, passes: np.ndarray) -> np.ndarray:
    """Step-up on the last axis: reject the first ``r`` of ``order`` (``r``: last passing rank)."""
    width = passes.shape[-1]
    ranks = np.arange(1, width + 1)
    n_rejected = np.where(passes.any(axis=-1), width - np.argmax(passes[..., ::-1], axis=-1), 0)
    reject: np.ndarray = np.empty_like(passes)
    np.put_along_axis(reject, order, ranks <= n_rejected[..., None], axis=-1)
    return np.asarray(reject, dtype=bool)


def e_bh(e_values: object, *, q: float = 0.05) -> np.ndarray:
    """Indices rejected by e-BH at level ``q`` (Wang & Ramdas 2022; docs/method.md §8).

    With ``K`` e-values sorted decreasingly, rejects the ``k*`` largest,
    ``k* = max{k : e_(k) >= K / (q k)}`` (none when no ``k`` qualifies). Valid under any
    dependence between the e-values. Indices come back sorted.

    >>> e_bh([80, 35, 3], q=0.05)
    array([0, 1])
    """
    e = np.asarray(e_values, dtype=float)
    if e.ndim != 1:
        raise ValueError(f"e_values must be one-dimensional, got shape {e.shape}")
    if np.any(np.isnan(e)) or np.any(e < 0):
        raise ValueError("e_values must be numbers >= 0")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    order = np.argsort(-e, kind="stable")
    ranks = np.arange(1, e.size + 1)
    return np.flatnonzero(_step_up(order, e[order] >= e.size / (q * ranks)))
