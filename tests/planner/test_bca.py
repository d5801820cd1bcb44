"""Tests for planner.bca (docs/method.md §2, "Intervals"): the pattern jackknife against the item
jackknife, BCa against scipy.stats.bootstrap, invariants of the interval, and measured coverage."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import bootstrap

from planner.agreement import fleiss_kappa, gwet_ac1, krippendorff_alpha
from planner.agreement_results import AgreementResult
from planner.bca import acceleration, bca_interval, pattern_jackknife
from planner.intervals import percentile_interval
from planner.tables import ac1_terms, alpha_terms, item_counts

FAST = settings(max_examples=80, deadline=None)
VALUES = np.arange(2.0)


def sparse_codes(seed: int, n_items: int, prevalence: float) -> np.ndarray:
    """Three binary raters of accuracy .85 on ``n_items`` items, a fifth of the cells missing
    (every item keeps two ratings, so every item is a pairable unit)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n_items) < prevalence).astype(np.int64)
    codes = np.where(rng.random((n_items, 3)) < 0.85, truth[:, None], 1 - truth[:, None])
    codes[:, 2][rng.random(n_items) < 0.6] = -1
    return codes


def by_pattern(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct per-item label counts, their frequencies, and each item's pattern."""
    patterns, item_pattern = np.unique(item_counts(codes, 2), axis=0, return_inverse=True)
    return patterns, np.bincount(item_pattern.ravel()), item_pattern.ravel()


Terms = Callable[[np.ndarray, np.ndarray], np.ndarray]
STATISTICS: dict[str, tuple[Terms, Callable[[np.ndarray], AgreementResult]]] = {
    "alpha": (
        lambda c, w: alpha_terms(c, w, "nominal", VALUES)[0],
        lambda codes: krippendorff_alpha(codes, n_labels=2),
    ),
    "ac1": (lambda c, w: ac1_terms(c, w)[0], lambda codes: gwet_ac1(codes, n_labels=2)),
}


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_pattern_jackknife_acceleration_is_the_item_jackknife(name: str) -> None:
    """Leaving out one item of each pattern, weighted by the pattern's count, is the textbook
    delete-one jackknife over all items (Efron & Tibshirani 14.15, written out here)."""
    terms, coefficient = STATISTICS[name]
    codes = sparse_codes(3, 45, 0.2)
    patterns, frequency, _ = by_pattern(codes)
    ours = acceleration(*pattern_jackknife(lambda w: terms(patterns, w), frequency))
    leave_one_out = np.array([coefficient(np.delete(codes, i, axis=0)).statistic for i in range(len(codes))])
    u = leave_one_out.mean() - leave_one_out
    textbook = np.sum(u**3) / (6.0 * np.sum(u**2) ** 1.5)
    assert ours == pytest.approx(textbook, rel=1e-9, abs=1e-12)
    assert abs(textbook) > 1e-3  # a real skew, not the trivial 0


@pytest.mark.parametrize("name", sorted(STATISTICS))
def test_bca_agrees_with_scipy_bootstrap_bca(name: str) -> None:
    """scipy.stats.bootstrap(method="BCa") resamples the item indices itself; at 20,000 resamples both
    intervals agree to 0.012, while the percentile interval is further off (the adjustment matters)."""
    terms, coefficient = STATISTICS[name]
    codes = sparse_codes(4, 40, 0.2)
    patterns, _, item_pattern = by_pattern(codes)
    one_hot = np.eye(patterns.shape[0])[item_pattern]

    def statistic(index: np.ndarray, axis: int = -1) -> np.ndarray:
        weights = one_hot[index].sum(axis=-2)  # items of each pattern in each resample
        lead = weights.shape[:-1]
        return terms(patterns, weights.reshape(-1, patterns.shape[0])).reshape(lead)

    reference = bootstrap(
        (np.arange(len(codes)),),
        statistic,
        vectorized=True,
        method="BCa",
        n_resamples=20_000,
        confidence_level=0.9,
        rng=np.random.default_rng(2),
    ).confidence_interval
    result = coefficient(codes)
    ours = result.confidence_interval(0.9, method="bca", n_resamples=20_000, rng=1)
    plain = result.confidence_interval(0.9, method="percentile", n_resamples=20_000, rng=1)
    assert ours.method == "bca" and plain.method == "percentile" and ours.approximate
    gaps = np.abs([ours.low - reference.low, ours.high - reference.high])
    plain_gaps = np.abs([plain.low - reference.low, plain.high - reference.high])
    assert gaps.max() < 0.012
    assert plain_gaps.max() > 2 * gaps.max()


@given(
    replicates=st.lists(st.floats(-5, 5), min_size=5, max_size=60),
    estimate=st.floats(-5, 5),
    accel=st.floats(-0.3, 0.3),
    level=st.floats(0.5, 0.99),
)
@FAST
def test_bca_interval_lies_among_the_replicates_and_nests_by_level(
    replicates: list[float], estimate: float, accel: float, level: float
) -> None:
    reps = np.array(replicates)
    ci = bca_interval(reps, estimate, accel, level)
    assert reps.min() <= ci.low <= ci.high <= reps.max()
    wider = bca_interval(reps, estimate, accel, min(0.995, level + 0.004))
    assert wider.low <= ci.low + 1e-12 and ci.high <= wider.high + 1e-12


@given(half=st.lists(st.floats(0.01, 5), min_size=2, max_size=40, unique=True), level=st.floats(0.5, 0.99))
@FAST
def test_bca_without_bias_or_acceleration_is_the_percentile_interval(half: list[float], level: float) -> None:
    """Replicates symmetric about the estimate (z0 = 0) and a = 0: BCa reads the percentile levels."""
    reps = np.concatenate([-np.array(half), [0.0], np.array(half)])
    bca, plain = bca_interval(reps, 0.0, 0.0, level), percentile_interval(reps, level)
    assert (bca.low, bca.high) == pytest.approx((plain.low, plain.high), abs=1e-12)


def test_bca_shifts_toward_the_estimate_side_and_falls_back_when_z0_is_infinite() -> None:
    reps = np.linspace(0.0, 1.0, 101)
    plain = percentile_interval(reps, 0.9)
    above = bca_interval(reps, 0.7, 0.0, 0.9)  # 70% of replicates below: z0 > 0 moves both ends up
    assert above.low > plain.low and above.high > plain.high
    beyond = bca_interval(reps, 2.0, 0.0, 0.9)  # every replicate below: no z0
    assert beyond.method == "percentile" and (beyond.low, beyond.high) == (plain.low, plain.high)
    assert np.isnan(bca_interval(np.array([np.nan]), 0.5, 0.0, 0.9).low)
    with pytest.raises(ValueError, match="confidence_level"):
        bca_interval(reps, 0.5, 0.0, 1.0)


def test_replicates_equal_to_the_estimate_up_to_rounding_tie_with_it() -> None:
    """A replicate summed in another order than the estimate differs in its last bits: it still ties
    (counted half in z0), so the interval does not jump with the order of a sum."""
    estimate = -4 / 35  # a kappa whose replicates often equal it
    reps = np.array([-0.31, -0.26, -0.2, -0.15, *[estimate] * 8, -0.07, -0.066, -0.066, -0.05])
    exact = bca_interval(reps, estimate, 0.05, 0.9)
    rounded = bca_interval(np.where(reps == estimate, estimate * (1 - 4e-15), reps), estimate, 0.05, 0.9)
    assert (rounded.low, rounded.high) == (exact.low, exact.high)
    apart = bca_interval(np.where(reps == estimate, estimate * (1 - 1e-6), reps), estimate, 0.05, 0.9)
    assert (apart.low, apart.high) != (exact.low, exact.high)  # a real difference is not a tie


def test_bca_is_the_default_only_for_approximate_intervals() -> None:
    small, large = sparse_codes(5, 40, 0.3), sparse_codes(5, 600, 0.3)
    assert krippendorff_alpha(small, n_labels=2).confidence_interval(n_resamples=200, rng=0).method == "bca"
    big = krippendorff_alpha(large, n_labels=2).confidence_interval(n_resamples=200, rng=0)
    assert big.method == "percentile" and not big.approximate
    assert (
        krippendorff_alpha(large, n_labels=2).confidence_interval(method="bca", n_resamples=200, rng=0).method == "bca"
    )
    delta = fleiss_kappa(np.array([[0, 0], [1, 1], [0, 1]] * 5), n_labels=2)
    assert delta.confidence_interval(n_resamples=50, rng=0).approximate


def population_values(prevalence: float, accuracy: float) -> dict[str, float]:
    """Large-sample values under the binary symmetric channel, by hand: every pair of raters agrees
    with ``p_o = a^2 + (1-a)^2`` whatever the prevalence; each rater says positive with
    ``q = pi a + (1-pi)(1-a)``; chance terms ``q^2 + (1-q)^2`` (kappa, Fleiss, alpha) and
    ``2 q (1-q)`` (AC1, L = 2)."""
    p_o = accuracy**2 + (1 - accuracy) ** 2
    q = prevalence * accuracy + (1 - prevalence) * (1 - accuracy)
    scott = q**2 + (1 - q) ** 2
    ac1_chance = 2 * q * (1 - q)
    kappa = (p_o - scott) / (1 - scott)
    return {"po": p_o, "kappa": kappa, "fleiss": kappa, "ac1": (p_o - ac1_chance) / (1 - ac1_chance)}


def test_bca_covers_at_nominal_where_percentile_falls_short_at_n30_under_skew() -> None:
    """n = 30 items, .9/.1 prevalence, three raters of accuracy .9 (generated here): over 500 seeded
    trials the default (BCa, the interval being approximate) covers p_o, Cohen's kappa and AC1 within
    2 Monte Carlo SE of .95, and beats the percentile interval on the same resamples (McNemar z > 2
    over the trials where they differ); for Fleiss' kappa it is no worse (both fall short there, which
    is why the interval stays flagged approximate). bench/interval_coverage.py has the full table."""
    from planner.agreement import cohen_kappa, percent_agreement

    truth = population_values(0.1, 0.9)
    coefficients: dict[str, Callable[[np.ndarray], AgreementResult]] = {
        "po": lambda c: percent_agreement(c, n_labels=2),
        "kappa": lambda c: cohen_kappa(c[:, 0], c[:, 1], n_labels=2),
        "ac1": lambda c: gwet_ac1(c, n_labels=2),
        "fleiss": lambda c: fleiss_kappa(c, n_labels=2),
    }
    rng = np.random.default_rng(20261130)
    hits: dict[str, list[tuple[bool, bool]]] = {name: [] for name in coefficients}
    for trial in range(500):
        labels = (rng.random(30) < 0.1).astype(np.int64)
        codes = np.where(rng.random((30, 3)) < 0.9, labels[:, None], 1 - labels[:, None])
        for name, coefficient in coefficients.items():
            result = coefficient(codes)
            if not result.defined:
                continue
            default = result.confidence_interval(n_resamples=400, rng=trial)
            plain = result.confidence_interval(method="percentile", n_resamples=400, rng=trial)
            assert default.method == "bca" and default.approximate
            hits[name].append((default.low <= truth[name] <= default.high, plain.low <= truth[name] <= plain.high))
    for name, pairs in hits.items():
        bca, plain = (np.array(x) for x in zip(*pairs, strict=True))
        se = np.sqrt(0.95 * 0.05 / bca.size)
        better, worse = int(np.sum(bca & ~plain)), int(np.sum(~bca & plain))
        if name == "fleiss":
            assert better >= worse
            continue
        assert bca.mean() >= 0.95 - 2 * se, (name, bca.mean())
        assert (better - worse) / np.sqrt(better + worse) > 2, (name, better, worse)
