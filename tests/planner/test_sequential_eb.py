"""The served per-human confidence sequence (docs/method.md §8) against a reference predictable plug-in
empirical-Bernstein (PrPl-EB) sequence written here from Waudby-Smith & Ramdas (2024, JRSS-B, Thm 2 and
eq. for lambda^PrPl-EB), independently of planner.sequential: its width at n = 120, its coverage at every
look by simulation (an independent generator) and that the coverage check can fail."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.confidence_sequences import confidence_sequence
from planner.sequential import monitor_judge

ALPHA = 0.05


def reference_prpl_eb(x: list[float], alpha: float, c: float = 0.5) -> tuple[list[float], list[float]]:
    """Bounds on the mean of ``x`` in ``[-1, 1]``, one pair per prefix, by the paper's formulas on
    ``X = (x + 1)/2`` (loops, no running intersection):

    mu_t = (1/2 + sum_{i<=t} X_i)/(t + 1), sigma_t^2 = (1/4 + sum_{i<=t} (X_i - mu_i)^2)/(t + 1),
    lambda_t = min(sqrt(2 log(2/alpha) / (sigma_{t-1}^2 t log(1 + t))), c), mu_0 = 1/2, sigma_0^2 = 1/4,
    v_t = 4 (X_t - mu_{t-1})^2, psi_E(l) = (-log(1 - l) - l)/4,
    C_t = sum l X / sum l  +-  (log(2/alpha) + sum v psi_E(l)) / sum l, clipped to [0, 1].
    """
    lows, highs = [], []
    mu_prev, sigma2_prev = 0.5, 0.25
    total = squares = lam_x = lam = pen = 0.0
    for t, xi in enumerate(x, start=1):
        big_x = (xi + 1.0) / 2.0
        bet = min(math.sqrt(2.0 * math.log(2.0 / alpha) / (sigma2_prev * t * math.log(1.0 + t))), c)
        v = 4.0 * (big_x - mu_prev) ** 2
        psi = (-math.log(1.0 - bet) - bet) / 4.0
        lam_x += bet * big_x
        lam += bet
        pen += v * psi
        centre, half = lam_x / lam, (math.log(2.0 / alpha) + pen) / lam
        lows.append(2.0 * max(centre - half, 0.0) - 1.0)
        highs.append(2.0 * min(centre + half, 1.0) - 1.0)
        total += big_x
        mu_prev = (0.5 + total) / (t + 1.0)
        squares += (big_x - mu_prev) ** 2
        sigma2_prev = (0.25 + squares) / (t + 1.0)
    return lows, highs


def _panel(rng: np.random.Generator, n: int, accuracies: list[float], n_labels: int) -> np.ndarray:
    """Independent of the planner's generator: each rater copies the truth w.p. ``p``, else draws one of
    the other labels uniformly (by rejection-free choice from the complement)."""
    truth = rng.choice(n_labels, size=n)
    columns = []
    for p in accuracies:
        wrong = (truth + 1 + np.floor(rng.random(n) * (n_labels - 1)).astype(int)) % n_labels
        columns.append(np.where(rng.uniform(size=n) < p, truth, wrong))
    return np.stack(columns, axis=1)


def _agree(pa: float, pb: float, n_labels: int) -> float:
    """P(two raters of the panel agree): both right, or both wrong on the same other label."""
    return pa * pb + (1 - pa) * (1 - pb) / (n_labels - 1)


def _xi_two_humans(codes: np.ndarray, k: int) -> np.ndarray:
    """Hand-computed xi of human k with two humans (columns 0, 1) and the judge (column 2), row order."""
    other = codes[:, 1 - k]
    return (codes[:, 2] == other).astype(float) - (codes[:, k] == other)


def test_hand_value_of_the_first_look() -> None:
    """x_1 = 0.4: X_1 = .7, lambda_1 = min(sqrt(2 log 40 / (.25 log 2)), .5) = .5, v_1 = 4 (.2)^2 = .16,
    psi(.5) = (log 2 - .5)/4 = .0482868; centre .7, half (3.6888795 + .0077259)/.5 = 7.3932 (clipped)."""
    cs = confidence_sequence([0.4], alpha=ALPHA, method="empirical-bernstein")
    assert (cs.lower[0], cs.upper[0]) == (-1.0, 1.0)
    # After 400 draws of 0.4 the band is tight about 0.4 (sigma shrinks to about 0):
    cs = confidence_sequence([0.4] * 400, alpha=ALPHA, method="empirical-bernstein")
    low, high = reference_prpl_eb([0.4] * 400, ALPHA)
    assert cs.lower[-1] == pytest.approx(max(low), abs=1e-12)
    assert cs.upper[-1] == pytest.approx(min(high), abs=1e-12)
    assert cs.lower[-1] < 0.4 < cs.upper[-1] and cs.upper[-1] - cs.lower[-1] < 0.1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), min_size=1, max_size=150), st.floats(0.01, 0.5))
def test_empirical_bernstein_equals_the_reference(x: list[float], alpha: float) -> None:
    cs = confidence_sequence(x, alpha=alpha, method="empirical-bernstein")
    low, high = reference_prpl_eb(x, alpha)
    np.testing.assert_allclose(cs.lower, np.maximum.accumulate(low), rtol=0, atol=1e-12)
    np.testing.assert_allclose(cs.upper, np.minimum.accumulate(high), rtol=0, atol=1e-12)


@pytest.mark.parametrize(("p_h", "p_j", "seed"), [(0.8, 0.85, 1), (0.85, 0.85, 2), (0.9, 0.8, 3)])
def test_the_served_sequence_is_within_1_1_of_the_reference_at_n_120(p_h: float, p_j: float, seed: int) -> None:
    """The band /reliability serves per human (monitor_judge) at n = 120 is at most 1.1x the reference
    PrPl-EB width on the same differences (was the normal mixture, about 1.7x)."""
    codes = _panel(np.random.default_rng(seed), 120, [p_h, p_h, p_j], 3)
    mon = monitor_judge(codes, judge=2, humans=[0, 1], n_labels=3, alpha=ALPHA, budget=120)
    for k, rater in enumerate(mon.raters):
        low, high = reference_prpl_eb(list(_xi_two_humans(codes, k)), ALPHA)
        assert rater.n == 120
        reference = min(high) - max(low)
        served = rater.upper[119] - rater.lower[119]
        assert served <= 1.1 * reference
        assert served >= reference - 1e-12  # the same sequence, not a narrower (invalid) one
        mixture = confidence_sequence(_xi_two_humans(codes, k), alpha=ALPHA, method="normal-mixture", v_opt=120)
        assert mixture.upper[-1] - mixture.lower[-1] > 1.3 * served  # the old band, for the record


def test_the_weighted_band_is_the_reference_with_weights() -> None:
    """Weighted (a Neyman panel): lambda w (y - mu) in the same formulas (docs/method.md §9); equal
    weights give the unweighted band exactly."""
    rng = np.random.default_rng(8)
    codes = _panel(rng, 80, [0.8, 0.8, 0.9], 2)
    inclusion = rng.choice([0.25, 0.5, 1.0], 80)
    w = inclusion.min() / inclusion
    mon = monitor_judge(codes, judge=2, humans=[0, 1], n_labels=2, inclusion=inclusion)
    for k, rater in enumerate(mon.raters):
        y = (_xi_two_humans(codes, k) + 1) / 2
        mu_prev, s2_prev, wsum, wy, sq, lam_y, lam_w, pen = 0.5, 0.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        lows, highs = [], []
        for t, (yi, wi) in enumerate(zip(y, w, strict=True), start=1):
            bet = min(math.sqrt(2 * math.log(2 / ALPHA) / (s2_prev * t * math.log(1 + t))), 0.5)
            pen += 4 * (wi * (yi - mu_prev)) ** 2 * (-math.log(1 - bet) - bet) / 4
            lam_y += bet * wi * yi
            lam_w += bet * wi
            c, h = lam_y / lam_w, (math.log(2 / ALPHA) + pen) / lam_w
            lows.append(2 * max(c - h, 0) - 1)
            highs.append(2 * min(c + h, 1) - 1)
            wsum += wi
            wy += wi * yi
            mu_prev = (0.5 + wy) / (1 + wsum)
            sq += (wi * (yi - mu_prev)) ** 2
            s2_prev = (0.25 + sq) / (t + 1)
        np.testing.assert_allclose(rater.lower, np.maximum.accumulate(lows), rtol=0, atol=1e-12)
        np.testing.assert_allclose(rater.upper, np.minimum.accumulate(highs), rtol=0, atol=1e-12)
    equal = monitor_judge(codes, judge=2, humans=[0, 1], n_labels=2, inclusion=np.full(80, 0.3))
    plain = monitor_judge(codes, judge=2, humans=[0, 1], n_labels=2)
    for a, b in zip(equal.raters, plain.raters, strict=True):
        np.testing.assert_allclose(a.lower, b.lower, rtol=0, atol=1e-12)


def _misses(runs: int, n: int, p_h: float, p_j: float, seed: int, shrink: float = 1.0) -> float:
    """Share of runs in which some human's served band (shrunk about its midpoint by ``shrink``) misses
    the true mean of xi at some look: K = 3 humans, every one labels every item, row order."""
    rng = np.random.default_rng(seed)
    truth = _agree(p_j, p_h, 3) - _agree(p_h, p_h, 3)  # E[xi]: judge-human minus human-human agreement
    missed = 0
    for _ in range(runs):
        codes = _panel(rng, n, [p_h, p_h, p_h, p_j], 3)
        mon = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=3, alpha=0.1)
        hit = False
        for r in mon.raters:
            mid, half = (r.upper + r.lower) / 2, (r.upper - r.lower) / 2 * shrink
            hit = hit or bool(np.any((mid - half > truth) | (mid + half < truth)))
        missed += hit
    return missed / runs


def test_the_served_sequence_covers_at_every_look() -> None:
    """Per human, P(its band misses the true mean of xi at some look up to 300) <= alpha, each of the three
    humans checked (alpha = .1, 400 runs, within 2 MC SE)."""
    runs, alpha = 400, 0.1
    rng = np.random.default_rng(21)
    per_human = np.zeros(3)
    for _ in range(runs):
        codes = _panel(rng, 300, [0.8, 0.8, 0.8, 0.85], 3)
        mon = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=3, alpha=alpha)
        truth = _agree(0.85, 0.8, 3) - _agree(0.8, 0.8, 3)
        per_human += [bool(np.any((r.lower > truth) | (r.upper < truth))) for r in mon.raters]
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert np.all(per_human / runs <= alpha + 2 * se)


def test_the_coverage_check_is_not_vacuous() -> None:
    """The band is informative (final width well under the range) and the same check fails for the band
    halved about its midpoint: it misses at some look far more often than alpha."""
    rng = np.random.default_rng(22)
    codes = _panel(rng, 300, [0.8, 0.8, 0.8, 0.85], 3)
    mon = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=3, alpha=0.1)
    assert all(r.upper[-1] - r.lower[-1] < 0.35 for r in mon.raters)
    assert _misses(60, 300, 0.8, 0.85, seed=23, shrink=0.5) > 0.1 + 2 * math.sqrt(0.1 * 0.9 / 60)


def test_a_won_human_rarely_keeps_a_band_across_minus_epsilon() -> None:
    """Issue 28: under the normal mixture nearly every won human's band still reached below -epsilon. With
    the served band, of the humans won by 600 items (K = 3, p_h .85, p_j .90, L = 2) at most 10% still
    cross it; the normal mixture on the same differences crosses for most (the contrast)."""
    rng = np.random.default_rng(31)
    won = crossing = crossing_mixture = 0
    for _ in range(40):
        codes = _panel(rng, 600, [0.85, 0.85, 0.85, 0.9], 2)
        mon = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, budget=300)
        for k, r in enumerate(mon.raters):
            if r.status != "won":
                continue
            won += 1
            crossing += r.cs.low < -mon.epsilon
            others = [h for h in range(3) if h != k]
            xi = np.mean([(codes[:, 3] == codes[:, h]).astype(float) - (codes[:, k] == codes[:, h]) for h in others], 0)
            mixture = confidence_sequence(xi, alpha=mon.alpha, method="normal-mixture", v_opt=300)
            crossing_mixture += mixture.lower[-1] < -mon.epsilon
    assert won >= 60
    assert crossing <= 0.1 * won
    assert crossing_mixture >= 0.5 * won
