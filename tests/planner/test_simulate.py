"""Tests for planner.simulate (docs/method.md §6).

Monte Carlo tolerances are stated next to each test: a rate estimated from ``T`` trials
has standard error ``sqrt(p (1 - p) / T)``, a mean ``sd / sqrt(T)``, a standard deviation
about ``sd / sqrt(2 T)``; bounds sit at 3-4 standard errors plus the "about" of the
published reference.
"""

from __future__ import annotations

import importlib
import json
import math
import tracemalloc

import krippendorff
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from planner.decision import validate_judge
from planner.design_masks import design_masks
from planner.designs import DESIGNS
from planner.recipes import certify_recipe
from planner.rules import COEFFICIENTS
from planner.simulate import SimulationResult, replay, simulate
from planner.synthetic import synthetic_codes
from planner.trial_decisions import DecisionRule, _pool_scores, evaluate_decisions
from planner.xi_moments import prior_moments

simulate_module = importlib.import_module("planner.simulate")  # planner.simulate is also the function
REFERENCE = dict(n_items=500, n_humans=4, n_labels=2, p_h=0.85, p_j=0.90, delta=0.05)


def rate_se(p: float, trials: int) -> float:
    return math.sqrt(max(p * (1 - p), 1e-4) / trials)


# --- generator ---------------------------------------------------------------------------


def test_generator_accuracy_prevalence_and_noise_channel():
    codes = synthetic_codes(4000, n_labels=3, accuracies=[1.0, 0.7, 0.4], prevalence=[0.6, 0.3, 0.1], trials=5, rng=0)
    assert codes.shape == (5, 4000, 3)
    truth = codes[..., 0]  # accuracy 1: the true label itself
    n = truth.size
    share = np.bincount(truth.ravel(), minlength=3) / n
    assert np.all(np.abs(share - [0.6, 0.3, 0.1]) < 4 * np.sqrt(0.25 / n))
    for r, p in ((1, 0.7), (2, 0.4)):
        assert abs((codes[..., r] == truth).mean() - p) < 4 * np.sqrt(p * (1 - p) / n)
        # symmetric channel: a wrong label is each other label with equal chance
        wrong = codes[..., r][codes[..., r] != truth]
        shift = (wrong - truth[codes[..., r] != truth]) % 3
        assert abs((shift == 1).mean() - 0.5) < 4 * np.sqrt(0.25 / wrong.size)


def test_generator_clusters_lower_accuracy_toward_chance():
    # With u = 1 - d, d ~ U(0, .6), accuracies become .5 + .5u and .5 + .4u; two binary
    # raters agree with chance p0 p1 + (1-p0)(1-p1) = .5 + .4u^2, E[u^2] = (1 - .4^3)/1.8,
    # so about .708. Clusters of 100 items: SE of the mean ~ .08 / sqrt(1000 clusters).
    codes = synthetic_codes(
        1000, n_labels=2, accuracies=[1.0, 0.9], clusters=10, cluster_difficulty=0.6, trials=100, rng=1
    )
    hit = codes[..., 1] == codes[..., 0]
    assert abs(hit.mean() - (0.5 + 0.4 * (1 - 0.4**3) / 1.8)) < 0.01
    # items of one cluster share a difficulty: per-cluster agreement spreads far more than
    # binomial noise of 100 items (sd <= 0.05) would allow
    per_cluster = hit.reshape(100, 10, 100).mean(axis=2)
    assert per_cluster.std() > 0.06


def test_generator_validation():
    with pytest.raises(ValueError, match="prevalence must be 2 non-negative shares summing to 1"):
        synthetic_codes(10, n_labels=2, accuracies=[0.9], prevalence=[0.5, 0.6])
    with pytest.raises(ValueError, match="accuracies must be"):
        synthetic_codes(10, n_labels=2, accuracies=[1.2])
    with pytest.raises(ValueError, match="clusters must be at most n_items=10"):
        synthetic_codes(10, n_labels=2, accuracies=[0.9], clusters=11)


# --- design masks ------------------------------------------------------------------------


