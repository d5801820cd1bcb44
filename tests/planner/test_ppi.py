"""Tests for planner.ppi (docs/method.md §9): published check values, a hand computation,
agreement with the reference library ``ppi_py``, invariants, and a coverage simulation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from planner.ppi import ppi_mean

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import ppi_py

FAST = settings(max_examples=60, deadline=None)


def check_counts() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Overlap (B, A) counts (1,1)=78, (0,0)=12, (1,0)=4, (0,1)=6; 900 unlabeled, 720 A=1."""
    b = np.r_[np.ones(78), np.zeros(12), np.ones(4), np.zeros(6)]
    a = np.r_[np.ones(78), np.zeros(12), np.zeros(4), np.ones(6)]
    a_unlabeled = np.r_[np.ones(720), np.zeros(180)]
    return b, a, a_unlabeled


# --------------------------------------------------------------------------- check values


@pytest.mark.parametrize(
    ("lam", "estimate", "low", "high"),
    [
        (0.0, 0.82, 0.74470, 0.89530),
        (1.0, 0.78, 0.71285, 0.84715),
        ("auto", 0.799186, 0.73913, 0.85924),
    ],
)
def test_published_check_values(lam, estimate, low, high):
    result = ppi_mean(*check_counts(), lam=lam, confidence_level=0.95)
    assert result.estimate == pytest.approx(estimate, abs=1e-5)
    assert result.confidence_interval.low == pytest.approx(low, abs=1e-5)
    assert result.confidence_interval.high == pytest.approx(high, abs=1e-5)


def test_auto_lam_by_hand():
    # Cov_n(B, A) = P(B=1, A=1) - P(B=1) P(A=1) on the 100 overlap items (ddof 0);
    # Var(A) over all 1000 items with ddof 1; n/N = 100/900.
    cov = 78 / 100 - (82 / 100) * (84 / 100)
    share = (84 + 720) / 1000
    var_all = share * (1 - share) * 1000 / 999
    lam = cov / ((1 + 100 / 900) * var_all)
    result = ppi_mean(*check_counts())
    assert result.lam == pytest.approx(lam, rel=1e-12)
    assert result.lam == pytest.approx(0.520344, abs=1e-6)
    # theta = lam * 720/900 + (82 - lam * 84)/100; SE^2 = Var_N(lam A)/N + Var_n(B - lam A)/n.
    theta = lam * 0.8 + (82 - lam * 84) / 100
    rect = np.r_[np.full(78, 1 - lam), np.zeros(12), np.ones(4), np.full(6, -lam)]
    se = np.sqrt(lam**2 * 0.8 * 0.2 / 900 + rect.var() / 100)
    assert result.estimate == pytest.approx(theta, rel=1e-12)
    assert result.standard_error == pytest.approx(se, rel=1e-12)


def test_classical_is_the_overlap_only_interval():
    result = ppi_mean(*check_counts())
    se = np.sqrt(0.82 * 0.18 / 100)
    assert result.classical.estimate == pytest.approx(0.82)
    assert result.classical.standard_error == pytest.approx(se, rel=1e-12)
    assert result.classical.confidence_interval.low == pytest.approx(0.74470, abs=1e-5)
    assert result.effective_n == pytest.approx(100 * se**2 / result.standard_error**2)
    assert result.effective_n > 100  # the proxy is informative here


# --------------------------------------------------------------------------- ppi_py


def binary_sample(seed: int, n: int, n_unlabeled: int, corr: float):
    rng = np.random.default_rng(seed)
    a = (rng.random(n + n_unlabeled) < 0.8).astype(float)
    flip = rng.random(n) > corr
    b = np.where(flip, 1.0 - a[:n], a[:n])
    return b, a[:n], a[n:], rng


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(5, 120),
    n_unlabeled=st.integers(2, 400),
    corr=st.floats(0.0, 1.0),
    alpha=st.sampled_from([0.01, 0.05, 0.1, 0.3]),
    lam=st.sampled_from(["auto", 0.0, 0.4, 1.0]),
    weighted=st.booleans(),
)
def test_agrees_with_ppi_py(seed, n, n_unlabeled, corr, alpha, lam, weighted):
    b, a, a_u, rng = binary_sample(seed, n, n_unlabeled, corr)
    w = rng.uniform(0.2, 5.0, size=n) if weighted else None
    w_u = rng.uniform(0.2, 5.0, size=n_unlabeled) if weighted else None
    ref_lam = None if lam == "auto" else lam
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low, high = ppi_py.ppi_mean_ci(b, a, a_u, alpha=alpha, lam=ref_lam, w=w, w_unlabeled=w_u)
        point = ppi_py.ppi_mean_pointestimate(b, a, a_u, lam=ref_lam, w=w, w_unlabeled=w_u)
    result = ppi_mean(b, a, a_u, lam=lam, confidence_level=1 - alpha, weights=w, weights_unlabeled=w_u)
    if np.all(np.isfinite([low[0], high[0]])):  # ppi_py gives NaN for a constant proxy
        assert result.confidence_interval.low == pytest.approx(float(low[0]), abs=1e-9)
        assert result.confidence_interval.high == pytest.approx(float(high[0]), abs=1e-9)
        assert result.estimate == pytest.approx(float(np.squeeze(point)), abs=1e-9)


def test_agrees_with_ppi_py_on_continuous_outcomes():
    rng = np.random.default_rng(7)
    x = rng.normal(size=1300)
    y = 2 * x[:300] + rng.normal(size=300)
    yhat, yhat_u = 1.5 * x[:300] + 0.3, 1.5 * x[300:] + 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.1)
    result = ppi_mean(y, yhat, yhat_u, confidence_level=0.9)
    assert result.confidence_interval.as_list() == pytest.approx([low[0], high[0]], abs=1e-9)
    assert 0 < result.lam <= 1


