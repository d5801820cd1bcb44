"""Cohen's kappa and the table-level API: SPEC.md §2 worked examples and cross-checks."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa as sm_cohens_kappa

from planner.agreement import cohen_kappa, kappa_from_table

SPEC_3X3 = np.array([[20, 5, 1], [6, 30, 7], [2, 8, 21]])


def fce_variance_by_hand(table: np.ndarray) -> float:
    """SPEC.md §2 unweighted FCE variance, cell by cell (independent of the vectorised code)."""
    n = table.sum()
    p = table / n
    size = len(p)
    row = [sum(p[a, b] for b in range(size)) for a in range(size)]
    col = [sum(p[a, b] for a in range(size)) for b in range(size)]
    p_o = sum(p[a, a] for a in range(size))
    p_e = sum(row[a] * col[a] for a in range(size))
    g = [
        [(1.0 if a == b else 0.0) * (1 - p_e) - (col[a] + row[b]) * (1 - p_o) for b in range(size)]
        for a in range(size)
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


@pytest.mark.parametrize(
    ("weights", "expected"), [(None, -3 / 13), ("linear", 1 / 3), ("quadratic", 5 / 7)]
)
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
        theirs = cohen_kappa_score(
            a[common], b[common], labels=np.arange(n_labels), weights=weights
        )
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
