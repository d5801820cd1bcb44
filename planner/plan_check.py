"""A plan's simulated check: the decision at the planned overlap, per design (docs/method.md §6, "Plan check").

The decision reads only the overlap: an item that no secondary labels is in no ``O_k``. So a
trial materialises only the items some secondary gets (at most ``(K - 1) m``), and the rest
of the corpus is kept as counts of untouched items per primary label. Items are i.i.d.
given what a design sees of them (the primary's label, and for Seq-Coverage the labels in
hand), so each design step is the served design's own selection (``planner.designs``:
``proportional_allocation``, ``stratified_masks``, ``coverage_codes``/``coverage_quota``)
applied to the materialised items, with the untouched ones entering as multivariate
hypergeometric counts. The cost grows with ``m`` and ``K``, not with ``n``.

Rates are against the population, not a dense matrix: FR is the share of trials in which
a judge that is good in population (the prior's ``p_j``: ``mu + epsilon > 0``) is rejected;
FA the share in which the **mirror judge** passes, the judge as far below ``-epsilon`` as the
good one is above it (``mu' + epsilon = -(mu + epsilon)``), ``mu`` the decision's own margin (a
ratio coefficient's for kappa, alpha and AC1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
from scipy.special import ndtr

from planner.overlap_samples import CHECK_DESIGNS, overlap_sample
from planner.ratio_moments import RATIO_COEFFICIENTS, ratio_moments
from planner.simulate import decision_rule
from planner.trial_decisions import DecisionRule, evaluate_decisions
from planner.xi_moments import advantage_moments, xi_lattice

Rng = int | np.random.Generator | None

INCONCLUSIVE_LEVEL = 0.2
MAX_RAISES = 12
Checked = TypeVar("Checked")


@dataclass(frozen=True)
class DesignCheck:
    """Simulated error rates of one design at overlap ``m`` with their Monte Carlo SE (docs/method.md §6).

    ``fr``: good judge rejected; ``rater_fr``: the good judge's share of lost comparisons per held-out
    human, pooled over the secondaries (whom a design treats alike) and apart for the primary, the larger
    of the two (the margin recipe's per-rater promise); ``fa``: mirror
    judge (accuracy ``p_j_bad``) passed; ``wrong = (fr + fa) / 2`` (the two judges equally
    likely); ``inconclusive``: share of trials whose decision the normal approximation of
    the bootstrap would flip with probability above 0.2 (margin rule, ``F = p_o``). A rate
    that cannot be measured is NaN and ``reason`` says why. ``promise_status`` of the promised rate
    (``promised``: ``rater_fr`` under the margin rule, ``fr`` under the alt-test), from
    ``promise_status``; ``keeps_promise``: the status is ``"kept"`` (the Monte Carlo error inside
    the promise).
    """

    design: str
    m: int
    trials: int
    fr: float
    fr_se: float
    rater_fr: float
    rater_fr_se: float
    fa: float
    fa_se: float
    wrong: float
    wrong_se: float
    inconclusive: float
    inconclusive_se: float
    p_j_bad: float
    promised: str
    promise: float
    promise_status: str
    reason: str

    @property
    def keeps_promise(self) -> bool:
        """The promised rate's upper 2-SE bound is within the promise."""
        return self.promise_status == "kept"


def promise_status(rate: float, rate_se: float, promise: float) -> str:
    """Whether a simulated rate keeps ``promise`` with its Monte Carlo error inside it (docs/method.md §6,
    "The promise and raising m"): ``"kept"`` when ``rate + 2 SE <= promise``, ``"broken"`` when
    ``rate - 2 SE > promise``, ``"unresolved"`` in between (the trials cannot tell), ``"undefined"`` for NaN.

    >>> [promise_status(r, 0.005, 0.025) for r in (0.01, 0.02, 0.04, float("nan"))]
    ['kept', 'unresolved', 'broken', 'undefined']
    """
    if math.isnan(rate):
        return "undefined"
    if rate + 2.0 * rate_se <= promise:
        return "kept"
    return "broken" if rate - 2.0 * rate_se > promise else "unresolved"


def _share(flags: np.ndarray) -> tuple[float, float]:
    """Share of True and its binomial Monte Carlo SE; NaN for no draws."""
    if flags.size == 0:
        return math.nan, math.nan
    rate = float(flags.mean())
    return rate, math.sqrt(rate * (1.0 - rate) / flags.size)


def _pooled_share(flags: np.ndarray, defined: np.ndarray) -> tuple[float, float]:
    """Share of True among the defined ``(trials, raters)`` cells of exchangeable raters, and its Monte
    Carlo SE with the trial as the cluster (a trial's raters share their items and labels).

    Pooling the raters a design treats alike estimates the rate of one held-out human without the
    upward bias of the largest of several noisy shares (docs/method.md §6).

    By hand: trials lose 1 and 0 of 2, rate ``1/4``; SE ``sqrt((1 - .5)^2 + (0 - .5)^2)/4 = .1768``:

    >>> [round(v, 4) for v in _pooled_share(np.array([[True, False], [False, False]]), np.ones((2, 2), bool))]
    [0.25, 0.1768]
    """
    lost = np.where(defined, flags, False).sum(axis=1).astype(float)
    used = defined.sum(axis=1).astype(float)
    total = float(used.sum())
    if total == 0:
        return math.nan, math.nan
    rate = float(lost.sum()) / total
    return rate, float(np.sqrt(np.sum((lost - rate * used) ** 2))) / total


def true_prevalence(primary_shares: object, *, p_h: float) -> np.ndarray:
    """True label shares whose symmetric-channel image at accuracy ``p_h`` is ``primary_shares``
    (docs/method.md §6): ``pi = (s - q) / (p_h - q)``, ``q = (1 - p_h)/(L - 1)``, clipped at 0."""
    shares = np.asarray(primary_shares, dtype=float)
    if shares.ndim != 1 or shares.size < 2 or np.any(shares < 0) or shares.sum() <= 0:
        raise ValueError("primary_shares must be at least two non-negative shares")
    shares = shares / shares.sum()
    q_h = (1.0 - p_h) / (shares.size - 1)
    if p_h - q_h <= 0:
        return np.full(shares.size, 1.0 / shares.size)
    raw = np.clip((shares - q_h) / (p_h - q_h), 0.0, None)
    return np.asarray(raw / raw.sum())


def fitted_channel(codes: object, *, judge: int, humans: list[int], n_labels: int) -> tuple[float, float] | None:
    """``(p_h, p_j)`` of the symmetric noise channel that reproduces the pooled human-human and
    judge-human agreement of a pilot (docs/method.md §6): ``a_hh = p_h^2 + (1 - p_h)^2/(L - 1)``
    (the root above ``1/L``), ``a_jh = p_h p_j + (1 - p_h)(1 - p_j)/(L - 1)``. None without a
    pair of humans sharing an item, or when the humans agree less than chance.

    By hand: ``a_hh = 3/4`` gives ``p_h = (1 + sqrt(1/2))/2``; ``a_jh = 5/8`` gives
    ``p_j = (5/8 - q_h)/(p_h - q_h)`` with ``q_h = 1 - p_h``:

    >>> [round(p, 6) for p in fitted_channel([[0, 0, 0], [1, 1, 0], [0, 0, 0], [1, 0, 1]], judge=2,
    ...                                       humans=[0, 1], n_labels=2)]
    [0.853553, 0.676777]
    """
    arr = np.asarray(codes)
    if arr.ndim != 2 or len(humans) < 2:
        return None

    def pooled(columns: list[tuple[int, int]]) -> float:
        both = [(arr[:, a] >= 0) & (arr[:, b] >= 0) for a, b in columns]
        common = sum(int(x.sum()) for x in both)
        agree = sum(int((arr[x, a] == arr[x, b]).sum()) for x, (a, b) in zip(both, columns, strict=True))
        return agree / common if common else math.nan

    a_hh = pooled([(a, b) for i, a in enumerate(humans) for b in humans[i + 1 :]])
    a_jh = pooled([(judge, h) for h in humans])
    chance = 1.0 / n_labels
    if math.isnan(a_hh) or math.isnan(a_jh) or a_hh <= chance:
        return None
    p_h = min((1.0 + math.sqrt(max(0.0, 1.0 - n_labels * (1.0 - a_hh * (n_labels - 1))))) / n_labels, 1.0 - 1e-9)
    q_h = (1.0 - p_h) / (n_labels - 1)
    p_j = min(max((a_jh - q_h) / (p_h - q_h), 0.0), 1.0)
    return p_h, p_j


def _posterior(prevalence: np.ndarray, p_h: float) -> tuple[np.ndarray, np.ndarray]:
    """Primary-label shares and ``P(truth | primary label)`` rows under the symmetric channel."""
    n_labels = prevalence.size
    channel = np.full((n_labels, n_labels), (1.0 - p_h) / (n_labels - 1))
    np.fill_diagonal(channel, p_h)
    joint = channel * prevalence[None, :]  # [primary label, truth]
    shares = joint.sum(axis=1)
    rows = np.divide(joint, shares[:, None], out=np.full(joint.shape, 1.0 / n_labels), where=shares[:, None] > 0)
    return shares, rows


def _population_gap(
    p_h: float,
    p_j: float,
    n_labels: int,
    rule: DecisionRule,
    pool_size: int,
    coefficient: str = "po",
    prevalence: np.ndarray | None = None,
) -> float:
    """``mu + epsilon`` of a judge in population: ``mu_d`` (margin; for a ratio coefficient its own margin
    ``F(judge, member) - F(human, member)`` at the true ``prevalence``, ``ratio_moments``) or
    ``p_plus - p_minus`` (alt-test). NaN where the coefficient is undefined (one label throughout)."""
    if rule.name == "margin" and coefficient in RATIO_COEFFICIENTS:
        try:
            mu = ratio_moments(
                p_h, p_j, n_labels=n_labels, coefficient=coefficient, prevalence=prevalence, pool_size=pool_size
            )[0]
        except ValueError:
            return math.nan
        return mu + rule.epsilon
    lattice = xi_lattice(p_h, p_j, n_labels=n_labels, pool_size=pool_size)
    mu = lattice.mu_d if rule.name == "margin" else advantage_moments(*lattice.advantage)[0]
    return mu + rule.epsilon


def mirror_accuracy(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    rule: DecisionRule,
    pool_size: int = 1,
    coefficient: str = "po",
    prevalence: np.ndarray | None = None,
) -> float:
    """Accuracy of the judge as far below ``-epsilon`` as ``p_j`` is above it, on the decision's own margin
    (``p_o``'s, a ratio coefficient's, or the alt-test's advantage); NaN if none in [0, p_j]."""
    from scipy.optimize import brentq

    def gap(p: float) -> float:
        return _population_gap(p_h, p, n_labels, rule, pool_size, coefficient, prevalence)

    target = -gap(p_j)

    def excess(p: float) -> float:
        return gap(p) - target

    if not target < 0 or not excess(0.0) <= 0 or not excess(p_j) >= 0:
        return math.nan
    return float(brentq(excess, 0.0, p_j, xtol=1e-10))


def _flip_probability(
    d: np.ndarray,
    m_k: np.ndarray,
    sigma: np.ndarray,
    won: np.ndarray,
    used: np.ndarray,
    epsilon: float,
    omega_threshold: float,
    passed: np.ndarray,
) -> np.ndarray:
    """Per trial and judge, the normal-approximation bootstrap probability of the opposite decision.

    Each used rater's ``won`` flips with ``Phi(-|d_k + eps| sqrt(m_k) / sigma)``, independently;
    the count of won raters is then a Poisson-binomial whose law a short recursion gives.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        flip = ndtr(-np.abs(d + epsilon) * np.sqrt(m_k) / sigma[None, :, None])
    p_win = np.where(used, np.where(won, 1.0 - flip, flip), 0.0)
    law = np.zeros((*p_win.shape[:2], p_win.shape[2] + 1))
    law[..., 0] = 1.0
    for k in range(p_win.shape[2]):
        p = p_win[..., k : k + 1]
        law = law * (1.0 - p) + np.concatenate([np.zeros(law[..., :1].shape), law[..., :-1]], axis=-1) * p
    n_used = used.sum(axis=2)
    wins = np.arange(law.shape[-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        pass_if = wins[None, None, :] >= omega_threshold * n_used[..., None] - 1e-12
    p_pass = np.where(n_used > 0, (law * pass_if).sum(axis=-1), 0.0)
    return np.asarray(np.where(passed, 1.0 - p_pass, p_pass))


def check_design(
    design: str,
    *,
    n_items: int,
    n_humans: int,
    n_labels: int,
    m: int,
    p_h: float,
    p_j: float,
    prevalence: object = None,
    coefficient: str = "po",
    rule: str = "margin",
    epsilon: float | None = None,
    alpha_sig: float = 0.05,
    omega_threshold: float = 0.5,
    q: float = 0.05,
    trials: int = 1000,
    rng: Rng = None,
) -> DesignCheck:
    """FR, FA, wrong-decision and inconclusive rates of ``design`` at overlap ``m`` (docs/method.md §6).

    ``prevalence``: true label shares (uniform by default; ``true_prevalence`` turns the
    primary's label shares into them). Each trial draws the corpus's primary-label counts,
    then the items the design puts in overlap (``overlap_sample``) with the labels of every
    human, the good judge (``p_j``) and its mirror, and runs the §3 decision on them.
    """
    if design not in CHECK_DESIGNS:
        raise ValueError(f"design must be one of {', '.join(CHECK_DESIGNS)}; got {design!r}")
    for value, name in ((n_items, "n_items"), (n_humans, "n_humans"), (m, "m"), (trials, "trials")):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if n_humans < 2 or not 1 <= m <= n_items:
        raise ValueError(f"need n_humans >= 2 and 1 <= m <= n_items, got K={n_humans}, m={m}, n={n_items}")
    decision = decision_rule(rule, epsilon, 0.05, omega_threshold, q, [coefficient])
    share = np.full(n_labels, 1.0 / n_labels) if prevalence is None else np.asarray(prevalence, dtype=float)
    if share.shape != (n_labels,) or np.any(share < 0) or not np.isclose(share.sum(), 1.0):
        raise ValueError(f"prevalence must be {n_labels} non-negative shares summing to 1")
    pool_size = n_humans - 1 if design == "strat" else 1
    promised = "rater_fr" if decision.name == "margin" else "fr"
    promise = alpha_sig / 2
    good_gap = _population_gap(p_h, p_j, n_labels, decision, pool_size, coefficient, share)
    if not good_gap > 0:
        reason = "the prior's judge is not good in population (mu + epsilon <= 0): FR is undefined"
        nan = math.nan
        return DesignCheck(
            design,
            m,
            trials,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            nan,
            promised,
            promise,
            "undefined",
            reason,
        )
    p_bad = mirror_accuracy(
        p_h, p_j, n_labels=n_labels, rule=decision, pool_size=pool_size, coefficient=coefficient, prevalence=share
    )
    gen = np.random.default_rng(rng)
    primary_share, posterior = _posterior(share, p_h)
    counts = gen.multinomial(n_items, primary_share, size=trials)
    judges = [p_j] if math.isnan(p_bad) else [p_j, p_bad]
    accuracies = np.array([p_h] * (n_humans - 1) + judges)
    codes, mask = overlap_sample(
        design,
        n_items=n_items,
        n_humans=n_humans,
        m=m,
        primary_counts=counts,
        posterior=posterior,
        accuracies=accuracies,
        gen=gen,
    )
    ev = evaluate_decisions(
        codes[:n_humans], codes[n_humans:], mask, coefficient=coefficient, n_labels=n_labels, rule=decision
    )
    fr, fr_se = _share(~ev.passed[:, 0])
    groups = [_pooled_share(~ev.won[:, 0, :1], ev.defined[:, 0, :1])]  # the primary
    groups.append(_pooled_share(~ev.won[:, 0, 1:], ev.defined[:, 0, 1:]))  # the secondaries, exchangeable
    rater_fr, rater_fr_se = max(groups, key=lambda r: -1.0 if math.isnan(r[0]) else r[0])
    reasons = []
    if math.isnan(p_bad):
        fa = fa_se = wrong = wrong_se = math.nan
        reasons.append("no judge accuracy gives the mirror margin: FA and wrong-decision are undefined")
    else:
        fa, fa_se = _share(ev.passed[:, 1])
        wrong, wrong_se = (fr + fa) / 2, math.hypot(fr_se, fa_se) / 2
    if decision.name == "margin" and coefficient == "po":
        sigma = np.sqrt([xi_lattice(p_h, p, n_labels=n_labels, pool_size=pool_size).variance for p in judges])
        m_k = np.count_nonzero(mask & (mask.sum(axis=0, dtype=np.int16) > 1), axis=2).T[:, None, :]
        flip = _flip_probability(ev.d, m_k, sigma, ev.won, ev.defined, decision.epsilon, omega_threshold, ev.passed)
        inconclusive, inconclusive_se = _share(flip > INCONCLUSIVE_LEVEL)
    else:
        inconclusive = inconclusive_se = math.nan
        reasons.append("inconclusive is approximated for the margin rule on p_o only")
    rate, rate_se = (rater_fr, rater_fr_se) if promised == "rater_fr" else (fr, fr_se)
    return DesignCheck(
        design,
        int(m),
        int(trials),
        fr,
        fr_se,
        rater_fr,
        rater_fr_se,
        fa,
        fa_se,
        wrong,
        wrong_se,
        inconclusive,
        inconclusive_se,
        p_bad,
        promised,
        promise,
        promise_status(rate, rate_se, promise),
        "; ".join(reasons),
    )


def raised_m(
    check_at: Callable[[int], Checked],
    m: int,
    *,
    n_items: int,
    keeps: Callable[[Checked], bool],
    first: Checked | None = None,
) -> tuple[Checked, int]:
    """The check at ``m`` (``first`` when already simulated there) and, while it breaks the promise,
    at ``m`` raised by 20% steps (at least one item, at most ``n_items``, up to 12 steps): the last
    check and its ``m`` (docs/method.md §6, "The promise and raising m")."""
    current, size = (first if first is not None else check_at(m)), m
    for _ in range(MAX_RAISES):
        if keeps(current) or size >= n_items:
            break
        size = min(n_items, max(size + 1, math.ceil(size * 1.2)))
        current = check_at(size)
    return current, size


class Judged(Protocol):
    """A simulated check at an overlap ``m`` with the status of its promised rate (``promise_status``)."""

    @property
    def m(self) -> int: ...

    @property
    def promise_status(self) -> str: ...


def needs_no_raise(check: Judged, recipe_m: int) -> bool:
    """Whether ``check`` lets the plan stand at its ``m`` (docs/method.md §6, "The promise and raising m"):
    kept, or undefined (no overlap makes a judge that is not good pass), or at the recipe's own ``m`` and
    not broken (the recipe's computation, exact or with its own Monte Carlo error inside the promise, is
    the evidence there). Once the check has shown the recipe's ``m`` broken it is the only evidence left,
    so a raised ``m`` must be kept."""
    return check.promise_status in ("kept", "undefined") or (
        check.m == recipe_m and check.promise_status == "unresolved"
    )


def raised_check(design: str, *, m: int, n_items: int, rng: Rng = None, **settings: object) -> DesignCheck:
    """``check_design`` at ``m``, raised by ``raised_m`` until ``needs_no_raise``."""
    gen = np.random.default_rng(rng)

    def at(size: int) -> DesignCheck:
        return check_design(design, m=size, n_items=n_items, rng=gen, **settings)  # type: ignore[arg-type]

    check, _ = raised_m(at, m, n_items=n_items, keeps=lambda c: needs_no_raise(c, m))
    return check


def simulated_choice(checks: dict[str, DesignCheck], *, preferred: str) -> tuple[str, str]:
    """The design with the lowest simulated wrong-decision rate, and why (docs/method.md §5, "Choosing").

    Designs within 2 Monte Carlo SE of the lowest rate tie; a tie goes to ``preferred`` (the
    entropy rule's pick) when it is among them. Without any defined rate: ``preferred``.
    """
    defined = {d: c for d, c in checks.items() if not math.isnan(c.wrong)}
    if not defined:
        return preferred, "no design's wrong-decision rate could be simulated: the stratum-entropy rule decides"
    best = min(defined.values(), key=lambda c: c.wrong)
    tied = [d for d, c in defined.items() if c.wrong - best.wrong <= 2 * math.hypot(c.wrong_se, best.wrong_se)]
    pick = preferred if preferred in tied else best.design
    rates = ", ".join(f"{d} {c.wrong:.3f}" for d, c in sorted(defined.items(), key=lambda x: x[1].wrong))
    why = f"lowest simulated wrong-decision rate at m={best.m} ({rates})"
    if len(tied) > 1:
        why += f"; {', '.join(sorted(tied))} tie within 2 Monte Carlo SE, so " + (
            f"the stratum-entropy rule's pick {preferred}" if pick == preferred else f"the lowest, {pick}"
        )
    return pick, why