def by_rater(codes: np.ndarray) -> np.ndarray:
    """(T, n, R) -> the simulator's internal rater-major layout (R, T, n)."""
    return np.ascontiguousarray(np.moveaxis(codes, 2, 0))


def test_design_masks_follow_the_designs():
    codes = synthetic_codes(300, n_labels=3, accuracies=[0.8] * 4, prevalence=[0.7, 0.2, 0.1], trials=6, rng=2)
    humans = by_rater(codes)
    rng = np.random.default_rng(0)
    for design in DESIGNS:
        mask = design_masks(design, humans, 60, n_labels=3, rng=rng)
        assert mask[0].all() and (mask[1:].sum(axis=2) == 60).all()
        panels_equal = (mask[1:] == mask[1]).all()
        assert panels_equal == (design in ("depth-first", "shared-panel", "strat"))
    strat = design_masks("strat", humans, 60, n_labels=3, rng=rng)[1]
    primary = humans[0]
    for t in range(6):
        share = 60 * np.bincount(primary[t], minlength=3) / 300
        assert np.all(np.abs(np.bincount(primary[t][strat[t]], minlength=3) - share) < 1)
    # Disjoint spreads 3 x 60 = 180 < 300 assignments: no item goes to two secondaries
    apart = design_masks("disjoint", humans, 60, n_labels=3, rng=rng)
    assert apart[1:].sum(axis=0).max() == 1
    # Seq-Coverage equalises pairwise overlap at about m^2/n = 12 items per pair
    cover = design_masks("seq-coverage", humans, 60, n_labels=3, rng=rng)
    pairs = [np.sum(cover[a] & cover[b], axis=1) for a in range(1, 4) for b in range(a + 1, 4)]
    assert np.all(np.abs(np.array(pairs) - 12) <= 4)
    refined = design_masks("seq-refined", humans, 60, n_labels=3, rng=rng)
    assert refined[1:].sum(axis=0).max() >= 2


# --- the batched statistics against independent implementations -------------------------


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_labels=st.integers(2, 4))
def test_two_rater_scores_match_sklearn_and_krippendorff(seed, n_labels):
    # With K = 2 the pool of r_1 is r_2 alone, so S_F(r_1; H_1) is F(r_1, r_2) on their
    # common items: Cohen's kappa (sklearn) and nominal alpha (krippendorff).
    rng = np.random.default_rng(seed)
    humans = rng.integers(0, n_labels, (2, 3, 40))
    mask = np.ones(humans.shape, dtype=bool)
    mask[1] = rng.random((3, 40)) < 0.6
    for coefficient in ("po", "kappa", "alpha"):
        got = _pool_scores(humans, humans[1:], mask, coefficient, n_labels)[0][:, 0]
        for t in range(3):
            a, b = humans[0, t, mask[1, t]], humans[1, t, mask[1, t]]
            if coefficient == "po":
                want = np.mean(a == b) if a.size else np.nan
            elif coefficient == "kappa":
                single = np.unique(a).size == 1 and np.unique(b).size == 1 and a[0] == b[0]
                want = np.nan if a.size == 0 or single else cohen_kappa_score(a, b)
            else:
                values = np.unique(np.concatenate([a, b]))
                want = (
                    np.nan
                    if values.size < 2
                    else krippendorff.alpha(
                        reliability_data=np.stack([a, b]).astype(float), level_of_measurement="nominal"
                    )
                )
            if np.isnan(want):
                assert np.isnan(got[t])
            else:
                assert got[t] == pytest.approx(want, abs=1e-12)


def test_alpha_worked_example_through_pool_average():
    # Hand computation: x = (0,0,1,1), pool members y1 = (0,1,1,1) on all four items and
    # y2 = (0,0,-,1) on three. alpha(x,y1): N=8, n=(3,5), D_e=(64-34)/56, D_o=2/8 -> 8/15.
    # alpha(x,y2): N=6, n=(4,2), D_e=(36-20)/30, D_o=0 -> 1. Weighted by 4 and 3: (32/15+3)/7.
    humans = by_rater(np.array([[[0, 0, 0], [0, 1, 0], [1, 1, 0], [1, 1, 1]]]))
    mask = by_rater(np.array([[[True] * 3, [True] * 3, [True, True, False], [True] * 3]]))
    got = _pool_scores(humans, humans[:1], mask, "alpha", 2)[0][:, 0]
    assert got[0] == pytest.approx((4 * 8 / 15 + 3 * 1.0) / 7)


