"""Two-rater coefficients (kappa, Scott's pi, PABAK, phi): docs/method.md §2 examples and cross-checks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, norm, pearsonr, spearmanr
from sklearn.metrics import cohen_kappa_score, matthews_corrcoef
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from planner.agreement import binary_association, cohen_kappa, gwet_ac1, kappa_from_table, pabak, scott_pi

SPEC_3X3 = np.array([[20, 5, 1], [6, 30, 7], [2, 8, 21]])


def fce_variance_by_hand(table: np.ndarray) -> float:
    """docs/method.md §2 unweighted FCE variance, cell by cell (independent of the vectorised code)."""
    n = table.sum()
    p = table / n
    size = len(p)
    row = [sum(p[a, b] for b in range(size)) for a in range(size)]
    col = [sum(p[a, b] for a in range(size)) for b in range(size)]
    p_o = sum(p[a, a] for a in range(size))
    p_e = sum(row[a] * col[a] for a in range(size))
    g = [
        [(1.0 if a == b else 0.0) * (1 - p_e) - (col[a] + row[b]) * (1 - p_o) for b in range(size)] for a in range(size)
    ]
    first = sum(p[a, b] * g[a][b] ** 2 for a in range(size) for b in range(size))
    second = sum(p[a, b] * g[a][b] for a in range(size) for b in range(size)) ** 2
    return (first - second) / (n * (1 - p_e) ** 4)


def test_spec_2x2_kappa_paradox_from_proportions() -> None:
    r = kappa_from_table([[0.91, 0.04], [0.04, 0.01]], n_items=100)
    assert r.p_o == pytest.approx(0.92)
    assert r.p_e == pytest.approx(0.905)
    assert r.statistic == pytest.approx(0.015 / 0.095)
    assert round(r.statistic, 3) == 0.158
    assert r.n_items == 100 and r.defined and r.reason == ""


def test_spec_3x3_ordinal_table() -> None:
    plain = kappa_from_table(SPEC_3X3)
    assert plain.p_o == pytest.approx(0.71)
    assert plain.p_e == pytest.approx(0.3476)
    assert plain.statistic == pytest.approx(0.5555, abs=5e-5)
    assert kappa_from_table(SPEC_3X3, weights="quadratic").statistic == pytest.approx(0.6664, abs=5e-5)
    assert kappa_from_table(SPEC_3X3, weights="linear").statistic == pytest.approx(0.6072, abs=5e-5)


@pytest.mark.parametrize(("weights", "expected"), [(None, -3 / 13), ("linear", 1 / 3), ("quadratic", 5 / 7)])
def test_spec_shifted_ordinal_example(weights: str | None, expected: float) -> None:
    y = np.array([1, 2, 3, 4]) - 1
    yhat = np.array([2, 3, 4, 5]) - 1
    assert cohen_kappa(y, yhat, n_labels=5, weights=weights).statistic == pytest.approx(expected)


def test_fce_variance_matches_spec_formula_by_hand() -> None:
    for table in (SPEC_3X3, np.array([[91, 4], [4, 1]]), np.array([[10, 3, 0], [2, 8, 4], [1, 1, 9]])):
        r = kappa_from_table(table)
        assert r.variance == pytest.approx(fce_variance_by_hand(table), rel=1e-10)
        assert r.standard_error == pytest.approx(np.sqrt(r.variance))


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_statistic_and_variance_match_statsmodels(weights: str | None) -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        size = int(rng.integers(2, 6))
        table = rng.integers(0, 30, size=(size, size)) + np.eye(size, dtype=int) * 20
        ours = kappa_from_table(table, weights=weights)
        theirs = sm_cohens_kappa(table, wt=weights)
        assert ours.statistic == pytest.approx(theirs.kappa, rel=1e-10)
        assert ours.variance == pytest.approx(theirs.var_kappa, rel=1e-8)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_sklearn_on_sparse_pairs(weights: str | None) -> None:
    rng = np.random.default_rng(11)
    for _ in range(30):
        n_labels = int(rng.integers(2, 6))
        a = rng.integers(0, n_labels, size=60)
        b = np.where(rng.random(60) < 0.6, a, rng.integers(0, n_labels, size=60))
        a[rng.random(60) < 0.2] = -1
        b[rng.random(60) < 0.2] = -1
        common = (a >= 0) & (b >= 0)
        ours = cohen_kappa(a, b, n_labels=n_labels, weights=weights)
        assert ours.n_items == common.sum()
        if not ours.defined:
            continue
        theirs = cohen_kappa_score(a[common], b[common], labels=np.arange(n_labels), weights=weights)
        assert ours.statistic == pytest.approx(theirs, rel=1e-9, abs=1e-12)


def test_delta_interval_is_statistic_plus_minus_z_se() -> None:
    r = kappa_from_table(SPEC_3X3)
    ci = r.confidence_interval(0.9)
    z = norm.ppf(0.95)
    assert ci.low == pytest.approx(r.statistic - z * r.standard_error)
    assert ci.high == pytest.approx(r.statistic + z * r.standard_error)


def test_bootstrap_interval_on_table_is_reproducible_and_close_to_delta() -> None:
    r = kappa_from_table(SPEC_3X3)
    boot = r.confidence_interval(method="bootstrap", n_resamples=4000, rng=3)
    assert boot == r.confidence_interval(method="bootstrap", n_resamples=4000, rng=3)
    delta = r.confidence_interval()
    assert boot.low < r.statistic < boot.high
    assert boot.low == pytest.approx(delta.low, abs=0.02)
    assert boot.high == pytest.approx(delta.high, abs=0.02)


def test_bootstrap_from_proportions_uses_n_items() -> None:
    small = kappa_from_table(SPEC_3X3 / 100, n_items=100)
    large = kappa_from_table(SPEC_3X3 / 100, n_items=10_000)
    width = [
        (ci.high - ci.low)
        for ci in (
            small.confidence_interval(method="bootstrap", n_resamples=500, rng=0),
            large.confidence_interval(method="bootstrap", n_resamples=500, rng=0),
        )
    ]
    assert width[1] < width[0] / 5
    assert large.standard_error == pytest.approx(small.standard_error / 10)


@pytest.mark.parametrize(
    ("table", "reason"),
    [
        ([[0, 0], [0, 0]], "no item labeled by both raters"),
        ([[5, 2], [0, 0]], "rater 1 used a single category"),
        ([[5, 0], [3, 0]], "rater 2 used a single category"),
        ([[7, 0], [0, 0]], "rater 1 used a single category"),
    ],
)
def test_undefined_tables(table: list[list[int]], reason: str) -> None:
    r = kappa_from_table(table)
    assert not r.defined
    assert np.isnan(r.statistic)
    assert r.reason.startswith(reason)
    assert np.isnan(r.confidence_interval().low)
    assert np.isnan(r.confidence_interval(method="bootstrap").high)


def test_undefined_pair_without_common_items() -> None:
    r = cohen_kappa([0, 1, -1, -1], [-1, -1, 1, 0], n_labels=2)
    assert (r.defined, r.n_items, r.reason) == (False, 0, "no item labeled by both raters")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"table": [[0.5, 0.5], [0.0, 0.0]]}, "table has fractional entries"),
        ({"table": [1, 2]}, "table must be a square L x L array"),
        ({"table": [[1, -1], [0, 1]]}, "table entries must be finite and non-negative"),
        ({"table": [[1, 1], [0, 1]], "weights": "cubic"}, "weights must be None"),
        ({"table": [[1, 1], [0, 1]], "n_items": -3}, "n_items must be a non-negative integer"),
    ],
)
def test_table_validation_messages(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kappa_from_table(**kwargs)


def test_pair_validation_messages() -> None:
    with pytest.raises(ValueError, match="a and b must have the same length"):
        cohen_kappa([0, 1], [0, 1, 1], n_labels=2)
    with pytest.raises(ValueError, match="codes must lie in 0..1"):
        cohen_kappa([0, 2], [0, 1], n_labels=2)
    with pytest.raises(ValueError, match="level must be in"):
        kappa_from_table(SPEC_3X3).confidence_interval(1.5)


# ---------------------------------------------------------------- Scott's pi, PABAK, phi


def codes_from_table(table: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Two raters' code vectors reproducing a count table (rows rater a)."""
    table_arr = np.asarray(table)
    cells = np.repeat(np.arange(table_arr.size), table_arr.ravel())
    return cells // len(table_arr), cells % len(table_arr)


