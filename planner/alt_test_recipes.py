"""Overlap for the alt-test and the judge-level promise: BY quantiles, rates of lost humans (docs/method.md §4)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from scipy.special import ndtri

from planner.false_rejection import (
    EXACT_M_MAX,
    m_needed,
    moments_iv,
)
from planner.rules import ALT_TEST_MIN_ITEMS, DEFAULT_EPSILON
from planner.xi_moments import (
    XiLattice,
)


def alt_test_quantile(n_humans: int, *, q: float = 0.05) -> float:
    """``z_{1-alpha*}``, ``alpha* = ceil(K/2) q / (K H_K)``: the BY level that ``ceil(K/2)``
    rejections must clear (docs/method.md §4, item 5).

    >>> [round(alt_test_quantile(k), 3) for k in (3, 4, 5)]
    [2.093, 2.257, 2.222]
    """
    if not isinstance(n_humans, (int, np.integer)) or n_humans < 2:
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    harmonic = float(np.sum(1.0 / np.arange(1, n_humans + 1)))
    alpha_star = math.ceil(n_humans / 2) * q / (n_humans * harmonic)
    return float(ndtri(1.0 - alpha_star))


def m_alt_test(
    mu: float,
    sigma_sq: float,
    *,
    n_humans: int,
    epsilon: float | None = None,
    q: float = 0.05,
    power: float | None = None,
    alpha_sig: float = 0.05,
) -> int | float:
    """Alt-test overlap ``ceil((z_{1-alpha*} + z_{power})^2 sigma^2 / (mu + eps)^2)``.

    docs/method.md §4, item 5.

    ``mu``, ``sigma_sq`` are the moments of ``W_f - W_h`` (``advantage_moments``). The
    default ``power`` is ``1 - alpha_sig/2``: a truly good judge then fails a held-out
    human no more often than the margin rule promises (``power=0.5`` plans for the 50%
    point). ``math.inf`` when ``mu + eps <= 0``.

    >>> m_alt_test(0.0, 0.3, n_humans=3, epsilon=0.1, power=0.5)  # ceil(2.0933^2 0.3 / 0.01)
    132
    >>> m_alt_test(0.0, 0.3, n_humans=3, epsilon=0.1)  # ceil((2.0933 + 1.9600)^2 0.3 / 0.01)
    493
    """
    moments_iv(sigma_sq, alpha_sig)
    power = 1.0 - alpha_sig / 2.0 if power is None else power
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1) or None, got {power!r}")
    z = alt_test_quantile(n_humans, q=q) + float(ndtri(power))
    epsilon = DEFAULT_EPSILON["alt-test"] if epsilon is None else epsilon
    return m_needed(z, sigma_sq, mu + epsilon)


PANEL_FR_SHARE = 0.8
"""A shared panel's per-human recipe at the default power plans for FR ``0.8 alpha_sig/2``: the t-test on a few
dozen shared items zig-zags about the normal form (FR .026 at 50 items, .0245 at its ``m`` of 49, ``p_h = .85``,
``p_j = .9``, ``K = 3``), so the normal form's ``m`` does not keep the promise over ``[m, 1.3 m]``
(docs/method.md §4, item 5)."""

ALT_TEST_DRAWS = 10_000
"""Simulated decisions behind the alt-test's judge-level FR (MC SE ~.0016 at .025; docs/method.md §4, item 5)."""
ALT_TEST_EXACT_M_MAX = 2_000
"""Beyond this overlap the judge-level search is not run and the per-human normal recipe stands."""


