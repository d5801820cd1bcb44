"""The overlap recipes: overlap to certify a judge or rank several, and the budget (docs/method.md §4).

``d_k ~ N(mu_d, sigma0^2 / m)`` with ``mu_d = E[xi]``, ``sigma0^2 = Var(xi)`` per item (``F = p_o``); the
moments come from ``planner.xi_moments`` (priors or a pilot) or ``planner.ratio_moments``, and the
false-rejection rates behind ``m`` from ``planner.false_rejection`` and ``planner.alt_test_recipes``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtri

from planner.alt_test_recipes import (
    PANEL_FR_SHARE,
    alt_test_quantile,
    m_alt_test,
    m_alt_test_judge,
    m_margin_judge,
)
from planner.false_rejection import (
    EXACT_CURVE,
    EXACT_M_MAX,
    corrected_false_rejection_rate,
    enveloped_m,
    exact_false_rejection_rates,
    false_rejection_rate,
    m_cert,
    m_rank,
    moments_iv,
)
from planner.neyman import PPI_FR_SHARE, moment_variances
from planner.ratio_moments import (
    RATIO_COEFFICIENTS,
    RatioPrior,
    simulated_ratio_m,
)
from planner.rules import ALT_TEST_MIN_ITEMS, DEFAULT_EPSILON, RULES
from planner.xi_moments import (
    XiLattice,
)


@dataclass(frozen=True)
class OverlapPlan:
    """Overlap ``m`` as a budget: ``rho = m/n``, labels per human, total human labels."""

    n_items: int
    n_humans: int
    m: int
    rho: float
    per_rater: tuple[int, ...]
    total_labels: int


@dataclass(frozen=True)
class Recipe:
    """The overlap a goal needs, its budget, and the error rate along an ``m`` grid.

    ``goal`` is ``"certify"`` (``fr_rate``: per-rater false-rejection rate) or
    ``"rank"`` (``fr_rate``: chance that a pair of judges ``delta_min`` apart is
    misordered). ``m`` is None when no overlap suffices (the judge is expected to fail);
    ``feasible`` is False then, or when ``m`` exceeds ``n_items``; ``plan`` is the budget
    when feasible. ``reason`` says why not feasible (``""`` otherwise).
    """

    goal: str
    rule: str
    m: int | None
    feasible: bool
    reason: str
    plan: OverlapPlan | None
    m_grid: tuple[int, ...]
    fr_rate: tuple[float, ...]
    alpha_sig: float
    estimator: str = "paired"
    promise: str = "rater"
    """``"rater"``: FR of each held-out human; ``"judge"``: the judge's FR (docs/method.md §4, item 6)."""


def _budget_iv(n_items: int, n_humans: int) -> None:
    if not isinstance(n_items, (int, np.integer)) or n_items < 1:
        raise ValueError(f"n_items must be a positive integer, got {n_items!r}")
    if not isinstance(n_humans, (int, np.integer)) or n_humans < 2:
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")


def overlap_plan(n_items: int, n_humans: int, m: int) -> OverlapPlan:
    """Budget of overlap ``m``: ``rho = m/n``, labels per human, ``B = n (1 + rho (K-1))``.

    docs/method.md §4, "Turn ``m`` into what a PM budgets". The primary labels all ``n`` items;
    each of the ``K - 1`` secondaries labels ``m``.

    >>> plan = overlap_plan(1000, 3, 250)
    >>> plan.rho, plan.per_rater, plan.total_labels
    (0.25, (1000, 250, 250), 1500)
    """
    _budget_iv(n_items, n_humans)
    if not isinstance(m, (int, np.integer)) or not 0 <= m <= n_items:
        raise ValueError(f"m must be an integer in 0..n_items={n_items}, got {m!r}")
    per_rater = (int(n_items),) + (int(m),) * (n_humans - 1)
    return OverlapPlan(int(n_items), int(n_humans), int(m), m / n_items, per_rater, sum(per_rater))


