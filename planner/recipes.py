"""How much overlap is enough: moments of ``xi`` and the overlap recipes (docs/method.md §4).

``d_k ~ N(mu_d, sigma0^2 / m)`` with ``mu_d = E[xi]``, ``sigma0^2 = Var(xi)`` per item
(``F = p_o``). The moments come from priors (symmetric noise channel) or from a pilot
(the overlap in hand); the recipes turn them into an overlap count ``m`` and a budget.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtr, ndtri

from planner.intervals import ConfidenceInterval, percentile_interval
from planner.neyman import moment_variances
from planner.patterns import item_patterns
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
    promise: str = "rater"
    """``"rater"``: FR of each held-out human; ``"judge"``: the judge's FR (docs/method.md §4, item 6)."""


# --------------------------------------------------------------------------- moments


def _probability_iv(value: float, name: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def _prior_iv(p_h: float, p_j: float, n_labels: int, pool_size: int) -> tuple[float, float]:
    """Validated accuracies of a noise prior, with its label count and pool size."""
    if not isinstance(n_labels, (int, np.integer)) or n_labels < 2:
        raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}")
    if not isinstance(pool_size, (int, np.integer)) or isinstance(pool_size, bool) or pool_size < 1:
        raise ValueError(f"pool_size must be an integer >= 1, got {pool_size!r}")
    return _probability_iv(p_h, "p_h"), _probability_iv(p_j, "p_j")


@dataclass(frozen=True)
class XiLattice:
    """Per-item distribution of ``s xi``, an integer in ``-s..s`` (docs/method.md §4, items 1-2).

    ``s`` (``pool_size``) is the number of held-in labels on an overlap item: ``xi`` is the
    judge's minus the held-out human's share of agreeing pool members, so ``s xi`` counts
    members. ``probabilities[j]`` is ``P(s xi = j - s)``.
    """

    pool_size: int
    probabilities: np.ndarray

    @property
    def mu_d(self) -> float:
        """``E[xi]``."""
        return float(self.probabilities @ self._values) / self.pool_size

    @property
    def variance(self) -> float:
        """``sigma_s^2 = Var(xi)``."""
        second = float(self.probabilities @ self._values**2) / self.pool_size**2
        return max(second - self.mu_d**2, 0.0)

    @property
    def advantage(self) -> tuple[float, float]:
        """``(p_plus, p_minus)``: chances that the judge, resp. the human, is strictly closer
        to the pool; the alt-test's ``W_f - W_h`` is the sign of ``xi`` (docs/method.md §4, item 5)."""
        s = self.pool_size
        return float(self.probabilities[s + 1 :].sum()), float(self.probabilities[:s].sum())

    @property
    def _values(self) -> np.ndarray:
        return np.arange(-self.pool_size, self.pool_size + 1, dtype=float)


def _members(a: float, b: float, pool_size: int) -> np.ndarray:
    """Distribution over ``-s..s`` of a sum of ``s`` i.i.d. steps: +1 w.p. ``a``, -1 w.p. ``b``."""
    step = np.array([b, 1.0 - a - b, a])
    out = np.array([1.0])
    for _ in range(pool_size):
        out = np.convolve(out, step)
    return out


def xi_lattice(p_h: float, p_j: float, *, n_labels: int, pool_size: int = 1) -> XiLattice:
    """Exact per-item distribution of ``s xi`` under the symmetric noise channel (docs/method.md §4).

    Humans report the truth with probability ``p_h``, the judge with ``p_j``, otherwise a
    uniformly chosen other label (``q(p) = (1-p)/(L-1)``); the ``s`` held-in labels are
    independent given the truth. When judge and held-out human give the same label
    ``xi = 0``; otherwise each pool member adds +1 (agrees with the judge), -1 (with the
    human) or 0, with chances fixed by whether each of the two is right.

    >>> lattice = xi_lattice(0.85, 0.90, n_labels=2)
    >>> round(lattice.mu_d, 4), round(lattice.variance, 6)
    (0.035, 0.218775)
    >>> [round(xi_lattice(0.85, 0.90, n_labels=2, pool_size=s).variance, 6) for s in (2, 4)]
    [0.162675, 0.134625]
    """
    p_h, p_j = _prior_iv(p_h, p_j, n_labels, pool_size)
    q_h = (1.0 - p_h) / (n_labels - 1)
    both_wrong_apart = (1.0 - p_h) * (1.0 - p_j) * (n_labels - 2) / (n_labels - 1)
    cases = (  # (probability, P(member agrees with judge), P(member agrees with human))
        (p_h * (1.0 - p_j), q_h, p_h),  # human right, judge wrong
        ((1.0 - p_h) * p_j, p_h, q_h),  # judge right, human wrong
        (both_wrong_apart, q_h, q_h),  # both wrong, different labels
    )
    probabilities = np.zeros(2 * pool_size + 1)
    for weight, a, b in cases:
        probabilities += weight * _members(a, b, pool_size)
    probabilities[pool_size] += 1.0 - sum(c[0] for c in cases)  # same label: xi = 0
    return XiLattice(int(pool_size), probabilities)