def test_spec_2x2_pabak_and_ac1_from_codes() -> None:
    a, b = codes_from_table([[91, 4], [4, 1]])
    assert pabak(a, b, n_labels=2).statistic == pytest.approx(0.84)
    assert round(gwet_ac1(np.column_stack([a, b]), n_labels=2).statistic, 3) == 0.912
    assert cohen_kappa(a, b, n_labels=2).statistic == pytest.approx(0.015 / 0.095)


def test_scott_pi_by_hand_and_against_statsmodels_fleiss_with_two_raters() -> None:
    a, b = codes_from_table([[20, 5, 1], [6, 30, 7], [2, 8, 21]])
    pooled = (np.array([26, 43, 31]) + np.array([28, 43, 29])) / 200
    expected = (0.71 - np.sum(pooled**2)) / (1 - np.sum(pooled**2))
    result = scott_pi(a, b, n_labels=3)
    assert result.statistic == pytest.approx(expected)
    assert result.p_e == pytest.approx(np.sum(pooled**2))
    rng = np.random.default_rng(5)
    for _ in range(20):
        n_labels = int(rng.integers(2, 6))
        a = rng.integers(0, n_labels, size=50)
        b = np.where(rng.random(50) < 0.5, a, rng.integers(0, n_labels, size=50))
        counts = np.stack([np.bincount([x, y], minlength=n_labels) for x, y in zip(a, b)])
        assert scott_pi(a, b, n_labels=n_labels).statistic == pytest.approx(sm_fleiss_kappa(counts), rel=1e-10)