@pytest.mark.parametrize("coefficient", ["po", "kappa", "alpha"])
@pytest.mark.parametrize("design", ["random", "strat", "seq-coverage"])
def test_batched_decision_equals_validate_judge(coefficient, design):
    # The simulator's per-trial human-pool score, d_k, won/skip and omega equal what
    # planner.decision.validate_judge computes on each single sparse matrix.
    n_items, n_humans, trials = 90, 4, 6
    codes = synthetic_codes(
        n_items,
        n_labels=3,
        accuracies=[0.8, 0.75, 0.85, 0.7, 0.8],
        prevalence=[0.7, 0.2, 0.1],
        trials=trials,
        rng=11,
    )
    humans, judges = by_rater(codes[..., :n_humans]), by_rater(codes[..., n_humans:])
    mask = design_masks(design, humans, 12, n_labels=3, rng=np.random.default_rng(3))
    rule = DecisionRule("margin", 0.05, 0.5, 0.05)
    ev = evaluate_decisions(humans, judges, mask, coefficient=coefficient, n_labels=3, rule=rule)
    for t in range(trials):
        matrix = np.column_stack([np.where(mask[:, t], humans[:, t], -1).T, judges[:, t].T])
        v = validate_judge(
            matrix,
            judge=n_humans,
            humans=list(range(n_humans)),
            n_labels=3,
            coefficient=coefficient,
            n_resamples=1,
            rng=0,
        )
        assert ev.score[t] == pytest.approx(v.human_pool.estimate, abs=1e-12, nan_ok=True)
        d = np.array([r.d for r in v.raters])
        assert np.allclose(ev.d[t, 0], d, atol=1e-12, equal_nan=True)
        assert ev.defined[t, 0].tolist() == [r.won is not None for r in v.raters]
        assert ev.won[t, 0].tolist() == [bool(r.won) for r in v.raters]
        assert ev.passed[t, 0] == (v.omega >= v.omega_threshold)


@pytest.mark.parametrize(("design", "m"), [("random", 28), ("random", 45), ("strat", 60), ("seq-refined", 45)])
def test_batched_alt_test_equals_validate_judge(design, m):
    # rule="alt-test": per-human p-values, the 30-item skip, BY at q and omega match
    # validate_judge on each sparse matrix. With m = 28 every secondary falls below 30
    # usable items and only the primary is tested; the judge (.78) sits among the humans
    # (.70-.85), so some humans are won and some not.
    n_items, n_humans, trials = 200, 4, 8
    codes = synthetic_codes(
        n_items,
        n_labels=3,
        accuracies=[0.8, 0.75, 0.85, 0.7, 0.78],
        trials=trials,
        rng=12,
    )
    humans, judges = by_rater(codes[..., :n_humans]), by_rater(codes[..., n_humans:])
    mask = design_masks(design, humans, m, n_labels=3, rng=np.random.default_rng(4))
    rule = DecisionRule("alt-test", 0.1, 0.5, 0.05)
    ev = evaluate_decisions(humans, judges, mask, coefficient="po", n_labels=3, rule=rule)
    assert 0 < ev.won.sum() < ev.defined.sum()
    assert ev.defined.all() == (m >= 30)
    for t in range(trials):
        matrix = np.column_stack([np.where(mask[:, t], humans[:, t], -1).T, judges[:, t].T])
        v = validate_judge(
            matrix,
            judge=n_humans,
            humans=list(range(n_humans)),
            n_labels=3,
            rule="alt-test",
            epsilon=0.1,
            n_resamples=1,
            rng=0,
        )
        assert ev.defined[t, 0].tolist() == [r.won is not None for r in v.raters]
        assert ev.won[t, 0].tolist() == [bool(r.won) for r in v.raters]
        rho_gap = np.array([r.rho_f - r.rho_h for r in v.raters])
        assert np.allclose(ev.d[t, 0], rho_gap, atol=1e-12, equal_nan=True)
        assert ev.passed[t, 0] == (v.omega >= v.omega_threshold)


