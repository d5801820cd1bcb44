"""Overlap sized for the anytime monitor in the service's arrival order (docs/method.md §8.1).

The generator here is the test's own: a noise channel with its own draw of each secondary's list
(uniform without replacement from the corpus, in random order), the primary's and the judge's labels
in hand first and the secondaries interleaved one item each in turn, as a PM following the batches
produces them. Only the decision (``monitor_judge``) and the sizing are the library's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.monitor_sizing import _smallest, monitor_runs, service_order_panel, size_for_monitor
from planner.sequential import monitor_judge

N_ITEMS = 5_000


def _accuracy_for(d: float, p_h: float) -> float:
    """Binary judge accuracy with ``mu_d = P_J - P_R = d`` against one human of accuracy ``p_h``."""
    agree_humans = p_h * p_h + (1 - p_h) * (1 - p_h)
    return (agree_humans + d - (1 - p_h)) / (2 * p_h - 1)


def _followed(rng: np.random.Generator, p_h: float, p_j: float, n_humans: int, per: int) -> tuple:
    """One project followed batch by batch: codes (primary, secondaries, judge), arrival ranks, first rank."""
    n_sec = n_humans - 1
    lists = [rng.permutation(N_ITEMS)[:per] for _ in range(n_sec)]
    items = np.unique(np.concatenate(lists))
    row = {int(i): r for r, i in enumerate(items)}
    truth = rng.random(items.size) < 0.5

    def noisy(t: np.ndarray, p: float) -> np.ndarray:
        return np.where(rng.random(t.size) < p, t, ~t).astype(np.int64)

    codes = -np.ones((items.size, n_humans + 1), dtype=np.int64)
    ranks = np.zeros_like(codes)
    codes[:, 0], codes[:, -1] = noisy(truth, p_h), noisy(truth, p_j)
    ranks[:, 0], ranks[:, -1] = np.arange(items.size), items.size + np.arange(items.size)
    first = 2 * items.size
    for j, chosen in enumerate(lists):
        rows = np.array([row[int(i)] for i in chosen])
        codes[rows, j + 1] = noisy(truth[rows], p_h)
        ranks[rows, j + 1] = first + np.arange(per) * n_sec + j
    return codes, ranks, first


def _decided_at(p_h: float, p_j: float, n_humans: int, per: int, trials: int, seed: int) -> tuple[np.ndarray, list]:
    """Per run, the items per secondary at the monitored decision (inf: open) and the decision."""
    rng = np.random.default_rng(seed)
    at, outcome = np.full(trials, np.inf), []
    for t in range(trials):
        codes, ranks, first = _followed(rng, p_h, p_j, n_humans, per)
        mon = monitor_judge(codes, judge=n_humans, humans=list(range(n_humans)), n_labels=2, order=ranks)
        outcome.append(mon.decision)
        if mon.decision in ("pass", "reject"):
            at[t] = (mon.decided_at - first) // (n_humans - 1) + 1
    return at, outcome


def test_the_service_order_panel_interleaves_the_secondaries_after_primary_and_judge():
    codes, order, base = service_order_panel(
        np.random.default_rng(1),
        p_h=0.8,
        p_j=0.9,
        n_labels=3,
        n_humans=4,
        per_secondary=5,
        design="disjoint",
        n_items=99,
    )
    assert codes.shape == (15, 5) and base == 30
    assert (codes[:, 0] >= 0).all() and (codes[:, 4] >= 0).all() and ((codes[:, 1:4] >= 0).sum(axis=1) == 1).all()
    secondary = np.sort(order[:, 1:4][codes[:, 1:4] >= 0])
    assert secondary.tolist() == list(range(30, 45))  # one item each in turn
    assert order[:, [0, 4]].max() < base
    panel, _, _ = service_order_panel(
        np.random.default_rng(1), p_h=0.8, p_j=0.9, n_labels=2, n_humans=3, per_secondary=7, design="panel", n_items=50
    )
    assert panel.shape == (7, 4) and (panel >= 0).all()  # one shared list


@pytest.mark.parametrize(("p_h", "n_humans"), [(0.8, 4), (0.9, 3)])
def test_a_good_judge_is_passed_by_the_plans_m_in_80_percent_of_followed_projects(p_h, n_humans):
    """d = +.03: the sizing's m (its own runs) passes the judge in >= .8 of the test's own runs within
    2 Monte Carlo SE; at m/2 clearly fewer; the one-look m of §4 is far below m_anytime."""
    p_j = _accuracy_for(0.03, p_h)
    sizing = size_for_monitor(
        p_h, p_j, n_labels=2, n_humans=n_humans, n_items=N_ITEMS, start=200, design="random", n_trials=150, rng=4
    )
    assert sizing.m is not None and sizing.power_at_m >= 0.8 and sizing.fr <= 0.05
    trials = 150
    at, outcome = _decided_at(p_h, p_j, n_humans, sizing.m, trials, seed=11)
    passed = np.array([o == "pass" for o in outcome])
    se = math.sqrt(0.8 * 0.2 / trials)
    assert passed.mean() >= 0.8 - 2 * se
    half = np.mean(passed & (at <= sizing.m // 2))
    assert half < passed.mean() - 0.25
    assert sizing.budget >= sizing.m and sizing.decided_by_budget >= sizing.budget_level


def test_the_sizing_is_monotone_in_power_and_reads_every_m_off_the_same_runs():
    common = {"n_labels": 2, "n_humans": 3, "n_items": N_ITEMS, "start": 60, "design": "disjoint", "n_trials": 60}
    low = size_for_monitor(0.85, 0.93, power=0.5, rng=2, **common)
    high = size_for_monitor(0.85, 0.93, power=0.9, rng=2, **common)
    assert low.m is not None and high.m is not None and low.m <= high.m
    rates = [r for _, r in high.curve]
    assert rates == sorted(rates)  # a pass stays a pass: P(pass by m) grows with m
    with pytest.raises(ValueError, match="power"):
        size_for_monitor(0.85, 0.93, power=1.0, **common)


def test_the_work_bound_caps_the_horizon_before_any_run():
    sizing = size_for_monitor(
        0.85, 0.86, n_labels=2, n_humans=3, n_items=N_ITEMS, start=50, n_trials=10, max_cells=200_000, rng=0
    )
    assert sizing.max_m == 200_000 // (2 * 10 * 2 * 4) and sizing.horizon <= sizing.max_m
    assert sizing.m is None or sizing.m <= sizing.max_m


@pytest.mark.parametrize("n_humans", [2, 3, 5])
def test_wrong_decisions_stay_below_alpha_under_looks_every_20_labels(n_humans):
    """Good (d = 0), boundary (d = -epsilon) and bad (d = -epsilon - .03) judges, p_h = .85, followed to
    150 items per secondary, read every 20 labels: P(reject good), P(pass or reject boundary), P(pass bad)
    each <= alpha + 2 SE. The monitor decides at some label; a look every 20 labels sees it at the next
    look, so the error over looks is the error over labels."""
    alpha, trials, per = 0.05, 80, 150
    se = math.sqrt(alpha * (1 - alpha) / trials)
    for d, wrong in ((0.0, ("reject",)), (-0.05, ("pass", "reject")), (-0.08, ("pass",))):
        p_j = _accuracy_for(d, 0.85)
        at, outcome = _decided_at(0.85, p_j, n_humans, per, trials, seed=100 + n_humans)
        labels_at = np.where(np.isfinite(at), np.ceil(at * (n_humans - 1) / 20) * 20, np.inf)
        seen = [o in wrong and labels_at[k] <= per * (n_humans - 1) for k, o in enumerate(outcome)]
        for side in wrong:
            rate = np.mean([s and outcome[k] == side for k, s in enumerate(seen)])
            assert rate <= alpha + 2 * se, (d, side, rate)


@settings(max_examples=40, deadline=None)
@given(
    n_humans=st.integers(2, 6),
    per=st.integers(1, 30),
    design=st.sampled_from(["disjoint", "random", "panel"]),
    n_labels=st.integers(2, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_service_order_is_a_list_each_in_turn_after_the_primary_and_judge(n_humans, per, design, n_labels, seed):
    n_items = 30 * n_humans
    codes, order, base = service_order_panel(
        np.random.default_rng(seed),
        p_h=0.8,
        p_j=0.7,
        n_labels=n_labels,
        n_humans=n_humans,
        per_secondary=per,
        design=design,
        n_items=n_items,
    )
    labeled = codes >= 0
    assert labeled[:, 0].all() and labeled[:, -1].all() and (codes < n_labels).all()
    assert (labeled[:, 1:-1].sum(axis=0) == per).all()  # each secondary labels its list, no item twice
    ranks = order[labeled]
    assert np.unique(ranks).size == ranks.size  # distinct arrival ranks
    assert order[:, [0, n_humans]].max() < base <= order[:, 1:-1][labeled[:, 1:-1]].min()
    for j in range(1, n_humans):  # the t-th item of secondary j at base + t (K - 1) + j - 1
        own = np.sort(order[labeled[:, j], j])
        assert own.tolist() == (base + np.arange(per) * (n_humans - 1) + j - 1).tolist()
    if design == "disjoint":
        assert (labeled[:, 1:-1].sum(axis=1) == 1).all()
    if design == "panel":
        assert labeled[:, 1:-1].all()


@settings(max_examples=60, deadline=None)
@given(
    at=st.lists(st.one_of(st.integers(1, 50), st.just(10**9)), min_size=1, max_size=40),
    level=st.floats(0.05, 1.0),
)
def test_the_smallest_m_is_the_first_with_the_level_of_runs_decided(at, level):
    times = np.array([np.inf if a == 10**9 else float(a) for a in at])
    m = _smallest(times, level)
    reached = [k for k in range(1, 51) if np.mean(times <= k) >= level - 1e-12]
    assert m == (reached[0] if reached else None)


def _fixed_rule_passes_at_some_look(codes: np.ndarray, ranks: np.ndarray, first: int, every: int = 20) -> bool:
    """The one-look rule (each human won when its mean xi >= -epsilon, pass at half won), read every
    ``every`` secondary labels in the same order: True when some look passes (the test's own xi)."""
    n_humans = codes.shape[1] - 1
    judge, humans = codes[:, -1], codes[:, :-1]
    present = humans >= 0
    entry = np.where(present[:, 1:], ranks[:, 1:-1], -1).max(axis=1)  # the item's last secondary label
    sums, counts = np.zeros((codes.shape[0], n_humans)), np.zeros((codes.shape[0], n_humans))
    for k in range(n_humans):
        others = present.copy()
        others[:, k] = False
        pool = others.sum(axis=1)
        usable = present[:, k] & (pool >= 1)
        agree_j = ((humans == judge[:, None]) & others).sum(axis=1)
        agree_k = ((humans == humans[:, k : k + 1]) & others).sum(axis=1)
        sums[usable, k] = (agree_j[usable] - agree_k[usable]) / pool[usable]
        counts[usable, k] = 1
    last = int(entry.max())
    for look in range(first + every - 1, last + every, every):
        seen = entry <= look
        n = counts[seen].sum(axis=0)
        if (n > 0).sum() < 2:
            continue
        d = sums[seen].sum(axis=0)[n > 0] / n[n > 0]
        if np.mean(d >= -0.05) >= 0.5:
            return True
    return False


def test_the_error_bound_is_not_vacuous_the_one_look_rule_read_every_20_labels_passes_the_boundary_judge():
    """Same order, same looks: the fixed rule approves a judge on the margin far more often than alpha,
    where the monitor (test above) does not."""
    rng = np.random.default_rng(7)
    p_j = _accuracy_for(-0.05, 0.85)
    passed = [_fixed_rule_passes_at_some_look(*_followed(rng, 0.85, p_j, 3, 150)) for _ in range(60)]
    assert np.mean(passed) > 0.05 + 2 * math.sqrt(0.05 * 0.95 / 60) + 0.1


@pytest.mark.parametrize("design", ["disjoint", "random", "panel"])
@pytest.mark.parametrize(
    "rule, multiplicity, n_humans, n_labels", [("margin", "e-bh", 3, 2), ("alt-test", "bonferroni", 4, 3)]
)
def test_the_batched_runs_decide_as_monitor_judge_does_run_by_run(design, rule, multiplicity, n_humans, n_labels):
    """``monitor_runs`` decides a batch of runs at once; each run's decision and its look are exactly
    what ``monitor_judge`` gives on that run's panel (drawn from the same stream, in the same order)."""
    kw = dict(p_h=0.8, p_j=0.86, n_labels=n_labels, n_humans=n_humans, per_secondary=50, design=design, n_items=120)
    runs = monitor_runs(
        kw["p_h"],
        kw["p_j"],
        n_labels=n_labels,
        n_humans=n_humans,
        horizon=50,
        design=design,
        n_items=120,
        rule=rule,
        multiplicity=multiplicity,
        n_trials=30,
        rng=11,
    )
    gen = np.random.default_rng(11)
    outcomes = set()
    for trial in range(30):
        codes, order, base = service_order_panel(gen, **kw)
        mon = monitor_judge(
            codes,
            judge=n_humans,
            humans=list(range(n_humans)),
            n_labels=n_labels,
            order=order,
            rule=rule,
            multiplicity=multiplicity,
        )
        decided = mon.decision in ("pass", "reject")
        assert runs.decision[trial] == (mon.decision if decided else "continue")
        expected = (mon.decided_at - base) // (n_humans - 1) + 1 if decided and mon.decided_at >= base else 1
        assert runs.at[trial] == (expected if decided else np.inf)
        outcomes.add(runs.decision[trial])
    assert len(outcomes) >= 2  # the runs are not all one outcome: the comparison has something to compare


def test_monitor_runs_refuses_bad_settings_before_any_run():
    with pytest.raises(ValueError, match="rule"):
        monitor_runs(0.8, 0.9, n_labels=2, n_humans=3, horizon=10, rule="majority")
    with pytest.raises(ValueError, match="epsilon"):
        monitor_runs(0.8, 0.9, n_labels=2, n_humans=3, horizon=10, epsilon=1.5)
    with pytest.raises(ValueError, match="alpha"):
        monitor_runs(0.8, 0.9, n_labels=2, n_humans=3, horizon=10, alpha=0.0)
