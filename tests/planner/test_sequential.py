"""Tests for planner.sequential (docs/method.md §8): check values, independent evaluations,
a slow reference of the monitoring procedure, and seeded simulations of its promises."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize

from planner import confidence_sequences
from planner.confidence_sequences import confidence_sequence, normal_mixture_boundary
from planner.sequential import monitor_judge
from planner.significance import e_bh

FAST = settings(max_examples=40, deadline=None)


# --------------------------------------------------------------------------- boundary


def test_normal_mixture_check_values() -> None:
    assert confidence_sequences._mixture_rho(100, 0.05) == pytest.approx(12.60056, abs=5e-6)
    assert normal_mixture_boundary(100, alpha=0.05, v_opt=100) == pytest.approx(30.35209, abs=5e-6)
    one = normal_mixture_boundary(100, alpha=0.05, v_opt=100, one_sided=True)
    assert one == pytest.approx(27.66071, abs=5e-6)


def _mixture_level(s: float, v: float, rho: float, one_sided: bool) -> float:
    """Direct quadrature of the N(0, 1/rho) mixture of exp(l s - l^2 v / 2) over the bet l."""
    scale = v + rho
    peak, width = s / scale, 1 / math.sqrt(scale)
    low = 0.0 if one_sided else peak - 40 * width
    weight = 2.0 if one_sided else 1.0

    def integrand(lam: float) -> float:
        return weight * math.sqrt(rho / (2 * math.pi)) * math.exp(lam * s - lam * lam * scale / 2)

    value, _ = integrate.quad(
        integrand,
        low,
        peak + 40 * width,
        points=[max(low, peak)],
        epsabs=0,
        epsrel=1e-11,
        limit=200,
    )
    return value


@pytest.mark.parametrize("v", [1.0, 37.0, 100.0, 2500.0])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.2])
@pytest.mark.parametrize("one_sided", [False, True])
def test_normal_mixture_equals_numerical_mixture(v: float, alpha: float, one_sided: bool) -> None:
    v_opt = 100.0
    log_inv = math.log(1 / (2 * alpha if one_sided else alpha))
    rho = v_opt / (2 * log_inv + math.log(1 + 2 * log_inv))
    root = optimize.brentq(
        lambda s: _mixture_level(s, v, rho, one_sided) - 1 / alpha,
        0.0,
        10 * math.sqrt(v + rho) + 10,
    )
    got = normal_mixture_boundary(v, alpha=alpha, v_opt=v_opt, one_sided=one_sided)
    assert got == pytest.approx(root, rel=1e-6)


def test_normal_mixture_is_time_uniform_for_a_random_walk() -> None:
    """P(some |S_t| >= u(t)) <= alpha for +-1 steps (variance proxy t): 4,000 walks, 2,000 steps."""
    rng = np.random.default_rng(7)
    runs, n, alpha = 4000, 2000, 0.05
    t = np.arange(1, n + 1)
    bound = np.array([normal_mixture_boundary(v, alpha=alpha, v_opt=200) for v in t[::50]])
    crossed = np.zeros(runs, dtype=bool)
    for chunk in np.array_split(np.arange(runs), 8):
        walks = np.cumsum(rng.choice([-1.0, 1.0], size=(chunk.size, n)), axis=1)[:, ::50]
        crossed[chunk] = np.any(np.abs(walks) >= bound, axis=1)
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert crossed.mean() <= alpha + 2 * se
    assert crossed.mean() > alpha / 10  # the boundary is not absurdly loose


# --------------------------------------------------------------------------- e-BH


def test_e_bh_check_value() -> None:
    np.testing.assert_array_equal(e_bh([80, 35, 3], q=0.05), [0, 1])
    np.testing.assert_array_equal(e_bh([3, 80, 35], q=0.05), [1, 2])
    assert e_bh([19.9, 19.9, 19.9], q=0.05).size == 0
    np.testing.assert_array_equal(e_bh([20.0, 20.0, 20.0], q=0.05), [0, 1, 2])


@FAST
@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=12), st.sampled_from([0.01, 0.05, 0.2]))
def test_e_bh_matches_its_definition(values: list[float], q: float) -> None:
    e = np.array(values)
    k = e.size
    ranked = np.sort(e)[::-1]
    qualifying = [j for j in range(1, k + 1) if ranked[j - 1] >= k / (q * j)]
    k_star = max(qualifying, default=0)
    got = e_bh(e, q=q)
    assert got.size == k_star
    assert np.all(e[got] >= (ranked[k_star - 1] if k_star else np.inf))
    assert set(np.flatnonzero(e >= k / q)) <= set(got)  # e-BH keeps every Bonferroni rejection


# --------------------------------------------------------------------------- confidence sequences


def _bounded_draws(rng: np.random.Generator, size: tuple[int, int]) -> tuple[np.ndarray, float]:
    """Per-item differences in {-1, -1/2, 0, 1/2, 1} with a known mean (not the planner's)."""
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    probs = np.array([0.1, 0.15, 0.4, 0.2, 0.15])
    return rng.choice(values, p=probs, size=size), float(values @ probs)


@pytest.mark.parametrize("method", ["betting", "normal-mixture"])
def test_confidence_sequence_covers_at_every_prefix(method: str) -> None:
    rng = np.random.default_rng(11)
    runs, n, alpha = 300, 400, 0.1
    draws, mean = _bounded_draws(rng, (runs, n))
    missed = []
    for x in draws:
        cs = confidence_sequence(x, alpha=alpha, method=method, grid_size=200)
        missed.append(np.any((cs.lower > mean) | (cs.upper < mean)))
    rate = float(np.mean(missed))
    assert rate <= alpha + 2 * math.sqrt(alpha * (1 - alpha) / runs)


def test_betting_is_tighter_than_normal_mixture_on_low_variance_data() -> None:
    x = _bounded_draws(np.random.default_rng(3), (1, 2000))[0][0] * 0.3
    bet = confidence_sequence(x, method="betting")
    mix = confidence_sequence(x, method="normal-mixture")
    assert bet.upper[-1] - bet.lower[-1] < 0.5 * (mix.upper[-1] - mix.lower[-1])
    for cs in (bet, mix):
        assert np.all(cs.lower <= cs.estimate + 1e-12) and np.all(cs.estimate <= cs.upper + 1e-12)
        assert np.all(np.diff(cs.lower) >= 0) and np.all(np.diff(cs.upper) <= 0)


def test_betting_bounds_match_a_direct_hedged_capital() -> None:
    """The grid bounds bracket the set of means whose hedged capital stays below 1/alpha."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, 60) * 0.8 + 0.1
    alpha, grid_size = 0.05, 100
    cs = confidence_sequence(x, alpha=alpha, grid_size=grid_size)
    y = (x + 1) / 2
    kept_any = rejected_any = False
    for m in np.linspace(0, 1, grid_size + 1)[1:-1]:
        up = down = 1.0
        total, squares, sigma2_prev, kept = 0.0, 0.0, 0.25, True
        for i, yi in enumerate(y, start=1):
            lam = math.sqrt(2 * math.log(2 / alpha) / (sigma2_prev * i * math.log(1 + i)))
            up *= 1 + min(lam, 0.5 / m) * (yi - m)
            down *= 1 - min(lam, 0.5 / (1 - m)) * (yi - m)
            kept = kept and max(up, down) / 2 < 1 / alpha
            total += yi
            squares += (yi - (0.5 + total) / (i + 1)) ** 2
            sigma2_prev = (0.25 + squares) / (i + 1)
        d = 2 * m - 1
        if kept:  # in the set at every prefix: strictly inside the final band
            assert cs.lower[-1] < d < cs.upper[-1]
        else:  # rejected at some prefix: outside the running intersection (or on its edge)
            assert d <= cs.lower[-1] + 1e-12 or d >= cs.upper[-1] - 1e-12
        kept_any, rejected_any = kept_any or kept, rejected_any or not kept
    assert kept_any and rejected_any


# --------------------------------------------------------------------------- a slow reference


def _reference_monitor(codes, order, judge, humans, rule, epsilon, alpha, omega, multiplicity, inclusion=None):
    """Item-by-item, look-by-look reimplementation of docs/method.md §8 (loops, no cumsums);
    with ``inclusion``, item ``i`` bets on ``(min pi / pi_i) (y_i - m0)`` (§9)."""
    k_humans = len(humans)
    m0 = (1 - epsilon) / 2
    seqs = []
    for own in humans:
        others = [h for h in humans if h != own]
        entries = []
        for i in range(codes.shape[0]):
            if codes[i, judge] < 0 or codes[i, own] < 0:
                continue
            present = [order[i, h] for h in others if codes[i, h] >= 0]
            if not present:
                continue
            t = max(order[i, judge], order[i, own], min(present))
            pool = [h for h in others if codes[i, h] >= 0 and order[i, h] <= t]
            ja = sum(codes[i, h] == codes[i, judge] for h in pool)
            ha = sum(codes[i, h] == codes[i, own] for h in pool)
            xi = (ja - ha) / len(pool) if rule == "margin" else float(np.sign(ja - ha))
            entries.append((t, i, xi))
        entries.sort()
        won, lost, caps = 1.0, 1.0, []
        total, squares, sigma2 = 0.0, 0.0, 0.25
        for n_seen, (t, i, xi) in enumerate(entries, start=1):
            y = (xi + 1) / 2
            if inclusion is not None:
                y = m0 + min(inclusion) / inclusion[i] * (y - m0)
            lam = math.sqrt(2 * math.log(k_humans / alpha) / (sigma2 * n_seen * math.log(1 + n_seen)))
            won *= 1 + min(lam, 0.5 / m0) * (y - m0)
            lost *= 1 - min(lam, 0.5 / (1 - m0)) * (y - m0)
            total += y
            mu = (0.5 + total) / (n_seen + 1)
            squares += (y - mu) ** 2
            sigma2 = (0.25 + squares) / (n_seen + 1)
            caps.append((t, won, lost))
        seqs.append(caps)
    looks = sorted({t for caps in seqs for t, _, _ in caps})
    first = {"won": [None] * k_humans, "lost": [None] * k_humans}
    for look in looks:
        for side, index in (("won", 1), ("lost", 2)):
            e = np.array([([1.0] + [c[index] for c in caps if c[0] <= look])[-1] for caps in seqs])
            if multiplicity == "e-bh":
                certified = set(e_bh(e, q=alpha).tolist())
            else:
                certified = set(np.flatnonzero(e >= k_humans / alpha).tolist())
            for k in certified:
                if first[side][k] is None:
                    first[side][k] = look
    statuses = []
    for k in range(k_humans):
        w, lo = first["won"][k], first["lost"][k]
        if w is not None and (lo is None or w < lo):
            statuses.append("won")
        elif lo is not None and (w is None or lo < w):
            statuses.append("lost")
        else:
            statuses.append("open")
    needed = math.ceil(omega * k_humans - 1e-9)
    decision, decided_at = "continue", None
    for look in looks:
        n_won = sum(s == "won" and first["won"][k] <= look for k, s in enumerate(statuses))
        n_lost = sum(s == "lost" and first["lost"][k] <= look for k, s in enumerate(statuses))
        if n_won >= needed or n_lost > k_humans - needed:
            decision = "pass" if n_won >= needed else "reject"
            decided_at = look
            break
    finals = [(caps[-1][1], caps[-1][2], len(caps)) if caps else (1.0, 1.0, 0) for caps in seqs]
    return statuses, decision, decided_at, finals, len(looks)


@st.composite
def _monitoring_cases(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_items = draw(st.integers(5, 120))
    n_humans = draw(st.integers(2, 4))
    n_labels = draw(st.integers(2, 3))
    truth = rng.integers(0, n_labels, n_items)
    accuracies = rng.uniform(0.5, 1.0, n_humans + 1)
    cols = []
    for p in accuracies:
        shift = rng.integers(1, n_labels, n_items)
        col = np.where(rng.random(n_items) < p, truth, (truth + shift) % n_labels)
        col[rng.random(n_items) < draw(st.sampled_from([0.0, 0.3]))] = -1
        cols.append(col)
    codes = np.column_stack(cols)
    ties = draw(st.booleans())
    order = (
        rng.integers(0, codes.size // 3 + 1, codes.shape) if ties else rng.permutation(codes.size).reshape(codes.shape)
    )
    rule = draw(st.sampled_from(["margin", "alt-test"]))
    epsilon = draw(st.sampled_from([0.0, 0.05, 0.2]))
    alpha = draw(st.sampled_from([0.05, 0.3, 0.6]))  # large alpha: certifications happen on small data
    multiplicity = draw(st.sampled_from(["e-bh", "bonferroni"]))
    weighted = draw(st.booleans())
    inclusion = rng.choice([0.1, 0.25, 1.0], n_items).tolist() if weighted else None
    return codes, order, n_humans, n_labels, rule, epsilon, alpha, multiplicity, inclusion


@settings(max_examples=60, deadline=None)
@given(_monitoring_cases())
def test_monitor_judge_matches_the_slow_reference(case) -> None:
    codes, order, n_humans, n_labels, rule, epsilon, alpha, multiplicity, inclusion = case
    humans, judge = list(range(n_humans)), n_humans
    got = monitor_judge(
        codes,
        judge=judge,
        humans=humans,
        n_labels=n_labels,
        order=order,
        rule=rule,
        epsilon=epsilon,
        alpha=alpha,
        multiplicity=multiplicity,
        inclusion=inclusion,
    )
    statuses, decision, decided_at, finals, n_looks = _reference_monitor(
        codes, order, judge, humans, rule, epsilon, alpha, 0.5, multiplicity, inclusion
    )
    assert got.weighting == ("none" if inclusion is None else "ht")
    assert [r.status for r in got.raters] == statuses
    assert got.looks == n_looks
    for rater, (won, lost, n) in zip(got.raters, finals, strict=True):
        assert rater.n == n
        assert rater.e_value == pytest.approx(won, rel=1e-9)
        assert rater.e_value_lost == pytest.approx(lost, rel=1e-9)
    if n_looks:
        assert (got.decision, got.decided_at) == (decision, decided_at)


# --------------------------------------------------------------------------- behaviour


def _panel(rng, n_items, p_h, p_j, n_humans=3, n_labels=2):
    """Independent generator: symmetric noise channel, every human labels every item."""
    truth = rng.integers(0, n_labels, n_items)
    cols = []
    for p in [p_h] * n_humans + [p_j]:
        shift = rng.integers(1, n_labels, n_items)
        cols.append(np.where(rng.random(n_items) < p, truth, (truth + shift) % n_labels))
    return np.column_stack(cols)


def test_a_decision_stands_and_earlier_prefixes_were_open() -> None:
    rng = np.random.default_rng(2)
    codes = _panel(rng, 800, 0.85, 0.95)
    order = rng.permutation(codes.size).reshape(codes.shape)
    full = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, order=order)
    assert full.decision == "pass" and full.decided_at is not None
    for cut, expected in ((full.decided_at - 1, "continue"), (full.decided_at, "pass")):
        seen = np.where(order <= cut, codes, -1)
        assert monitor_judge(seen, judge=3, humans=[0, 1, 2], n_labels=2, order=order).decision == expected


def test_results_follow_arrival_ranks_not_row_positions() -> None:
    rng = np.random.default_rng(4)
    codes = _panel(rng, 300, 0.8, 0.85)
    order = rng.permutation(codes.size).reshape(codes.shape)
    rows = rng.permutation(300)
    a = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, order=order, alpha=0.3)
    b = monitor_judge(codes[rows], judge=3, humans=[0, 1, 2], n_labels=2, order=order[rows], alpha=0.3)
    assert [(r.status, r.e_value, r.n) for r in a.raters] == [(r.status, r.e_value, r.n) for r in b.raters]
    assert (a.decision, a.decided_at, a.looks) == (b.decision, b.decided_at, b.looks)


def test_bad_judge_is_rejected_and_budget_gives_inconclusive() -> None:
    rng = np.random.default_rng(6)
    bad = monitor_judge(_panel(rng, 600, 0.9, 0.6), judge=3, humans=[0, 1, 2], n_labels=2)
    assert bad.decision == "reject" and [r.status for r in bad.raters].count("lost") >= 2
    borderline = monitor_judge(
        _panel(rng, 100, 0.85, 0.85 - 0.05 / 0.7), judge=3, humans=[0, 1, 2], n_labels=2, budget=50
    )
    assert borderline.decision == "inconclusive"
    assert (
        monitor_judge(_panel(rng, 100, 0.85, 0.85 - 0.05 / 0.7), judge=3, humans=[0, 1, 2], n_labels=2).decision
        == "continue"
    )


def test_insufficient_data_and_undefined_values() -> None:
    codes = _panel(np.random.default_rng(0), 50, 0.9, 0.9)
    one = monitor_judge(codes, judge=3, humans=[0], n_labels=2)
    assert one.decision == "insufficient_data" and "two humans" in one.reason
    codes[:, 1:3] = -1
    none = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2)
    assert none.decision == "insufficient_data"
    assert all(r.n == 0 and math.isnan(r.d) and math.isnan(r.cs.low) for r in none.raters)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"coefficient": "kappa"}, "docs/method.md §8"),
        ({"rule": "majority"}, "rule must be one of"),
        ({"multiplicity": "holm"}, "multiplicity must be one of"),
        ({"epsilon": 1.0}, "epsilon"),
        ({"alpha": 0.0}, "alpha"),
        ({"budget": 0}, "budget"),
        ({"order": np.zeros((3, 3), dtype=int)}, "order must be"),
        ({"humans": [0, 3]}, "must not repeat"),
        ({"inclusion": [0.5] * 19}, "inclusion must have shape"),
        ({"inclusion": [0.0] + [0.5] * 19}, r"inclusion must hold probabilities in \(0, 1\]"),
    ],
)
def test_bad_input_is_named(kwargs, message) -> None:
    codes = _panel(np.random.default_rng(0), 20, 0.9, 0.9)
    call = {"judge": 3, "humans": [0, 1, 2], "n_labels": 2} | kwargs
    with pytest.raises(ValueError, match=message):
        monitor_judge(codes, **call)


# --------------------------------------------------------------------------- promises by simulation

RUNS = 400
ALPHA = 0.05
P_H = 0.85
EPS = 0.05
# L = 2 symmetric noise, pool of two: E[xi] = 0.7 p_j - 0.595, so this judge sits on the margin
P_BOUNDARY = (0.595 - EPS) / 0.7
M_FIXED = 117  # fixed-sample m_cert at p_h .85, p_j .90, L 2 (docs/method.md §4)
LOOK_EVERY = 20


def _se(p: float, runs: int) -> float:
    return math.sqrt(p * (1 - p) / runs)


def _monitor_runs(p_j, n_items, runs, seed, **kwargs):
    rng = np.random.default_rng(seed)
    return [
        monitor_judge(_panel(rng, n_items, P_H, p_j), judge=3, humans=[0, 1, 2], n_labels=2, **kwargs)
        for _ in range(runs)
    ]


@pytest.mark.parametrize("multiplicity", ["e-bh", "bonferroni"])
def test_a_judge_on_the_margin_is_rarely_decided_at_any_look(multiplicity: str) -> None:
    """On the margin both nulls hold: P(some look passes), P(some look rejects) <= alpha each.

    Every prefix up to 5x the fixed-sample m is a look (monitor_judge evaluates each, and
    the first decision stands), so looks every 20 items are covered too.
    """
    runs = _monitor_runs(P_BOUNDARY, 5 * M_FIXED, RUNS, seed=21, multiplicity=multiplicity)
    bound = ALPHA + 2 * _se(ALPHA, RUNS)
    assert np.mean([m.decision == "pass" for m in runs]) <= bound
    assert np.mean([m.decision == "reject" for m in runs]) <= bound


def test_a_judge_as_good_as_the_humans_is_not_rejected() -> None:
    runs = _monitor_runs(P_H, 5 * M_FIXED, RUNS, seed=22)
    assert np.mean([m.decision == "reject" for m in runs]) <= ALPHA + 2 * _se(ALPHA, RUNS)


def test_a_judge_worse_than_the_margin_does_not_pass() -> None:
    runs = _monitor_runs(P_BOUNDARY - 0.03, 5 * M_FIXED, RUNS, seed=23, rule="margin")
    assert np.mean([m.decision == "pass" for m in runs]) <= ALPHA + 2 * _se(ALPHA, RUNS)


def test_a_good_judge_passes_by_600_overlap_items() -> None:
    """Not vacuous: p_j .90 against p_h .85 (L 2, K 3) passes by 600 items in >= 80% of runs."""
    runs = _monitor_runs(0.90, 600, 200, seed=24)
    assert np.mean([m.decision == "pass" for m in runs]) >= 0.8
    assert all(m.decided_at is None or m.decided_at < 600 for m in runs)


def test_the_fixed_sample_rule_read_at_every_look_is_not_valid() -> None:
    """Contrast: the margin rule (won when mean xi >= -eps, pass at omega >= 1/2) read every 20
    items on the same margin judge passes at some look far more often than alpha."""
    rng = np.random.default_rng(25)
    passed = []
    looks = np.arange(LOOK_EVERY, 5 * M_FIXED + 1, LOOK_EVERY)
    for _ in range(RUNS):
        codes = _panel(rng, 5 * M_FIXED, P_H, P_BOUNDARY)
        humans, judge = codes[:, :3], codes[:, 3]
        xi = np.empty((codes.shape[0], 3))
        for k in range(3):
            pool = np.delete(humans, k, axis=1)
            xi[:, k] = np.mean(pool == judge[:, None], axis=1) - np.mean(pool == humans[:, [k]], axis=1)
        means = np.cumsum(xi, axis=0)[looks - 1] / looks[:, None]
        passed.append(np.any(np.mean(means >= -EPS, axis=1) >= 0.5))
    assert np.mean(passed) > ALPHA + 4 * _se(ALPHA, RUNS)


def test_alt_test_monitoring_passes_good_and_rejects_bad_judges() -> None:
    good = _monitor_runs(0.97, 600, 40, seed=26, rule="alt-test")
    bad = _monitor_runs(0.5, 600, 40, seed=27, rule="alt-test", epsilon=0.1)
    assert np.mean([m.decision == "pass" for m in good]) >= 0.8
    assert np.mean([m.decision == "reject" for m in bad]) >= 0.8
    equal = _monitor_runs(P_H, 600, RUNS, seed=28, rule="alt-test")
    assert np.mean([m.decision == "reject" for m in equal]) <= ALPHA + 2 * _se(ALPHA, RUNS)


def test_simulated_operating_characteristics() -> None:
    """The plan's simulation agrees with the promises tested above and shows the peeking cost."""
    from planner.monitor_simulation import simulate_monitoring

    margin = simulate_monitoring(P_H, P_BOUNDARY, n_labels=2, n_humans=3, m=M_FIXED, n_trials=200, rng=1)
    bound = ALPHA + 2 * _se(ALPHA, 200)
    assert margin.anytime.p_pass <= bound and margin.anytime.p_reject <= bound
    assert margin.fixed_peeking.p_pass > 0.3 and margin.fixed_once.p_pass > 0.3
    assert math.isnan(margin.stop_quantile_90)  # most margin runs never decide
    good = simulate_monitoring(P_H, 0.90, n_labels=2, n_humans=3, m=M_FIXED, n_trials=100, rng=2)
    assert good.anytime.p_pass >= 0.9 and M_FIXED < good.expected_stop < 5 * M_FIXED
    assert good.expected_stop <= good.stop_quantile_90 <= good.horizon == 5 * M_FIXED
    with pytest.raises(ValueError, match="n_humans"):
        simulate_monitoring(P_H, 0.9, n_labels=2, n_humans=1, m=10)


@pytest.mark.parametrize(("n_humans", "n_labels", "rule"), [(2, 2, "margin"), (5, 3, "margin"), (4, 2, "alt-test")])
def test_simulated_anytime_decision_is_monitor_judges_on_the_same_panels(
    n_humans: int, n_labels: int, rule: str
) -> None:
    """The simulation decides each panel without ``monitor_judge``'s per-human bands: replaying its
    panels (same seed, same draws) through ``monitor_judge`` gives the same decisions and stops."""
    from planner.monitor_simulation import _noisy_panel, simulate_monitoring
    from planner.sequential import monitor_judge

    sim = simulate_monitoring(
        P_H, 0.9, n_labels=n_labels, n_humans=n_humans, m=40, rule=rule, horizon=200, n_trials=25, rng=4
    )
    gen = np.random.default_rng(4)
    runs = [
        monitor_judge(
            _noisy_panel(gen, 200, [P_H] * n_humans + [0.9], n_labels),
            judge=n_humans,
            humans=list(range(n_humans)),
            n_labels=n_labels,
            rule=rule,
        )
        for _ in range(25)
    ]
    assert sim.anytime.p_pass == sum(r.decision == "pass" for r in runs) / 25
    assert sim.anytime.p_reject == sum(r.decision == "reject" for r in runs) / 25
    stops = [r.decided_at + 1.0 for r in runs if r.decided_at is not None]
    assert stops and sim.expected_stop == pytest.approx(np.mean(stops), rel=1e-12)
