"""Anytime monitoring of a score judge (planner.score_monitor; docs/method.md §8b): the arrival order and
the pool present at entry by hand, the bounds against the library's confidence sequence, and by simulation
with its own generator that a judge within the margin is rejected at some look at most alpha of the time,
where reading the fixed-sample rule at every look is not."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.confidence_sequences import confidence_sequence
from planner.score_monitor import monitor_scores, score_monitor_budget
from planner.score_recipes import pilot_differences


def test_pool_present_at_entry_and_arrival_order_by_hand() -> None:
    """Judge, h1, h2, h3 on two items (range 1..5). Item 0: h3 arrives after h1 entered (rank 5 > 2), so
    h1's xi there is against h2 alone: (|h1 - h2| - |j - h2|)/4 = (1 - 0)/4. Item 1 enters for h1 at rank 1
    (before item 0 at rank 2): its xi is (|2 - 4| - |4 - 4|)/4 against h2 and h3 both present."""
    ratings = np.array([[3.0, 2, 3, 1], [4, 2, 4, 4]])
    order = np.array([[0.0, 2, 1, 5], [0, 1, 0, 0]])
    m = monitor_scores(ratings, order, 0, [1, 2, 3], value_range=(1, 5), alpha=0.05)
    h1 = m.raters[0]
    assert h1.m == 2 and h1.estimate == pytest.approx((0.5 + 0.25) / 2)
    reference = confidence_sequence([0.5, 0.25], alpha=0.05 / 3, method="empirical-bernstein")
    assert (h1.lower, h1.upper) == (pytest.approx(reference.lower[-1]), pytest.approx(reference.upper[-1]))
    assert m.decision == "continue" and h1.status == "open" and h1.decided_at == 0


def test_insufficient_and_bad_input() -> None:
    one = monitor_scores(np.ones((3, 2)), np.zeros((3, 2)), 0, [1], value_range=(0, 1))
    assert one.decision == "insufficient_data" and math.isnan(one.omega) and "two humans" in one.reason
    with pytest.raises(ValueError, match="arrival rank"):
        monitor_scores(np.ones((2, 3)), np.full((2, 3), np.nan), 0, [1, 2], value_range=(0, 1))
    with pytest.raises(ValueError, match="outside"):
        monitor_scores(np.full((2, 3), 7.0), np.zeros((2, 3)), 0, [1, 2], value_range=(0, 1))


def _panel(rng: np.random.Generator, n: int, judge_sd: float, judge_bias: float) -> np.ndarray:
    """Judge and three humans on ``n`` items of a 1..5 scale (own generator: true value, noise, rounding)."""
    truth = rng.uniform(1.0, 5.0, n)
    judge = np.clip(np.round(truth + judge_bias + rng.normal(0.0, judge_sd, n)), 1, 5)
    humans = [np.clip(np.round(truth + rng.normal(0.0, 0.8, n)), 1, 5) for _ in range(3)]
    return np.column_stack([judge, *humans])


def _naive_ever_rejects(x: np.ndarray, epsilon: float, look: int) -> bool:
    """The fixed-sample margin rule (each human lost when its mean xi < -epsilon) read every ``look`` items."""
    span = 4.0
    for t in range(look, x.shape[0] + 1, look):
        lost = 0
        for k in (1, 2, 3):
            pool = [h for h in (1, 2, 3) if h != k]
            gaps = np.abs(x[:t, [k]] - x[:t, pool]).mean(axis=1) - np.abs(x[:t, [0]] - x[:t, pool]).mean(axis=1)
            lost += gaps.mean() / span < -epsilon
        if lost >= 2:
            return True
    return False


def test_a_judge_within_the_margin_is_rarely_rejected_at_any_look() -> None:
    """A judge as good as the humans (margin .05): the monitored decision after 600 items per path, whose
    statuses never revert, rejects at most alpha + 2 SE of the paths (here none); reading the fixed-sample
    rule every 5 items rejects well above alpha, so the check can fail. A judge far worse (mean xi about
    -.14) is rejected within the 600 items."""
    rng = np.random.default_rng(33)
    trials, n, alpha = 200, 600, 0.05
    order = np.tile(np.arange(4.0), (n, 1))
    rejected = naive = 0
    for _ in range(trials):
        x = _panel(rng, n, 0.8, 0.0)
        rejected += monitor_scores(x, order, 0, [1, 2, 3], value_range=(1, 5), alpha=alpha).decision == "reject"
        naive += _naive_ever_rejects(x, 0.05, 5)
    assert rejected / trials <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / trials)
    assert naive / trials > alpha + 2 * math.sqrt(alpha * (1 - alpha) / trials)
    bad = [monitor_scores(_panel(rng, n, 2.0, 1.5), order, 0, [1, 2, 3], value_range=(1, 5)) for _ in range(5)]
    assert all(m.decision == "reject" for m in bad)


def test_a_budget_reached_open_is_inconclusive() -> None:
    """xi = 0 on every item certifies both humans at item 351 (the doctest): a budget of 300 stops the
    sequences there, still open, so the decision is inconclusive; a budget of 400 lets them pass."""
    r, order = np.array([[3.0, 3, 3]] * 400), np.tile([0.0, 1, 2], (400, 1))
    short = monitor_scores(r, order, 0, [1, 2], value_range=(1, 5), budget=300)
    assert short.decision == "inconclusive" and [h.m for h in short.raters] == [300, 300]
    assert "budget of 300" in short.reason and all(h.status == "open" for h in short.raters)
    assert monitor_scores(r, order, 0, [1, 2], value_range=(1, 5), budget=400).decision == "pass"
    with pytest.raises(ValueError, match="budget"):
        monitor_scores(r, order, 0, [1, 2], value_range=(1, 5), budget=0)


def _disjoint_run(rng: np.random.Generator, block: int, judge_sd: float) -> tuple[np.ndarray, np.ndarray]:
    """The service's disjoint design, own generator: judge and primary on every item, secondary ``b`` on
    block ``b`` of ``block`` items, each secondary's ratings arriving in its list's order."""
    truth = rng.uniform(1.0, 5.0, 2 * block)
    ratings = np.column_stack(
        [np.clip(np.round(truth + rng.normal(0.0, sd, truth.size)), 1, 5) for sd in (judge_sd, 0.8, 0.8, 0.8)]
    )
    ratings[block:, 2] = np.nan
    ratings[:block, 3] = np.nan
    position = np.arange(2 * block, dtype=float) % block
    order = np.column_stack([np.zeros(2 * block), np.ones(2 * block), 2 + position, 2 + position])
    return ratings, np.where(np.isnan(ratings), np.nan, order)


def test_the_sized_budget_decides_its_level_of_independent_runs() -> None:
    """The budget sized from a pilot's pairwise differences (pool of one) decides at least (1 + power)/2 of
    runs drawn by an independent generator in the service's disjoint design, within 2 MC SE; at half the
    budget far fewer runs have decided, so the check can fail. The pilot is large (20,000 items) so that the
    check is of the sizing, not of the pilot's noise: the budget is a plug-in (a 300-item pilot of this judge
    gives 321 items where 20,000 give 369, and 321 decides .56 of the runs)."""
    rng = np.random.default_rng(7)
    truth = rng.uniform(1.0, 5.0, 20_000)
    pilot = np.column_stack(
        [np.clip(np.round(truth + rng.normal(0.0, sd, truth.size)), 1, 5) for sd in (0.6, 0.8, 0.8, 0.8)]
    )
    xi = pilot_differences(pilot, 0, [1, 2, 3], rule="margin", value_range=(1, 5))
    sized = score_monitor_budget(xi, n_humans=3, start=50, horizon=3000, epsilon=0.05, power=0.8, rng=1)
    assert sized.budget is not None and sized.level == 0.9 and sized.decided >= 0.9
    trials = 100

    def decided(budget: int) -> float:
        runs = [_disjoint_run(rng, sized.budget or 0, 0.6) for _ in range(trials)]
        outcomes = [
            monitor_scores(x, order, 0, [1, 2, 3], value_range=(1, 5), budget=budget).decision for x, order in runs
        ]
        assert "continue" not in outcomes  # at the budget every human has its items: open means inconclusive
        return sum(d in ("pass", "reject") for d in outcomes) / trials

    se = math.sqrt(0.9 * 0.1 / trials) + sized.mc_se
    assert decided(sized.budget) >= 0.9 - 2 * se
    assert decided(sized.budget // 2) < 0.9 - 2 * se


def test_budget_sizing_bad_input() -> None:
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        score_monitor_budget([2.0], n_humans=2, start=1, horizon=10, epsilon=0.05)
    with pytest.raises(ValueError, match="start and horizon"):
        score_monitor_budget([0.0], n_humans=2, start=20, horizon=10, epsilon=0.05)
    with pytest.raises(ValueError, match="differences a sizing draws"):
        score_monitor_budget([0.0], n_humans=3, start=1, horizon=10**6, epsilon=0.05)