def test_alt_test_simulation_runs_and_defaults_epsilon():
    result = simulate(
        n_items=300,
        n_humans=3,
        n_labels=2,
        p_h=0.8,
        p_j=0.9,
        rho=[0.2, 1.0],
        design="strat",
        rule="alt-test",
        trials=30,
        rng=6,
    )
    assert (result.rule, result.epsilon, result.q) == ("alt-test", 0.2, 0.05)
    assert result.cells[1].wrong_decision == 0.0
    with pytest.raises(ValueError, match="use coefficient='po'"):
        simulate(
            n_items=50,
            n_humans=3,
            n_labels=2,
            p_h=0.8,
            p_j=0.8,
            rho=0.5,
            design="strat",
            rule="alt-test",
            coefficient="kappa",
            trials=2,
        )


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    coefficient=st.sampled_from(COEFFICIENTS),
    labels=st.permutations(range(3)),
    raters=st.permutations(range(4)),
)
def test_scores_invariant_to_relabelling_and_rater_order(seed, coefficient, labels, raters):
    # Nominal coefficients ignore label names; the held-out scores follow the humans when
    # they are reordered, and the human-pool score and decisions do not change.
    rng = np.random.default_rng(seed)
    humans = rng.integers(0, 3, (4, 5, 30))
    judges = rng.integers(0, 3, (2, 5, 30))
    mask = rng.random(humans.shape) < 0.6
    rule = DecisionRule("margin", 0.05, 0.5, 0.05)
    base = evaluate_decisions(humans, judges, mask, coefficient=coefficient, n_labels=3, rule=rule)
    names = np.asarray(labels)
    renamed = evaluate_decisions(names[humans], names[judges], mask, coefficient=coefficient, n_labels=3, rule=rule)
    order = list(raters)
    moved = evaluate_decisions(humans[order], judges, mask[order], coefficient=coefficient, n_labels=3, rule=rule)
    for other in (renamed, moved):
        assert np.allclose(other.score, base.score, atol=1e-12, equal_nan=True)
        assert np.array_equal(other.passed, base.passed)
    assert np.allclose(renamed.d, base.d, atol=1e-12, equal_nan=True)
    assert np.allclose(moved.d, base.d[..., order], atol=1e-12, equal_nan=True)
    finite = np.isfinite(base.score)
    assert np.all((base.score[finite] >= -1 - 1e-12) & (base.score[finite] <= 1 + 1e-12))


# --- sparse = dense, API ---------------------------------------------------------------


@pytest.mark.parametrize("design", DESIGNS)
def test_full_overlap_reproduces_the_dense_reference(design):
    result = simulate(
        n_items=60,
        n_humans=3,
        n_labels=3,
        p_h=0.8,
        p_j=0.8,
        prevalence=[0.6, 0.3, 0.1],
        rho=1.0,
        design=design,
        coefficient=list(COEFFICIENTS),
        trials=10,
        rng=0,
    )
    for cell in result.cells:
        assert (cell.bias, cell.std, cell.reliability, cell.wrong_decision) == (0.0, 0.0, 1.0, 0.0)
        assert cell.rater_false_rejection in (0.0,) or math.isnan(cell.rater_false_rejection)