def _m_grid(n_items: int, m: int | float, m_grid: object) -> tuple[int, ...]:
    """The given grid, or ~30 geometric steps up to ``n_items`` plus ``m`` itself."""
    if m_grid is not None:
        grid = np.asarray(m_grid)
        if grid.ndim != 1 or grid.size == 0 or np.any(grid < 1) or np.any(grid % 1 != 0):
            raise ValueError(f"m_grid must be a non-empty list of integers >= 1, got {m_grid!r}")
        return tuple(int(v) for v in grid)
    grid = np.unique(np.round(np.geomspace(1, n_items, 30)).astype(int))
    if m <= n_items:
        grid = np.union1d(grid, [int(m)])
    return tuple(int(v) for v in grid)


def _recipe(
    goal: str,
    rule: str,
    m: int | float,
    n_items: int,
    n_humans: int,
    grid: tuple[int, ...],
    rates: np.ndarray | float,
    alpha_sig: float,
    fail_reason: str,
) -> Recipe:
    if math.isinf(m):
        feasible, reason, m_out = False, fail_reason, None
    elif m > n_items:
        feasible, m_out = False, int(m)
        reason = f"needs m={int(m)} overlapping items but the project has only n_items={n_items}"
    else:
        feasible, reason, m_out = True, "", int(m)
    plan = overlap_plan(n_items, n_humans, m_out) if feasible and m_out is not None else None
    return Recipe(
        goal, rule, m_out, feasible, reason, plan, grid, tuple(float(r) for r in np.atleast_1d(rates)), float(alpha_sig)
    )


def _rates_at(
    m: np.ndarray,
    mu_d: float,
    sigma_sq: float,
    epsilon: float,
    pool_size: int,
    lattice: XiLattice | None,
    *,
    exact_to: int = EXACT_CURVE,
) -> np.ndarray:
    """Per-rater FR at the overlaps ``m``: exact on ``lattice`` up to ``exact_to`` items, else continuity-corrected."""
    rates = corrected_false_rejection_rate(m, mu_d, sigma_sq, epsilon=epsilon, pool_size=pool_size)
    exact = m <= min(exact_to, EXACT_M_MAX)
    if lattice is not None and exact.any():
        rates[exact] = exact_false_rejection_rates(lattice, int(m[exact].max()), epsilon=epsilon)[m[exact] - 1]
    return rates


def corrected_bracket(
    mu_d: float, sigma_sq: float, *, epsilon: float, pool_size: int = 1, alpha_sig: float = 0.05
) -> tuple[int, int]:
    """Overlaps ``(lo, hi)`` between which the continuity-corrected FR last exceeds ``alpha_sig/2``.

    docs/method.md §4, item 1. The cut ``c(m)`` lies in ``[-eps m s - 1, -eps m s)``, so
    ``FR(m)`` lies between ``Phi((-+1/2 - s m (mu_d + eps))/(s sigma_s sqrt(m)))``; both bounds
    fall with ``m``. The lower bound exceeds the target below ``lo`` and the upper bound
    meets it from ``hi`` on (roots of ``(mu_d + eps) x^2 - z sigma_s x -+ 1/(2s) = 0`` in
    ``x = sqrt(m)``), so the monotone envelope of the corrected FR lies in ``lo..hi``, a window
    of about ``2 sqrt(m)/(s z sigma_s)`` items however large ``m`` is. Needs ``mu_d + eps > 0``
    and ``sigma_sq > 0``.

    >>> corrected_bracket(0.035, 0.218775, epsilon=0.05)  # m_cert = 117
    (104, 128)
    """
    gap, sigma = mu_d + epsilon, math.sqrt(sigma_sq)
    z = float(ndtri(1.0 - alpha_sig / 2.0))

    def root(half: float) -> float:  # the larger root; 0 when the bound stays below the target
        discriminant = z * z * sigma_sq + 4.0 * gap * half / pool_size
        return ((z * sigma + math.sqrt(discriminant)) / (2.0 * gap)) ** 2 if discriminant >= 0 else 0.0

    return max(1, math.floor(root(-0.5))), math.ceil(root(0.5))


