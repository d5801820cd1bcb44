"""Skewed kappa and alpha intervals at 100 items are flagged approximate, with the reason (issue 29 item 7;
docs/method.md §2, "Intervals"): the coverage simulation that motivates the flag, on a generator of this file
with the population coefficient computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.agreement import cohen_kappa, krippendorff_alpha
from planner.intervals import AGREEMENT_BELOW_MINORITY, approximation_reason, is_approximate
from planner.rater_pairs import summary_table

PREVALENCE, ACCURACY, N_ITEMS = 0.1, 0.95, 100
RUNS = 1000


def _population_kappa(prevalence: float, accuracy: float) -> float:
    """Kappa (= Scott's pi, the large-sample alpha: both raters share a margin) of two raters each right
    with ``accuracy`` on binary items of this ``prevalence``: ``p_o = a^2 + (1 - a)^2``, ``q = pi a + (1 - pi)
    (1 - a)`` the share of 1s, ``p_e = q^2 + (1 - q)^2``."""
    p_o = accuracy**2 + (1 - accuracy) ** 2
    q = prevalence * accuracy + (1 - prevalence) * (1 - accuracy)
    p_e = q**2 + (1 - q) ** 2
    return (p_o - p_e) / (1 - p_e)


def test_the_population_kappa_by_hand_is_what_a_large_sample_gives():
    rng = np.random.default_rng(0)
    truth = (rng.random(400_000) < PREVALENCE).astype(int)
    a, b = (np.where(rng.random(truth.size) < ACCURACY, truth, 1 - truth) for _ in range(2))
    assert cohen_kappa(a, b, n_labels=2).statistic == pytest.approx(_population_kappa(PREVALENCE, ACCURACY), abs=0.01)
    assert _population_kappa(0.5, 0.9) == pytest.approx(0.64)  # p_o .82, p_e .5


@pytest.mark.slow
def test_skewed_intervals_at_100_items_fall_short_unflagged_and_cover_as_served():
    """At a .1/.9 skew, raters .95 right, 100 items: the percentile interval (what the flag did not switch
    away from) covers below .95 by more than 2 MC SE for kappa and alpha; nearly every such dataset is flagged
    approximate with its reason, and the interval served (BCa where flagged) covers within 2 SE of .95."""
    truth_value = _population_kappa(PREVALENCE, ACCURACY)
    rng = np.random.default_rng(29)
    covered = {(name, how): 0 for name in ("kappa", "alpha") for how in ("percentile", "served")}
    flagged = 0
    for run in range(RUNS):
        truth = (rng.random(N_ITEMS) < PREVALENCE).astype(int)
        a, b = (np.where(rng.random(N_ITEMS) < ACCURACY, truth, 1 - truth) for _ in range(2))
        results = {
            "kappa": cohen_kappa(a, b, n_labels=2),
            "alpha": krippendorff_alpha(np.column_stack([a, b]), n_labels=2),
        }
        flagged += all(r.approximate and "minority label" in r.approximate_reason for r in results.values())
        for name, result in results.items():
            for how, method in (("percentile", "percentile"), ("served", None)):
                options = {} if method is None else {"method": method}
                ci = result.confidence_interval(n_resamples=200, rng=run, **options)
                covered[(name, how)] += ci.low <= truth_value <= ci.high
    se = math.sqrt(0.95 * 0.05 / RUNS)
    rates = {key: n / RUNS for key, n in covered.items()}
    assert flagged / RUNS >= 0.95, flagged
    for name in ("kappa", "alpha"):
        assert rates[(name, "percentile")] < 0.95 - 2 * se, rates
        assert rates[(name, "served")] >= 0.95 - 2 * se, rates


def test_the_reason_says_why_and_a_balanced_table_is_not_flagged():
    assert approximation_reason(80, np.array([40, 120])) == "80 items, fewer than 100"
    assert approximation_reason(100, np.array([0, 200])) == "a single label throughout"
    assert approximation_reason(100, np.array([166, 34]), minority_below=AGREEMENT_BELOW_MINORITY) == (
        f"the minority label has 34 ratings, fewer than {AGREEMENT_BELOW_MINORITY}"
    )
    assert approximation_reason(100, np.array([166, 34])) == ""  # other intervals keep the minority of 10
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 2, N_ITEMS)
    codes = np.column_stack([np.where(rng.random(N_ITEMS) < 0.9, truth, 1 - truth) for _ in range(2)])
    table = summary_table(codes, n_labels=2, n_resamples=100, rng=0)
    shown = {key: (e.as_dict()["approximate"], e.as_dict()["approximate_reason"]) for key, e in table.items()}
    assert shown == dict.fromkeys(("po", "kappa", "alpha", "ac1"), (False, ""))
    skewed = codes.copy()
    skewed[10:] = 0  # 10 items with any 1 left: a minority of at most 20 ratings
    flagged = summary_table(skewed, n_labels=2, n_resamples=100, rng=0)["kappa"].as_dict()
    assert flagged["approximate"] is True and str(flagged["approximate_reason"]).startswith("the minority label has")
    assert flagged["interval_method"] == "bca"


@settings(max_examples=200, deadline=None)
@given(
    n_items=st.integers(1, 400),
    counts=st.lists(st.integers(0, 300), min_size=2, max_size=5),
    extra=st.integers(0, 100),
)
def test_a_reason_is_given_exactly_when_flagged_and_more_minority_ratings_never_add_a_flag(n_items, counts, extra):
    counts = np.array(counts)
    for minority_below in (10, AGREEMENT_BELOW_MINORITY):
        reason = approximation_reason(n_items, counts, minority_below=minority_below)
        assert bool(reason) == (
            n_items < 100 or np.count_nonzero(counts) < 2 or counts[counts > 0].min() < minority_below
        )
    assert is_approximate(n_items, counts) == bool(approximation_reason(n_items, counts))
    if np.count_nonzero(counts) >= 2:  # raising the rarest label's ratings never adds a flag
        more = counts.copy()
        more[np.flatnonzero(counts == counts[counts > 0].min())] += extra
        if not approximation_reason(n_items, counts, minority_below=AGREEMENT_BELOW_MINORITY):
            assert not approximation_reason(n_items, more, minority_below=AGREEMENT_BELOW_MINORITY)
