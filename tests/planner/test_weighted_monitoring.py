"""The inverse-inclusion-weighted anytime monitor (docs/method.md §9) on Neyman panels.

A Neyman panel over the judge-primary agreement over-samples the items where the judge and
the primary disagree. Each promise is shown by a seeded simulation with its own generator
(symmetric noise channel, stratified draw and arrival order written here), read in batches
of 20 items, beside the unweighted monitor on the same panels, which breaks it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.sequential import monitor_judge

ALPHA = 0.05
P_H = 0.85
EPS = 0.05
P_MARGIN = (0.595 - EPS) / 0.7  # L = 2, pool of two: E[xi] = 0.7 p_j - 0.595 = -EPS
S_H = (0.4936, 0.3698)  # S_h of the disagree / agree strata under p_h .85, p_j .90 (docs §9)
BATCH = 20
RUNS = 400


def _neyman_trial(rng, m, p_j, order):
    """One corpus of ``4 m`` items and its Neyman panel of ``m``: the panel's codes (primary,
    two secondaries, judge), each label's batch number, the inclusion probabilities, and the
    corpus-wide mean of the secondaries' ``xi`` (the estimand)."""
    n = 4 * m
    truth = rng.integers(0, 2, n)
    prim, s1, s2, judge = (np.where(rng.random(n) < p, truth, 1 - truth) for p in (P_H, P_H, P_H, p_j))
    agree = (judge == prim).astype(int)
    sizes = np.bincount(agree, minlength=2)
    share = sizes * np.array(S_H) / (sizes * np.array(S_H)).sum() * m
    taken = np.floor(share).astype(int)
    taken[np.argmax(share - taken)] += m - taken.sum()
    picks = [rng.choice(np.flatnonzero(agree == h), taken[h], replace=False) for h in (0, 1)]
    panel = np.concatenate(picks)
    if order == "interleaved":  # each stratum spread evenly along the list
        panel = panel[np.argsort(np.concatenate([(np.arange(c) + 0.5) / c for c in taken]), kind="stable")]
    else:
        panel = rng.permutation(panel)
    codes = np.column_stack([prim, s1, s2, judge])[panel]
    batches = np.repeat((np.arange(m) // BATCH)[:, None], 4, axis=1)
    # xi of a secondary against the pool {primary, other secondary}, over the whole corpus
    same = lambda a, b: (a == b).astype(float)  # noqa: E731
    xi = [(same(judge, prim) + same(judge, o) - same(s, prim) - same(s, o)) / 2 for s, o in ((s1, s2), (s2, s1))]
    return codes, batches, (taken / sizes)[agree[panel]], float(np.mean(xi))


def _runs(m, p_j, order, seed, runs=RUNS):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(runs):
        codes, batches, inclusion, d = _neyman_trial(rng, m, p_j, order)
        call = {"judge": 3, "humans": [0, 1, 2], "n_labels": 2, "order": batches}
        out.append((monitor_judge(codes, **call, inclusion=inclusion), monitor_judge(codes, **call), d))
    return out


def _rate(monitors, decision):
    return float(np.mean([mon.decision == decision for mon in monitors]))


def _bound(runs=RUNS):
    return ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / runs)


@pytest.mark.parametrize("order", ["interleaved", "shuffled"])
def test_weighted_monitor_keeps_both_promises_on_the_margin_where_the_unweighted_one_rejects(order):
    """A judge on the margin over the corpus, 1,500 Neyman overlap items read every 20: the
    weighted monitor passes and rejects at most alpha + 2 SE of the time; unweighted, the
    over-sampled disagreement stratum drags every d_k down and the same judge is rejected
    several times as often as promised."""
    results = _runs(1500, P_MARGIN, order, seed=11 if order == "interleaved" else 12)
    weighted, plain, _ = zip(*results, strict=True)
    assert _rate(weighted, "pass") <= _bound() and _rate(weighted, "reject") <= _bound()
    assert _rate(plain, "reject") > ALPHA + 6 * math.sqrt(ALPHA * (1 - ALPHA) / RUNS)
    assert all(mon.weighting == "ht" for mon in weighted) and plain[0].weighting == "none"


def test_weighted_d_is_unbiased_and_the_unweighted_d_is_visibly_not():
    """Across runs the secondaries' weighted d_k centre on the corpus value; unweighted they sit
    about .037 below it (more than 10 Monte Carlo SE)."""
    results = _runs(600, P_MARGIN, "interleaved", seed=13, runs=200)
    bias = {
        name: np.array([np.mean([r.d for r in mon.raters[1:]]) - d for mon, d in pairs])
        for name, pairs in (
            ("weighted", [(w, d) for w, _, d in results]),
            ("plain", [(p, d) for _, p, d in results]),
        )
    }
    se = {k: v.std(ddof=1) / math.sqrt(v.size) for k, v in bias.items()}
    assert abs(bias["weighted"].mean()) <= 3 * se["weighted"]
    assert bias["plain"].mean() < -10 * se["plain"] and bias["plain"].mean() < -0.02


def test_weighted_monitor_passes_a_good_judge_and_stops_a_bad_one():
    """Not vacuous: p_j .90 passes by 1,500 items in most runs; a judge .06 below the margin
    is rejected in most runs and passes at most alpha + 2 SE of the time."""
    good = [w for w, _, _ in _runs(1500, 0.90, "interleaved", seed=14, runs=100)]
    assert _rate(good, "pass") >= 0.9
    bad = [w for w, _, _ in _runs(1500, P_MARGIN - 0.06 / 0.7, "interleaved", seed=15, runs=100)]
    assert _rate(bad, "reject") >= 0.5 and _rate(bad, "pass") <= _bound(100)


def _hand_case(seed):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, 60)
    codes = np.column_stack([np.where(rng.random(60) < p, truth, 1 - truth) for p in (0.8, 0.8, 0.9)])
    return codes, rng.choice([0.2, 0.5, 1.0], 60)