def _enveloped_certification(
    mu_d: float, sigma_sq: float, epsilon: float, pool_size: int, lattice: XiLattice | None, alpha_sig: float
) -> int | float:
    """The smallest ``m`` with FR ``<= alpha_sig/2`` at every ``m' >= m`` (docs/method.md §4, items 1-2).

    Only a window of overlaps is evaluated: the corrected form's bracket (``corrected_bracket``)
    beyond the exact reach, so a judge just past ``-eps`` (an overlap of millions) costs as little as
    any other; with a lattice, the exact FR on ``1..top``, ``top`` a tenth (at least 40 items) past
    the bracket, and twice as far while the exact FR still exceeds the target there (the lattice's
    skew moves the crossing past the corrected form's: 6,960 against 6,900 at p_h .9, p_j .85, s 2).
    """
    if mu_d + epsilon <= 0:
        return math.inf
    if sigma_sq == 0:
        return 1
    target = alpha_sig / 2.0
    lo, hi = corrected_bracket(mu_d, sigma_sq, epsilon=epsilon, pool_size=pool_size, alpha_sig=alpha_sig)
    top = hi + max(40, hi // 10)
    if lattice is None or top > EXACT_M_MAX:
        window = np.arange(max(lo - 1, EXACT_M_MAX + 1 if lattice is not None else 1), hi + 1)
        above = window[_rates_at(window, mu_d, sigma_sq, epsilon, pool_size, None) > target]
        if above.size:
            return int(above[-1]) + 1
        if lattice is None:
            return 1
    top = min(top, EXACT_M_MAX)
    while True:
        m = enveloped_m(exact_false_rejection_rates(lattice, top, epsilon=epsilon), target)
        if math.isfinite(m) or top == EXACT_M_MAX:
            return min(m, EXACT_M_MAX + 1)
        top = min(2 * top, EXACT_M_MAX)


def certify_recipe(
    mu_d: float,
    sigma0_sq: float,
    *,
    n_items: int,
    n_humans: int,
    rule: str = "margin",
    epsilon: float | None = None,
    alpha_sig: float = 0.05,
    q: float = 0.05,
    power: float | None = None,
    m_grid: list[int] | None = None,
    estimator: str = "paired",
    judge_agreement: float | None = None,
    pool_size: int = 1,
    lattice: XiLattice | RatioPrior | None = None,
    coefficient: str = "po",
    omega_threshold: float = 0.5,
    promise: str = "rater",
) -> Recipe:
    """Overlap and budget to certify a judge, with its FR curve (docs/method.md §4).

    ``rule="margin"`` (``epsilon`` default 0.05): ``sigma0_sq`` is the per-item variance
    ``sigma_s^2`` for ``pool_size = s`` held-in labels per overlap item (``prior_moments``).
    The FR of one held-out human is exact on the lattice of ``s m d_k`` when ``lattice``
    (the item distribution, ``xi_lattice``) is given, else continuity-corrected; ``m`` is
    the smallest overlap with ``FR(m') <= alpha_sig/2`` for every ``m' >= m`` (the
    monotone envelope; ``m_cert`` is where the search starts). ``rule="alt-test"``:
    ``mu_d``, ``sigma0_sq`` are the moments of ``W_f - W_h``; ``m_alt_test`` with ``q``
    and ``power`` (default ``1 - alpha_sig/2``; ``epsilon`` default 0.2), at least the
    alt-test's 30 items per human, and ``FR(m) = Phi(z_{1-alpha*} - (mu + eps) sqrt(m)/sigma)``. With one
    held-in label per overlap item (``pool_size = 1``, disjoint secondaries) the alt-test's ``m`` is instead
    the smallest whose judge-level FR is at most ``alpha_sig/2`` (``m_alt_test_judge``, with
    ``omega_threshold``): the per-human power target over-sized it 33-100%; the curve stays per human. On a
    shared panel (``pool_size > 1``) the default power is ``1 - PANEL_FR_SHARE alpha_sig/2``, a margin for the
    t-test's zig-zag on few items.

    A ratio ``coefficient`` (kappa, alpha, AC1; margin rule) takes ``mu_d``, ``sigma0_sq`` from
    ``ratio_moments`` (the delta-method variance constant) and the plain normal FR
    ``Phi(-(mu_d + eps) sqrt(m)/sigma)``: its ``d_k`` lives on no lattice (docs/method.md §4, item 4).

    ``promise="judge"`` (margin rule, ``p_o``, paired, one held-in label per item with its lattice: disjoint
    secondaries) serves ``m_margin_judge``, the smallest ``m`` keeping the judge's FR within ``alpha_sig/2``,
    instead of each held-out human's; the curve stays per human.

    ``estimator="ppi"`` / ``"neyman"`` (margin rule; docs/method.md §9) plan for the
    estimate that also uses the judge-primary agreement on every item, ``judge_agreement``
    = ``P(judge = primary)``: the variance drops to ``(1 - rho^2) Var(B)`` (PPI++) or
    ``(sum_h W_h S_h)^2`` (Neyman panel over the agreement strata). PPI++ plans for FR ``PPI_FR_SHARE alpha_sig/2``
    (its tuned ``lam`` puts its FR on the normal form's; ``planner.neyman.PPI_FR_SHARE``); the curve stays the normal
    form's at ``alpha_sig/2``.

    >>> from planner.xi_moments import xi_lattice
    >>> r = certify_recipe(0.035, 0.218775, n_items=1000, n_humans=3,
    ...                    lattice=xi_lattice(0.85, 0.90, n_labels=2))
    >>> r.m, r.plan.rho, r.plan.total_labels  # m_cert = 117; the exact FR stays above .025 up to 119
    (120, 0.12, 1240)
    >>> [certify_recipe(0.035, 0.218775, n_items=1000, n_humans=3, estimator=e,
    ...                 judge_agreement=0.78).m for e in ("ppi", "neyman")]
    [90, 84]
    """
    _budget_iv(n_items, n_humans)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if coefficient not in ("po", *RATIO_COEFFICIENTS):
        raise ValueError(f"coefficient must be 'po' or one of {RATIO_COEFFICIENTS}, got {coefficient!r}")
    if coefficient != "po" and (
        rule != "margin" or estimator != "paired" or not (lattice is None or isinstance(lattice, RatioPrior))
    ):
        raise ValueError("a ratio coefficient plans the margin rule's paired estimate, without a p_o lattice")
    if isinstance(lattice, RatioPrior) and lattice.coefficient != coefficient:
        raise ValueError(f"the ratio prior is for {lattice.coefficient}, not {coefficient}")
    if estimator not in ("paired", "ppi", "neyman"):
        raise ValueError(f"estimator must be 'paired', 'ppi' or 'neyman', got {estimator!r}")
    if estimator != "paired":
        if rule != "margin" or judge_agreement is None:
            raise ValueError(f"estimator={estimator!r} plans the margin rule and needs judge_agreement")
        moments_iv(sigma0_sq, alpha_sig)
        variances = moment_variances(mu_d, sigma0_sq, judge_agreement=judge_agreement)
        sigma0_sq = getattr(variances, estimator)
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    if lattice is not None and lattice.pool_size != pool_size:
        raise ValueError(f"lattice is for pool_size={lattice.pool_size}, not {pool_size}")
    if promise not in ("rater", "judge"):
        raise ValueError(f"promise must be 'rater' or 'judge', got {promise!r}")
    if promise == "judge" and not (
        rule == "margin" and estimator == "paired" and coefficient == "po" and isinstance(lattice, XiLattice)
    ):
        raise ValueError("promise='judge' plans the margin rule's paired p_o on a prior lattice")
    if promise == "judge" and pool_size != 1:
        raise ValueError("promise='judge' needs one held-in label per overlap item (disjoint secondaries)")
    if rule == "margin" and estimator == "paired" and coefficient == "po":
        moments_iv(sigma0_sq, alpha_sig)
        if isinstance(lattice, RatioPrior):
            raise ValueError("a ratio prior plans a ratio coefficient, not p_o")
        m = _enveloped_certification(mu_d, sigma0_sq, epsilon, pool_size, lattice, alpha_sig)
        if promise == "judge" and isinstance(lattice, XiLattice) and math.isfinite(m) and m <= EXACT_M_MAX:
            m = m_margin_judge(
                lattice,
                int(m),
                n_humans=n_humans,
                epsilon=epsilon,
                omega_threshold=omega_threshold,
                alpha_sig=alpha_sig,
            )
        grid = _m_grid(n_items, m, m_grid)
        reach = max(EXACT_CURVE, math.ceil(1.3 * m) + 1) if math.isfinite(m) else EXACT_CURVE
        rates: np.ndarray | float = _rates_at(
            np.array(grid), mu_d, sigma0_sq, epsilon, pool_size, lattice, exact_to=reach
        )
    else:
        if rule == "margin":
            planned = alpha_sig * (PPI_FR_SHARE if estimator == "ppi" else 1.0)
            m = m_cert(mu_d, sigma0_sq, epsilon=epsilon, alpha_sig=planned)
            critical_z = 0.0
            if isinstance(lattice, RatioPrior) and math.isfinite(m):
                simulated = simulated_ratio_m(lattice, int(m), epsilon=epsilon, alpha_sig=alpha_sig)
                m = m if simulated is None else simulated
        else:
            served_power = 1.0 - PANEL_FR_SHARE * alpha_sig / 2.0 if power is None and pool_size > 1 else power
            m = m_alt_test(
                mu_d, sigma0_sq, n_humans=n_humans, epsilon=epsilon, q=q, power=served_power, alpha_sig=alpha_sig
            )
            m = max(m, ALT_TEST_MIN_ITEMS)
            if pool_size == 1 and power is None:
                try:
                    judge_m = m_alt_test_judge(
                        mu_d,
                        sigma0_sq,
                        n_humans=n_humans,
                        epsilon=epsilon,
                        q=q,
                        omega_threshold=omega_threshold,
                        alpha_sig=alpha_sig,
                    )
                except ValueError:  # pilot moments no exchangeable pair of humans gives
                    judge_m = None
                m = m if judge_m is None else judge_m
            critical_z = alt_test_quantile(n_humans, q=q)
        grid = _m_grid(n_items, m, m_grid)
        rates = false_rejection_rate(np.array(grid), mu_d, sigma0_sq, epsilon=epsilon, critical_z=critical_z)
    recipe = _recipe(
        "certify",
        rule,
        m,
        n_items,
        n_humans,
        grid,
        rates,
        alpha_sig,
        f"the judge is expected to fail: mu_d + epsilon = {mu_d + epsilon:.4g} <= 0",
    )
    return replace(recipe, estimator=estimator, promise=promise)


def rank_recipe(
    variance: float,
    delta_min: float,
    *,
    n_items: int,
    n_humans: int,
    n_judges: int,
    alpha_sig: float = 0.05,
    alpha_share: float = 1.0,
    m_grid: list[int] | None = None,
) -> Recipe:
    """Overlap and budget to rank ``n_judges`` judges, with the misorder curve (docs/method.md §4).

    ``variance`` is the largest per-item variance of an adjacent pair's margin
    (``paired_variance``); ``m = m_rank`` planned at ``alpha_share alpha_sig`` (a share below 1 when
    ``variance`` is a pilot's plug-in, ``score_ranking.SCORE_RANK_SHARE``; the promise stays ``alpha_sig``);
    ``fr_rate(m) = Phi(-delta_min sqrt(m / variance))``, the chance that two adjacent judges ``delta_min``
    apart come out in the wrong order.

    >>> rank_recipe(0.2, 0.05, n_items=10_000, n_humans=4, n_judges=2).plan.total_labels
    10651
    """
    if not 0.0 < alpha_share <= 1.0:
        raise ValueError(f"alpha_share must be in (0, 1], got {alpha_share!r}")
    m = m_rank(variance, delta_min, n_judges=n_judges, alpha_sig=alpha_share * alpha_sig)
    _budget_iv(n_items, n_humans)
    grid = _m_grid(n_items, m, m_grid)
    rates = false_rejection_rate(np.array(grid), delta_min, variance, epsilon=0.0)
    return _recipe("rank", "margin", m, n_items, n_humans, grid, rates, alpha_sig, "")
