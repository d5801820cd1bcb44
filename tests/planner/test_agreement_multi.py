"""Multi-rater coefficients: docs/method.md §2 examples, published values, cross-checks, pairwise, summary."""

from __future__ import annotations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from planner.agreement import (
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    krippendorff_alpha,
    pabak,
    percent_agreement,
    scott_pi,
)
from planner.rater_pairs import mean_pairwise_kappa, pairwise, summary_table

# docs/method.md §2: three raters, four items (1,1,1), (1,2,.), (2,2,2), (1,2,2); codes 0 = "1".
SPEC_THREE = np.array([[0, 0, 0], [0, 1, -1], [1, 1, 1], [0, 1, 1]])
SPEC_THREE_RESTORED = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1], [0, 1, 1]])

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 coders x 12 units,
# values 1..5, None = missing. Published: nominal .743, ordinal .815, interval .849, ratio .797.
KRIPPENDORFF_2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]

# Fleiss (1971): 30 patients, 6 psychiatrists each, 5 diagnoses (the table also ships as R
# irr::diagnoses); published kappa .430 (irr: 0.4302445). Rows: ratings 1..5 per patient.
FLEISS_1971 = [
    [4, 4, 4, 4, 4, 4],
    [2, 2, 2, 5, 5, 5],
    [2, 3, 3, 3, 3, 5],
    [5, 5, 5, 5, 5, 5],
    [2, 2, 2, 4, 4, 4],
    [1, 1, 3, 3, 3, 3],
    [3, 3, 3, 3, 5, 5],
    [1, 1, 3, 3, 3, 4],
    [1, 1, 4, 4, 4, 4],
    [5, 5, 5, 5, 5, 5],
    [1, 4, 4, 4, 4, 4],
    [1, 2, 4, 4, 4, 4],
    [2, 2, 2, 3, 3, 3],
    [1, 4, 4, 4, 4, 4],
    [2, 2, 4, 4, 4, 5],
    [3, 3, 3, 3, 3, 5],
    [1, 1, 1, 4, 5, 5],
    [1, 1, 1, 1, 1, 2],
    [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 5, 5, 5],
    [5, 5, 5, 5, 5, 5],
    [2, 4, 4, 4, 4, 4],
    [2, 2, 4, 5, 5, 5],
    [1, 1, 4, 4, 4, 4],
    [1, 4, 4, 4, 4, 5],
    [2, 2, 2, 2, 2, 4],
    [1, 1, 1, 1, 5, 5],
    [2, 2, 4, 4, 4, 4],
    [1, 3, 3, 3, 3, 3],
    [5, 5, 5, 5, 5, 5],
]


def krippendorff_codes() -> np.ndarray:
    """The 2011 example as codes ``(units, coders)``: value v -> code v - 1, missing -> -1."""
    return np.array([[-1 if v is None else v - 1 for v in coder] for coder in KRIPPENDORFF_2011]).T


def random_sparse(rng: np.random.Generator, n_items: int, n_raters: int, n_labels: int, missing: float) -> np.ndarray:
    """Noisy raters around a latent label, with cells missing at random."""
    truth = rng.integers(0, n_labels, size=n_items)
    codes = np.where(
        rng.random((n_items, n_raters)) < 0.6, truth[:, None], rng.integers(0, n_labels, (n_items, n_raters))
    )
    codes[rng.random((n_items, n_raters)) < missing] = -1
    return codes


