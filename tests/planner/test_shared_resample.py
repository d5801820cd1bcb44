"""One resample of the items read by every statistic (``planner.resampling.ItemResample``).

The draw is an exact multinomial (checked against the binomial margins and covariances it must
have); a merged view is the sum of its patterns' columns; held and replayed resamples are the
same numbers; and the validation and every coefficient of ``summary_table`` reading a shared
resample equal a reference that rebuilds each resampled matrix item by item (``np.repeat``) from
the same multiplicities and calls the public statistic on it (hypothesis, to 1e-12).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

import planner.resampling as resampling
from planner.agreement import gwet_ac1, krippendorff_alpha, percent_agreement
from planner.decision import validate_judge
from planner.intervals import percentile_interval
from planner.patterns import item_patterns
from planner.ranking import rank_judges
from planner.rater_pairs import mean_pairwise_kappa, summary_table
from planner.resampling import ItemResample, joint_replicates
from planner.rules import passes

PROPERTY = settings(max_examples=25, deadline=None)


def multiplicities(resample: ItemResample) -> np.ndarray:
    return np.concatenate(list(resample.blocks()))


def test_the_draw_has_the_multinomial_margins_and_covariances() -> None:
    # common patterns (Poisson and corrections) and rare ones (items), plus items in no pattern
    counts = np.array([400, 120, 30, 11, 10, 3, 1, 1])
    n_items = int(counts.sum()) + 60
    w = multiplicities(ItemResample.draw(counts, n_items, 40_000, 3))
    p = counts / n_items
    for u in (0, 2, 4, 7):  # each margin is Binomial(n_items, p_u): chi-square over its support
        observed = np.bincount(w[:, u].astype(int), minlength=n_items + 1)
        expected = stats.binom.pmf(np.arange(n_items + 1), n_items, p[u]) * w.shape[0]
        pooled = expected >= 5
        chi = np.sum((observed[pooled] - expected[pooled]) ** 2 / expected[pooled])
        assert stats.chi2.sf(chi, pooled.sum() - 1) > 1e-3, u
    cov = np.cov(w.T)
    theory = n_items * (np.diag(p) - np.outer(p, p))
    se = np.sqrt((theory**2 + np.outer(np.diag(theory), np.diag(theory))) / w.shape[0])
    assert np.all(np.abs(cov - theory) < 5 * se + 1e-9)


def test_a_draw_that_ignores_the_removals_is_caught() -> None:
    """The covariance check above is not vacuous: the Poisson counts alone (no correction to the
    multinomial total) have independent margins and fail it."""
    counts = np.array([400, 120, 30, 11])
    rng = np.random.default_rng(1)
    w = rng.poisson(np.broadcast_to(counts.astype(float), (40_000, 4)))
    p = counts / counts.sum()
    theory = counts.sum() * (np.diag(p) - np.outer(p, p))
    se = np.sqrt((theory**2 + np.outer(np.diag(theory), np.diag(theory))) / w.shape[0])
    assert not np.all(np.abs(np.cov(w.T) - theory) < 5 * se)


@PROPERTY
@given(
    st.lists(st.integers(1, 40), min_size=1, max_size=12),
    st.integers(0, 30),
    st.integers(1, 40),
    st.data(),
)
def test_a_merged_view_sums_its_patterns_and_replays_the_held_numbers(
    counts: list[int], outside: int, n_resamples: int, data: st.DataObject
) -> None:
    arr = np.array(counts)
    held = ItemResample.draw(arr, int(arr.sum()) + outside, n_resamples, 5)
    groups = np.array(data.draw(st.lists(st.integers(-1, 3), min_size=arr.size, max_size=arr.size)))
    w = multiplicities(held)
    expected = np.stack([w[:, groups == g].sum(axis=1) for g in range(4)], axis=1)
    np.testing.assert_array_equal(multiplicities(held.merged(groups, 4)), expected)
    assert held.merged(groups, 4).view_counts.tolist() == [int(arr[groups == g].sum()) for g in range(4)]
    assert np.all(w.sum(axis=1) <= arr.sum() + outside)
    with pytest.MonkeyPatch.context() as patch:  # too big to hold: replayed from the seed, block by block
        patch.setattr(resampling, "_HELD_CELLS", 0)
        patch.setattr(resampling, "_BLOCK_CELLS", 3)
        replayed = ItemResample.draw(arr, int(arr.sum()) + outside, n_resamples, 5)
        assert replayed.held is None
        again = ItemResample.draw(arr, int(arr.sum()) + outside, n_resamples, 5)
        np.testing.assert_array_equal(multiplicities(replayed), multiplicities(again))
        view = replayed.merged(groups, 4)
        first, second = joint_replicates([(view, lambda x: x.sum(axis=1), 0), (replayed, lambda x: x[:, 0], 0)])
        np.testing.assert_array_equal(first, multiplicities(view).sum(axis=1))
        np.testing.assert_array_equal(second, multiplicities(replayed)[:, 0])


@st.composite
def pattern_matrices(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """A few distinct rows of codes repeated 5..60 times: items enough for percentile intervals."""
    n_labels, n_raters = draw(st.integers(2, 3)), draw(st.integers(3, 4))
    n_rows = draw(st.integers(2, 7))
    rows = np.array(
        draw(
            st.lists(
                st.lists(st.integers(-1, n_labels - 1), min_size=n_raters, max_size=n_raters),
                min_size=n_rows,
                max_size=n_rows,
            )
        )
    )
    rows[:, :2] = np.maximum(rows[:, :2], 0)  # the first two raters label every item
    repeats = draw(st.lists(st.integers(5, 60), min_size=n_rows, max_size=n_rows))
    return np.repeat(rows, repeats, axis=0), n_labels


def resampled_matrices(codes: np.ndarray, n_labels: int, resample: ItemResample) -> list[np.ndarray]:
    """Each resample as a matrix of items: every pattern's row repeated by its multiplicity."""
    patterns = item_patterns(codes, n_labels)
    return [np.repeat(patterns.rows, w.astype(int), axis=0) for w in multiplicities(resample)]


