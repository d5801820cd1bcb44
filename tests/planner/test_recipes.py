"""Tests for planner.recipes (docs/method.md §4): method check values, enumeration, Monte Carlo, pilot."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from planner.recipes import (
    advantage_moments,
    alt_test_quantile,
    certify_recipe,
    false_rejection_rate,
    m_alt_test,
    m_cert,
    m_rank,
    overlap_plan,
    pilot_moments,
    prior_moments,
    rank_recipe,
)

FAST = settings(max_examples=60, deadline=None)


def channel(p: float, n_labels: int) -> np.ndarray:
    """Symmetric noise channel: P(report b | truth a)."""
    off = (1.0 - p) / (n_labels - 1)
    return np.where(np.eye(n_labels, dtype=bool), p, off)


def enumerated_xi(p_h: float, p_j: float, n_labels: int) -> dict[int, float]:
    """Exact distribution of xi = 1[judge = held-in] - 1[held-out = held-in] by enumeration."""
    h, j = channel(p_h, n_labels), channel(p_j, n_labels)
    dist = {-1: 0.0, 0: 0.0, 1: 0.0}
    for t, r, held_in, judge in itertools.product(range(n_labels), repeat=4):
        prob = h[t, r] * h[t, held_in] * j[t, judge] / n_labels
        dist[int(judge == held_in) - int(r == held_in)] += prob
    return dist


def noisy(truth, accuracy, n_labels, rng):
    shift = rng.integers(1, n_labels, size=truth.shape)
    return np.where(rng.random(truth.shape) < accuracy, truth, (truth + shift) % n_labels)


# --------------------------------------------------------------------------- priors


def test_spec_prior_check():
    mu_d, sigma0_sq = prior_moments(0.85, 0.90, n_labels=2)
    assert mu_d == pytest.approx(0.035, abs=1e-12)
    assert sigma0_sq == pytest.approx(0.2188, abs=5e-5)
    assert m_cert(mu_d, sigma0_sq, epsilon=0.05, alpha_sig=0.05) == 117


@FAST
@given(st.floats(0.3, 1.0), st.floats(0.3, 1.0), st.integers(2, 5))
def test_prior_moments_match_enumeration(p_h, p_j, n_labels):
    dist = enumerated_xi(p_h, p_j, n_labels)
    mean = sum(v * p for v, p in dist.items())
    var = sum(v * v * p for v, p in dist.items()) - mean**2
    mu_d, sigma0_sq = prior_moments(p_h, p_j, n_labels=n_labels)
    assert mu_d == pytest.approx(mean, abs=1e-12)
    assert sigma0_sq == pytest.approx(var, abs=1e-12)
    # with one held-in label the alt-test's xi' = W_f - W_h is the same variable
    assert advantage_moments(dist[1], dist[-1]) == pytest.approx((mean, var), abs=1e-12)


def test_prior_validation():
    with pytest.raises(ValueError, match="p_h must be a probability"):
        prior_moments(1.2, 0.9, n_labels=2)
    with pytest.raises(ValueError, match="n_labels must be an integer >= 2"):
        prior_moments(0.8, 0.9, n_labels=1)
    with pytest.raises(ValueError, match="p_plus \\+ p_minus must be <= 1"):
        advantage_moments(0.7, 0.5)


# --------------------------------------------------------------------------- false rejection


@pytest.mark.parametrize(
    ("m", "p_h", "p_j", "n_labels"),
    [
        (117, 0.85, 0.90, 2),
        (60, 0.85, 0.85, 2),
        (200, 0.80, 0.75, 3),
        (400, 0.85, 0.82, 2),
        (300, 0.70, 0.68, 4),
    ],
)
def test_false_rejection_formula_matches_monte_carlo(m, p_h, p_j, n_labels):
    """Simulate d_k = mean xi with one held-in human, symmetric noise channel (docs/method.md §4)."""
    rng = np.random.default_rng(m)
    trials, epsilon = 20_000, 0.05
    truth = rng.integers(0, n_labels, size=(trials, m))
    held_out, held_in, judge = (noisy(truth, p, n_labels, rng) for p in (p_h, p_h, p_j))
    total = np.sum((judge == held_in).astype(int) - (held_out == held_in), axis=1)
    simulated = np.mean(total / m < -epsilon)
    mu_d, sigma0_sq = prior_moments(p_h, p_j, n_labels=n_labels)
    formula = false_rejection_rate(m, mu_d, sigma0_sq, epsilon=epsilon)
    se = math.sqrt(formula * (1 - formula) / trials)
    # d lives on a lattice of step 1/m: with a continuity correction the normal model
    # N(mu_d, sigma0^2/m) must match within sampling error ...
    cut = math.ceil(-epsilon * m - 1e-9) - 1  # largest integer sum with d < -epsilon
    corrected = norm.cdf((cut + 0.5 - m * mu_d) / math.sqrt(m * sigma0_sq))
    assert abs(simulated - corrected) < 4 * se
    # ... and the uncorrected formula is off by at most one lattice step more
    lattice = norm.pdf((mu_d + epsilon) * math.sqrt(m / sigma0_sq)) / math.sqrt(m * sigma0_sq)
    assert abs(simulated - formula) < 4 * se + lattice


@FAST
@given(st.floats(-0.04, 0.2), st.floats(0.01, 0.5), st.floats(0.01, 0.2), st.floats(0.01, 0.3))
def test_m_cert_is_the_smallest_m_with_fr_at_most_half_alpha(mu_d, sigma0_sq, epsilon, alpha_sig):
    m = m_cert(mu_d, sigma0_sq, epsilon=epsilon, alpha_sig=alpha_sig)
    if mu_d + epsilon <= 0:
        assert m == math.inf
        return
    assert false_rejection_rate(m, mu_d, sigma0_sq, epsilon=epsilon) <= alpha_sig / 2 + 1e-9
    if m > 1:
        assert false_rejection_rate(m - 1, mu_d, sigma0_sq, epsilon=epsilon) > alpha_sig / 2 - 1e-9


def test_m_cert_infinite_when_judge_expected_to_fail():
    assert m_cert(-0.05, 0.2, epsilon=0.05) == math.inf
    assert m_cert(-0.2, 0.2) == math.inf
    assert false_rejection_rate(10_000, -0.2, 0.2, epsilon=0.05) > 0.99


def test_false_rejection_rate_is_vectorised_and_handles_zero_variance():
    rates = false_rejection_rate(np.array([1, 10, 100]), 0.0, 0.25, epsilon=0.05)
    np.testing.assert_allclose(rates, norm.cdf(-0.05 * np.sqrt([1, 10, 100]) / 0.5))
    assert false_rejection_rate(50, 0.1, 0.0, epsilon=0.05) == 0.0
    assert false_rejection_rate(50, -0.1, 0.0, epsilon=0.05) == 1.0


# --------------------------------------------------------------------------- ranking and alt-test


def test_m_rank_by_hand():
    # z_{1-0.05/2} = 1.95996 for three judges: ceil(1.95996^2 * 2 * 0.25 / 0.04^2) = 1201
    assert m_rank(0.25, 0.04, n_judges=3) == 1201
    assert m_rank(0.25, 0.04, n_judges=10) > m_rank(0.25, 0.04, n_judges=3)
    with pytest.raises(ValueError, match="delta_min must be a finite number > 0"):
        m_rank(0.25, 0.0, n_judges=3)
    with pytest.raises(ValueError, match="n_judges must be an integer >= 2"):
        m_rank(0.25, 0.04, n_judges=1)


def test_alt_test_quantiles_from_spec():
    assert [round(alt_test_quantile(k), 3) for k in (3, 4, 5)] == [2.093, 2.257, 2.222]


def test_m_alt_test_by_hand_and_with_power():
    # K=3: alpha* = 2 * .05 / (3 * 11/6) = 1/55; z = 2.0933; ceil(z^2 * 0.3 / 0.1^2) = 132
    z = norm.ppf(1 - 1 / 55)
    assert m_alt_test(0.0, 0.3, n_humans=3, epsilon=0.1) == math.ceil(z * z * 30) == 132
    with_power = m_alt_test(0.0, 0.3, n_humans=3, epsilon=0.1, power=0.8)
    assert with_power == math.ceil((z + norm.ppf(0.8)) ** 2 * 30)
    assert m_alt_test(-0.3, 0.3, n_humans=3, epsilon=0.1) == math.inf


# --------------------------------------------------------------------------- budgets and recipes


@FAST
@given(st.integers(1, 10**6), st.integers(2, 12), st.data())
def test_overlap_plan_budget(n_items, n_humans, data):
    m = data.draw(st.integers(0, n_items))
    plan = overlap_plan(n_items, n_humans, m)
    assert plan.rho == m / n_items
    assert plan.per_rater == (n_items,) + (m,) * (n_humans - 1)
    assert plan.total_labels == pytest.approx(n_items * (1 + plan.rho * (n_humans - 1)))


def test_overlap_plan_validation():
    with pytest.raises(ValueError, match="m must be an integer in 0..n_items=10"):
        overlap_plan(10, 3, 11)
    with pytest.raises(ValueError, match="n_humans must be an integer >= 2"):
        overlap_plan(10, 1, 5)


def test_certify_recipe_margin():
    r = certify_recipe(0.035, 0.2188, n_items=1000, n_humans=4)
    assert (r.goal, r.rule, r.m, r.feasible, r.reason) == ("certify", "margin", 117, True, "")
    assert r.plan == overlap_plan(1000, 4, 117)
    assert r.plan.total_labels == 1000 + 3 * 117
    rates = dict(zip(r.m_grid, r.fr_rate))
    assert rates[117] == pytest.approx(false_rejection_rate(117, 0.035, 0.2188, epsilon=0.05))
    assert rates[117] <= 0.025
    assert all(np.diff(r.fr_rate) <= 0) and r.m_grid[0] == 1 and r.m_grid[-1] == 1000


def test_certify_recipe_infeasible_cases():
    failing = certify_recipe(-0.1, 0.2, n_items=1000, n_humans=3)
    assert failing.m is None and not failing.feasible and failing.plan is None
    assert "expected to fail" in failing.reason
    assert min(failing.fr_rate) > 0.5
    too_big = certify_recipe(0.0, 0.25, n_items=100, n_humans=3, epsilon=0.01)
    assert too_big.m == m_cert(0.0, 0.25, epsilon=0.01) and too_big.m > 100
    assert not too_big.feasible and "only n_items=100" in too_big.reason


def test_certify_recipe_alt_test():
    r = certify_recipe(0.0, 0.3, n_items=500, n_humans=3, rule="alt-test", epsilon=0.1)
    assert r.m == 132 and r.rule == "alt-test"
    z = alt_test_quantile(3)
    rates = dict(zip(r.m_grid, r.fr_rate))
    assert rates[132] == pytest.approx(norm.cdf(z - 0.1 * math.sqrt(132 / 0.3)))
    assert rates[132] == pytest.approx(0.5, abs=0.01)  # planned at the 50% point
    easy = certify_recipe(0.5, 0.3, n_items=500, n_humans=3, rule="alt-test")
    assert easy.m == 30  # the alt-test skips humans under 30 items
    assert certify_recipe(0.0, 0.3, n_items=500, n_humans=3, rule="alt-test", epsilon=0.1,
                          power=0.9).m > r.m


def test_rank_recipe():
    r = rank_recipe(0.25, 0.04, n_items=5000, n_humans=3, n_judges=3, m_grid=[100, 1201, 3000])
    assert r.m == 1201 and r.feasible and r.plan.total_labels == 5000 + 2 * 1201
    expected = norm.cdf(-0.04 * np.sqrt([100, 1201, 3000]) / math.sqrt(0.5))
    np.testing.assert_allclose(r.fr_rate, expected)
    with pytest.raises(ValueError, match="m_grid must be a non-empty list of integers >= 1"):
        rank_recipe(0.25, 0.04, n_items=5000, n_humans=3, n_judges=3, m_grid=[0.5])


# --------------------------------------------------------------------------- pilot


def reference_pilot_xi(codes, judge, humans, rule):
    """xi of every held-out human on its O_k, item by item."""
    xi = []
    for k in humans:
        for row in codes:
            others = [row[h] for h in humans if h != k and row[h] != -1]
            if row[k] == -1 or row[judge] == -1 or not others:
                continue
            s_f = np.mean([row[judge] == o for o in others])
            s_h = np.mean([row[k] == o for o in others])
            xi.append(s_f - s_h if rule == "margin" else float(s_f > s_h) - float(s_h > s_f))
    return np.array(xi)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["margin", "alt-test"]))
def test_pilot_moments_match_item_by_item_xi(seed, rule):
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, 3, size=(rng.integers(3, 40), 4))
    xi = reference_pilot_xi(codes, 3, [0, 1, 2], rule)
    p = pilot_moments(codes, judge=3, humans=[2, 0, 1], n_labels=3, rule=rule,
                      n_resamples=20, rng=0)
    if xi.size == 0:
        assert np.isnan(p.mu_d) and p.m == 0
        return
    assert p.m == xi.size
    assert p.mu_d == pytest.approx(xi.mean(), abs=1e-12)
    assert p.sigma0_sq == pytest.approx(xi.var(), abs=1e-12)


def test_pilot_recovers_prior_with_uncertainty():
    rng = np.random.default_rng(11)
    n, p_h, p_j = 4000, 0.85, 0.9
    truth = rng.integers(0, 2, size=n)
    h0, h1, judge = noisy(truth, p_h, 2, rng), noisy(truth, p_h, 2, rng), noisy(truth, p_j, 2, rng)
    h1[rng.random(n) >= 0.5] = -1  # secondary at 50%: one held-in label per xi
    p = pilot_moments(np.column_stack([h0, h1, judge]), judge=2, humans=[0, 1], n_labels=2,
                      n_resamples=400, rng=0)
    mu_d, sigma0_sq = prior_moments(p_h, p_j, n_labels=2)
    assert p.mu_d_ci.low < mu_d < p.mu_d_ci.high
    assert p.sigma0_sq_ci.low < sigma0_sq < p.sigma0_sq_ci.high
    assert p.n_raters == 2 and p.m == 2 * np.sum(h1 != -1)
    # the two xi of an item are correlated: the bootstrap SE exceeds the iid sqrt(var/m)
    assert p.mu_d_se > math.sqrt(p.sigma0_sq / p.m)


def test_pilot_is_invariant_to_item_order():
    rng = np.random.default_rng(2)
    codes = rng.integers(-1, 2, size=(200, 4))
    a = pilot_moments(codes, judge=3, humans=[0, 1, 2], n_labels=2, n_resamples=50, rng=3)
    b = pilot_moments(codes[rng.permutation(200)], judge=3, humans=[1, 2, 0], n_labels=2,
                      n_resamples=50, rng=3)
    assert a == b
