"""Simulated cost and errors of the anytime monitor against the fixed-sample rule (docs/method.md §8)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.monitor_paths import block_differences, certifications, monitor_decision
from planner.rules import ALT_TEST_MIN_ITEMS, DEFAULT_EPSILON, TOLERANCE, passes
from planner.significance import alt_test_p_values, by_rejections


@dataclass(frozen=True)
class DecisionRates:
    """Share of simulated trials whose decision was pass / reject (the rest stayed open)."""

    p_pass: float
    p_reject: float


@dataclass(frozen=True)
class MonitoringSimulation:
    """Simulated cost and errors of the monitored and the fixed-sample decision (docs/method.md §8).

    ``n_trials`` shared panels of ``horizon`` overlap items (every human labels each, in
    order). ``anytime``: ``monitor_judge`` over every prefix. ``fixed_once``: the fixed-sample
    rule read once at the planned ``m``. ``fixed_peeking``: that rule read every
    ``look_every`` items, the first look deciding. ``expected_stop`` is the mean overlap at
    the monitored decision over the decided trials (NaN if none), ``stop_quantile_90`` the
    overlap by which 90% of trials were decided (NaN when fewer were).
    """

    n_trials: int
    horizon: int
    look_every: int
    m: int
    expected_stop: float
    stop_quantile_90: float
    anytime: DecisionRates
    fixed_once: DecisionRates
    fixed_peeking: DecisionRates


def _noisy_panel(rng: np.random.Generator, n_items: int, accuracies: list[float], n_labels: int) -> np.ndarray:
    """Symmetric noise channel (docs/method.md §6): the true label w.p. ``p``, else another."""
    truth = rng.integers(0, n_labels, n_items)
    columns = []
    for p in accuracies:
        shift = rng.integers(1, n_labels, n_items)
        columns.append(np.where(rng.random(n_items) < p, truth, (truth + shift) % n_labels))
    return np.column_stack(columns)


def _fixed_rule_passes(
    xi: np.ndarray, looks: np.ndarray, rule: str, epsilon: float, q: float, omega_threshold: float
) -> np.ndarray:
    """The fixed-sample point decision at each look: True pass, False reject, per look (docs §3).

    ``xi`` is ``(n_items, K)`` in arrival order; at ``l`` items, margin: won when the mean of
    ``xi`` is ``>= -epsilon``; alt-test: BY over the t-tests of ``W_h - W_f`` (humans with
    fewer than 30 items skipped). Returns ``(len(looks),)`` float: 1 pass, 0 reject, NaN none.
    """
    n = looks.astype(float)[:, None]
    sums = np.cumsum(xi, axis=0)[looks - 1]
    if rule == "margin":
        won = sums / n >= -epsilon - TOLERANCE
        used = np.ones_like(won)
    else:
        abs_sums = np.cumsum(np.abs(xi), axis=0)[looks - 1]
        p = alt_test_p_values(-sums, abs_sums, np.broadcast_to(n, sums.shape), epsilon)
        used = (n >= ALT_TEST_MIN_ITEMS) & np.isfinite(p)
        won = by_rejections(p, used, q) & used
    n_used = used.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        omega = np.where(n_used > 0, won.sum(axis=1) / np.maximum(n_used, 1), np.nan)
    return np.where(np.isfinite(omega), passes(omega, omega_threshold).astype(float), np.nan)


def simulate_monitoring(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    n_humans: int,
    m: int,
    rule: str = "margin",
    epsilon: float | None = None,
    alpha: float = 0.05,
    q: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    horizon: int | None = None,
    look_every: int = 20,
    n_trials: int = 100,
    rng: int | np.random.Generator | None = None,
) -> MonitoringSimulation:
    """Expected stopping overlap and errors of anytime vs fixed-sample reading (docs/method.md §8).

    Shared panels from the symmetric noise channel (human accuracy ``p_h``, judge ``p_j``)
    of ``horizon`` items (default ``5 m``); the monitored decision of ``monitor_judge`` on
    each, and the fixed-sample point rule read once at ``m`` and every ``look_every`` items.
    """
    if not (isinstance(m, (int, np.integer)) and m >= 1):
        raise ValueError(f"m must be a positive integer, got {m!r}")
    if not (isinstance(n_humans, (int, np.integer)) and n_humans >= 2):
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")
    horizon = 5 * int(m) if horizon is None else int(horizon)
    if horizon < 1 or look_every < 1 or n_trials < 1:
        raise ValueError("horizon, look_every and n_trials must be positive")
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    gen = np.random.default_rng(rng)
    looks = np.arange(look_every, horizon + 1, look_every)
    looks = looks if looks.size else np.array([horizon])
    once = np.array([min(int(m), horizon)])
    needed = math.ceil(omega_threshold * n_humans - 1e-9)
    rows = np.arange(horizon)
    ranks = np.broadcast_to(rows[:, None], (horizon, n_humans))
    stops, anytime, peeking, fixed = [], [], [], []
    for _ in range(n_trials):
        codes = _noisy_panel(gen, horizon, [p_h] * n_humans + [p_j], n_labels)
        # every human and the judge label every row, in row order: one dense block (``differences``)
        entry, xi_block = block_differences(codes[:, :n_humans], ranks, codes[:, n_humans], ranks[:, 0], rule)
        paths = [(entry[:, k], xi_block[:, k], rows) for k in range(n_humans)]
        _, first_won, first_lost = certifications(
            paths,
            [None] * n_humans,
            n_humans=n_humans,
            epsilon=epsilon,
            alpha=alpha,
            multiplicity=multiplicity,
        )
        decision, _, decided_at = monitor_decision(
            first_won, first_lost, needed, n_humans, horizon, [x.size for _, x, _ in paths], None
        )  # monitor_judge's decision on the panel, without its per-human bands
        anytime.append(decision)
        stops.append(np.inf if decided_at is None else decided_at + 1.0)
        xi = np.column_stack([x for _, x, _ in paths])
        read = _fixed_rule_passes(xi, looks, rule, epsilon, q, omega_threshold)
        decided = read[np.isfinite(read)]
        peeking.append(decided[0] if decided.size else np.nan)
        fixed.append(_fixed_rule_passes(xi, once, rule, epsilon, q, omega_threshold)[0])
    stop = np.array(stops)
    done = np.isfinite(stop)
    return MonitoringSimulation(
        n_trials=n_trials,
        horizon=horizon,
        look_every=look_every,
        m=int(m),
        expected_stop=float(stop[done].mean()) if done.any() else math.nan,
        stop_quantile_90=float(np.quantile(stop, 0.9)) if done.mean() >= 0.9 else math.nan,
        anytime=DecisionRates(anytime.count("pass") / n_trials, anytime.count("reject") / n_trials),
        fixed_once=_rates(fixed),
        fixed_peeking=_rates(peeking),
    )


def _rates(reads: list[float]) -> DecisionRates:
    values = np.array(reads, dtype=float)
    return DecisionRates(float(np.mean(values == 1.0)), float(np.mean(values == 0.0)))