def _block_counts(
    p_plus: float, p_minus: float, n_humans: int, m_max: int, draws: int, at: object, rates: np.ndarray
) -> Iterator[tuple[int, np.ndarray]]:
    """Per overlap ``m = 1..m_max`` (only those in ``at`` when given; ``rates`` of the others set NaN), the
    counts so far of each secondary's block items of the three kinds that move a held-out human's score
    (``A``: ``J = P != S``, ``B``: ``J = S != P``, ``C``: ``P = S != J``), shape ``(3, draws, K - 1)``.

    Each draw adds one item to every block as ``m`` grows (successive ``m`` share their draws, from seed 0);
    ``draws`` is cut so that draws x humans x ``m_max`` stays under 4e7 (the work bound).
    """
    edges = np.cumsum([p_plus, p_plus, p_minus])
    draws = max(100, min(int(draws), 40_000_000 // (n_humans * m_max)))
    gen = np.random.default_rng(0)
    counts = np.zeros((3, draws, n_humans - 1))
    wanted = np.ones(m_max + 1, dtype=bool)
    if at is not None:
        wanted[:] = False
        wanted[np.asarray(at, dtype=np.int64)] = True
        rates[~wanted[1:]] = np.nan
    for size in range(1, m_max + 1):
        u = gen.random((draws, n_humans - 1))
        counts[0] += u < edges[0]
        counts[1] += (u >= edges[0]) & (u < edges[1])
        counts[2] += (u >= edges[1]) & (u < edges[2])
        if wanted[size]:
            yield size, counts


def margin_judge_rates(
    m_max: int,
    lattice: XiLattice,
    *,
    n_humans: int,
    epsilon: float | None = None,
    omega_threshold: float = 0.5,
    draws: int = ALT_TEST_DRAWS,
    at: object = None,
) -> np.ndarray:
    """Judge-level margin FR, ``P(omega < omega_threshold)`` for a judge as the lattice says, at ``m = 1..m_max``
    on a design with one held-in label per overlap item (disjoint secondaries; docs/method.md §4, item 6).

    On secondary ``S``'s block (pool: the primary ``P``) ``xi_S`` is ``+1`` on ``A`` items, ``-1`` on ``C``; the
    primary, held out on every block (pool: that block's secondary), has ``xi_P`` ``+1`` on ``B`` and ``-1`` on
    ``C``: ``P(A) = P(B) = P(s xi = +1)``, ``P(C) = P(s xi = -1)``. A human is lost when its ``d < -eps``; the rate
    counts runs whose share of humans not lost is below ``omega_threshold``, an upper bound on the fixed
    rule's rejections (which also need the bootstrap's agreement). Shares the draws of ``_block_counts``.
    """
    if lattice.pool_size != 1:
        raise ValueError(f"the judge-level rate is for one held-in label per item, not pool_size={lattice.pool_size}")
    if not isinstance(n_humans, (int, np.integer)) or n_humans < 2:
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")
    if not isinstance(m_max, (int, np.integer)) or not 1 <= m_max <= EXACT_M_MAX:
        raise ValueError(f"m_max must be an integer in 1..{EXACT_M_MAX}, got {m_max!r}")
    epsilon = DEFAULT_EPSILON["margin"] if epsilon is None else epsilon
    p_plus, p_minus = float(lattice.probabilities[2]), float(lattice.probabilities[0])
    k = int(n_humans)
    rates = np.ones(m_max)
    for size, counts in _block_counts(p_plus, p_minus, k, m_max, draws, at, rates):
        lost = lost_humans(counts, size, epsilon=epsilon)
        rates[size - 1] = float(np.mean(k - lost < omega_threshold * k - 1e-9))
    return rates


def lost_humans(counts: np.ndarray, m: int, *, epsilon: float) -> np.ndarray:
    """How many humans the margin rule loses (``d < -eps``) on disjoint secondaries of ``m`` items each, from
    the block counts of ``A``, ``B``, ``C`` items (shape ``(3, ..., K - 1)``; docs/method.md §4, item 6):
    secondary ``r`` has ``m d = A_r - C_r``, the primary ``(K - 1) m d = sum_r (B_r - C_r)``."""
    a, b, c = counts
    lost = np.sum(a - c < -epsilon * m - 1e-9, axis=-1)
    return np.asarray(lost + (np.sum(b - c, axis=-1) < -epsilon * m * a.shape[-1] - 1e-9))


def m_margin_judge(
    lattice: XiLattice,
    per_rater_m: int,
    *,
    n_humans: int,
    epsilon: float | None = None,
    omega_threshold: float = 0.5,
    alpha_sig: float = 0.05,
) -> int:
    """Smallest ``m`` whose judge-level FR (``margin_judge_rates``) plus 2 MC SE is at most ``alpha_sig/2`` at
    every overlap from ``m`` up to the per-rater recipe's ``per_rater_m`` (docs/method.md §4, item 6);
    ``per_rater_m`` when none below it holds.

    >>> from planner.xi_moments import xi_lattice
    >>> lattice = xi_lattice(0.85, 0.90, n_labels=2)
    >>> m_margin_judge(lattice, 120, n_humans=3)  # the per-rater recipe: 120
    60
    """
    target = alpha_sig / 2.0
    rates = margin_judge_rates(
        per_rater_m, lattice, n_humans=n_humans, epsilon=epsilon, omega_threshold=omega_threshold
    )
    draws = max(100, min(ALT_TEST_DRAWS, 40_000_000 // (n_humans * per_rater_m)))
    misses = np.flatnonzero(rates + 2.0 * np.sqrt(rates * (1.0 - rates) / draws) > target)
    return per_rater_m if misses.size and misses[-1] == per_rater_m - 1 else int(misses[-1]) + 2 if misses.size else 1


def alt_test_judge_rates(
    m_max: int,
    mu: float,
    sigma_sq: float,
    *,
    n_humans: int,
    epsilon: float | None = None,
    q: float = 0.05,
    omega_threshold: float = 0.5,
    draws: int = ALT_TEST_DRAWS,
    at: object = None,
) -> np.ndarray:
    """Judge-level alt-test FR at ``m = 1..m_max`` on a design with one held-in label per overlap item
    (disjoint secondaries; docs/method.md §4, item 5), simulated from the moments alone.

    On an item of secondary ``r`` (pool: the primary ``P``; the primary's pool there: ``S_r``) the judge's
    sign ``X = W_f - W_h`` for ``S_r`` and ``Y`` for ``P`` take ``(+1, 0)`` when ``J = P != S``, ``(0, +1)``
    when ``J = S != P`` (both ``p_plus``, the humans being exchangeable), ``(-1, -1)`` when ``P = S != J``
    (``p_minus``) and ``(0, 0)`` otherwise, with ``p_plus + p_minus = sigma^2 + mu^2`` and
    ``p_plus - p_minus = mu``. Each draw adds one item to every secondary's block as ``m`` grows (the rates
    of successive ``m`` share their draws, from seed 0), and runs the decision: the one-sided t-test of
    ``W_h - W_f`` against ``eps`` per human (the primary on all ``(K - 1) m`` items), BY at ``q``, pass when
    the share rejected reaches ``omega_threshold``. Rates below the alt-test's 30 items are 1 (not run);
    with ``at`` (overlaps in ``1..m_max``) only those are decided and the others are NaN.
    """
    from scipy.special import stdtr

    from planner.significance import by_rejections

    moments_iv(sigma_sq, 0.5)
    if not isinstance(n_humans, (int, np.integer)) or n_humans < 2:
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")
    if not isinstance(m_max, (int, np.integer)) or not 1 <= m_max <= ALT_TEST_EXACT_M_MAX:
        raise ValueError(f"m_max must be an integer in 1..{ALT_TEST_EXACT_M_MAX}, got {m_max!r}")
    epsilon = DEFAULT_EPSILON["alt-test"] if epsilon is None else epsilon
    p_plus, p_minus = (sigma_sq + mu * mu + mu) / 2.0, (sigma_sq + mu * mu - mu) / 2.0
    if min(p_plus, p_minus) < -1e-9 or 2.0 * p_plus + p_minus > 1.0 + 1e-9:
        raise ValueError(f"moments mu={mu!r}, sigma_sq={sigma_sq!r} are not those of exchangeable humans' W_f - W_h")
    k = int(n_humans)
    rates = np.ones(m_max)
    for size, (a, b, c) in _block_counts(p_plus, p_minus, k, m_max, draws, at, rates):
        if size < ALT_TEST_MIN_ITEMS:
            continue
        diff = np.concatenate([c - a, (c - b).sum(axis=1, keepdims=True)], axis=1)  # sum of W_h - W_f
        absolute = np.concatenate([c + a, (c + b).sum(axis=1, keepdims=True)], axis=1)
        m_k = np.array([size] * (k - 1) + [size * (k - 1)], dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            spread = m_k * absolute - diff * diff
            t = (diff / m_k - epsilon) / np.sqrt(spread / (m_k * m_k * (m_k - 1.0)))
            p = stdtr(m_k - 1.0, t)
        p = np.where(spread <= 0, np.where(diff / m_k < epsilon, 0.0, 1.0), p)
        rejected = by_rejections(p, np.ones(p.shape, dtype=bool), q).sum(axis=1)
        rates[size - 1] = float(np.mean(rejected < omega_threshold * k - 1e-9))
    return rates


def m_alt_test_judge(
    mu: float,
    sigma_sq: float,
    *,
    n_humans: int,
    epsilon: float | None = None,
    q: float = 0.05,
    omega_threshold: float = 0.5,
    alpha_sig: float = 0.05,
) -> int | float | None:
    """Smallest ``m`` (at least 30) whose judge-level FR (``alt_test_judge_rates``) is at most ``alpha_sig/2``
    at every overlap from ``m`` to the per-human recipe's (the monotone envelope of a zig-zagging rate,
    docs/method.md §4, item 5), the draws' Monte Carlo error (2 SE) counted inside the promise. ``inf``
    when ``mu + eps <= 0``; None when the per-human recipe asks more than ``ALT_TEST_EXACT_M_MAX`` items
    or the judge-level rate misses the promise there (the per-human recipe then stands).

    >>> from planner.xi_moments import advantage_moments, xi_lattice
    >>> mu, var = advantage_moments(*xi_lattice(0.85, 0.90, n_labels=2).advantage)
    >>> m_alt_test_judge(mu, var, n_humans=3), m_alt_test(mu, var, n_humans=3)
    (42, 66)
    """
    moments_iv(sigma_sq, alpha_sig)
    epsilon = DEFAULT_EPSILON["alt-test"] if epsilon is None else epsilon
    if mu + epsilon <= 0:
        return math.inf
    per_human = m_alt_test(mu, sigma_sq, n_humans=n_humans, epsilon=epsilon, q=q, alpha_sig=alpha_sig)
    hi = max(int(per_human), 2 * ALT_TEST_MIN_ITEMS) if math.isfinite(per_human) else math.inf
    if hi > ALT_TEST_EXACT_M_MAX:
        return None
    assert isinstance(hi, int)
    target = alpha_sig / 2.0

    def above(sizes: np.ndarray) -> np.ndarray:
        """The overlaps among ``sizes`` whose rate + 2 SE (the draws' MC error inside the promise) misses."""
        rates = alt_test_judge_rates(
            hi, mu, sigma_sq, n_humans=n_humans, epsilon=epsilon, q=q, omega_threshold=omega_threshold, at=sizes
        )[sizes - 1]
        return np.asarray(sizes[rates + 2.0 * np.sqrt(rates * (1.0 - rates) / ALT_TEST_DRAWS) > target], dtype=np.int64)

    # Every step-th overlap, then every overlap just above the last coarse miss: the rate falls steeply
    # past its crossing, so the envelope is found at a fraction of deciding every overlap.
    step = max(1, hi // 60)
    coarse = above(np.unique(np.r_[np.arange(ALT_TEST_MIN_ITEMS, hi + 1, step), hi]))
    if coarse.size == 0:
        return ALT_TEST_MIN_ITEMS
    if coarse[-1] == hi:
        return None
    last = int(coarse[-1])
    fine = above(np.arange(last + 1, min(last + 2 * step, hi) + 1))
    return (int(fine[-1]) if fine.size else last) + 1