REFERENCES: dict[str, Callable[[np.ndarray, int], float]] = {
    "po": lambda c, n: percent_agreement(c, n_labels=n).statistic,
    "kappa": lambda c, n: mean_pairwise_kappa(c, n_labels=n).statistic,
    "alpha": lambda c, n: krippendorff_alpha(c, n_labels=n).statistic,
    "ac1": lambda c, n: gwet_ac1(c, n_labels=n).statistic,
}


@PROPERTY
@given(pattern_matrices(), st.integers(0, 2**32))
def test_every_coefficient_reading_one_resample_equals_its_reference_on_the_same_items(
    case: tuple[np.ndarray, int], seed: int
) -> None:
    codes, n_labels = case
    patterns = item_patterns(codes, n_labels)
    resample = ItemResample.draw(patterns.counts, patterns.n_items, 40, seed)
    table = summary_table(codes, n_labels=n_labels, resample=resample)
    matrices = resampled_matrices(codes, n_labels, resample)
    checked = 0
    for key, reference in REFERENCES.items():
        estimate = table[key]
        if not estimate.result.defined or estimate.interval.method != "percentile":
            continue  # BCa intervals add the jackknife, checked in test_bca
        expected = percentile_interval(np.array([reference(m, n_labels) for m in matrices]), 0.95)
        assert estimate.interval.low == pytest.approx(expected.low, abs=1e-12), key
        assert estimate.interval.high == pytest.approx(expected.high, abs=1e-12), key
        checked += 1
    assume(checked > 0)
    # the same call drawing its own resample from a seed reads one resample too: the same numbers
    again = summary_table(codes, n_labels=n_labels, n_resamples=40, rng=seed)
    assert repr({k: e.interval for k, e in again.items()}) == repr({k: e.interval for k, e in table.items()})


