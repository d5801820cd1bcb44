"""Tests for planner.recipes (docs/method.md §4): method check values, enumeration, Monte Carlo, pilot."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, norm

from planner.alt_test_recipes import alt_test_quantile, m_alt_test, m_alt_test_judge
from planner.false_rejection import (
    corrected_false_rejection_rate,
    exact_false_rejection_rates,
    false_rejection_rate,
    m_cert,
    m_rank,
)
from planner.recipes import certify_recipe, corrected_bracket, overlap_plan, rank_recipe
from planner.xi_moments import (
    advantage_moments,
    ladder_accuracies,
    ladder_variance,
    paired_variance,
    pilot_moments,
    prior_moments,
    xi_lattice,
)
from tests.planner.promise_bounds import broken, kept

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
    # one-sided z_{1-0.05/2} = 1.95996 for three judges on the paired variance:
    # ceil(1.95996^2 * 0.25 / 0.04^2) = ceil(600.23) = 601
    assert m_rank(0.25, 0.04, n_judges=3) == 601
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
    assert m_alt_test(0.0, 0.3, n_humans=3, epsilon=0.1, power=0.5) == math.ceil(z * z * 30) == 132
    # default power 1 - alpha_sig/2: ceil((2.0933 + 1.95996)^2 * 30) = 493
    assert m_alt_test(0.0, 0.3, n_humans=3, epsilon=0.1) == math.ceil((z + norm.ppf(0.975)) ** 2 * 30) == 493
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
    """Continuity-corrected (no lattice given): the envelope of the corrected rate, checked by hand."""
    r = certify_recipe(0.035, 0.218775, n_items=1000, n_humans=4)
    m = np.arange(1, 600)
    cut = np.ceil(-0.05 * m - 1e-9) - 1
    corrected = norm.cdf((cut + 0.5 - m * 0.035) / np.sqrt(m * 0.218775))
    expected = int(np.flatnonzero(corrected > 0.025)[-1]) + 2
    assert (r.goal, r.rule, r.m, r.feasible, r.reason) == ("certify", "margin", expected, True, "")
    assert r.m >= m_cert(0.035, 0.218775)
    assert r.plan == overlap_plan(1000, 4, r.m)
    rates = dict(zip(r.m_grid, r.fr_rate))
    assert rates[r.m] == pytest.approx(corrected[r.m - 1])
    assert r.m_grid[0] == 1 and r.m_grid[-1] == 1000


def test_certify_recipe_infeasible_cases():
    failing = certify_recipe(-0.1, 0.2, n_items=1000, n_humans=3)
    assert failing.m is None and not failing.feasible and failing.plan is None
    assert "expected to fail" in failing.reason
    assert failing.fr_rate[-1] > 0.99  # FR grows to 1 with the overlap
    too_big = certify_recipe(0.0, 0.25, n_items=100, n_humans=3, epsilon=0.01)
    assert too_big.m >= m_cert(0.0, 0.25, epsilon=0.01) and too_big.m > 100
    assert not too_big.feasible and "only n_items=100" in too_big.reason


def test_certify_recipe_alt_test():
    r = certify_recipe(0.0, 0.3, n_items=500, n_humans=3, rule="alt-test", epsilon=0.1, power=0.5)
    assert r.m == 132 and r.rule == "alt-test"
    z = alt_test_quantile(3)
    rates = dict(zip(r.m_grid, r.fr_rate))
    assert rates[132] == pytest.approx(norm.cdf(z - 0.1 * math.sqrt(132 / 0.3)))
    assert rates[132] == pytest.approx(0.5, abs=0.01)  # planned at the 50% point on request
    default = certify_recipe(0.0, 0.3, n_items=1000, n_humans=3, rule="alt-test", epsilon=0.1, pool_size=2)
    assert default.m == 516  # ceil((2.0933 + 2.0537)^2 0.3 / 0.01): power 1 - .8 alpha_sig/2 on a shared panel
    judge_level = certify_recipe(0.0, 0.3, n_items=1000, n_humans=3, rule="alt-test", epsilon=0.1)
    assert judge_level.m == m_alt_test_judge(0.0, 0.3, n_humans=3, epsilon=0.1) < 493  # one held-in label
    assert dict(zip(default.m_grid, default.fr_rate))[516] <= 0.8 * 0.025
    easy = certify_recipe(0.5, 0.3, n_items=500, n_humans=3, rule="alt-test")
    assert easy.m == 30  # the alt-test skips humans under 30 items
    assert certify_recipe(0.0, 0.3, n_items=500, n_humans=3, rule="alt-test", epsilon=0.1, power=0.9).m > r.m


def test_rank_recipe():
    r = rank_recipe(0.25, 0.04, n_items=5000, n_humans=3, n_judges=3, m_grid=[100, 601, 3000])
    assert r.m == 601 and r.feasible and r.plan.total_labels == 5000 + 2 * 601
    expected = norm.cdf(-0.04 * np.sqrt([100, 601, 3000]) / math.sqrt(0.25))
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
    p = pilot_moments(codes, judge=3, humans=[2, 0, 1], n_labels=3, rule=rule, n_resamples=20, rng=0)
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
    p = pilot_moments(np.column_stack([h0, h1, judge]), judge=2, humans=[0, 1], n_labels=2, n_resamples=400, rng=0)
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
    b = pilot_moments(codes[rng.permutation(200)], judge=3, humans=[1, 2, 0], n_labels=2, n_resamples=50, rng=3)
    assert a == b


# --------------------------------------------------------------------------- exact lattice, pool size


def trinomial_fr(m: int, a: float, b: float, epsilon: float) -> float:
    """P(N+ - N- < -eps m) for m items with steps +1 (a), -1 (b), 0: by binomial conditioning."""
    cut = math.ceil(-epsilon * m - 1e-9) - 1
    n_minus = np.arange(m + 1)
    return float(np.sum(binom.pmf(n_minus, m, b) * binom.cdf(cut + n_minus, m - n_minus, a / (1 - b))))


def enumerated_steps(p_h: float, p_j: float, n_labels: int, pool_size: int) -> dict[int, float]:
    """P(s xi = x) by brute-force enumeration of truth, held-out, judge and s held-in labels."""
    h, j = channel(p_h, n_labels), channel(p_j, n_labels)
    dist: dict[int, float] = {}
    for t, r, judge, *pool in itertools.product(range(n_labels), repeat=3 + pool_size):
        prob = h[t, r] * j[t, judge] * np.prod([h[t, x] for x in pool]) / n_labels
        x = sum(int(judge == y) - int(r == y) for y in pool)
        dist[x] = dist.get(x, 0.0) + prob
    return dist


def test_pool_size_variance_check_values():
    assert [round(prior_moments(0.85, 0.90, n_labels=2, pool_size=s)[1], 6) for s in (1, 2, 4)] == [
        0.218775,
        0.162675,
        0.134625,
    ]


@pytest.mark.parametrize(
    ("p_h", "p_j", "n_labels", "pool_size"), [(0.85, 0.9, 2, 1), (0.8, 0.75, 3, 2), (0.7, 0.72, 4, 3)]
)
def test_lattice_matches_enumeration(p_h, p_j, n_labels, pool_size):
    lattice = xi_lattice(p_h, p_j, n_labels=n_labels, pool_size=pool_size)
    dist = enumerated_steps(p_h, p_j, n_labels, pool_size)
    expected = [dist.get(x, 0.0) for x in range(-pool_size, pool_size + 1)]
    np.testing.assert_allclose(lattice.probabilities, expected, atol=1e-12)
    mu_d, variance = prior_moments(p_h, p_j, n_labels=n_labels, pool_size=pool_size)
    assert lattice.mu_d == pytest.approx(mu_d, abs=1e-12)
    assert lattice.variance == pytest.approx(variance, abs=1e-12)


def test_exact_false_rejection_check_value_and_independent_enumeration():
    lattice = xi_lattice(0.85, 0.90, n_labels=2)
    rates = exact_false_rejection_rates(lattice, 300, epsilon=0.05)
    assert round(rates[116], 4) == 0.0285  # m = 117, the method's check value (normal form: .0247)
    a, b = lattice.probabilities[2], lattice.probabilities[0]
    independent = [trinomial_fr(m, a, b, 0.05) for m in range(1, 301)]
    np.testing.assert_allclose(rates, independent, atol=1e-10)


@pytest.mark.parametrize(
    ("p_h", "p_j", "n_labels", "epsilon", "alpha_sig"),
    [
        (0.85, 0.90, 2, 0.05, 0.05),
        (0.8, 0.8, 2, 0.05, 0.05),
        (0.85, 0.83, 3, 0.05, 0.1),
        (0.75, 0.78, 2, 0.1, 0.05),
        (0.9, 0.88, 4, 0.05, 0.05),
        (0.7, 0.69, 2, 0.05, 0.2),
    ],
)
def test_recommended_m_keeps_the_promise_for_every_larger_m(p_h, p_j, n_labels, epsilon, alpha_sig):
    """Exact FR <= alpha/2 at every m' >= the recommended m (the monotone envelope), and the
    plain normal m_cert would break it somewhere (the defect this guards against) or equal it."""
    lattice = xi_lattice(p_h, p_j, n_labels=n_labels)
    r = certify_recipe(
        lattice.mu_d, lattice.variance, n_items=10**6, n_humans=3, epsilon=epsilon, alpha_sig=alpha_sig, lattice=lattice
    )
    a, b = lattice.probabilities[2], lattice.probabilities[0]
    upto = 3 * r.m + 50
    rates = np.array([trinomial_fr(m, a, b, epsilon) for m in range(r.m, upto)])
    assert rates.max() <= alpha_sig / 2 + 1e-12
    assert trinomial_fr(r.m - 1, a, b, epsilon) > alpha_sig / 2  # the smallest such m
    normal = m_cert(lattice.mu_d, lattice.variance, epsilon=epsilon, alpha_sig=alpha_sig)
    assert normal <= r.m


@given(
    gap=st.floats(0.002, 0.3),
    sigma_sq=st.floats(0.01, 0.5),
    epsilon=st.floats(0.01, 0.2),
    pool_size=st.integers(1, 4),
    alpha_sig=st.sampled_from([0.05, 0.1, 0.2]),
)
@FAST
def test_corrected_envelope_from_its_bracket_equals_a_full_scan(gap, sigma_sq, epsilon, pool_size, alpha_sig):
    """The recipe searches only the bracket; scanning every m up to 3 m_cert + 200 finds the same m."""
    mu_d = gap - epsilon
    r = certify_recipe(
        mu_d, sigma_sq, n_items=10**9, n_humans=3, epsilon=epsilon, alpha_sig=alpha_sig, pool_size=pool_size
    )
    upto = 3 * int(m_cert(mu_d, sigma_sq, epsilon=epsilon, alpha_sig=alpha_sig)) + 200
    rates = corrected_false_rejection_rate(np.arange(1, upto + 1), mu_d, sigma_sq, epsilon=epsilon, pool_size=pool_size)
    above = np.flatnonzero(rates > alpha_sig / 2)
    assert r.m == (int(above[-1]) + 2 if above.size else 1)
    lo, hi = corrected_bracket(mu_d, sigma_sq, epsilon=epsilon, pool_size=pool_size, alpha_sig=alpha_sig)
    assert lo <= r.m <= hi


@pytest.mark.parametrize("lattice", [None, xi_lattice(0.85, 0.90, n_labels=2)])
def test_judge_just_past_minus_epsilon_gets_its_overlap_without_a_memory_error(lattice):
    """mu_d + eps = 1e-4 needs ~8e7 items: feasible on a 1e9-item corpus, infeasible on 1e6 with the
    overlap that would be needed named, and a huge m_grid costs nothing (it used to allocate 1..max)."""
    mu_d, sigma_sq = (-0.0499, 0.2) if lattice is None else (lattice.mu_d, lattice.variance)
    epsilon = 0.05 if lattice is None else 1e-4 - lattice.mu_d
    need = m_cert(mu_d, sigma_sq, epsilon=epsilon)
    assert need > 7 * 10**7
    big = certify_recipe(mu_d, sigma_sq, n_items=10**9, n_humans=3, epsilon=epsilon, lattice=lattice, pool_size=1)
    assert big.feasible and need <= big.m < need * 1.001
    small = certify_recipe(
        mu_d, sigma_sq, n_items=10**6, n_humans=3, epsilon=epsilon, lattice=lattice, m_grid=[10, 10**11]
    )
    assert not small.feasible and small.m == big.m and f"needs m={big.m}" in small.reason
    assert 0.4 < small.fr_rate[0] < 0.6 and small.fr_rate[1] < 1e-6  # a coin flip at m=10, sure at 1e11


def test_paired_variance_matches_enumeration_and_m_rank_is_not_overconservative():
    """sigma_Delta^2 against enumeration of the K-human average margin of two judges."""
    p_h, p_a, p_b, n_labels, k = 0.85, 0.90, 0.86, 2, 3
    h, ja, jb = channel(p_h, n_labels), channel(p_a, n_labels), channel(p_b, n_labels)
    mean = second = 0.0
    for t, a, b, *humans in itertools.product(range(n_labels), repeat=3 + k):
        prob = ja[t, a] * jb[t, b] * np.prod([h[t, x] for x in humans]) / n_labels
        margin = np.mean([int(a == x) - int(b == x) for x in humans])
        mean += prob * margin
        second += prob * margin**2
    assert paired_variance(p_h, p_a, p_b, n_labels=n_labels, n_humans=k) == pytest.approx(second - mean**2, abs=1e-12)


def misorder_rate(m: int, trials: int, seed: int) -> float:
    """Two judges ranked by mean d_k over K = 3 humans on m shared items: how often b beats a."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, size=(trials, m))
    humans = np.stack([noisy(truth, 0.85, 2, rng) for _ in range(3)])
    a, b = noisy(truth, 0.90, 2, rng), noisy(truth, 0.86, 2, rng)
    score = [np.mean([(j == humans[k]).mean(axis=1) for k in range(3)], axis=0) for j in (a, b)]
    return float(np.mean(score[1] > score[0]) + 0.5 * np.mean(score[1] == score[0]))