def test_grid_progress_json_and_reproducibility():
    calls = []
    kwargs = dict(
        n_items=100,
        n_humans=3,
        n_labels=2,
        p_h=[0.8, (0.9, 0.8, 0.7)],
        p_j=[0.85, 0.6],
        rho=[0.1, 0.3],
        design=["strat", "random"],
        coefficient=["po", "kappa"],
        trials=15,
    )
    result = simulate(**kwargs, rng=4, progress=lambda done, total: calls.append((done, total)))
    assert isinstance(result, SimulationResult)
    assert len(result.cells) == 2 * 2 * 2 * 2
    assert calls == [(i, 16) for i in range(1, 17)]
    assert {c.p_h for c in result.cells} == {0.8, (0.9, 0.8, 0.7)}
    assert {(c.rho, c.m) for c in result.cells} == {(0.1, 10), (0.3, 30)}
    text = json.dumps(result.as_dict(), allow_nan=False)
    assert json.loads(text)["cells"][0]["design"] == "strat"
    again = simulate(**kwargs, rng=4)
    assert again.as_dict() == result.as_dict()


def test_min_rho_reads_one_curve():
    result = simulate(**REFERENCE, rho=[0.05, 0.25, 0.5], design=["random", "strat"], trials=200, rng=5)
    # reliability about .68 at rho = .05 and >= .97 from .25 on (see the reference test)
    assert result.min_rho(design="random") == 0.25
    assert result.min_rho(0.001, design="random") in (0.5, None)
    with pytest.raises(ValueError, match="several curves"):
        result.min_rho()
    with pytest.raises(ValueError, match="no cell matches"):
        result.min_rho(design="seq-refined")


def test_input_validation_messages():
    base = dict(n_items=50, n_humans=3, n_labels=2, p_h=0.8, p_j=0.8, rho=0.2, design="strat", trials=5)
    with pytest.raises(ValueError, match="design must be one of"):
        simulate(**{**base, "design": "stratified"})
    with pytest.raises(ValueError, match="coefficient must be one of"):
        simulate(**base, coefficient="ac2")
    with pytest.raises(ValueError, match=r"rho must be overlap rates in \(0, 1\]"):
        simulate(**{**base, "rho": [0.2, 1.5]})
    with pytest.raises(ValueError, match="gives no item per secondary"):
        simulate(**{**base, "rho": 0.001})
    with pytest.raises(ValueError, match="n_humans must be at least 2"):
        simulate(**{**base, "n_humans": 1})
    with pytest.raises(ValueError, match="rater-specific p_h needs 3 accuracies"):
        simulate(**{**base, "p_h": [(0.8, 0.9)]})
    with pytest.raises(ValueError, match="rule must be one of"):
        simulate(**base, rule="vote")
    with pytest.raises(ValueError, match="codes must be a dense matrix"):
        replay([[0, -1], [1, 1]], judges=[0, 1], n_labels=2, rho=0.5, design="strat")
    with pytest.raises(ValueError, match="judges must be complete codes with 2 rows"):
        replay([[0, 1], [1, 1]], judges=[0, 1, 1], n_labels=2, rho=0.5, design="strat")


# --- reference shapes (docs/method.md §6 and issue 5) -----------------------------------------


def test_reference_shape_random_design_po():
    # Published: sd of sparse - dense about .050 at rho .05 and .020 at .25; reliability
    # about .68 and .99. T = 400: SE(sd) ~ sd / sqrt(800), SE(reliability) ~ .023 / .005.
    trials = 400
    result = simulate(**REFERENCE, rho=[0.05, 0.25], design="random", trials=trials, rng=20)
    low, high = result.cells
    assert low.std == pytest.approx(0.050, abs=0.006)
    assert high.std == pytest.approx(0.020, abs=0.003)
    assert low.reliability == pytest.approx(0.68, abs=3 * rate_se(0.68, trials) + 0.02)
    assert high.reliability >= 0.99 - 3 * rate_se(0.99, trials)
    for cell in result.cells:  # p_o on i.i.d. items: no design bias
        assert abs(cell.bias) < 4 * cell.std / math.sqrt(trials)