@PROPERTY
@given(pattern_matrices(), st.integers(0, 2**32), st.sampled_from(["paired", "ppi"]))
def test_the_validation_reading_one_resample_equals_its_reference_on_the_same_items(
    case: tuple[np.ndarray, int], seed: int, estimator: str
) -> None:
    codes, n_labels = case
    patterns = item_patterns(codes, n_labels)
    humans = list(range(1, codes.shape[1]))
    resample = ItemResample.draw(patterns.counts, patterns.n_items, 40, seed)
    options = {"judge": 0, "humans": humans, "n_labels": n_labels, "estimator": estimator, "primary": 1}
    v = validate_judge(codes, n_resamples=40, resample=resample, **options)
    matrices = resampled_matrices(codes, n_labels, resample)
    replicates = [validate_judge(m, n_resamples=1, rng=0, **options) for m in matrices]
    for k, rater in enumerate(v.raters):
        if rater.ci.method != "percentile":
            continue  # the PPI secondaries' normal intervals do not resample
        expected = percentile_interval(np.array([r.raters[k].d for r in replicates]), 0.95)
        assert [rater.ci.low, rater.ci.high] == pytest.approx([expected.low, expected.high], abs=1e-12, nan_ok=True)
    omegas = np.array([r.omega for r in replicates])
    omegas = omegas[np.isfinite(omegas)]
    if np.isfinite(v.p_opposite):
        flips = np.mean(passes(omegas, v.omega_threshold) != passes(v.omega, v.omega_threshold))
        assert v.p_opposite == pytest.approx(float(flips), abs=1e-12)
    assert repr(validate_judge(codes, n_resamples=40, rng=seed, **options)) == repr(v)


def test_a_resample_of_other_patterns_is_refused() -> None:
    codes = np.array([[0, 0, 1], [1, 1, 1], [0, 1, -1]] * 10)
    other = ItemResample.draw(np.array([10, 20]), 30, 5, 0)
    with pytest.raises(ValueError, match="resample must be drawn over the item patterns"):
        summary_table(codes, n_labels=2, resample=other)
    with pytest.raises(ValueError, match="resample must be drawn over the item patterns"):
        validate_judge(codes, judge=0, humans=[1, 2], n_labels=2, resample=other)


def test_the_ranking_draws_its_own_resample_with_the_item_bootstrap_distribution() -> None:
    """rank_judges draws its resamples over the groups it sums (not over every pattern): its top-1
    probability equals that of an item bootstrap written here (rows drawn with replacement, each
    resampled matrix ranked on its own) within 3 Monte Carlo standard errors; a third of the items
    lack the judges, so the draw must resample all items, not only the compared ones."""
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 2, size=90)
    humans = [np.where(rng.random(90) < 0.85, truth, 1 - truth) for _ in range(3)]
    judges = [np.where(rng.random(90) < p, truth, 1 - truth) for p in (0.8, 0.83)]
    codes = np.column_stack([*humans, *judges])
    codes[60:, 3:] = -1
    options = {"judges": [3, 4], "humans": [0, 1, 2], "n_labels": 2}
    drawn = rank_judges(codes, n_resamples=4000, rng=2, **options)
    boot = np.random.default_rng(5)
    tops = []
    for _ in range(600):
        r = rank_judges(codes[boot.integers(0, 90, size=90)], n_resamples=1, rng=0, **options)
        score = np.array([s.score for s in r.judges])
        top = np.isclose(score, np.nanmax(score), rtol=0, atol=1e-12)
        tops.append(top / top.sum())
    p_ours, p_items = drawn.judges[1].p_top1, float(np.mean(tops, axis=0)[1])
    se = np.sqrt(p_items * (1 - p_items) / 600 + p_ours * (1 - p_ours) / 4000)
    assert 0.1 < p_items < 0.9  # a probability the check can miss
    assert abs(p_ours - p_items) < 3 * se