def exact_misorders(p_h: float, p_a: float, p_b: float, k: int, m: np.ndarray) -> np.ndarray:
    """P(judge b's score beats a's) + half the ties on m shared items, exactly (binary labels): the per-item
    score margin D = sum_k 1[a = h_k] - 1[b = h_k] enumerated over who is right, its m-fold sum by an FFT
    power. An implementation independent of the recipe's normal form, with no Monte Carlo error."""
    law = np.zeros(2 * k + 1)  # index D + k
    for a_right, b_right, *right in itertools.product((0, 1), repeat=2 + k):
        prob = (p_a if a_right else 1 - p_a) * (p_b if b_right else 1 - p_b)
        prob *= np.prod([p_h if r else 1 - p_h for r in right])
        law[sum(int(a_right == r) - int(b_right == r) for r in right) + k] += prob
    size = 1 << int(np.ceil(np.log2(2 * k * int(m.max()) + 1)))
    phi = np.fft.rfft(law, size)
    out = np.empty(m.size)
    for i, mi in enumerate(m):
        pmf = np.fft.irfft(phi ** int(mi), size)  # index j: sum of D = j - k mi
        out[i] = pmf[: k * mi].sum() + 0.5 * pmf[k * mi]
    return out


def test_exact_misorders_match_the_simulation():
    rates = exact_misorders(0.85, 0.90, 0.86, 3, np.array([50, 200]))
    trials = 4000
    for rate, m, seed in zip(rates, (50, 200), (5, 6), strict=True):
        assert abs(misorder_rate(m, trials, seed) - rate) <= 2 * math.sqrt(rate * (1 - rate) / trials), m


