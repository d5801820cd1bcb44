"""How much overlap is enough: moments of ``xi`` and the overlap recipes (docs/method.md §4).

``d_k ~ N(mu_d, sigma0^2 / m)`` with ``mu_d = E[xi]``, ``sigma0^2 = Var(xi)`` per item
(``F = p_o``). The moments come from priors (symmetric noise channel) or from a pilot
(the overlap in hand); the recipes turn them into an overlap count ``m`` and a budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtr, ndtri

from planner.intervals import ConfidenceInterval, percentile_interval
from planner.neyman import moment_variances
from planner.pools import overlap_rows, pool_counts
from planner.resampling import bootstrap_sums, distinct_features
from planner.rules import ALT_TEST_MIN_ITEMS, DEFAULT_EPSILON, RULES, checked_inputs

# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PilotMoments:
    """Plug-in ``mu_d``, ``sigma0^2`` from the observed ``xi`` with their uncertainty.

    ``m`` is the number of ``xi`` values pooled over held-out humans (``sum_k m_k``),
    ``n_raters`` the humans contributing; ``*_se`` and ``*_ci`` come from the item
    bootstrap. All NaN when no human has overlap.
    """

    mu_d: float
    sigma0_sq: float
    mu_d_se: float
    sigma0_sq_se: float
    mu_d_ci: ConfidenceInterval
    sigma0_sq_ci: ConfidenceInterval
    m: int
    n_raters: int
    rule: str


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


# --------------------------------------------------------------------------- moments


def _probability_iv(value: float, name: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def prior_moments(p_h: float, p_j: float, *, n_labels: int) -> tuple[float, float]:
    """``(mu_d, sigma0^2)`` under the symmetric noise channel (docs/method.md §4, "Priors").

    With ``q(p) = (1-p)/(L-1)`` and one held-in label: ``P_J = p_h p_j + (1-p_h) q(p_j)``,
    ``P_R = p_h^2 + (1-p_h) q(p_h)``, ``P_JR = p_h^2 p_j + (1-p_h) q(p_j) q(p_h)``;
    ``mu_d = P_J - P_R``, ``sigma0^2 = P_J + P_R - 2 P_JR - mu_d^2``.

    >>> [round(v, 4) for v in prior_moments(0.85, 0.90, n_labels=2)]
    [0.035, 0.2188]
    """
    p_h, p_j = _probability_iv(p_h, "p_h"), _probability_iv(p_j, "p_j")
    if not isinstance(n_labels, (int, np.integer)) or n_labels < 2:
        raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}")
    q_h, q_j = (1.0 - p_h) / (n_labels - 1), (1.0 - p_j) / (n_labels - 1)
    p_judge = p_h * p_j + (1.0 - p_h) * q_j
    p_human = p_h * p_h + (1.0 - p_h) * q_h
    p_both = p_h * p_h * p_j + (1.0 - p_h) * q_j * q_h
    mu_d = p_judge - p_human
    return mu_d, p_judge + p_human - 2.0 * p_both - mu_d * mu_d


def advantage_moments(p_plus: float, p_minus: float) -> tuple[float, float]:
    """``(mu, sigma^2)`` of ``xi' = W_f - W_h`` for the alt-test (docs/method.md §4, item 5).

    ``mu = p_plus - p_minus``, ``sigma^2 = p_plus + p_minus - mu^2``, with ``p_plus``
    (``p_minus``) the chance that the judge (the human) is strictly closer to the pool.

    >>> [round(v, 4) for v in advantage_moments(0.3, 0.1)]
    [0.2, 0.36]
    """
    p_plus, p_minus = _probability_iv(p_plus, "p_plus"), _probability_iv(p_minus, "p_minus")
    if p_plus + p_minus > 1.0:
        raise ValueError(f"p_plus + p_minus must be <= 1, got {p_plus + p_minus!r}")
    mu = p_plus - p_minus
    return mu, p_plus + p_minus - mu * mu


def _xi_features(rows: np.ndarray, n_labels: int, rule: str) -> np.ndarray:
    """Per item, pooled over held-out humans: ``[#k with i in O_k, sum xi, sum xi^2]``.

    ``xi = agree(judge, pool_i) - agree(r_k, pool_i)`` (margin), ``W_f - W_h`` (alt-test).
    """
    pc = pool_counts(rows, 1, n_labels)
    gap = pc.judge_agree[:, 0, :] - pc.human_agree
    xi = gap / np.maximum(pc.pool_size, 1) if rule == "margin" else np.sign(gap).astype(float)
    xi = np.where(pc.observed, xi, 0.0)
    return np.column_stack([pc.observed.sum(axis=1), xi.sum(axis=1), (xi * xi).sum(axis=1)])


def _moments(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Plug-in mean and variance of ``xi`` from ``[count, sum, sum of squares]``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(sums[:, 0] > 0, sums[:, 1] / sums[:, 0], np.nan)
        return mean, np.maximum(sums[:, 2] / sums[:, 0] - mean * mean, 0.0)


def pilot_moments(
    codes: object,
    *,
    judge: int,
    humans: list[int],
    n_labels: int,
    rule: str = "margin",
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = None,
) -> PilotMoments:
    """``mu_d``, ``sigma0^2`` estimated from the overlap in hand (docs/method.md §4, "Pilot").

    The ``xi_i`` of every held-out human ``r_k`` on its ``O_k`` are pooled; their
    plug-in mean and variance are the estimates, and an item bootstrap (items resampled
    with all their ``xi``) gives standard errors and percentile intervals at ``confidence_level``.
    ``rule="alt-test"`` uses ``xi' = W_f - W_h`` (docs/method.md §4, item 5), whose plug-in
    moments are ``p_plus - p_minus`` and ``p_plus + p_minus - mu^2``.

    >>> import numpy as np
    >>> codes = np.array([[0, 0, 0], [1, 1, 0], [0, 1, 1], [1, 1, 1]])
    >>> p = pilot_moments(codes, judge=2, humans=[0, 1], n_labels=2, n_resamples=50, rng=0)
    >>> p.mu_d, p.sigma0_sq, p.m  # xi = 0,0 | -1,-1 | +1,0 | 0,0 (two held-out humans)
    (-0.125, 0.359375, 8)
    """
    if not isinstance(judge, (int, np.integer)):
        raise ValueError(f"judge must be a single column index, got {judge!r}")
    codes, judges, humans, _, _ = checked_inputs(
        codes, judge, humans, n_labels=n_labels, rule=rule, coefficient="po", epsilon=None,
        min_items=None, q=0.05, n_resamples=n_resamples, confidence_level=confidence_level,
        judges_name="judge",
    )
    rows, counts = overlap_rows(codes, judges, sorted(humans))
    features, counts = distinct_features(_xi_features(rows, n_labels, rule), counts)
    point = (counts @ features)[None, :]
    rng = np.random.default_rng(rng)
    reps = bootstrap_sums(features, counts, codes.shape[0], n_resamples, rng)
    (mu,), (var,) = _moments(point)
    rep_mu, rep_var = _moments(reps)
    used = pool_counts(rows, 1, n_labels).observed
    return PilotMoments(
        mu_d=float(mu),
        sigma0_sq=float(var) if np.isfinite(mu) else np.nan,
        mu_d_se=float(np.nanstd(rep_mu, ddof=1)) if np.isfinite(mu) else np.nan,
        sigma0_sq_se=float(np.nanstd(rep_var, ddof=1)) if np.isfinite(mu) else np.nan,
        mu_d_ci=percentile_interval(rep_mu, confidence_level),
        sigma0_sq_ci=percentile_interval(
            np.where(np.isfinite(rep_mu), rep_var, np.nan), confidence_level
        ),
        m=int(round(point[0, 0])),
        n_raters=int(np.any(used, axis=0).sum()),
        rule=rule,
    )


# --------------------------------------------------------------------------- recipes


def _moments_iv(sigma0_sq: float, alpha_sig: float) -> None:
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
    _moments_iv(sigma0_sq, 0.5)
    m = np.asarray(m, dtype=float)
    if np.any(m < 0):
        raise ValueError(f"m must be >= 0, got {m!r}")
    gap = (mu_d + epsilon) * np.sqrt(m)
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(gap == 0, 0.0, gap / math.sqrt(sigma0_sq))
    rate = ndtr(critical_z - shift)
    return float(rate) if rate.ndim == 0 else rate


def _m_needed(z: float, variance: float, gap: float) -> int | float:
    """``ceil(z^2 variance / gap^2)``, at least 1; ``inf`` when ``gap <= 0`` or the ratio overflows."""
    if gap <= 0:
        return math.inf
    ratio = (z / gap) ** 2 * variance if gap > 1e-150 else math.inf
    return max(1, math.ceil(ratio - 1e-9)) if math.isfinite(ratio) else math.inf


def m_cert(
    mu_d: float, sigma0_sq: float, *, epsilon: float | None = None, alpha_sig: float = 0.05
) -> int | float:
    """Overlap for per-rater FR ``<= alpha_sig/2`` (docs/method.md §4, item 2).

    ``m_cert = ceil(z_{1-alpha_sig/2}^2 sigma0^2 / (mu_d + eps)^2)``; ``math.inf`` when
    ``mu_d + eps <= 0``: no overlap certifies a judge that is expected to fail.

    >>> m_cert(*prior_moments(0.85, 0.90, n_labels=2))
    117
    >>> m_cert(-0.1, 0.2)
    inf
    """
    _moments_iv(sigma0_sq, alpha_sig)
    epsilon = DEFAULT_EPSILON["margin"] if epsilon is None else epsilon
    return _m_needed(float(ndtri(1.0 - alpha_sig / 2.0)), sigma0_sq, mu_d + epsilon)


def m_rank(sigma0_sq: float, delta_min: float, *, n_judges: int, alpha_sig: float = 0.05) -> int | float:
    """Overlap to order ``J`` judges ``delta_min`` apart (docs/method.md §4, item 3).

    ``m_rank = ceil(z_{1-alpha_sig/(J-1)}^2 2 sigma0^2 / Delta_min^2)`` (Bonferroni over
    the ``J - 1`` neighbours; paired differences double the variance).

    >>> m_rank(0.2, 0.05, n_judges=2)
    433
    """
    _moments_iv(sigma0_sq, alpha_sig)
    if not (np.isfinite(delta_min) and delta_min > 0):
        raise ValueError(f"delta_min must be a finite number > 0, got {delta_min!r}")
    if not isinstance(n_judges, (int, np.integer)) or n_judges < 2:
        raise ValueError(f"n_judges must be an integer >= 2, got {n_judges!r}")
    z = float(ndtri(1.0 - alpha_sig / (n_judges - 1)))
    return _m_needed(z, 2.0 * sigma0_sq, delta_min)


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
    mu: float, sigma_sq: float, *, n_humans: int, epsilon: float | None = None, q: float = 0.05,
    power: float | None = None,
) -> int | float:
    """Alt-test overlap ``ceil((z_{1-alpha*} + z_{power})^2 sigma^2 / (mu + eps)^2)``.

    docs/method.md §4, item 5.

    ``mu``, ``sigma_sq`` are the moments of ``W_f - W_h`` (``advantage_moments``);
    ``power=None`` plans for the 50% point (``z_{power} = 0``); ``math.inf`` when
    ``mu + eps <= 0``.

    >>> m_alt_test(0.0, 0.3, n_humans=3, epsilon=0.1)
    132
    """
    _moments_iv(sigma_sq, 0.5)
    if power is not None and not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1) or None, got {power!r}")
    z = alt_test_quantile(n_humans, q=q) + (0.0 if power is None else float(ndtri(power)))
    epsilon = DEFAULT_EPSILON["alt-test"] if epsilon is None else epsilon
    return _m_needed(z, sigma_sq, mu + epsilon)


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
    goal: str, rule: str, m: int | float, n_items: int, n_humans: int, grid: tuple[int, ...],
    rates: np.ndarray | float, alpha_sig: float, fail_reason: str,
) -> Recipe:
    if math.isinf(m):
        feasible, reason, m_out = False, fail_reason, None
    elif m > n_items:
        feasible, m_out = False, int(m)
        reason = f"needs m={int(m)} overlapping items but the project has only n_items={n_items}"
    else:
        feasible, reason, m_out = True, "", int(m)
    plan = overlap_plan(n_items, n_humans, m_out) if feasible and m_out is not None else None
    return Recipe(goal, rule, m_out, feasible, reason, plan, grid,
                  tuple(float(r) for r in np.atleast_1d(rates)), float(alpha_sig))


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
) -> Recipe:
    """Overlap and budget to certify a judge, with its FR curve (docs/method.md §4).

    ``rule="margin"``: ``m_cert`` (``epsilon`` default 0.05) and
    ``FR(m) = Phi(-(mu_d + eps) sqrt(m)/sigma0)``. ``rule="alt-test"``: ``mu_d``,
    ``sigma0_sq`` are the moments of ``W_f - W_h``; ``m_alt_test`` with ``q``, ``power``
    (``epsilon`` default 0.2), at least the alt-test's 30 items per human, and
    ``FR(m) = Phi(z_{1-alpha*} - (mu + eps) sqrt(m)/sigma)``.

    ``estimator="ppi"`` / ``"neyman"`` (margin rule; docs/method.md §9) plan for the
    estimate that also uses the judge-primary agreement on every item, ``judge_agreement``
    = ``P(judge = primary)``: the variance drops to ``(1 - rho^2) Var(B)`` (PPI++) or
    ``(sum_h W_h S_h)^2`` (Neyman panel over the agreement strata).

    >>> r = certify_recipe(0.035, 0.2188, n_items=1000, n_humans=3)
    >>> r.m, r.plan.rho, r.plan.total_labels
    (117, 0.117, 1234)
    >>> [certify_recipe(0.035, 0.218775, n_items=1000, n_humans=3, estimator=e,
    ...                 judge_agreement=0.78).m for e in ("ppi", "neyman")]
    [86, 84]
    """
    _budget_iv(n_items, n_humans)
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if estimator not in ("paired", "ppi", "neyman"):
        raise ValueError(f"estimator must be 'paired', 'ppi' or 'neyman', got {estimator!r}")
    if estimator != "paired":
        if rule != "margin" or judge_agreement is None:
            raise ValueError(
                f"estimator={estimator!r} plans the margin rule and needs judge_agreement"
            )
        _moments_iv(sigma0_sq, alpha_sig)
        variances = moment_variances(mu_d, sigma0_sq, judge_agreement=judge_agreement)
        sigma0_sq = getattr(variances, estimator)
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    if rule == "margin":
        m = m_cert(mu_d, sigma0_sq, epsilon=epsilon, alpha_sig=alpha_sig)
        critical_z = 0.0
    else:
        m = m_alt_test(mu_d, sigma0_sq, n_humans=n_humans, epsilon=epsilon, q=q, power=power)
        m = max(m, ALT_TEST_MIN_ITEMS)
        critical_z = alt_test_quantile(n_humans, q=q)
    grid = _m_grid(n_items, m, m_grid)
    rates = false_rejection_rate(
        np.array(grid), mu_d, sigma0_sq, epsilon=epsilon, critical_z=critical_z
    )
    recipe = _recipe("certify", rule, m, n_items, n_humans, grid, rates, alpha_sig,
                     f"the judge is expected to fail: mu_d + epsilon = {mu_d + epsilon:.4g} <= 0")
    return replace(recipe, estimator=estimator)


def rank_recipe(
    sigma0_sq: float,
    delta_min: float,
    *,
    n_items: int,
    n_humans: int,
    n_judges: int,
    alpha_sig: float = 0.05,
    m_grid: list[int] | None = None,
) -> Recipe:
    """Overlap and budget to rank ``n_judges`` judges, with the misorder curve (docs/method.md §4).

    ``m = m_rank``; ``fr_rate(m) = Phi(-delta_min sqrt(m) / sqrt(2 sigma0^2))``, the
    chance that two judges ``delta_min`` apart come out in the wrong order.

    >>> rank_recipe(0.2, 0.05, n_items=10_000, n_humans=4, n_judges=2).plan.total_labels
    11299
    """
    m = m_rank(sigma0_sq, delta_min, n_judges=n_judges, alpha_sig=alpha_sig)
    _budget_iv(n_items, n_humans)
    grid = _m_grid(n_items, m, m_grid)
    rates = false_rejection_rate(np.array(grid), delta_min, 2.0 * sigma0_sq, epsilon=0.0)
    return _recipe("rank", "margin", m, n_items, n_humans, grid, rates, alpha_sig, "")