def test_reference_shape_wrong_decisions_under_skew():
    # Published: at rho = .05 with pi_max = .9, wrong decisions about .02 with p_o and
    # about .15 with kappa (alpha alike). Same matrices for every coefficient.
    trials = 400
    result = simulate(
        **{**REFERENCE},
        prevalence=[0.9, 0.1],
        rho=0.05,
        design="random",
        coefficient=["po", "kappa", "alpha"],
        trials=trials,
        rng=21,
    )
    po, kappa, alpha = result.cells
    assert po.wrong_decision <= 0.02 + 3 * rate_se(0.02, trials) + 0.02
    for ratio in (kappa, alpha):
        assert 0.15 - 0.08 <= ratio.wrong_decision <= 0.15 + 0.08
        gap_se = math.sqrt(rate_se(po.wrong_decision, trials) ** 2 + rate_se(ratio.wrong_decision, trials) ** 2)
        assert ratio.wrong_decision - po.wrong_decision > 3 * gap_se


def test_reference_shape_strat_cuts_kappa_bias_under_skew():
    # L = 3, prevalence (.8, .15, .05), kappa, rho = .05: Random fragments the overlap
    # between secondaries (pairs share ~m^2/n items), which biases kappa; Strat's shared
    # panel does not. Bias SE = sd / sqrt(T); T = 2000 puts 3 SE of Strat's bias at ~.008,
    # a third of Random's bias (~.025).
    trials = 2000
    result = simulate(
        n_items=500,
        n_humans=4,
        n_labels=3,
        p_h=0.85,
        p_j=0.9,
        prevalence=[0.8, 0.15, 0.05],
        rho=0.05,
        design=["random", "strat"],
        coefficient="kappa",
        trials=trials,
        rng=22,
    )
    random_k, strat_k = result.cells
    assert random_k.bias < -4 * random_k.std / math.sqrt(trials)
    assert abs(strat_k.bias) < 3 * strat_k.std / math.sqrt(trials)
    assert 3 * abs(strat_k.bias) < abs(random_k.bias)  # held on 5 other seeds: ratios 8 to 100


def test_kappa_bias_at_ten_percent_and_po_unbiased():
    # rho = .10 under the same skew: Random's kappa bias (~ -.013 over 6 seeds) is still
    # significant; Strat keeps a small one (~ -.003), at most half of Random's. With p_o
    # both designs are unbiased on i.i.d. synthetic data.
    # T = 1500: SE of a kappa bias ~ .075 / sqrt(1500) = .002.
    trials = 1500
    result = simulate(
        n_items=500,
        n_humans=4,
        n_labels=3,
        p_h=0.85,
        p_j=0.9,
        prevalence=[0.8, 0.15, 0.05],
        rho=0.10,
        design=["random", "strat"],
        coefficient=["kappa", "po"],
        trials=trials,
        rng=24,
    )
    cell = {(c.design, c.coefficient): c for c in result.cells}
    se = {key: c.std / math.sqrt(trials) for key, c in cell.items()}
    assert cell["random", "kappa"].bias < -3 * se["random", "kappa"]
    assert 2 * abs(cell["strat", "kappa"].bias) < abs(cell["random", "kappa"].bias)
    for design in ("random", "strat"):
        assert abs(cell[design, "po"].bias) < 4 * se[design, "po"]


def test_strat_removes_the_bias_of_a_distinct_primary():
    # Heterogeneous raters (primary .95, secondaries .80): under Random each secondary's
    # pool is mostly the primary alone, so primary pairs are over-weighted and the sparse
    # p_o human-pool score is biased upward; Strat's shared panel weights every pair
    # equally on each item and is unbiased. (Seq-Coverage, whose secondaries are
    # disjoint at this overlap, inherits the bias.)
    trials = 400
    result = simulate(
        n_items=500,
        n_humans=4,
        n_labels=2,
        p_h=[(0.95, 0.8, 0.8, 0.8)],
        p_j=0.9,
        rho=0.10,
        design=["random", "strat", "seq-coverage"],
        trials=trials,
        rng=25,
    )
    cell = {c.design: c for c in result.cells}
    se = {d: c.std / math.sqrt(trials) for d, c in cell.items()}
    assert cell["random"].bias > 6 * se["random"] and cell["seq-coverage"].bias > 6 * se["seq-coverage"]
    assert abs(cell["strat"].bias) < 3 * se["strat"]