def test_m_rank_misorder_rate_holds_at_m_and_fails_at_half():
    """The misorder rate is exactly at most .05 at every m' in [m, 1.3 m] (no Monte Carlo error to place),
    and an independent simulation breaks the promise at m/2 by more than its Monte Carlo error."""
    delta = (0.85 - 0.15) * (0.90 - 0.86)  # P_a - P_b = (p_h - q_h)(p_a - p_b)
    variance = paired_variance(0.85, 0.90, 0.86, n_labels=2, n_humans=3)
    m = m_rank(variance, delta, n_judges=2, alpha_sig=0.05)
    assert exact_misorders(0.85, 0.90, 0.86, 3, np.arange(m, math.ceil(1.3 * m) + 1)).max() <= 0.05
    trials = 4000
    at_half = misorder_rate(m // 2, trials, 2)
    assert broken(at_half, trials, 0.05), at_half  # not over-conservative: half the overlap breaks the promise


def alt_test_false_rejection(m: int, trials: int, seed: int, epsilon: float = 0.2, q: float = 0.05) -> float:
    """Share of trials where a good judge (p_j = .90 vs humans .85) fails the alt-test: 3 humans label
    the same m items (a shared panel, 2 held-in labels per item); t-test and BY as Calderon et al."""
    from scipy.stats import ttest_1samp
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, size=(trials, m))
    humans = np.stack([noisy(truth, 0.85, 2, rng) for _ in range(3)])
    judge = noisy(truth, 0.90, 2, rng)
    p_values = np.empty((trials, 3))
    for k in range(3):
        pool = [h for h in range(3) if h != k]
        s_f = np.mean([judge == humans[h] for h in pool], axis=0)
        s_h = np.mean([humans[k] == humans[h] for h in pool], axis=0)
        diff = (s_h >= s_f).astype(float) - (s_f >= s_h)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = ttest_1samp(diff, epsilon, axis=1, alternative="less").pvalue
        flat = diff.std(axis=1) == 0
        p_values[:, k] = np.where(flat, np.where(diff.mean(axis=1) < epsilon, 0.0, 1.0), p)
    won = np.array([multipletests(row, alpha=q, method="fdr_by")[0] for row in p_values])
    return float(np.mean(won.mean(axis=1) < 0.5))


