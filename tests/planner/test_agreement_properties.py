"""Properties of the agreement coefficients (hypothesis), the item bootstrap, and memory use."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import krippendorff
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from planner import rater_pairs
from planner.agreement import (
    binary_association,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    pabak,
    percent_agreement,
    scott_pi,
)
from planner.agreement_results import AgreementResult
from planner.patterns import item_patterns
from planner.rater_pairs import _held_pair_cells, _rater_pair_cells, mean_pairwise_kappa, pairwise, summary_table
from planner.resampling import ItemResample, distinct_rows, joint_replicates
from planner.tables import agreement_weights, cell_kappas, grouped_count_patterns

PROPERTY = settings(max_examples=60, deadline=None)


@st.composite
def code_matrices(draw: st.DrawFn, *, missing: bool = True, min_raters: int = 2) -> tuple[np.ndarray, int]:
    """A code matrix ``(n_items, n_raters)`` with its ``n_labels``; -1 cells when ``missing``."""
    n_labels = draw(st.integers(2, 5))
    n_items = draw(st.integers(1, 25))
    n_raters = draw(st.integers(min_raters, 5))
    low = -1 if missing else 0
    cells = draw(st.lists(st.integers(low, n_labels - 1), min_size=n_items * n_raters, max_size=n_items * n_raters))
    return np.array(cells, dtype=np.int64).reshape(n_items, n_raters), n_labels


def multi_rater(codes: np.ndarray, n_labels: int) -> dict[str, AgreementResult]:
    return {
        "percent": percent_agreement(codes, n_labels=n_labels),
        "ac1": gwet_ac1(codes, n_labels=n_labels),
        "alpha_nominal": krippendorff_alpha(codes, n_labels=n_labels),
        "alpha_ordinal": krippendorff_alpha(codes, n_labels=n_labels, level_of_measurement="ordinal"),
        "alpha_interval": krippendorff_alpha(codes, n_labels=n_labels, level_of_measurement="interval"),
        "alpha_ratio": krippendorff_alpha(
            codes, n_labels=n_labels, level_of_measurement="ratio", values=np.arange(1.0, n_labels + 1)
        ),
        "mean_kappa": mean_pairwise_kappa(codes, n_labels=n_labels),
        "mean_kappa_quadratic": mean_pairwise_kappa(codes, n_labels=n_labels, weights="quadratic"),
    }


def two_rater(a: np.ndarray, b: np.ndarray, n_labels: int) -> dict[str, AgreementResult]:
    return {
        "kappa": cohen_kappa(a, b, n_labels=n_labels),
        "kappa_linear": cohen_kappa(a, b, n_labels=n_labels, weights="linear"),
        "kappa_quadratic": cohen_kappa(a, b, n_labels=n_labels, weights="quadratic"),
        "scott": scott_pi(a, b, n_labels=n_labels),
        "pabak": pabak(a, b, n_labels=n_labels),
    }


def assert_same(first: dict[str, AgreementResult], second: dict[str, AgreementResult]) -> None:
    for key in first:
        assert first[key].n_items == second[key].n_items, key
        assert first[key].defined == second[key].defined, key
        np.testing.assert_allclose(first[key].statistic, second[key].statistic, rtol=1e-9, atol=1e-12, err_msg=key)


# ---------------------------------------------------------------- symmetry and invariance


@PROPERTY
@given(code_matrices(min_raters=2))
def test_two_rater_coefficients_are_symmetric_in_the_raters(data: tuple[np.ndarray, int]) -> None:
    codes, n_labels = data
    a, b = codes[:, 0], codes[:, 1]
    assert_same(two_rater(a, b, n_labels), two_rater(b, a, n_labels))
    binary_a, binary_b = np.minimum(a, 1), np.minimum(b, 1)
    forward, backward = binary_association(binary_a, binary_b), binary_association(binary_b, binary_a)
    np.testing.assert_allclose(forward.statistic, backward.statistic, rtol=1e-12)
    np.testing.assert_array_equal(
        [forward.positive_rate_a, forward.positive_rate_b], [backward.positive_rate_b, backward.positive_rate_a]
    )


@PROPERTY
@given(code_matrices(), st.randoms(use_true_random=False))
def test_invariant_to_item_and_rater_permutations(data: tuple[np.ndarray, int], random) -> None:  # noqa: ANN001
    codes, n_labels = data
    items = list(range(codes.shape[0]))
    raters = list(range(codes.shape[1]))
    random.shuffle(items)
    random.shuffle(raters)
    assert_same(multi_rater(codes, n_labels), multi_rater(codes[items][:, raters], n_labels))
    shuffled = pairwise(codes[:, raters], n_labels=n_labels)
    original = pairwise(codes, n_labels=n_labels)
    np.testing.assert_array_equal(shuffled.n_items, original.n_items[np.ix_(raters, raters)])
    np.testing.assert_allclose(shuffled.statistic, original.statistic[np.ix_(raters, raters)], rtol=1e-12)


@PROPERTY
@given(code_matrices(), st.integers(0, 4), st.integers(0, 2))
def test_missing_padding_changes_nothing(data: tuple[np.ndarray, int], extra_items: int, extra_raters: int) -> None:
    """Sparse form = dense form: unlabeled items and raters who labeled nothing do not count."""
    codes, n_labels = data
    padded = np.full((codes.shape[0] + extra_items, codes.shape[1] + extra_raters), -1)
    padded[: codes.shape[0], : codes.shape[1]] = codes
    assert_same(multi_rater(codes, n_labels), multi_rater(padded, n_labels))


@PROPERTY
@given(code_matrices(missing=False))
def test_dense_matrices_reduce_to_the_textbook_forms(data: tuple[np.ndarray, int]) -> None:
    codes, n_labels = data
    counts = np.stack([np.bincount(row, minlength=n_labels) for row in codes])
    fleiss = fleiss_kappa(codes, n_labels=n_labels)
    if fleiss.defined:
        assert fleiss.statistic == pytest.approx(sm_fleiss_kappa(counts), rel=1e-9, abs=1e-12)
    alpha = krippendorff_alpha(codes, n_labels=n_labels)
    if alpha.defined:
        expected = krippendorff.alpha(
            codes.T.astype(float), level_of_measurement="nominal", value_domain=np.arange(n_labels)
        )
        assert alpha.statistic == pytest.approx(expected, rel=1e-9, abs=1e-12)
    share = np.mean([np.sum(c * (c - 1)) / (codes.shape[1] * (codes.shape[1] - 1)) for c in counts])
    assert percent_agreement(codes, n_labels=n_labels).statistic == pytest.approx(share)


# ---------------------------------------------------------------- bounds and undefined cases


@PROPERTY
@given(code_matrices())
def test_bounds_and_undefined_is_nan_with_a_reason(data: tuple[np.ndarray, int]) -> None:
    codes, n_labels = data
    results = {**multi_rater(codes, n_labels), **two_rater(codes[:, 0], codes[:, 1], n_labels)}
    for key, result in results.items():
        assert np.isnan(result.statistic) == (not result.defined), key
        assert bool(result.reason) == (not result.defined), key
        if result.defined:
            assert result.statistic <= 1.0 + 1e-12, key
    assert -1.0 - 1e-12 <= results["pabak"].statistic <= 1.0 + 1e-12 or not results["pabak"].defined
    assert 0.0 <= results["percent"].statistic <= 1.0 or not results["percent"].defined
    phi = binary_association(np.minimum(codes[:, 0], 1), np.minimum(codes[:, 1], 1))
    assert not phi.defined or -1.0 - 1e-12 <= phi.statistic <= 1.0 + 1e-12


@PROPERTY
@given(code_matrices(missing=False), st.integers(0, 4))
def test_a_constant_rater_makes_kappa_undefined_never_zero(data: tuple[np.ndarray, int], label: int) -> None:
    codes, n_labels = data
    constant = np.full(codes.shape[0], label % n_labels)
    for weights in (None, "linear", "quadratic"):
        result = cohen_kappa(codes[:, 0], constant, n_labels=n_labels, weights=weights)
        assert not result.defined and np.isnan(result.statistic) and "single category" in result.reason


@PROPERTY
@given(code_matrices())
def test_no_pairable_item_is_detected(data: tuple[np.ndarray, int]) -> None:
    codes, n_labels = data
    single = np.full_like(codes, -1)
    single[np.arange(codes.shape[0]), np.arange(codes.shape[0]) % codes.shape[1]] = np.maximum(codes[:, 0], 0)
    for key, result in multi_rater(single, n_labels).items():
        assert not result.defined and np.isnan(result.statistic), key
        assert result.n_items == (codes.shape[0] if key == "ac1" else 0), key  # AC1 counts rated items


# ---------------------------------------------------------------- the item bootstrap


def naive_item_bootstrap(
    codes: np.ndarray, statistic: Callable[[np.ndarray], float], n_resamples: int, seed: int
) -> np.ndarray:
    """Resample whole rows with replacement, one replicate at a time (the textbook loop)."""
    rng = np.random.default_rng(seed)
    return np.array([statistic(codes[rng.integers(0, len(codes), len(codes))]) for _ in range(n_resamples)])


@pytest.mark.parametrize(
    "coefficient",
    [
        lambda c: krippendorff_alpha(c, n_labels=3),
        lambda c: krippendorff_alpha(c, n_labels=3, level_of_measurement="ordinal"),
        lambda c: gwet_ac1(c, n_labels=3),
        lambda c: mean_pairwise_kappa(c, n_labels=3),
        lambda c: percent_agreement(c, n_labels=3),
    ],
)
def test_pattern_bootstrap_is_the_item_bootstrap(coefficient: Callable[[np.ndarray], AgreementResult]) -> None:
    rng = np.random.default_rng(31)
    truth = rng.integers(0, 3, 60)
    codes = np.where(rng.random((60, 4)) < 0.7, truth[:, None], rng.integers(0, 3, (60, 4)))
    codes[:, 2:][rng.random((60, 2)) < 0.5] = -1  # every item keeps >= 2 ratings
    naive = naive_item_bootstrap(codes, lambda c: coefficient(c).statistic, 1500, seed=5)
    naive = naive[np.isfinite(naive)]
    ours = coefficient(codes).confidence_interval(0.9, method="percentile", n_resamples=3000, rng=7)
    low, high = np.quantile(naive, [0.05, 0.95])
    spread = high - low
    assert ours.low == pytest.approx(low, abs=0.08 * spread)
    assert ours.high == pytest.approx(high, abs=0.08 * spread)


def test_bootstrap_reproducible_and_accepts_generators() -> None:
    codes = np.array([[0, 0, 1], [1, 1, 1], [2, 2, 1], [0, 1, -1], [2, 2, 2], [1, 1, 0]] * 5)
    result = krippendorff_alpha(codes, n_labels=3)
    first = result.confidence_interval(n_resamples=200, rng=11)
    assert first == result.confidence_interval(n_resamples=200, rng=11)
    assert first == result.confidence_interval(n_resamples=200, rng=np.random.default_rng(11))
    assert first.low <= result.statistic <= first.high
    narrow = result.confidence_interval(0.5, n_resamples=200, rng=11)
    assert first.low <= narrow.low <= narrow.high <= first.high


def test_bootstrap_chunks_give_the_same_replicates_as_one_block(monkeypatch: pytest.MonkeyPatch) -> None:
    import planner.rater_pairs as rater_pairs
    import planner.resampling as resampling

    rng = np.random.default_rng(2)
    codes = rng.integers(-1, 4, size=(300, 5))
    result = rater_pairs.mean_pairwise_kappa(codes, n_labels=4)
    whole = result.confidence_interval(n_resamples=64, rng=3)
    monkeypatch.setattr(resampling, "_CHUNK_CELLS", 1)  # one resample per block
    assert result.confidence_interval(n_resamples=64, rng=3) == whole


# ---------------------------------------------------------------- memory


def many_labels() -> tuple[np.ndarray, int]:
    """6,000 items, 16 raters (14 label 10% each), 40 labels: n x L x L would be 77 MB."""
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 40, size=(6_000, 16))
    codes[:, 2:][rng.random((6_000, 14)) < 0.9] = -1
    return codes, 40


def many_raters() -> tuple[np.ndarray, int]:
    """6,000 items, 30 raters all labeling, 3 labels: n x R x R would be 43 MB."""
    return np.random.default_rng(1).integers(0, 3, size=(6_000, 30)), 3


@pytest.mark.parametrize("matrix", [many_labels, many_raters])
@pytest.mark.parametrize(
    "call",
    [
        lambda c, n: krippendorff_alpha(c, n_labels=n).confidence_interval(n_resamples=20, rng=0),
        lambda c, n: krippendorff_alpha(c, n_labels=n, level_of_measurement="ordinal").confidence_interval(
            n_resamples=20, rng=0
        ),
        lambda c, n: gwet_ac1(c, n_labels=n).confidence_interval(n_resamples=20, rng=0),
        lambda c, n: pairwise(c, n_labels=n),
        lambda c, n: mean_pairwise_kappa(c, n_labels=n).confidence_interval(n_resamples=20, rng=0),
        lambda c, n: summary_table(c, n_labels=n, n_resamples=20, rng=0),
    ],
)
def test_peak_memory_stays_far_below_an_items_by_labels_or_raters_squared_array(
    matrix: Callable[[], tuple[np.ndarray, int]], call: Callable[[np.ndarray, int], object]
) -> None:
    """No array of size n x L x L or n x R x R: peak memory is under a quarter of the larger."""
    codes, n_labels = matrix()
    n_items, n_raters = codes.shape
    forbidden = max(n_items * n_labels * n_labels, n_items * n_raters * n_raters) * 8
    tracemalloc.start()
    call(codes, n_labels)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < forbidden / 4, (peak, forbidden)


@PROPERTY
@given(
    st.integers(2, 5),
    st.sampled_from([None, "linear", "quadratic"]),
    st.lists(st.lists(st.integers(0, 30), min_size=25, max_size=25), min_size=1, max_size=20),
)
def test_cell_kappas_equal_cohen_kappa_of_each_table(
    n_labels: int, weights: str | None, cell_rows: list[list[int]]
) -> None:
    """The mean pairwise kappa's fast kappa (from cell counts by small products) is sklearn's
    weighted kappa of each table written out as label pairs, NaN exactly where kappa is undefined
    (an empty table, or a rater with one category)."""
    cells = np.array(cell_rows, dtype=float)[:, : n_labels**2]
    cells[::3, n_labels:] = 0  # every third table: the first rater uses one category only
    ours = cell_kappas(cells, agreement_weights(n_labels, weights))
    for row, kappa in zip(cells.astype(int), ours, strict=True):
        table = row.reshape(n_labels, n_labels)
        a, b = np.repeat(np.indices(table.shape).reshape(2, -1), row, axis=1)
        if len(set(a.tolist())) < 2 or len(set(b.tolist())) < 2:
            assert np.isnan(kappa)
            continue
        theirs = cohen_kappa_score(a, b, labels=list(range(n_labels)), weights=weights)
        assert kappa == pytest.approx(theirs, abs=1e-12)


@PROPERTY
@given(code_matrices())
def test_the_held_pair_cells_are_every_raters_pair_cells_stacked(case: tuple[np.ndarray, int]) -> None:
    """The one-pass build of the mean pairwise kappa's sparse pair cells equals each rater's own
    cells (the per-rater build that ``pairwise`` uses) stacked in rater order, entry for entry."""
    from scipy.sparse import vstack

    codes, n_labels = case
    rows, _ = distinct_rows(codes, n_labels)
    held = _held_pair_cells(rows, n_labels)
    assume(held is not None)
    stacked = vstack([_rater_pair_cells(rows, n_labels, j) for j in range(rows.shape[1] - 1)], format="csc")
    assert held.shape == stacked.shape
    assert (held != stacked).nnz == 0


@PROPERTY
@given(code_matrices(), st.sampled_from(["nominal", "ordinal", "interval"]))
@example(  # replicates equal to the estimate but for the order of a sum: the BCa ties must hold in both
    (np.array([[2, 0], *[[0, 0]] * 10, [0, 1], [0, 1]]), 4), "interval"
)
def test_summary_table_reads_each_figure_as_its_own_reader_would(case: tuple[np.ndarray, int], scale: str) -> None:
    """summary_table's one sparse product of the pair cells and count patterns gives each figure the
    interval that the figure's own reader of the same resample gives (count patterns merged row by
    row, pair tables from their own product)."""
    codes, n_labels = case
    kept, rater_pairs._STACKED_ROWS = rater_pairs._STACKED_ROWS, 0  # the stacked product at any size
    try:
        patterns = item_patterns(codes, n_labels)
        resample = ItemResample.draw(patterns.counts, patterns.n_items, 60, 3)
        table = summary_table(codes, n_labels=n_labels, scale=scale, resample=resample, confidence_level=0.9)  # type: ignore[arg-type]
        _, frequency, to_counts = grouped_count_patterns(patterns.rows, n_labels, patterns.counts)
        for key, estimate in table.items():
            result = estimate.result
            view = resample if key == "kappa" else resample.merged(to_counts, frequency.size)
            alone = joint_replicates([result._resampling.reader(view)])[0] if result.defined else np.zeros(0)
            interval = result._interval(0.9, "bootstrap", lambda alone=alone: alone)
            np.testing.assert_allclose(
                [estimate.interval.low, estimate.interval.high],
                [interval.low, interval.high],
                rtol=1e-12,
                atol=1e-12,
                err_msg=key,
            )
    finally:
        rater_pairs._STACKED_ROWS = kept


@PROPERTY
@given(code_matrices(), st.lists(st.integers(1, 4), min_size=25, max_size=25))
def test_grouped_count_patterns_group_rows_by_label_counts(case: tuple[np.ndarray, int], weights: list[int]) -> None:
    """Each row's group holds that row's count of every label (counted here in Python), and a
    group's frequency is the items of its rows."""
    codes, n_labels = case
    counts = np.array(weights[: codes.shape[0]])
    distinct, frequency, groups = grouped_count_patterns(codes, n_labels, counts)
    for row, group in zip(codes.tolist(), groups.tolist(), strict=True):
        assert distinct[group].tolist() == [row.count(label) for label in range(n_labels)]
    assert frequency.tolist() == [int(counts[groups == g].sum()) for g in range(distinct.shape[0])]