def xi_law(p_h: float, p_j: float) -> tuple[float, float]:
    """L = 2, one held-in label: chances that xi = agree(j, pool) - agree(r, pool) is +1 and -1.

    Enumerates which of pool, rater and judge report the truth (a wrong binary label is
    the other label, so two raters agree exactly when both are right or both wrong).
    """
    plus = minus = 0.0
    for pool_ok in (True, False):
        for r_ok in (True, False):
            for j_ok in (True, False):
                chance = (p_h if pool_ok else 1 - p_h) * (p_h if r_ok else 1 - p_h) * (p_j if j_ok else 1 - p_j)
                xi = int(j_ok == pool_ok) - int(r_ok == pool_ok)
                plus += chance * (xi == 1)
                minus += chance * (xi == -1)
    return plus, minus


def exact_loss_chance(m: int, plus: float, minus: float, eps: float) -> float:
    """Pr[mean of m i.i.d. xi in {-1, 0, 1} < -eps], by convolving the law of xi m times."""
    law = np.array([1.0])
    step = np.array([minus, 1 - plus - minus, plus])
    for _ in range(m):
        law = np.convolve(law, step)
    total = np.arange(-m, m + 1)
    return float(law[total < -eps * m - 1e-9].sum())


def test_per_rater_false_rejection_matches_exact_law_and_recipe():
    # K = 2, shared panel of m items: each held-out human's pool is the other human, so
    # d_k is the mean of m i.i.d. xi whose law is known exactly. The simulated per-rater
    # false-rejection rate must match the exact lattice probability (3 SE; 2T decisions,
    # correlated within a trial, so SE is taken over T), and planner.recipes' continuity-
    # corrected curve (docs/method.md §4) within 3 SE + .005. The recommended m is the
    # envelope (120), not the normal form's 117, where the exact rate is .0285 > .025.
    p_h, p_j, eps, trials = 0.85, 0.90, 0.05, 1500
    plus, minus = xi_law(p_h, p_j)
    mu, var = plus - minus, plus + minus - (plus - minus) ** 2
    assert (round(mu, 3), round(var, 4)) == (0.035, 0.2188)  # docs/method.md §4 check values
    assert prior_moments(p_h, p_j, n_labels=2) == pytest.approx((mu, var), abs=1e-12)
    recipe = certify_recipe(mu, var, n_items=585, n_humans=2, epsilon=eps, m_grid=[40, 117, 120])
    assert recipe.m == 120
    result = simulate(
        n_items=585,
        n_humans=2,
        n_labels=2,
        p_h=p_h,
        p_j=p_j,
        rho=[40 / 585, 117 / 585, 120 / 585],
        design="shared-panel",
        trials=trials,
        rng=23,
    )
    for cell, planned in zip(result.cells, recipe.fr_rate, strict=True):
        exact = exact_loss_chance(cell.m, plus, minus, eps)
        assert cell.rater_false_rejection == pytest.approx(exact, abs=3 * rate_se(exact, trials))
        assert cell.rater_false_rejection == pytest.approx(planned, abs=3 * rate_se(planned, trials) + 0.005)
    assert exact_loss_chance(117, plus, minus, eps) > 0.025  # the defect the envelope removes
    # at the recommended m the exact rate keeps the promise alpha_sig / 2 = .025 (no Monte Carlo error to
    # place), and the simulation agrees with it (above)
    assert exact_loss_chance(120, plus, minus, eps) <= 0.025


# --- replay --------------------------------------------------------------------------------


def pool_po(block: np.ndarray) -> float:
    """Dense human-pool p_o of a complete block: mean over k of mean over j != k of agreement."""
    k = block.shape[1]
    per_rater = [np.mean([(block[:, a] == block[:, b]).mean() for b in range(k) if b != a]) for a in range(k)]
    return float(np.mean(per_rater))