def test_shared_panel_alt_test_recipe_keeps_its_promise_over_m_to_1_3_m():
    """docs/method.md §4 item 5: on a shared panel the per-human recipe plans for FR .8 alpha_sig/2
    (PANEL_FR_SHARE): the normal form's 49 items sat on the promise (.0245 at 49, .026 at 50 over 40,000
    trials of this generator). The served m keeps FR within .025 at m and over [m, 1.3 m] with the Monte
    Carlo error inside; m/1.15 and the 50% point's m break it (the recipe is within 15% of the smallest m)."""
    lattice = xi_lattice(0.85, 0.90, n_labels=2, pool_size=2)
    mu, var = advantage_moments(*lattice.advantage)
    m = certify_recipe(mu, var, n_items=10_000, n_humans=3, rule="alt-test", pool_size=2).m
    normal = certify_recipe(mu, var, n_items=10_000, n_humans=3, rule="alt-test", power=0.975, pool_size=2).m
    half = certify_recipe(mu, var, n_items=10_000, n_humans=3, rule="alt-test", power=0.5, pool_size=2).m
    assert m is not None and normal == 49 and normal < m <= 1.15 * normal
    for size, trials, seed in ((m, 10_000, 1), ((m + math.ceil(1.3 * m)) // 2, 4000, 4), (math.ceil(1.3 * m), 4000, 3)):
        assert kept(alt_test_false_rejection(size, trials, seed=seed), trials, 0.025), size
    assert broken(alt_test_false_rejection(math.floor(m / 1.15), 4000, seed=5), 4000, 0.025)
    assert broken(alt_test_false_rejection(half, 2000, seed=2), 2000, 0.025)


def ladder_misorders(accuracies, m: int, trials: int, seed: int, p_h: float = 0.85, k: int = 3) -> np.ndarray:
    """Per adjacent pair of judges (accuracies best first), the share of trials ranking the lower one
    above (ties count half): K humans and every judge label the same m items; a judge's score is its
    mean agreement with the humans, which is its mean d_k up to the humans' own term (it cancels)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, size=(trials, m), dtype=np.int8)
    humans = [noisy(truth, p_h, 2, rng) for _ in range(k)]
    scores = []
    for accuracy in accuracies:
        judge = noisy(truth, accuracy, 2, rng)
        scores.append(sum((judge == h).sum(axis=1) for h in humans))
    return np.array([np.mean(b > a) + 0.5 * np.mean(b == a) for a, b in itertools.pairwise(scores)])


@pytest.mark.parametrize("n_judges", [3, 5])
def test_ranking_recipe_orders_every_adjacent_pair_of_a_ladder(n_judges):
    """docs/method.md §4, item 3 (issue 29): m_rank on the largest adjacent-pair variance keeps every
    adjacent pair's misorder rate within alpha_sig/(J-1) on [m, 1.3 m], exactly (the simulation agrees at m
    within 2 SE) and m_rank is within 15% of the smallest m from which every pair holds (some pair breaks it
    above m/1.15; the smallest is 331 against 332 for J = 3, 602 itself for J = 5); half of it breaks the
    promise beyond the Monte Carlo error, and so does the m the top pair's variance alone gave (the lowest
    pair, nearest chance, varies most)."""
    p_h, p_j, delta, k = 0.85, 0.90, 0.05, 3
    accuracies = ladder_accuracies(p_h, p_j, delta, n_labels=2, n_judges=n_judges)
    assert np.allclose(np.diff(accuracies), -delta / (2 * p_h - 1))
    variance, worst = ladder_variance(p_h, p_j, delta, n_labels=2, n_humans=k, n_judges=n_judges)
    assert worst == n_judges - 2
    top = paired_variance(p_h, accuracies[0], accuracies[1], n_labels=2, n_humans=k)
    m = m_rank(variance, delta, n_judges=n_judges)
    m_top = m_rank(top, delta, n_judges=n_judges)
    assert m > m_top
    promise, trials = 0.05 / (n_judges - 1), 3000
    sizes = np.arange(m, math.ceil(1.3 * m) + 1)
    for a, b in itertools.pairwise(accuracies):  # exact, so the promise holds with no Monte Carlo error
        assert exact_misorders(p_h, a, b, k, sizes).max() <= promise, (a, b)
    below = np.arange(math.ceil(m / 1.15), m)  # some pair breaks the promise there, so m_rank is not over-sized
    worst = np.max([exact_misorders(p_h, a, b, k, below) for a, b in itertools.pairwise(accuracies)], axis=0)
    assert np.any(worst > promise), worst.max()
    at_m = ladder_misorders(accuracies, m, trials, seed=n_judges)
    exact_at_m = [exact_misorders(p_h, a, b, k, np.array([m]))[0] for a, b in itertools.pairwise(accuracies)]
    assert np.all(np.abs(at_m - exact_at_m) <= 2 * np.sqrt(promise * (1 - promise) / trials)), at_m
    at_half = ladder_misorders(accuracies, m // 2, trials, seed=10 + n_judges)
    assert broken(at_half.max(), trials, promise), at_half
    at_top = ladder_misorders(accuracies, m_top, trials, seed=20 + n_judges)
    assert broken(at_top[-1], trials, promise), at_top


def test_ladder_rejects_a_ladder_below_zero_accuracy():
    with pytest.raises(ValueError, match="accuracy of"):
        ladder_accuracies(0.85, 0.6, 0.2, n_labels=2, n_judges=5)
    with pytest.raises(ValueError, match="n_judges"):
        ladder_variance(0.85, 0.9, 0.05, n_labels=2, n_humans=3, n_judges=1)
    assert ladder_accuracies(0.5, 0.9, 0.05, n_labels=2, n_judges=3).tolist() == [0.9] * 3  # humans at chance


@given(
    p_h=st.floats(0.55, 0.99),
    p_j=st.floats(0.5, 1.0),
    delta=st.floats(0.005, 0.05),
    n_judges=st.integers(2, 6),
    k=st.integers(2, 6),
)
@FAST
def test_ladder_variance_is_the_maximum_over_adjacent_pairs(p_h, p_j, delta, n_judges, k):
    try:
        accuracies = ladder_accuracies(p_h, p_j, delta, n_labels=3, n_judges=n_judges)
    except ValueError:
        return
    variance, worst = ladder_variance(p_h, p_j, delta, n_labels=3, n_humans=k, n_judges=n_judges)
    pairs = [paired_variance(p_h, a, b, n_labels=3, n_humans=k) for a, b in itertools.pairwise(accuracies)]
    assert variance == pytest.approx(max(pairs)) and pairs[worst] == variance
    assert variance >= pairs[0]


def disjoint_alt_test_false_rejection(
    m: int, k: int, trials: int, seed: int, p_h: float, p_j: float, epsilon: float = 0.2, q: float = 0.05
) -> float:
    """Share of trials in which a good judge fails the alt-test on a disjoint design: K - 1 secondaries
    on m items each, none shared, the primary and the judge on all of them (binary labels). Per held-out
    human the t-test of W_h - W_f against epsilon (the primary against the secondary holding each item),
    BY written out, pass with at least half the humans rejected."""
    from scipy.stats import t as student

    rng = np.random.Generator(np.random.Philox(seed))
    n = (k - 1) * m
    truth = rng.integers(0, 2, size=(trials, n))
    primary, judge = noisy(truth, p_h, 2, rng), noisy(truth, p_j, 2, rng)
    secondary = noisy(truth, p_h, 2, rng)  # block r of the columns is secondary r's

    def p_value(s_f, s_h):
        diff = (s_h >= s_f).astype(float) - (s_f >= s_h)
        mean, sd = diff.mean(axis=1), diff.std(axis=1, ddof=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = student.cdf((mean - epsilon) / (sd / np.sqrt(diff.shape[1])), diff.shape[1] - 1)
        return np.where(sd == 0, np.where(mean < epsilon, 0.0, 1.0), p)

    blocks = [slice(r * m, (r + 1) * m) for r in range(k - 1)]
    p = [p_value(judge[:, b] == primary[:, b], secondary[:, b] == primary[:, b]) for b in blocks]
    p.append(p_value(judge == secondary, primary == secondary))
    ordered = np.sort(np.column_stack(p), axis=1)
    bound = np.arange(1, k + 1) * q / (k * np.sum(1.0 / np.arange(1, k + 1)))
    below = ordered <= bound
    rejected = np.where(below.any(axis=1), k - np.argmax(below[:, ::-1], axis=1), 0)
    return float(np.mean(rejected < 0.5 * k))


@pytest.mark.parametrize(("k", "p_h", "p_j"), [(3, 0.85, 0.90), (5, 0.80, 0.80)])
def test_alt_test_recipe_on_a_disjoint_design_is_the_smallest_m_that_holds(k, p_h, p_j):
    """Issue 29 item 3: the judge-level recipe's m keeps the good judge's FR within alpha_sig/2 at m and
    over [m, 1.3 m] by an independent simulation, the Monte Carlo error inside the promise, and m/1.15
    breaks it beyond that error (so m is within 15% of the smallest m that holds); the per-human power
    recipe asked 57-77% more."""
    mu, var = advantage_moments(*xi_lattice(p_h, p_j, n_labels=2).advantage)
    m = certify_recipe(mu, var, n_items=10_000, n_humans=k, rule="alt-test").m
    per_human = m_alt_test(mu, var, n_humans=k)
    assert m < per_human
    promise = 0.025
    # FR ~.020-.022 at m: 10,000-trial chunks until the upper bound can clear .025 (2 at K 3, 4 at K 5)
    chunks = 2 if k == 3 else 4
    at_m = np.mean([disjoint_alt_test_false_rejection(m, k, 10_000, (1, c), p_h, p_j) for c in range(chunks)])
    assert kept(float(at_m), 10_000 * chunks, promise), at_m
    for size, seed in (((m + math.ceil(1.3 * m)) // 2, 2), (math.ceil(1.3 * m), 3)):
        assert kept(disjoint_alt_test_false_rejection(size, k, 4000, seed, p_h, p_j), 4000, promise), size
    assert broken(disjoint_alt_test_false_rejection(math.floor(m / 1.15), k, 4000, 4, p_h, p_j), 4000, promise)


def _fft_false_rejection(probabilities: np.ndarray, m: np.ndarray, epsilon: float) -> np.ndarray:
    """P(S < -eps m s) for S the sum of m draws on -s..s, from the characteristic function (an FFT power):
    an implementation independent of the recipe's sequential convolution."""
    s = (probabilities.size - 1) // 2
    size = 1 << int(np.ceil(np.log2(2 * s * int(m.max()) + 1)))
    phi = np.fft.rfft(probabilities, size)
    out = np.empty(m.size)
    for k, mk in enumerate(m):
        pmf = np.fft.irfft(phi**mk, size)  # index j: S = j - s mk
        cut = math.ceil(-epsilon * mk * s - 1e-9) - 1  # the largest S with S / (s mk) < -eps
        out[k] = pmf[: cut + s * mk + 1].sum()
    return out