def test_pabak_variance_is_binomial() -> None:
    a, b = codes_from_table([[40, 10, 0], [5, 30, 5], [0, 5, 5]])
    r = pabak(a, b, n_labels=3)
    p_o = 0.75
    assert r.statistic == pytest.approx((3 * p_o - 1) / 2)
    assert r.standard_error == pytest.approx(1.5 * np.sqrt(p_o * (1 - p_o) / 100))
    assert r.p_e == pytest.approx(1 / 3)


def test_phi_equals_pearson_spearman_kendall_and_mcc() -> None:
    rng = np.random.default_rng(9)
    for _ in range(25):
        a = (rng.random(80) < rng.uniform(0.1, 0.9)).astype(int)
        b = np.where(rng.random(80) < 0.7, a, 1 - a)
        a[rng.random(80) < 0.1] = -1
        common = (a >= 0) & (b >= 0)
        r = binary_association(a, b)
        x, y = a[common], b[common]
        assert r.n_items == common.sum()
        assert r.statistic == pytest.approx(pearsonr(x, y)[0], abs=1e-12)
        assert r.statistic == pytest.approx(spearmanr(x, y)[0], abs=1e-12)
        assert r.statistic == pytest.approx(kendalltau(x, y)[0], abs=1e-12)
        assert r.statistic == pytest.approx(matthews_corrcoef(x, y), abs=1e-12)
        assert r.positive_rate_a == pytest.approx(x.mean())
        assert r.positive_rate_b == pytest.approx(y.mean())
        np.testing.assert_array_equal(r.table, [[np.sum((x == i) & (y == j)) for j in (0, 1)] for i in (0, 1)])


def test_kappa_paradox_positive_rates_reported() -> None:
    a, b = codes_from_table([[1, 4], [4, 91]])
    r = binary_association(a, b)
    assert (r.positive_rate_a, r.positive_rate_b) == (pytest.approx(0.95), pytest.approx(0.95))
    assert r.statistic == pytest.approx(cohen_kappa(a, b, n_labels=2).statistic)  # equal margins


@pytest.mark.parametrize(
    ("a", "b", "fragment"),
    [
        ([1, 1, 1], [0, 1, 1], "single category"),
        ([-1, 1, -1], [0, -1, 1], "no item labeled by both raters"),
    ],
)
def test_phi_undefined(a: list[int], b: list[int], fragment: str) -> None:
    r = binary_association(a, b)
    assert not r.defined and np.isnan(r.statistic) and fragment in r.reason


def test_scott_and_pabak_undefined_cases() -> None:
    same = scott_pi([1, 1, 1], [1, 1, 1], n_labels=3)
    assert not same.defined and "same single category" in same.reason
    assert scott_pi([1, 1, 1], [1, 0, 1], n_labels=3).defined  # one constant rater: pooled varies
    empty = pabak([0, -1], [-1, 1], n_labels=2)
    assert not empty.defined and np.isnan(empty.statistic) and empty.reason == "no item labeled by both raters"
    with pytest.raises(ValueError, match="no analytic variance for scott_pi"):
        scott_pi([0, 1, 1], [0, 1, 0], n_labels=2).confidence_interval(method="delta")
