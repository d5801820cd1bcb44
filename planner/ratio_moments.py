"""Moments of a ratio coefficient's influence (kappa, alpha, AC1), its simulated false rejection (docs/method.md §4)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.xi_moments import (
    prior_iv,
)

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
    p_h, p_j = prior_iv(p_h, p_j, n_labels, pool_size)
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
RATIO_SIMULATED_CELLS = 81
"""Largest law of one item's labels (``L^(s+2)``: judge, ``s`` pool members, held-out) that is simulated:
``RATIO_DRAWS`` x cells counts are kept (3 labels with 2 members, 2 with 4: a few seconds of a plan; 3
labels with 4 members took 30 s); beyond it the normal form stands."""


def ratio_false_rejection_rates(prior: RatioPrior, m_max: int, *, epsilon: float, at: object) -> np.ndarray:
    """Per-rater FR ``Pr[d_k < -eps]`` of a ratio coefficient at the overlaps ``at`` (in ``1..m_max``; NaN
    elsewhere), with ``s = pool_size`` held-in labels per item: ``d_k`` the mean over the members ``P_i`` of
    ``F(judge, P_i) - F(S, P_i)`` on ``m`` items labelled by the judge, the members and the held-out ``S``
    (docs/method.md §4, item 4).

    Items are drawn from the prior's law of ``(judge, P_1..P_s, S)`` labels one at a time for ``RATIO_DRAWS``
    comparisons (seed 0), so successive ``m`` share their draws; ``F`` is the decision's own two-rater
    formula on the counts (``planner.tables.two_rater_coefficient``); a comparison whose ``d_k`` is
    undefined is left out, as the decision does.
    """
    from planner.tables import two_rater_coefficient

    if prior.coefficient not in RATIO_COEFFICIENTS:
        raise ValueError(f"coefficient must be one of {RATIO_COEFFICIENTS}, got {prior.coefficient!r}")
    if not isinstance(m_max, (int, np.integer)) or not 1 <= m_max <= 2 * RATIO_SIMULATED_M_MAX:
        raise ValueError(f"m_max must be an integer in 1..{2 * RATIO_SIMULATED_M_MAX}, got {m_max!r}")
    n_labels, members = prior.n_labels, prior.pool_size
    if n_labels ** (members + 2) > RATIO_SIMULATED_CELLS:
        raise ValueError(f"{n_labels}^{members + 2} label cells per item exceed {RATIO_SIMULATED_CELLS}")
    p_h, p_j = prior_iv(prior.p_h, prior.p_j, n_labels, members)
    shares = np.full(n_labels, 1.0 / n_labels) if prior.prevalence is None else np.asarray(prior.prevalence, float)
    human, judge = _channel(p_h, n_labels), _channel(p_j, n_labels)
    law = shares[:, None] * judge  # [truth, judge], then one human axis per member and the held-out
    for _ in range(members + 1):
        law = law[..., None] * human.reshape((n_labels,) + (1,) * (law.ndim - 1) + (n_labels,))
    law = law.sum(axis=0).ravel()
    edges = np.cumsum(law)[:-1]
    wanted = np.zeros(m_max + 1, dtype=bool)
    wanted[np.asarray(at, dtype=np.int64)] = True
    gen = np.random.default_rng(0)
    counts = np.zeros((RATIO_DRAWS, law.size), dtype=np.int32)
    rows = np.arange(RATIO_DRAWS)
    rates = np.full(m_max, np.nan)
    diagonal = np.arange(n_labels)
    axes = tuple(range(1, members + 3))  # judge, P_1..P_s, S
    for size in range(1, m_max + 1):
        counts[rows, np.searchsorted(edges, gen.random(RATIO_DRAWS), side="right")] += 1
        if not wanted[size]:
            continue
        cube = counts.reshape((RATIO_DRAWS,) + (n_labels,) * (members + 2)).astype(float)
        d = np.zeros(RATIO_DRAWS)
        for i in range(members):
            member = 2 + i
            judge_p = cube.sum(axis=tuple(a for a in axes if a not in (1, member)))  # [judge, P_i]
            p_s = cube.sum(axis=tuple(a for a in axes if a not in (member, members + 2)))  # [P_i, S]
            f_judge = two_rater_coefficient(
                judge_p[:, diagonal, diagonal].sum(axis=1), judge_p.sum(axis=2), judge_p.sum(axis=1), prior.coefficient
            )
            f_human = two_rater_coefficient(
                p_s[:, diagonal, diagonal].sum(axis=1), p_s.sum(axis=1), p_s.sum(axis=2), prior.coefficient
            )
            d += (f_judge - f_human) / members
        defined = np.isfinite(d)
        rates[size - 1] = float(np.mean(d[defined] < -epsilon - 1e-12)) if defined.any() else math.nan
    return rates


def simulated_ratio_m(prior: RatioPrior, normal_m: int, *, epsilon: float, alpha_sig: float) -> int | None:
    """Smallest ``m`` whose simulated FR + 2 SE (``ratio_false_rejection_rates``; the draws' MC error inside
    the promise) is at most ``alpha_sig/2`` at every overlap up to ``1.6`` times the normal form's ``m``
    (docs/method.md §4, item 4); None beyond ``RATIO_SIMULATED_M_MAX`` or ``RATIO_SIMULATED_CELLS``, or when
    it misses the promise up there (the normal form then stands).
    """
    if normal_m > RATIO_SIMULATED_M_MAX or prior.n_labels ** (prior.pool_size + 2) > RATIO_SIMULATED_CELLS:
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