def prior_moments(p_h: float, p_j: float, *, n_labels: int, pool_size: int = 1) -> tuple[float, float]:
    """``(mu_d, sigma_s^2)`` under the symmetric noise channel (docs/method.md §4, "Priors").

    With ``q(p) = (1-p)/(L-1)`` and one held-in label: ``P_J = p_h p_j + (1-p_h) q(p_j)``,
    ``P_R = p_h^2 + (1-p_h) q(p_h)``, ``P_JR = p_h^2 p_j + (1-p_h) q(p_j) q(p_h)``;
    ``mu_d = P_J - P_R``, ``sigma0^2 = P_J + P_R - 2 P_JR - mu_d^2``. With ``s = pool_size``
    held-in labels per overlap item ``sigma_s^2 = V_b + (sigma0^2 - V_b)/s``,
    ``V_b = ((L p_h - 1)/(L - 1))^2 (p_j(1-p_j) + p_h(1-p_h))``.

    >>> [round(v, 4) for v in prior_moments(0.85, 0.90, n_labels=2)]
    [0.035, 0.2188]
    >>> round(prior_moments(0.85, 0.90, n_labels=2, pool_size=2)[1], 6)
    0.162675
    """
    p_h, p_j = _prior_iv(p_h, p_j, n_labels, pool_size)
    q_h, q_j = (1.0 - p_h) / (n_labels - 1), (1.0 - p_j) / (n_labels - 1)
    p_judge = p_h * p_j + (1.0 - p_h) * q_j
    p_human = p_h * p_h + (1.0 - p_h) * q_h
    p_both = p_h * p_h * p_j + (1.0 - p_h) * q_j * q_h
    mu_d = p_judge - p_human
    sigma0_sq = p_judge + p_human - 2.0 * p_both - mu_d * mu_d
    between = ((n_labels * p_h - 1.0) / (n_labels - 1)) ** 2 * (p_j * (1 - p_j) + p_h * (1 - p_h))
    return mu_d, between + (sigma0_sq - between) / pool_size


def paired_variance(p_h: float, p_a: float, p_b: float, *, n_labels: int, n_humans: int) -> float:
    """Per-item variance ``sigma_Delta^2`` of the score margin of judges ``a`` and ``b``.

    docs/method.md §4, item 3: the held-out human's term cancels in the margin, so with
    ``P_x = p_h p_x + (1-p_h) q(p_x)`` and ``P_ab = p_h p_a p_b + (1-p_h) q(p_a) q(p_b)``:
    ``sigma_pair^2 = P_a + P_b - 2 P_ab - Delta^2``,
    ``V_b' = ((L p_h - 1)/(L - 1))^2 (p_a(1-p_a) + p_b(1-p_b))`` and
    ``sigma_Delta^2 = V_b' + (sigma_pair^2 - V_b')/K``.

    By hand (``p_h = .85``, ``p_a = .90``, ``p_b = .85``, ``L = 2``, ``K = 3``): ``P_a = .78``,
    ``P_b = .745``, ``P_ab = .6525``, ``sigma_pair^2 = .218775``, ``V_b' = .106575``:

    >>> round(paired_variance(0.85, 0.90, 0.85, n_labels=2, n_humans=3), 6)
    0.143975
    """
    p_h, p_a, p_b = (_probability_iv(v, n) for v, n in ((p_h, "p_h"), (p_a, "p_a"), (p_b, "p_b")))
    if not isinstance(n_labels, (int, np.integer)) or n_labels < 2:
        raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}")
    if not isinstance(n_humans, (int, np.integer)) or n_humans < 2:
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")

    def q(p: float) -> float:
        return (1.0 - p) / (n_labels - 1)

    agree_a, agree_b = p_h * p_a + (1 - p_h) * q(p_a), p_h * p_b + (1 - p_h) * q(p_b)
    both = p_h * p_a * p_b + (1 - p_h) * q(p_a) * q(p_b)
    delta = agree_a - agree_b
    pair = agree_a + agree_b - 2.0 * both - delta * delta
    between = ((n_labels * p_h - 1.0) / (n_labels - 1)) ** 2 * (p_a * (1 - p_a) + p_b * (1 - p_b))
    return between + (pair - between) / n_humans


def ladder_accuracies(p_h: float, p_j: float, delta_min: float, *, n_labels: int, n_judges: int) -> np.ndarray:
    """Accuracies of ``J`` judges ``delta_min`` apart in ``d``, the best at ``p_j`` (docs/method.md §4, item 3).

    Two judges' agreement with a human differs by ``(p_h - q(p_h)) (p_a - p_b)``, so each step down
    the ladder lowers the accuracy by ``delta_min / (p_h - q(p_h))``; humans at chance
    (``p_h <= 1/L``) leave every judge at ``p_j``. A ladder that would need an accuracy below 0 is an error.

    >>> ladder_accuracies(0.85, 0.9, 0.07, n_labels=2, n_judges=3).round(6).tolist()  # step .07/.7 = .1
    [0.9, 0.8, 0.7]
    """
    p_h, p_j = _probability_iv(p_h, "p_h"), _probability_iv(p_j, "p_j")
    if not (np.isfinite(delta_min) and delta_min > 0):
        raise ValueError(f"delta_min must be a finite number > 0, got {delta_min!r}")
    if not isinstance(n_judges, (int, np.integer)) or n_judges < 2:
        raise ValueError(f"n_judges must be an integer >= 2, got {n_judges!r}")
    slope = (n_labels * p_h - 1.0) / (n_labels - 1)
    step = delta_min / slope if slope > 0 else 0.0
    accuracies = p_j - step * np.arange(n_judges)
    if accuracies[-1] < -1e-12:
        raise ValueError(
            f"{n_judges} judges {delta_min} apart below p_j={p_j} need an accuracy of {accuracies[-1]:.4g} < 0"
        )
    return np.asarray(np.maximum(accuracies, 0.0), dtype=float)


def ladder_variance(
    p_h: float, p_j: float, delta_min: float, *, n_labels: int, n_humans: int, n_judges: int
) -> tuple[float, int]:
    """The largest ``sigma_Delta^2`` over the ``J - 1`` adjacent pairs of the ladder, and which pair.

    docs/method.md §4, item 3: ``m_rank`` must order every adjacent pair, so it is planned on the
    maximum of ``paired_variance`` over the pairs ``(a_i, a_{i+1})`` of ``ladder_accuracies``; the
    variance grows as the accuracies fall toward chance, so the top pair alone understates it.
    Returns ``(variance, i)``, ``i`` the 0-based index of the pair's better judge.

    By hand (``p_h = .85``, ``L = 2``, ``K = 3``, accuracies ``.9, .8, .7``), the lower pair:
    ``P_a = .71``, ``P_b = .64``, ``P_ab = .485``, ``sigma_pair^2 = .3751``, ``V_b' = .49 (.16 + .21) = .1813``,
    ``sigma_Delta^2 = .1813 + .1938/3 = .2459`` (the top pair's is ``.1873``):

    >>> v, i = ladder_variance(0.85, 0.9, 0.07, n_labels=2, n_humans=3, n_judges=3)
    >>> round(v, 6), i, round(paired_variance(0.85, 0.8, 0.7, n_labels=2, n_humans=3), 6)
    (0.2459, 1, 0.2459)
    """
    accuracies = ladder_accuracies(p_h, p_j, delta_min, n_labels=n_labels, n_judges=n_judges)
    pairs = [
        paired_variance(p_h, float(a), float(b), n_labels=n_labels, n_humans=n_humans)
        for a, b in zip(accuracies[:-1], accuracies[1:], strict=True)
    ]
    worst = int(np.argmax(pairs))
    return float(pairs[worst]), worst


RATIO_COEFFICIENTS = ("kappa", "alpha", "ac1")


def _channel(p: float, n_labels: int) -> np.ndarray:
    """``P(report b | truth a)`` of the symmetric noise channel."""
    off = (1.0 - p) / (n_labels - 1)
    return np.where(np.eye(n_labels, dtype=bool), p, off)


def ratio_influence(table: np.ndarray, coefficient: str) -> tuple[float, np.ndarray]:
    """A two-rater ratio coefficient of the joint distribution ``table`` and its influence function.

    docs/method.md §4, item 4. ``F = (p_o - p_e)/(1 - p_e)``; moving the distribution toward
    the cell ``(a, b)`` changes ``p_o`` by ``1[a=b] - p_o`` and ``p_e`` by ``e_ab``: kappa
    (``p_e = sum r c``) ``c_a + r_b - 2 p_e``; nominal alpha, whose large-sample form is Scott's pi
    (``p_e = sum pi_l^2``, ``pi = (r + c)/2``) ``pi_a + pi_b - 2 p_e``; AC1
    (``p_e = sum pi (1 - pi)/(L - 1)``) ``(2 sum pi^2 - pi_a - pi_b)/(L - 1)``. The influence is
    ``psi_ab = ((1[a=b] - p_o)(1 - p_e) - e_ab (1 - p_o))/(1 - p_e)^2``, and ``n Var(F_n) -> Var(psi)``
    (for kappa this is Fleiss, Cohen & Everitt's variance).

    By hand, table ``(.4, .1; .1, .4)``: ``p_o = .8``, ``p_e = .5``, ``F = .6``; at ``(0, 0)``
    ``psi = (.2 (.5) - 0 (.2))/.25 = .4``, at ``(0, 1)`` ``psi = (-.8 (.5))/.25 = -1.6``:

    >>> f, psi = ratio_influence(np.array([[0.4, 0.1], [0.1, 0.4]]), "kappa")
    >>> round(f, 6), psi.round(6).tolist()
    (0.6, [[0.4, -1.6], [-1.6, 0.4]])
    """
    if coefficient not in RATIO_COEFFICIENTS:
        raise ValueError(f"coefficient must be one of {RATIO_COEFFICIENTS}, got {coefficient!r}")
    n_labels = table.shape[0]
    rows, cols = table.sum(axis=1), table.sum(axis=0)
    pooled = (rows + cols) / 2.0
    p_o = float(np.trace(table))
    if coefficient == "kappa":
        p_e = float(rows @ cols)
        shift = cols[:, None] + rows[None, :] - 2.0 * p_e
    elif coefficient == "alpha":
        p_e = float(pooled @ pooled)
        shift = pooled[:, None] + pooled[None, :] - 2.0 * p_e
    else:
        p_e = float(pooled @ (1.0 - pooled)) / (n_labels - 1)
        shift = (2.0 * float(pooled @ pooled) - pooled[:, None] - pooled[None, :]) / (n_labels - 1)
    if not p_e < 1.0:
        raise ValueError(f"{coefficient} is undefined here: chance agreement is 1 (one label throughout)")
    agree = np.eye(n_labels) - p_o
    psi = (agree * (1.0 - p_e) - shift * (1.0 - p_o)) / (1.0 - p_e) ** 2
    return (p_o - p_e) / (1.0 - p_e), psi


def ratio_moments(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    coefficient: str,
    prevalence: object = None,
    pool_size: int = 1,
) -> tuple[float, float]:
    """``(mu_F, sigma_F^2)`` of a ratio coefficient's margin ``d_k`` under the noise prior (docs/method.md §4, item 4).

    ``d_k`` is the mean over the ``s = pool_size`` held-in members ``P_i`` of
    ``F(judge, P_i) - F(r_k, P_i)`` on the same items, so its delta-method variance is
    ``Var(psi_d)/m`` with ``psi_d = (1/s) sum_i [psi_JP(j, p_i) - psi_HP(h, p_i)]``
    (``ratio_influence`` of the judge-member and human-member tables). Given the truth and the
    two labels the members are independent, so, as for ``p_o``,
    ``sigma_s^2 = V_b + (sigma_1^2 - V_b)/s`` with ``V_b`` the variance of the conditional mean.
    ``mu_F = F(judge, member) - F(human, member)``. ``prevalence``: true label shares (default
    uniform); chance agreement depends on it, unlike ``p_o``.

    By hand, ``L = 2``, uniform, ``p_h = p_j = .9``, kappa, ``s = 1``: both tables are
    ``(.41, .09; .09, .41)``, ``p_o = .82``, ``p_e = .5``, ``e_ab = 0``, so ``psi = .18 (.5)/.25 = .36``
    on agreement and ``-.82 (.5)/.25 = -1.64`` off it; ``psi_d = +-2`` when exactly one of judge and
    human agrees with the member (probability ``2 (.82 - .73) = .18``, ``.73 = .9^3 + .1^3`` the
    chance that all three agree), else 0: ``sigma_1^2 = 4 (.18) = .72``:

    >>> [round(v, 5) for v in ratio_moments(0.9, 0.9, n_labels=2, coefficient="kappa")]
    [0.0, 0.72]
    """
    p_h, p_j = _prior_iv(p_h, p_j, n_labels, pool_size)
    shares = np.full(n_labels, 1.0 / n_labels) if prevalence is None else np.asarray(prevalence, dtype=float)
    if shares.shape != (n_labels,) or np.any(shares < 0) or not math.isclose(float(shares.sum()), 1.0):
        raise ValueError(f"prevalence must be {n_labels} non-negative shares summing to 1, got {prevalence!r}")
    human, judge = _channel(p_h, n_labels), _channel(p_j, n_labels)
    f_judge, psi_judge = ratio_influence(np.einsum("t,ta,tb->ab", shares, judge, human), coefficient)
    f_human, psi_human = ratio_influence(np.einsum("t,ta,tb->ab", shares, human, human), coefficient)
    gap = psi_judge[None, :, None, :] - psi_human[None, None, :, :]  # (truth, judge, human, member)
    given = np.einsum("t,tj,th->tjh", shares, judge, human)
    one_member = float(np.einsum("tjh,tp,tjhp->", given, human, gap**2))
    conditional = np.einsum("tp,tjhp->tjh", human, gap)
    between = float(np.einsum("tjh,tjh->", given, conditional**2))
    return f_judge - f_human, between + (one_member - between) / pool_size


@dataclass(frozen=True)
class RatioPrior:
    """The noise prior behind a ratio coefficient's recipe, for its small-overlap FR (docs/method.md §4, item 4).

    Passed to ``certify_recipe`` as its ``lattice`` for ``coefficient`` in kappa, alpha, AC1: with one
    held-in label per item and a normal-form ``m`` up to ``RATIO_SIMULATED_M_MAX`` the FR is simulated
    (``ratio_false_rejection_rates``) instead of read off the delta method's normal form.
    """

    p_h: float
    p_j: float
    n_labels: int
    coefficient: str
    prevalence: tuple[float, ...] | None = None
    pool_size: int = 1


RATIO_DRAWS = 10_000
"""Simulated comparisons behind a ratio coefficient's small-overlap FR (MC SE ~.0016 at .025)."""
RATIO_SIMULATED_M_MAX = 600
"""Above this normal-form overlap the delta method's normal form stands (its error there is small)."""


def ratio_false_rejection_rates(prior: RatioPrior, m_max: int, *, epsilon: float, at: object) -> np.ndarray:
    """Per-rater FR ``Pr[d_k < -eps]`` of a ratio coefficient at the overlaps ``at`` (in ``1..m_max``; NaN
    elsewhere), one held-in label per item: ``d_k = F(judge, P) - F(S, P)`` on ``m`` items labelled by
    the judge, the pool member ``P`` and the held-out ``S`` (docs/method.md §4, item 4).

    Items are drawn from the prior's law of ``(judge, P, S)`` labels one at a time for ``RATIO_DRAWS``
    comparisons (seed 0), so successive ``m`` share their draws; ``F`` is the decision's own two-rater
    formula on the counts (``planner.tables.two_rater_coefficient``); a comparison whose ``d_k`` is
    undefined is left out, as the decision does.
    """
    from planner.tables import two_rater_coefficient

    if prior.coefficient not in RATIO_COEFFICIENTS:
        raise ValueError(f"coefficient must be one of {RATIO_COEFFICIENTS}, got {prior.coefficient!r}")
    if not isinstance(m_max, (int, np.integer)) or not 1 <= m_max <= 2 * RATIO_SIMULATED_M_MAX:
        raise ValueError(f"m_max must be an integer in 1..{2 * RATIO_SIMULATED_M_MAX}, got {m_max!r}")
    n_labels = prior.n_labels
    p_h, p_j = _prior_iv(prior.p_h, prior.p_j, n_labels, prior.pool_size)
    shares = np.full(n_labels, 1.0 / n_labels) if prior.prevalence is None else np.asarray(prior.prevalence, float)
    human, judge = _channel(p_h, n_labels), _channel(p_j, n_labels)
    law = np.einsum("t,tj,tp,ts->jps", shares, judge, human, human).ravel()
    edges = np.cumsum(law)[:-1]
    wanted = np.zeros(m_max + 1, dtype=bool)
    wanted[np.asarray(at, dtype=np.int64)] = True
    gen = np.random.default_rng(0)
    counts = np.zeros((RATIO_DRAWS, law.size), dtype=np.int32)
    rows = np.arange(RATIO_DRAWS)
    rates = np.full(m_max, np.nan)
    for size in range(1, m_max + 1):
        counts[rows, np.searchsorted(edges, gen.random(RATIO_DRAWS), side="right")] += 1
        if not wanted[size]:
            continue
        cube = counts.reshape(RATIO_DRAWS, n_labels, n_labels, n_labels).astype(float)  # [judge, P, S]
        judge_p, s_p = cube.sum(axis=3), cube.sum(axis=1)  # [judge, P], [P, S]
        diagonal = np.arange(n_labels)
        f_judge = two_rater_coefficient(
            judge_p[:, diagonal, diagonal].sum(axis=1), judge_p.sum(axis=2), judge_p.sum(axis=1), prior.coefficient
        )
        f_human = two_rater_coefficient(
            s_p[:, diagonal, diagonal].sum(axis=1), s_p.sum(axis=1), s_p.sum(axis=2), prior.coefficient
        )
        d = f_judge - f_human
        defined = np.isfinite(d)
        rates[size - 1] = float(np.mean(d[defined] < -epsilon - 1e-12)) if defined.any() else math.nan
    return rates