def test_replay_shows_depth_first_bias_on_ordered_difficulty():
    # Items 0..199 are easy (accuracy .98) and 200..399 hard (.60), in corpus order:
    # Depth-first at rho = .25 gives every secondary items 0..99, so its score is the
    # dense score of that block (hand-computed here) and sits far above the full one;
    # Strat samples the whole corpus with one panel (bias within MC error).
    rng = np.random.default_rng(30)
    truth = rng.integers(0, 2, 400)
    acc = np.where(np.arange(400) < 200, 0.98, 0.60)[:, None]
    humans = np.where(rng.random((400, 4)) < acc, truth[:, None], 1 - truth[:, None])
    judge = np.where(rng.random(400) < acc[:, 0], truth, 1 - truth)
    trials = 200
    result = replay(humans, judges=judge, n_labels=2, rho=0.25, design=["depth-first", "strat"], trials=trials, rng=1)
    depth, strat = result.cells
    assert depth.bias == pytest.approx(pool_po(humans[:100]) - pool_po(humans), abs=1e-12)
    assert depth.bias > 0.1 and depth.std == pytest.approx(0.0, abs=1e-12)
    assert abs(strat.bias) < 4 * strat.std / math.sqrt(trials)
    assert depth.p_h is None


def test_replay_primary_column_and_dense_equality():
    rng = np.random.default_rng(31)
    humans = rng.integers(0, 3, (120, 3))
    judges = rng.integers(0, 3, (120, 2))
    # the primary keeps every item: naming column 2 as primary equals moving it first
    moved = replay(humans[:, [2, 0, 1]], judges=judges, n_labels=3, rho=0.2, design="strat", trials=20, rng=5)
    named = replay(humans, judges=judges, n_labels=3, rho=0.2, design="strat", primary=2, trials=20, rng=5)
    assert [c.as_dict() for c in moved.cells] == [c.as_dict() for c in named.cells]
    full = replay(humans, judges=judges, n_labels=3, rho=1.0, design="random", coefficient=["kappa", "alpha"], trials=3)
    assert all(c.bias == 0.0 and c.wrong_decision == 0.0 for c in full.cells)


# --------------------------------------------------------------------------- trial chunks

CHUNKED = dict(
    n_items=300,
    n_humans=4,
    n_labels=2,
    p_h=0.85,
    p_j=0.85,
    rho=0.1,
    design=["random", "strat"],
    trials=600,
)


def test_trial_chunks_bound_memory_and_report_progress_per_chunk(monkeypatch):
    one_shot_peak = _peak_bytes(lambda: simulate(**CHUNKED, rng=1))
    monkeypatch.setattr(simulate_module, "_TRIAL_CELLS", 300 * 5 * 40)  # 40 trials per chunk
    calls = []
    chunked_peak = _peak_bytes(
        lambda: simulate(**CHUNKED, rng=1, progress=lambda done, total: calls.append((done, total)))
    )
    assert calls == [(i, 2 * 15) for i in range(1, 31)]  # 2 cells x 15 chunks
    assert chunked_peak < one_shot_peak / 5, (chunked_peak, one_shot_peak)


def test_chunked_trials_give_the_one_shot_metrics_within_monte_carlo_error(monkeypatch):
    one_shot = simulate(**CHUNKED, rng=2)
    monkeypatch.setattr(simulate_module, "_TRIAL_CELLS", 300 * 5 * 7)  # 7 trials per chunk
    chunked = simulate(**CHUNKED, rng=2)
    again = simulate(**CHUNKED, rng=2)
    assert chunked.as_dict() == again.as_dict()  # reproducible for a seed and chunk size
    assert chunked.as_dict() != one_shot.as_dict()  # the draws did interleave by chunk
    for a, b in zip(one_shot.cells, chunked.cells, strict=True):
        assert (a.design, a.m, a.trials) == (b.design, b.m, b.trials)
        bias_se = math.hypot(a.std, b.std) / math.sqrt(a.trials)
        assert abs(a.bias - b.bias) < 3 * bias_se
        assert abs(a.std - b.std) < 0.15 * a.std
        for rate in ("reliability", "wrong_decision"):
            x, y = getattr(a, rate), getattr(b, rate)
            se = math.sqrt(max(x * (1 - x) + y * (1 - y), 1e-4) / a.trials)
            assert abs(x - y) < 3 * se, (rate, x, y)


def _peak_bytes(run) -> int:
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak
