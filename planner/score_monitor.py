"""Anytime-valid monitoring of a score judge: each held-out human's per-item alignment difference, in
arrival order, under a confidence sequence (docs/method.md §8b).

Ratings are floats ``(n_items, n_raters)``, NaN where missing; ``order`` holds each rating's arrival
rank (any increasing stamp, NaN or negative where there is no rating). The difference ``xi`` of §4b
lies in ``[-1, 1]`` on a range-scaled axis, so §8's bounded-mean sequences apply to it directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.confidence_sequences import confidence_sequence
from planner.rules import DEFAULT_EPSILON, passes
from planner.score_decision import SCORE_RULES, item_differences

MAX_CELLS = 50_000_000
"""The largest ratings matrix (cells) monitored: a few float copies of it are held at once."""


@dataclass(frozen=True, kw_only=True)
class ScoreRaterMonitoring:
    """One held-out human: ``m`` usable items, the running mean of ``xi`` and its bounds after the last,
    ``status`` ``"won"`` (the lower bound cleared ``-epsilon``), ``"lost"`` (the upper bound fell below it)
    or ``"open"``, and the item count at which it was decided (0 while open)."""

    rater: int
    m: int
    estimate: float
    lower: float
    upper: float
    status: str
    decided_at: int


@dataclass(frozen=True, kw_only=True)
class ScoreMonitoring:
    """The monitored decision of one judge: ``"pass"`` once the humans certified won reach
    ``omega_threshold``, ``"reject"`` once those certified lost make that impossible, else ``"continue"``;
    ``"insufficient_data"`` with fewer than two humans (``reason`` says why)."""

    judge: int
    raters: tuple[ScoreRaterMonitoring, ...]
    omega: float
    decision: str
    alpha: float
    epsilon: float
    reason: str


def _monitor_iv(
    ratings: object, order: object, judge: int, humans: list[int], rule: str, value_range: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray, float]:
    values, ranks = np.asarray(ratings, dtype=float), np.asarray(order, dtype=float)
    if values.ndim != 2 or ranks.shape != values.shape:
        raise ValueError(f"ratings and order must be 2-D of one shape, got {values.shape} and {ranks.shape}")
    if values.size > MAX_CELLS:
        raise ValueError(f"ratings has {values.size:,} cells, more than the {MAX_CELLS:,} accepted")
    columns = [judge, *humans]
    if len(set(columns)) != len(columns) or not all(0 <= c < values.shape[1] for c in columns):
        raise ValueError(f"judge and humans must be distinct columns in 0..{values.shape[1] - 1}")
    if rule not in SCORE_RULES:
        raise ValueError(f"rule must be one of {SCORE_RULES}, got {rule!r}")
    low, high = (float(v) for v in value_range)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"value_range must be finite (min, max) with min < max, got {value_range!r}")
    if np.any((values[:, columns] < low) | (values[:, columns] > high)):
        raise ValueError(f"ratings fall outside value_range {value_range!r}")
    rated = ~np.isnan(values)
    if np.any(rated & ~(np.nan_to_num(ranks, nan=-1.0) >= 0)):
        raise ValueError("every rating needs its arrival rank in order (>= 0)")
    return values, np.where(rated, ranks, np.inf), high - low


def _arrived(
    values: np.ndarray, ranks: np.ndarray, judge: int, human: int, others: list[int], rule: str, span: float
) -> np.ndarray:
    """``xi`` of ``human`` in the order its items became usable, each against the pool present then."""
    first_other = ranks[:, others].min(axis=1)
    entry = np.maximum(np.maximum(ranks[:, judge], ranks[:, human]), first_other)
    present = values.copy()
    present[:, others] = np.where(ranks[:, others] <= entry[:, None], values[:, others], np.nan)
    rows, xi = item_differences(present, judge, human, others, rule=rule, span=span)
    return xi[np.argsort(entry[rows], kind="stable")]


def monitor_scores(
    ratings: object,
    order: object,
    judge: int,
    humans: list[int],
    *,
    rule: str = "margin",
    value_range: tuple[float, float],
    epsilon: float | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    budget: int | None = None,
) -> ScoreMonitoring:
    """The judge's monitored decision on numeric ``ratings`` with arrival ``order`` (docs/method.md §8b).

    For each held-out human ``r_k`` the items become usable when the judge, ``r_k`` and another human have
    rated them; ``xi`` (§4b: the margin rule's range-scaled agreement difference, or the alt-test's
    ``W_f - W_h``) is fixed then, against the humans present. The empirical-Bernstein confidence sequence
    at ``alpha / K`` bounds the mean of ``xi`` after every item: ``r_k`` is certified won the first time its
    lower bound exceeds ``-epsilon``, lost the first time its upper bound falls below it. The bounds hold for
    every human and every look at once with probability ``1 - alpha``, so a judge within the margin of every
    human is rejected, at any look, with probability at most ``alpha``. ``budget`` is the plan's usable overlap
    per human: each human's first ``budget`` items are read, and a decision still open once every human
    reached it is ``"inconclusive"``.

    >>> r = np.array([[3.0, 3, 3]] * 400)  # the judge rates as the humans do: xi = 0 on every item
    >>> m = monitor_scores(r, np.tile([0.0, 1, 2], (400, 1)), 0, [1, 2], value_range=(1, 5))
    >>> m.decision, [h.status for h in m.raters], m.raters[0].decided_at
    ('pass', ['won', 'won'], 351)
    """
    values, ranks, span = _monitor_iv(ratings, order, judge, humans, rule, value_range)
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else float(epsilon)
    if not (np.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if not 0.0 < omega_threshold <= 1.0:
        raise ValueError(f"omega_threshold must be in (0, 1], got {omega_threshold!r}")
    if budget is not None and not (isinstance(budget, (int, np.integer)) and budget >= 1):
        raise ValueError(f"budget must be a positive integer or None, got {budget!r}")
    if len(humans) < 2:
        return ScoreMonitoring(
            judge=judge,
            raters=(),
            omega=float("nan"),
            decision="insufficient_data",
            alpha=alpha,
            epsilon=epsilon,
            reason="fewer than two humans: no human can be compared with a pool",
        )
    outcomes = []
    for h in humans:
        xi = _arrived(values, ranks, judge, h, [o for o in humans if o != h], rule, span)[:budget]
        if xi.size == 0:
            outcomes.append(
                ScoreRaterMonitoring(
                    rater=h, m=0, estimate=np.nan, lower=np.nan, upper=np.nan, status="open", decided_at=0
                )
            )
            continue
        cs = confidence_sequence(xi, alpha=alpha / len(humans), method="empirical-bernstein")
        won, lost = np.flatnonzero(cs.lower > -epsilon), np.flatnonzero(cs.upper < -epsilon)
        status, decided_at = "open", 0
        if won.size:
            status, decided_at = "won", int(won[0]) + 1
        elif lost.size:
            status, decided_at = "lost", int(lost[0]) + 1
        outcomes.append(
            ScoreRaterMonitoring(
                rater=h,
                m=int(xi.size),
                estimate=float(cs.estimate[-1]),
                lower=float(cs.lower[-1]),
                upper=float(cs.upper[-1]),
                status=status,
                decided_at=decided_at,
            )
        )
    n = len(humans)
    n_won, n_lost = sum(o.status == "won" for o in outcomes), sum(o.status == "lost" for o in outcomes)
    decision, reason = "continue", ""
    if passes(n_won / n, omega_threshold):
        decision = "pass"
    elif not passes((n - n_lost) / n, omega_threshold):
        decision = "reject"
    elif budget is not None and all(o.m >= budget for o in outcomes):
        decision = "inconclusive"
        reason = (
            f"every human reached the monitoring budget of {budget} items with the judge neither certified within "
            f"the margin nor ruled out: {n_won} of {n} humans won, {n_lost} lost"
        )
    return ScoreMonitoring(
        judge=judge,
        raters=tuple(outcomes),
        omega=n_won / n,
        decision=decision,
        alpha=alpha,
        epsilon=epsilon,
        reason=reason,
    )


SIZING_TRIALS = 200
"""Monitored runs a budget is sized from."""
MAX_SIZING_CELLS = 20_000_000
"""The most differences a budget sizing draws (trials x humans x horizon): the horizon is cut to fit."""


@dataclass(frozen=True, kw_only=True)
class ScoreMonitorBudget:
    """Where an open monitored decision becomes ``inconclusive``: ``budget``, the smallest overlap per human
    at or after ``start`` by which ``level`` of the simulated runs decided (None: not within ``horizon``);
    ``decided`` and ``passed``, the shares of runs decided and passed by ``budget`` (by ``horizon`` when
    None), over ``n_trials`` runs."""

    budget: int | None
    level: float
    decided: float
    passed: float
    start: int
    horizon: int
    n_trials: int

    @property
    def mc_se(self) -> float:
        """The largest Monte Carlo SE of a share of the runs."""
        return 0.5 / math.sqrt(self.n_trials)


def _first(hits: np.ndarray) -> float:
    """1-based index of the first True, inf when none."""
    where = np.flatnonzero(hits)
    return float(where[0] + 1) if where.size else math.inf


def score_monitor_budget(
    xi: object,
    *,
    n_humans: int,
    start: int,
    horizon: int,
    epsilon: float,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    power: float = 0.8,
    n_trials: int = SIZING_TRIALS,
    rng: int | np.random.Generator | None = None,
) -> ScoreMonitorBudget:
    """The monitoring budget of a numeric plan from the pilot's per-item differences ``xi`` (docs/method.md §8b).

    Each run gives every one of the ``n_humans`` held-out humans ``horizon`` differences drawn with
    replacement from ``xi`` (the plan's pool of one: ``score_recipes.pilot_differences``), the humans
    advancing together, and reads :func:`monitor_scores`' rule after every item: the empirical-Bernstein
    sequence at ``alpha / K`` per human, won when its lower bound clears ``-epsilon``, lost when its upper
    bound falls below it; the run decides at the first item where the humans won reach ``omega_threshold``
    or those lost make it unreachable. ``budget`` is the smallest overlap ``>= start`` by which
    ``level = (1 + power)/2`` of the runs decided, as label plans' budget is (§8.1).

    >>> b = score_monitor_budget([0.0], n_humans=2, start=100, horizon=600, epsilon=0.05, n_trials=4, rng=0)
    >>> b.budget, b.decided, b.passed  # xi = 0 on every item: every run passes at 351 (monitor_scores' doctest)
    (351, 1.0, 1.0)
    """
    values = np.asarray(xi, dtype=float)
    if values.ndim != 1 or values.size == 0 or not np.all((values >= -1.0) & (values <= 1.0)):
        raise ValueError("xi must be a non-empty one-dimensional array in [-1, 1] (no NaN)")
    if not (isinstance(n_humans, (int, np.integer)) and n_humans >= 2):
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")
    if not (isinstance(start, (int, np.integer)) and isinstance(horizon, (int, np.integer)) and 1 <= start <= horizon):
        raise ValueError(f"start and horizon must be integers with 1 <= start <= horizon, got {start!r}, {horizon!r}")
    if not (isinstance(n_trials, (int, np.integer)) and n_trials >= 1):
        raise ValueError(f"n_trials must be a positive integer, got {n_trials!r}")
    if n_trials * n_humans * horizon > MAX_SIZING_CELLS:
        raise ValueError(
            f"{n_trials} runs x {n_humans} humans x {horizon} items is more than the {MAX_SIZING_CELLS:,} differences "
            "a sizing draws"
        )
    if not (np.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if not 0.0 < omega_threshold <= 1.0:
        raise ValueError(f"omega_threshold must be in (0, 1], got {omega_threshold!r}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    gen = np.random.default_rng(rng)
    won, lost = np.full((n_trials, n_humans), math.inf), np.full((n_trials, n_humans), math.inf)
    for trial in range(n_trials):
        for k in range(n_humans):
            cs = confidence_sequence(gen.choice(values, horizon), alpha=alpha / n_humans, method="empirical-bernstein")
            won[trial, k] = _first(cs.lower > -epsilon)
            lost[trial, k] = math.inf if np.isfinite(won[trial, k]) else _first(cs.upper < -epsilon)
    needed = next(k for k in range(1, n_humans + 1) if passes(k / n_humans, omega_threshold))
    passed_at = np.sort(won, axis=1)[:, needed - 1]
    decided_at = np.minimum(passed_at, np.sort(lost, axis=1)[:, n_humans - needed])
    level = (1.0 + power) / 2.0
    at_level = np.sort(decided_at)[math.ceil(level * n_trials - 1e-9) - 1]
    budget = None if not np.isfinite(at_level) else max(int(start), int(at_level))
    by = horizon if budget is None else budget
    return ScoreMonitorBudget(
        budget=budget,
        level=level,
        decided=float(np.mean(decided_at <= by)),
        passed=float(np.mean(passed_at <= by)),
        start=int(start),
        horizon=int(horizon),
        n_trials=int(n_trials),
    )