def simulated_ratio_m(prior: RatioPrior, normal_m: int, *, epsilon: float, alpha_sig: float) -> int | None:
    """Smallest ``m`` whose simulated FR + 2 SE (``ratio_false_rejection_rates``; the draws' MC error inside
    the promise) is at most ``alpha_sig/2`` at every overlap up to ``1.6`` times the normal form's ``m``
    (docs/method.md §4, item 4); None beyond ``RATIO_SIMULATED_M_MAX``, for a shared pool, or when it
    misses the promise up there (the normal form then stands).
    """
    if prior.pool_size != 1 or normal_m > RATIO_SIMULATED_M_MAX:
        return None
    target, hi = alpha_sig / 2.0, max(math.ceil(1.6 * normal_m), 10)
    lo = max(2, normal_m // 3)

    def above(sizes: np.ndarray) -> np.ndarray:
        rates = ratio_false_rejection_rates(prior, hi, epsilon=epsilon, at=sizes)[sizes - 1]
        with np.errstate(invalid="ignore"):
            miss = ~(rates + 2.0 * np.sqrt(rates * (1.0 - rates) / RATIO_DRAWS) <= target)
        return np.asarray(sizes[miss], dtype=np.int64)

    step = max(1, (hi - lo) // 60)
    coarse = above(np.unique(np.r_[np.arange(lo, hi + 1, step), hi]))
    if coarse.size == 0:
        return lo
    if coarse[-1] == hi:
        return None
    last = int(coarse[-1])
    fine = above(np.arange(last + 1, min(last + 2 * step, hi) + 1))
    return (int(fine[-1]) if fine.size else last) + 1


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
    patterns = item_patterns(codes, n_labels)
    judges, humans, _, _ = checked_inputs(
        patterns.n_raters,
        judge,
        humans,
        rule=rule,
        coefficient="po",
        epsilon=None,
        min_items=None,
        q=0.05,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
        judges_name="judge",
    )
    rows, counts = overlap_rows(patterns, judges, sorted(humans))
    features, counts = distinct_features(_xi_features(rows, n_labels, rule), counts)
    point = (counts @ features)[None, :]
    rng = np.random.default_rng(rng)
    reps = bootstrap_sums(features, counts, patterns.n_items, n_resamples, rng)
    (mu,), (var,) = _moments(point)
    rep_mu, rep_var = _moments(reps)
    used = pool_counts(rows, 1, n_labels).observed
    return PilotMoments(
        mu_d=float(mu),
        sigma0_sq=float(var) if np.isfinite(mu) else np.nan,
        mu_d_se=float(np.nanstd(rep_mu, ddof=1)) if np.isfinite(mu) else np.nan,
        sigma0_sq_se=float(np.nanstd(rep_var, ddof=1)) if np.isfinite(mu) else np.nan,
        mu_d_ci=percentile_interval(rep_mu, confidence_level),
        sigma0_sq_ci=percentile_interval(np.where(np.isfinite(rep_mu), rep_var, np.nan), confidence_level),
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


_EXACT_M_MAX = 30_000  # the exact convolution's reach (~2 s at the top); beyond it the corrected normal form
_EXACT_CURVE = 4000  # a recipe's FR curve is exact up to here, or up to 1.3 m when that is further
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
    _moments_iv(sigma_sq, 0.5)
    m = np.asarray(m, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (_cut(m, epsilon, pool_size) + 0.5 - pool_size * m * mu_d) / (pool_size * math.sqrt(sigma_sq) * np.sqrt(m))
    return np.asarray(ndtr(z), dtype=float)


def exact_false_rejection_rates(lattice: XiLattice, m_max: int, *, epsilon: float) -> np.ndarray:
    """``Pr[d_k < -eps]`` at ``m = 1..m_max``: the ``m``-fold convolution of the item lattice.

    docs/method.md §4, item 1. ``s m d_k`` is a sum of ``m`` independent draws of
    ``s xi``; probabilities below 1e-17 at either end are dropped as the sum grows. Above
    ``m = 30,000`` the continuity-corrected normal form takes over.

    >>> round(float(exact_false_rejection_rates(xi_lattice(0.85, 0.9, n_labels=2), 117, epsilon=0.05)[-1]), 4)
    0.0285
    """
    s = lattice.pool_size
    exact_max = min(m_max, _EXACT_M_MAX)
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


def _m_needed(z: float, variance: float, gap: float) -> int | float:
    """``ceil(z^2 variance / gap^2)``, at least 1; ``inf`` when ``gap <= 0`` or the ratio overflows."""
    if gap <= 0:
        return math.inf
    ratio = (z / gap) ** 2 * variance if gap > 1e-150 else math.inf
    return max(1, math.ceil(ratio - 1e-9)) if math.isfinite(ratio) else math.inf


def m_cert(mu_d: float, sigma0_sq: float, *, epsilon: float | None = None, alpha_sig: float = 0.05) -> int | float:
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


def m_rank(variance: float, delta_min: float, *, n_judges: int, alpha_sig: float = 0.05) -> int | float:
    """Overlap to order ``J`` judges ``delta_min`` apart (docs/method.md §4, item 3).

    ``m_rank = ceil(z_{1-alpha_sig/(J-1)}^2 sigma_Delta^2 / Delta_min^2)``: one-sided,
    Bonferroni over the ``J - 1`` adjacent pairs; ``variance`` is the largest per-item
    variance of an adjacent pair's margin (``paired_variance``).

    >>> m_rank(0.2, 0.05, n_judges=2)  # ceil(1.6449^2 0.2 / 0.05^2) = ceil(216.5)
    217
    """
    _moments_iv(variance, alpha_sig)
    sigma0_sq = variance
    if not (np.isfinite(delta_min) and delta_min > 0):
        raise ValueError(f"delta_min must be a finite number > 0, got {delta_min!r}")
    if not isinstance(n_judges, (int, np.integer)) or n_judges < 2:
        raise ValueError(f"n_judges must be an integer >= 2, got {n_judges!r}")
    z = float(ndtri(1.0 - alpha_sig / (n_judges - 1)))
    return _m_needed(z, sigma0_sq, delta_min)


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
    _moments_iv(sigma_sq, alpha_sig)
    power = 1.0 - alpha_sig / 2.0 if power is None else power
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1) or None, got {power!r}")
    z = alt_test_quantile(n_humans, q=q) + float(ndtri(power))
    epsilon = DEFAULT_EPSILON["alt-test"] if epsilon is None else epsilon
    return _m_needed(z, sigma_sq, mu + epsilon)


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
    if not isinstance(m_max, (int, np.integer)) or not 1 <= m_max <= _EXACT_M_MAX:
        raise ValueError(f"m_max must be an integer in 1..{_EXACT_M_MAX}, got {m_max!r}")
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

    _moments_iv(sigma_sq, 0.5)
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

    >>> mu, var = advantage_moments(*xi_lattice(0.85, 0.90, n_labels=2).advantage)
    >>> m_alt_test_judge(mu, var, n_humans=3), m_alt_test(mu, var, n_humans=3)
    (42, 66)
    """
    _moments_iv(sigma_sq, alpha_sig)
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
    exact_to: int = _EXACT_CURVE,
) -> np.ndarray:
    """Per-rater FR at the overlaps ``m``: exact on ``lattice`` up to ``exact_to`` items, else continuity-corrected."""
    rates = corrected_false_rejection_rate(m, mu_d, sigma_sq, epsilon=epsilon, pool_size=pool_size)
    exact = m <= min(exact_to, _EXACT_M_MAX)
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
    if lattice is None or top > _EXACT_M_MAX:
        window = np.arange(max(lo - 1, _EXACT_M_MAX + 1 if lattice is not None else 1), hi + 1)
        above = window[_rates_at(window, mu_d, sigma_sq, epsilon, pool_size, None) > target]
        if above.size:
            return int(above[-1]) + 1
        if lattice is None:
            return 1
    top = min(top, _EXACT_M_MAX)
    while True:
        m = enveloped_m(exact_false_rejection_rates(lattice, top, epsilon=epsilon), target)
        if math.isfinite(m) or top == _EXACT_M_MAX:
            return min(m, _EXACT_M_MAX + 1)
        top = min(2 * top, _EXACT_M_MAX)


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
    ``omega_threshold``): the per-human power target over-sized it 33-100%; the curve stays per human.

    A ratio ``coefficient`` (kappa, alpha, AC1; margin rule) takes ``mu_d``, ``sigma0_sq`` from
    ``ratio_moments`` (the delta-method variance constant) and the plain normal FR
    ``Phi(-(mu_d + eps) sqrt(m)/sigma)``: its ``d_k`` lives on no lattice (docs/method.md §4, item 4).

    ``promise="judge"`` (margin rule, ``p_o``, paired, one held-in label per item with its lattice: disjoint
    secondaries) serves ``m_margin_judge``, the smallest ``m`` keeping the judge's FR within ``alpha_sig/2``,
    instead of each held-out human's; the curve stays per human.

    ``estimator="ppi"`` / ``"neyman"`` (margin rule; docs/method.md §9) plan for the
    estimate that also uses the judge-primary agreement on every item, ``judge_agreement``
    = ``P(judge = primary)``: the variance drops to ``(1 - rho^2) Var(B)`` (PPI++) or
    ``(sum_h W_h S_h)^2`` (Neyman panel over the agreement strata).

    >>> r = certify_recipe(0.035, 0.218775, n_items=1000, n_humans=3,
    ...                    lattice=xi_lattice(0.85, 0.90, n_labels=2))
    >>> r.m, r.plan.rho, r.plan.total_labels  # m_cert = 117; the exact FR stays above .025 up to 119
    (120, 0.12, 1240)
    >>> [certify_recipe(0.035, 0.218775, n_items=1000, n_humans=3, estimator=e,
    ...                 judge_agreement=0.78).m for e in ("ppi", "neyman")]
    [86, 84]
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
        _moments_iv(sigma0_sq, alpha_sig)
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
        _moments_iv(sigma0_sq, alpha_sig)
        if isinstance(lattice, RatioPrior):
            raise ValueError("a ratio prior plans a ratio coefficient, not p_o")
        m = _enveloped_certification(mu_d, sigma0_sq, epsilon, pool_size, lattice, alpha_sig)
        if promise == "judge" and isinstance(lattice, XiLattice) and math.isfinite(m) and m <= _EXACT_M_MAX:
            m = m_margin_judge(
                lattice,
                int(m),
                n_humans=n_humans,
                epsilon=epsilon,
                omega_threshold=omega_threshold,
                alpha_sig=alpha_sig,
            )
        grid = _m_grid(n_items, m, m_grid)
        reach = max(_EXACT_CURVE, math.ceil(1.3 * m) + 1) if math.isfinite(m) else _EXACT_CURVE
        rates: np.ndarray | float = _rates_at(
            np.array(grid), mu_d, sigma0_sq, epsilon, pool_size, lattice, exact_to=reach
        )
    else:
        if rule == "margin":
            m = m_cert(mu_d, sigma0_sq, epsilon=epsilon, alpha_sig=alpha_sig)
            critical_z = 0.0
            if isinstance(lattice, RatioPrior) and math.isfinite(m):
                simulated = simulated_ratio_m(lattice, int(m), epsilon=epsilon, alpha_sig=alpha_sig)
                m = m if simulated is None else simulated
        else:
            m = m_alt_test(mu_d, sigma0_sq, n_humans=n_humans, epsilon=epsilon, q=q, power=power, alpha_sig=alpha_sig)
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
    m_grid: list[int] | None = None,
) -> Recipe:
    """Overlap and budget to rank ``n_judges`` judges, with the misorder curve (docs/method.md §4).

    ``variance`` is the largest per-item variance of an adjacent pair's margin
    (``paired_variance``); ``m = m_rank``; ``fr_rate(m) = Phi(-delta_min sqrt(m / variance))``,
    the chance that two adjacent judges ``delta_min`` apart come out in the wrong order.

    >>> rank_recipe(0.2, 0.05, n_items=10_000, n_humans=4, n_judges=2).plan.total_labels
    10651
    """
    m = m_rank(variance, delta_min, n_judges=n_judges, alpha_sig=alpha_sig)
    _budget_iv(n_items, n_humans)
    grid = _m_grid(n_items, m, m_grid)
    rates = false_rejection_rate(np.array(grid), delta_min, variance, epsilon=0.0)
    return _recipe("rank", "margin", m, n_items, n_humans, grid, rates, alpha_sig, "")