@pytest.mark.parametrize(("p_h", "p_j", "pool_size"), [(0.9, 0.85, 2), (0.85, 0.8, 1)])
def test_recipes_past_4000_items_keep_the_promise_on_the_exact_lattice(p_h, p_j, pool_size):
    """Issue 29 item 7: above 4,000 items the continuity-corrected normal form left m short (6,900 where the
    exact FR holds from 6,960 at p_h .9, p_j .85, s 2). The exact FR, computed independently, is <= .025 on
    [m, 1.3 m] (every m' of the first 60, where it is closest, then every 23rd) and above it at m - 1."""
    lattice = xi_lattice(p_h, p_j, n_labels=2, pool_size=pool_size)
    r = certify_recipe(lattice.mu_d, lattice.variance, n_items=10**6, n_humans=3, lattice=lattice, pool_size=pool_size)
    assert r.m > 4000
    looked = np.union1d(np.arange(r.m - 1, r.m + 60), np.arange(r.m + 60, math.ceil(1.3 * r.m) + 1, 23))
    rates = _fft_false_rejection(lattice.probabilities, looked, 0.05)
    assert rates[0] > 0.025 and rates[1:].max() <= 0.025 + 1e-9
    corrected = corrected_false_rejection_rate(
        looked[1:], lattice.mu_d, lattice.variance, epsilon=0.05, pool_size=pool_size
    )
    assert pool_size == 1 or corrected.max() <= 0.025  # the normal form alone would not have seen the excess


def test_a_shared_panel_recipe_holds_on_the_exact_lattice_from_m_to_1_3_m():
    """Issue 29 item 7: a shared panel (pool_size 2, prior_moments(..., pool_size=2)) at p_h = p_j = .9, L 2,
    was served short on the lattice (exact FR up to .0261 over m 230 and the 40 items above). The served m
    (240) has exact FR <= .025 at every m' in [m, 1.3 m] by the FFT enumeration (max .0216, at 259), and
    m - 1 breaks it (.0263): m is the smallest that holds, with no Monte Carlo error to place."""
    mu, var = prior_moments(0.9, 0.9, n_labels=2, pool_size=2)
    lattice = xi_lattice(0.9, 0.9, n_labels=2, pool_size=2)
    r = certify_recipe(mu, var, n_items=10_000, n_humans=3, lattice=lattice, pool_size=2)
    looked = np.arange(r.m - 1, math.ceil(1.3 * r.m) + 1)
    rates = _fft_false_rejection(lattice.probabilities, looked, 0.05)
    assert r.m == 240 and rates[0] == pytest.approx(0.02634, abs=1e-5)
    assert rates[1:].max() == pytest.approx(0.02156, abs=1e-5) and rates[1:].max() <= 0.025