def test_weighted_d_and_band_match_a_hand_computation():
    """With two humans the pool of each is the other: xi = 1[J = other] - 1[r_k = other]; d is
    the Hajek mean, and the band (the weighted empirical-Bernstein sequence, checked against its
    formulas in test_sequential_eb.py) lies within sum(w xi)/sum(w) +- u(t)/sum(w), u the two-sided
    normal-mixture boundary (docs/method.md §8, check value at t = 100 elsewhere)."""
    from planner.confidence_sequences import normal_mixture_boundary

    codes, inclusion = _hand_case(3)
    mon = monitor_judge(codes, judge=2, humans=[0, 1], n_labels=2, inclusion=inclusion, budget=40)
    w = inclusion.min() / inclusion
    for k, rater in enumerate(mon.raters):
        other = codes[:, 1 - k]
        xi = (codes[:, 2] == other).astype(float) - (codes[:, k] == other)
        d = np.sum(w * xi) / np.sum(w)
        assert rater.d == pytest.approx(d, abs=1e-12)
        u = normal_mixture_boundary(60, alpha=ALPHA, v_opt=40)
        assert rater.upper[-1] <= d + u / np.sum(w) + 1e-12
        assert rater.lower[-1] >= d - u / np.sum(w) - 1e-12


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.05, 1.0))
def test_equal_inclusion_is_the_unweighted_monitor_and_scale_does_not_matter(seed, scale):
    codes, inclusion = _hand_case(seed)
    call = {"judge": 2, "humans": [0, 1], "n_labels": 2, "alpha": 0.5}
    same = monitor_judge(codes, **call, inclusion=np.full(60, scale))
    plain = monitor_judge(codes, **call)
    weighted = monitor_judge(codes, **call, inclusion=inclusion)
    rescaled = monitor_judge(codes, **call, inclusion=inclusion * scale)
    for a, b in ((same, plain), (rescaled, weighted)):
        assert a.decision == b.decision
        for x, y in zip(a.raters, b.raters, strict=True):
            assert (x.status, x.n) == (y.status, y.n)
            assert x.e_value == pytest.approx(y.e_value, rel=1e-12)
            assert x.d == pytest.approx(y.d, abs=1e-12)
