"""Moments of the per-item difference ``xi`` from priors or a pilot (docs/method.md §4).

Under the symmetric noise channel (priors ``p_h``, ``p_j``) the exact lattice of ``xi`` and its mean
and variance; from the overlap in hand, the pilot's moments with bootstrap intervals; and the
variances a ranking plans on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.intervals import ConfidenceInterval, percentile_interval
from planner.patterns import item_patterns
from planner.pools import overlap_rows, pool_counts
from planner.resampling import bootstrap_sums, distinct_features
from planner.rules import checked_inputs

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


# --------------------------------------------------------------------------- moments


def _probability_iv(value: float, name: str) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def prior_iv(p_h: float, p_j: float, n_labels: int, pool_size: int) -> tuple[float, float]:
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
    p_h, p_j = prior_iv(p_h, p_j, n_labels, pool_size)
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
    p_h, p_j = prior_iv(p_h, p_j, n_labels, pool_size)
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