# --------------------------------------------------------------------------- invariants


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    scale=st.floats(0.1, 10.0),
    shift=st.floats(-5.0, 5.0),
)
def test_affine_equivariance(seed, scale, shift):
    b, a, a_u, _ = binary_sample(seed, 40, 200, 0.7)
    base = ppi_mean(b, a, a_u)
    moved = ppi_mean(scale * b + shift, scale * a + shift, scale * a_u + shift)
    assert moved.lam == pytest.approx(base.lam, abs=1e-9)
    assert moved.estimate == pytest.approx(scale * base.estimate + shift, abs=1e-9)
    assert moved.standard_error == pytest.approx(scale * base.standard_error, abs=1e-9)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 60), n_unlabeled=st.integers(1, 300))
def test_interval_and_lam_invariants(seed, n, n_unlabeled):
    b, a, a_u, rng = binary_sample(seed, n, n_unlabeled, 0.8)
    result = ppi_mean(b, a, a_u)
    assert 0.0 <= result.lam <= 1.0
    ci = result.confidence_interval
    assert ci.low <= result.estimate <= ci.high
    assert result.estimate - ci.low == pytest.approx(ci.high - result.estimate, abs=1e-12)
    classical = ppi_mean(b, a, a_u, lam=0.0)
    assert classical.estimate == pytest.approx(result.classical.estimate, abs=1e-12)
    assert classical.estimate == pytest.approx(b.mean(), abs=1e-12)
    order, order_u = rng.permutation(n), rng.permutation(n_unlabeled)
    shuffled = ppi_mean(b[order], a[order], a_u[order_u])
    assert shuffled.estimate == pytest.approx(result.estimate, abs=1e-12)
    constant = ppi_mean(b, a, a_u, weights=np.full(n, 3.0), weights_unlabeled=np.full(n_unlabeled, 0.5))
    assert constant.estimate == pytest.approx(result.estimate, abs=1e-12)
    assert constant.standard_error == pytest.approx(result.standard_error, abs=1e-12)


def test_perfect_proxy_takes_full_weight_and_constant_proxy_none():
    b, _, a_u, _ = binary_sample(3, 50, 500, 1.0)
    assert ppi_mean(b, b, a_u).lam > 0.8
    flat = ppi_mean(b, np.ones(50), np.ones(500))
    assert flat.lam == 0.0
    assert flat.estimate == pytest.approx(b.mean())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"y": [1.0]}, "at least 2 labeled"),
        ({"yhat": [1.0, 0.0]}, "same length"),
        ({"yhat_unlabeled": []}, "at least one"),
        ({"y": [1.0, np.nan, 0.0]}, "finite"),
        ({"lam": "best"}, "lam must be"),
        ({"confidence_level": 1.0}, "confidence_level must be"),
        ({"weights": [1.0, 0.0, 1.0]}, "positive"),
        ({"weights_unlabeled": [1.0]}, "shape"),
    ],
)
def test_bad_input(kwargs, message):
    args = {"y": [1.0, 0.0, 1.0], "yhat": [1.0, 0.0, 0.0], "yhat_unlabeled": [1.0, 1.0, 0.0]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ppi_mean(args.pop("y"), args.pop("yhat"), args.pop("yhat_unlabeled"), **args)


# --------------------------------------------------------------------------- coverage


def coverage(seed: int, *, trials: int, proxy_only: bool) -> float:
    """Share of seeded trials whose 95% interval holds P(r_k = primary).

    Independent generator: truth uniform on 2 labels, every rater right with its accuracy;
    300 overlap items, 2700 judge-only items. ``proxy_only`` scores the interval that
    takes the judge's agreement for the human's (no rectifier), which must fail.
    """
    p_h, p_j, n, n_unlabeled = 0.85, 0.90, 300, 2700
    target = p_h**2 + (1 - p_h) ** 2
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, size=(trials, n + n_unlabeled))
    primary = np.where(rng.random(truth.shape) < p_h, truth, 1 - truth)
    judge = np.where(rng.random(truth.shape) < p_j, truth, 1 - truth)
    other = np.where(rng.random((trials, n)) < p_h, truth[:, :n], 1 - truth[:, :n])
    a = (judge == primary).astype(float)
    b = (other == primary[:, :n]).astype(float)
    if proxy_only:
        half = norm.ppf(0.975) * a.std(axis=1) / np.sqrt(a.shape[1])
        return float(np.mean(np.abs(a.mean(axis=1) - target) <= half))
    hits = 0
    for t in range(trials):
        ci = ppi_mean(b[t], a[t, :n], a[t, n:]).confidence_interval
        hits += ci.low <= target <= ci.high
    return hits / trials


def test_interval_covers_within_two_monte_carlo_se():
    # The normal interval is asymptotic: at 100 overlap items it covers about 0.941
    # (8,000 trials), hence 300 here.
    trials = 2000
    two_se = 2 * np.sqrt(0.95 * 0.05 / trials)
    assert abs(coverage(11, trials=trials, proxy_only=False) - 0.95) <= two_se


def test_coverage_check_is_not_vacuous():
    # The same check on the judge-only estimate (biased: P(judge = primary) = .78) fails.
    trials = 2000
    two_se = 2 * np.sqrt(0.95 * 0.05 / trials)
    assert coverage(11, trials=trials, proxy_only=True) < 0.95 - two_se