def as_reliability_data(codes: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
    """``krippendorff`` layout: ``(coders, units)`` floats with NaN for missing."""
    numbers = codes.astype(float) if values is None else values[np.maximum(codes, 0)]
    return np.where(codes < 0, np.nan, numbers).T


def per_item_ac1_by_hand(codes: np.ndarray, n_labels: int) -> float:
    """Gwet's multi-rater AC1 with missing ratings, item by item (docs/method.md §2), for cross-checking."""
    agreements, shares = [], []
    for row in codes:
        ratings = row[row >= 0]
        if ratings.size == 0:
            continue
        counts = np.bincount(ratings, minlength=n_labels)
        shares.append(counts / ratings.size)
        if ratings.size >= 2:
            agreements.append(np.sum(counts * (counts - 1)) / (ratings.size * (ratings.size - 1)))
    p_o = np.mean(agreements)
    pbar = np.mean(shares, axis=0)
    p_e = np.sum(pbar * (1 - pbar)) / (n_labels - 1)
    return (p_o - p_e) / (1 - p_e)


# ---------------------------------------------------------------- docs/method.md worked examples


def test_spec_three_raters_with_a_missing_rating() -> None:
    assert krippendorff_alpha(SPEC_THREE, n_labels=2).statistic == pytest.approx(1 / 3)
    assert percent_agreement(SPEC_THREE).statistic == pytest.approx(7 / 12)
    # Hand: p_o = 7/12, pbar = (11/24, 13/24), p_e = 143/288, AC1 = 25/145 = 5/29.
    assert gwet_ac1(SPEC_THREE, n_labels=2).statistic == pytest.approx(5 / 29)
    alpha = krippendorff_alpha(SPEC_THREE, n_labels=2)
    assert (alpha.n_items, alpha.n_values) == (4, 11)
    assert alpha.d_o == pytest.approx(4 / 11)


def test_spec_three_raters_restored() -> None:
    assert fleiss_kappa(SPEC_THREE_RESTORED, n_labels=2).statistic == pytest.approx(1 / 3)
    assert krippendorff_alpha(SPEC_THREE_RESTORED, n_labels=2).statistic == pytest.approx(7 / 18)
    fleiss = fleiss_kappa(SPEC_THREE_RESTORED, n_labels=2)
    assert (fleiss.p_o, fleiss.p_e) == (pytest.approx(2 / 3), pytest.approx(1 / 2))


# ---------------------------------------------------------------- published values


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_krippendorff_2011_published_example(level: str, published: float) -> None:
    codes = krippendorff_codes()
    values = np.arange(1.0, 6.0) if level in ("interval", "ratio") else None
    result = krippendorff_alpha(codes, n_labels=5, level_of_measurement=level, values=values)
    assert round(result.statistic, 3) == published
    assert result.n_items == 11  # unit 12 has a single value and is dropped
    theirs = krippendorff.alpha(
        as_reliability_data(codes, np.arange(1.0, 6.0)), level_of_measurement=level, value_domain=np.arange(1.0, 6.0)
    )
    assert result.statistic == pytest.approx(theirs, rel=1e-12)


def test_fleiss_1971_published_example() -> None:
    codes = np.array(FLEISS_1971) - 1
    result = fleiss_kappa(codes, n_labels=5)
    assert round(result.statistic, 3) == 0.430
    assert result.statistic == pytest.approx(0.4302445, abs=5e-8)
    assert result.n_items == 30


# ---------------------------------------------------------------- cross-checks on random sparse data


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_alpha_matches_krippendorff_package_on_sparse_matrices(level: str) -> None:
    rng = np.random.default_rng(21)
    for _ in range(25):
        n_labels = int(rng.integers(2, 7))
        codes = random_sparse(rng, int(rng.integers(5, 60)), int(rng.integers(2, 7)), n_labels, 0.4)
        values = np.sort(rng.uniform(0.5, 10.0, n_labels)) if level in ("interval", "ratio") else None
        ours = krippendorff_alpha(codes, n_labels=n_labels, level_of_measurement=level, values=values)
        domain = values if values is not None else np.arange(n_labels, dtype=float)
        if not ours.defined:
            continue
        theirs = krippendorff.alpha(as_reliability_data(codes, values), level_of_measurement=level, value_domain=domain)
        assert ours.statistic == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_fleiss_matches_statsmodels_with_varying_raters_per_item() -> None:
    rng = np.random.default_rng(4)
    for _ in range(25):
        n_labels, n_raters, per_item = int(rng.integers(2, 6)), 8, int(rng.integers(2, 6))
        codes = random_sparse(rng, 40, n_raters, n_labels, 0.0)
        for row in codes:  # each item rated by a random subset of per_item raters
            row[rng.permutation(n_raters)[per_item:]] = -1
        counts = np.stack([np.bincount(row[row >= 0], minlength=n_labels) for row in codes])
        assert fleiss_kappa(codes, n_labels=n_labels).statistic == pytest.approx(sm_fleiss_kappa(counts), rel=1e-10)


def test_ac1_matches_item_by_item_formula_on_sparse_matrices() -> None:
    rng = np.random.default_rng(8)
    for _ in range(25):
        n_labels = int(rng.integers(2, 6))
        codes = random_sparse(rng, 50, int(rng.integers(2, 6)), n_labels, 0.4)
        if not np.any((codes >= 0).sum(axis=1) >= 2):
            continue
        assert gwet_ac1(codes, n_labels=n_labels).statistic == pytest.approx(
            per_item_ac1_by_hand(codes, n_labels), rel=1e-10
        )


def test_two_rater_forms_agree_with_multi_rater_forms() -> None:
    rng = np.random.default_rng(12)
    for _ in range(20):
        n_labels = int(rng.integers(2, 6))
        codes = random_sparse(rng, 60, 2, n_labels, 0.3)
        a, b = codes.T
        common = (a >= 0) & (b >= 0)
        assert percent_agreement(codes).statistic == pytest.approx(np.mean(a[common] == b[common]))
        pair = pairwise(codes, n_labels=n_labels, coefficient="percent_agreement")
        assert pair.statistic[0, 1] == pytest.approx(np.mean(a[common] == b[common]))
        pooled = np.bincount(np.concatenate([a[common], b[common]]), minlength=n_labels) / (2 * common.sum())
        p_e = np.sum(pooled * (1 - pooled)) / (n_labels - 1)
        p_o = np.mean(a[common] == b[common])
        assert gwet_ac1(codes[common], n_labels=n_labels).statistic == pytest.approx((p_o - p_e) / (1 - p_e))


# ---------------------------------------------------------------- pairwise and the mean kappa


def test_pairwise_matrix_matches_per_pair_functions() -> None:
    rng = np.random.default_rng(3)
    codes = random_sparse(rng, 80, 5, 4, 0.5)
    for coefficient, single in (("cohen_kappa", cohen_kappa), ("scott_pi", scott_pi), ("pabak", pabak)):
        result = pairwise(codes, n_labels=4, coefficient=coefficient)
        for j in range(5):
            assert result.n_items[j, j] == np.sum(codes[:, j] >= 0)
            assert not result.defined[j, j] and np.isnan(result.statistic[j, j])
            for k in range(j + 1, 5):
                expected = single(codes[:, j], codes[:, k], n_labels=4)
                assert result.n_items[j, k] == result.n_items[k, j] == expected.n_items
                np.testing.assert_allclose(result.statistic[[j, k], [k, j]], expected.statistic, rtol=1e-12)
                assert result.results[(j, k)].reason == expected.reason == result.reason[k, j]


def test_pairwise_weighted_kappa_matches_sklearn() -> None:
    rng = np.random.default_rng(13)
    codes = random_sparse(rng, 200, 4, 5, 0.3)
    result = pairwise(codes, n_labels=5, weights="quadratic")
    for (j, k), pair in result.results.items():
        common = (codes[:, j] >= 0) & (codes[:, k] >= 0)
        expected = cohen_kappa_score(codes[common, j], codes[common, k], labels=range(5), weights="quadratic")
        assert pair.statistic == pytest.approx(expected, rel=1e-10)
    intervals = result.confidence_interval(method="delta")
    assert set(intervals) == set(result.results)
    assert all(ci.low < result.results[pair].statistic < ci.high for pair, ci in intervals.items())


def test_mean_pairwise_kappa_is_overlap_weighted_over_defined_pairs() -> None:
    rng = np.random.default_rng(17)
    codes = random_sparse(rng, 120, 5, 3, 0.6)
    codes[:, 4] = np.where(codes[:, 4] >= 0, 2, -1)  # a constant rater: its pairs are undefined
    pairs = pairwise(codes, n_labels=3)
    usable = [r for r in pairs.results.values() if r.defined]
    expected = sum(r.statistic * r.n_items for r in usable) / sum(r.n_items for r in usable)
    result = mean_pairwise_kappa(codes, n_labels=3)
    assert result.statistic == pytest.approx(expected, rel=1e-12)
    assert result.n_pairs == len(usable) == 6
    assert result.n_items == np.sum((codes >= 0).sum(axis=1) >= 2)


def test_mean_pairwise_kappa_undefined_cases() -> None:
    apart = np.array([[0, -1], [-1, 1], [1, -1]])
    result = mean_pairwise_kappa(apart, n_labels=2)
    assert not result.defined and np.isnan(result.statistic) and "no two raters" in result.reason
    constant = np.array([[0, 0], [0, 1], [0, 1]])
    result = mean_pairwise_kappa(constant, n_labels=2)
    assert not result.defined and "no rater pair has a defined kappa" in result.reason
    assert np.isnan(result.confidence_interval().low)


# ---------------------------------------------------------------- summary table


@pytest.mark.parametrize(("scale", "weights"), [("nominal", None), ("ordinal", "linear"), ("interval", "quadratic")])
def test_summary_table_matches_the_individual_functions(scale: str, weights: str | None) -> None:
    rng = np.random.default_rng(23)
    codes = random_sparse(rng, 150, 4, 4, 0.4)
    values = np.array([0.0, 1.0, 2.5, 5.0]) if scale == "interval" else None
    table = summary_table(codes, n_labels=4, scale=scale, values=values, n_resamples=300, rng=1)
    assert list(table) == ["po", "kappa", "alpha", "ac1"]
    assert table["po"].result.statistic == percent_agreement(codes, n_labels=4).statistic
    assert table["kappa"].result.statistic == pytest.approx(
        mean_pairwise_kappa(codes, n_labels=4, weights=weights).statistic
    )
    assert table["alpha"].result.statistic == pytest.approx(
        krippendorff_alpha(codes, n_labels=4, level_of_measurement=scale, values=values).statistic
    )
    assert table["ac1"].result.statistic == pytest.approx(gwet_ac1(codes, n_labels=4).statistic)
    for estimate in table.values():
        assert estimate.interval.method == ("bca" if estimate.interval.approximate else "percentile")
        assert estimate.interval.low < estimate.result.statistic < estimate.interval.high
        as_dict = estimate.as_dict()
        assert as_dict["statistic"] == estimate.result.statistic and as_dict["defined"] is True
    assert table == summary_table(codes, n_labels=4, scale=scale, values=values, n_resamples=300, rng=1)


def test_summary_table_reports_undefined_figures_with_empty_intervals() -> None:
    table = summary_table(np.array([[1, 1], [1, 1], [1, -1]]), n_labels=3, n_resamples=50, rng=0)
    assert table["po"].result.statistic == 1.0 and table["ac1"].result.defined
    for key in ("kappa", "alpha"):
        assert table[key].as_dict()["statistic"] is None
        assert table[key].as_dict()["interval"] == [None, None]
        assert table[key].result.reason


# ---------------------------------------------------------------- undefined cases and validation


def test_no_pairable_item_is_undefined_everywhere() -> None:
    codes = np.array([[0, -1, -1], [-1, 1, -1], [-1, -1, 2]])
    for result in (
        percent_agreement(codes, n_labels=3),
        gwet_ac1(codes, n_labels=3),
        krippendorff_alpha(codes, n_labels=3),
        mean_pairwise_kappa(codes, n_labels=3),
    ):
        assert not result.defined and np.isnan(result.statistic) and result.reason
        assert np.isnan(result.confidence_interval(n_resamples=10).low)


def test_single_valued_data_leaves_alpha_and_fleiss_undefined_but_ac1_at_one() -> None:
    codes = np.array([[2, 2, 2], [2, 2, -1], [2, 2, 2]])
    alpha = krippendorff_alpha(codes, n_labels=3)
    assert not alpha.defined and "D_e is 0" in alpha.reason
    fleiss = fleiss_kappa(codes[[0, 2]], n_labels=3)
    assert not fleiss.defined and "one category" in fleiss.reason
    assert gwet_ac1(codes, n_labels=3).statistic == 1.0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fleiss_kappa(SPEC_THREE, n_labels=2), "same number of ratings on every rated item; found 2 to 3"),
        (lambda: fleiss_kappa([[0, -1], [1, -1]], n_labels=2), "at least 2 ratings per item"),
        (
            lambda: krippendorff_alpha(SPEC_THREE, n_labels=2, level_of_measurement="ratios"),
            "level_of_measurement must be 'nominal'",
        ),
        (lambda: krippendorff_alpha(SPEC_THREE, n_labels=2, values=[0, 1]), "values= applies to level"),
        (
            lambda: krippendorff_alpha(SPEC_THREE, n_labels=2, level_of_measurement="interval", values=[0, 1, 2]),
            "values must be 2 finite",
        ),
        (
            lambda: krippendorff_alpha(SPEC_THREE, n_labels=2, level_of_measurement="ratio", values=[-1, 1]),
            "ratio values must be non-negative",
        ),
        (lambda: gwet_ac1([0, 1, 1], n_labels=2), "codes must have 2 dimension"),
        (lambda: gwet_ac1(SPEC_THREE, n_labels=1), "n_labels must be an integer >= 2"),
        (lambda: pairwise(SPEC_THREE, n_labels=2, coefficient="alpha"), "coefficient must be one of"),
        (lambda: pairwise(SPEC_THREE, n_labels=2, coefficient="pabak", weights="linear"), "weights= applies to"),
        (
            lambda: summary_table(SPEC_THREE, n_labels=2, scale="ratio"),
            "scale must be 'nominal', 'ordinal' or 'interval'",
        ),
        (lambda: summary_table(SPEC_THREE, n_labels=2, n_resamples=0), "n_resamples must be a positive integer"),
        (
            lambda: krippendorff_alpha(SPEC_THREE, n_labels=2).confidence_interval(method="delta"),
            "no analytic variance",
        ),
        (lambda: krippendorff_alpha(SPEC_THREE, n_labels=2).confidence_interval(method="exact"), "method must be"),
    ],
)
def test_validation_messages(call, message: str) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match=message):
        call()
