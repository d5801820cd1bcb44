"""Selective evaluation with a disagreement guarantee (docs/method.md §3c)."""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.optimize import brentq

from planner.selective import binomial_upper_bound, calibrate_selective, majority_labels, selective_assignment

CASCADE = Path("/work/.mirror/jaehunjung1+cascaded-selective-evaluation/repo")  # bare: read with git show
JUDGES = ["mistral-7b-instruct", "gpt-3.5-turbo", "gpt-4-turbo"]


def _fixed_sequence(conf: np.ndarray, wrong: np.ndarray, grid: np.ndarray, alpha: float, delta: float) -> float:
    """The fixed-sequence rule written as a loop over thresholds, highest first (for comparison)."""
    last = math.nan
    for lam in sorted(grid, reverse=True):
        kept = conf >= lam
        n = int(kept.sum())
        if n < 30:
            continue
        if stats.binom.cdf(int(wrong[kept].sum()), n, alpha) > delta:
            break
        last = float(lam)
    return last


def test_the_threshold_by_hand() -> None:
    # 200 confidences 0.5..1; items 0, 4, .., 96 (confidence < 0.75) disagree. At lambda 0.661 the
    # judge keeps items 65..199 (135) with 8 disagreements: P(Bin(135, .1) <= 8) = 0.0685 <= .1;
    # at 0.660 it also keeps item 64 (a disagreement): P(Bin(136, .1) <= 9) = 0.1168 > .1, so it stops.
    conf = np.linspace(0.5, 1.0, 200)
    wrong = (np.arange(200) % 4 == 0) & (conf < 0.75)
    c = calibrate_selective(conf, wrong, alpha=0.1, delta=0.1)
    stage = c.stages[0]
    assert stage.threshold == pytest.approx(0.661)
    assert (stage.n_kept, stage.disagreements) == (135, 8)
    assert stats.binom.cdf(8, 135, 0.1) == pytest.approx(0.0685, abs=1e-4)
    assert stats.binom.cdf(9, 136, 0.1) == pytest.approx(0.1168, abs=1e-4)
    assert c.coverage == 135 / 200 and c.risk == 8 / 135
    assert stage.upper_bound <= 0.1 < float(binomial_upper_bound(np.array([9]), np.array([136]), 0.1)[0])
    assert c.guarantee.startswith("with probability >= 0.9")


def test_the_binomial_bound_is_clopper_pearson() -> None:
    # k = 0 has the closed form 1 - delta^(1/n); otherwise the root of P(Bin(n, r) <= k) = delta.
    assert binomial_upper_bound(np.array([0]), np.array([30]), 0.1)[0] == pytest.approx(1 - 0.1 ** (1 / 30))
    for k, n in [(3, 40), (17, 100), (99, 100)]:
        root = brentq(lambda r, k=k, n=n: stats.binom.cdf(k, n, r) - 0.05, 1e-12, 1 - 1e-12)
        assert binomial_upper_bound(np.array([k]), np.array([n]), 0.05)[0] == pytest.approx(root, abs=1e-9)
    assert binomial_upper_bound(np.array([5]), np.array([5]), 0.05)[0] == 1.0
    assert math.isnan(binomial_upper_bound(np.array([0]), np.array([0]), 0.05)[0])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.05, 0.4), st.floats(0.02, 0.3))
def test_the_vectorised_rule_is_the_loop_and_its_invariants_hold(seed: int, alpha: float, delta: float) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 300))
    conf = np.round(rng.random(n), 2)  # ties at grid points on purpose
    wrong = rng.random(n) < 0.6 * (1 - conf)
    grid = np.linspace(0, 1, 101)
    c = calibrate_selective(conf, wrong, alpha=alpha, delta=delta, grid=grid)
    expected = _fixed_sequence(conf, wrong, grid, alpha, delta)
    assert c.stages[0].threshold == pytest.approx(expected, nan_ok=True)
    if c.stages[0].defined:
        assert c.stages[0].upper_bound <= alpha + 1e-9
        assert c.stages[0].n_kept >= 30
    looser = calibrate_selective(conf, wrong, alpha=min(alpha * 1.5, 0.99), delta=delta, grid=grid)
    assert looser.coverage >= c.coverage  # a looser alpha never keeps fewer
    surer = calibrate_selective(conf, wrong, alpha=alpha, delta=delta / 2, grid=grid)
    assert surer.coverage <= c.coverage  # a smaller delta never keeps more
    two = calibrate_selective(
        np.column_stack([conf, rng.random(n)]), np.column_stack([wrong, wrong]), alpha=alpha, delta=delta
    )
    taken = selective_assignment(np.column_stack([conf, rng.random(n)]), [s.threshold for s in two.stages])
    assert two.coverage >= 0.0 and taken.shape == (n,)


def test_assignment_on_the_calibration_items_gives_each_judges_kept_count() -> None:
    rng = np.random.default_rng(1)
    conf = rng.random((600, 2))
    wrong = rng.random((600, 2)) < 0.5 * (1 - conf)
    c = calibrate_selective(conf, wrong, alpha=0.1, delta=0.1)
    taken = selective_assignment(conf, [s.threshold for s in c.stages])
    assert [int((taken == j).sum()) for j in range(2)] == [s.n_kept for s in c.stages]
    assert c.stages[1].n_reached == 600 - c.stages[0].n_kept
    assert c.stages[0].delta == 0.05 and c.split_delta  # delta split over the two judges
    assert c.coverage == pytest.approx(np.mean(taken >= 0))


def test_bad_input_is_refused_with_a_reason() -> None:
    conf, wrong = np.full(40, 0.9), np.zeros(40, dtype=bool)
    for alpha, delta in [(0.0, 0.1), (1.0, 0.1), (0.1, 0.0), (0.1, 1.5)]:
        with pytest.raises(ValueError, match="must be in \\(0, 1\\)"):
            calibrate_selective(conf, wrong, alpha=alpha, delta=delta)
    with pytest.raises(ValueError, match="confidence must lie in"):
        calibrate_selective(np.full(40, 1.2), wrong, alpha=0.1, delta=0.1)
    with pytest.raises(ValueError, match="confidence must lie in"):
        calibrate_selective(np.full(40, np.nan), wrong, alpha=0.1, delta=0.1)
    with pytest.raises(ValueError, match="one shape"):
        calibrate_selective(conf, wrong[:-1], alpha=0.1, delta=0.1)
    few = calibrate_selective(conf[:10], wrong[:10], alpha=0.1, delta=0.1)
    assert not few.stages[0].defined and "keeps 30 or more" in few.stages[0].reason and few.coverage == 0.0


def test_majority_labels_leave_ties_and_unlabelled_items_out() -> None:
    codes = np.array([[0, 0, 1], [1, 0, -1], [-1, -1, -1], [2, 2, -1], [1, -1, -1]])
    assert majority_labels(codes, [0, 1, 2]).tolist() == [0, -1, -1, 2, 1]


def _true_risk(lam: np.ndarray) -> np.ndarray:
    """``P(disagree | conf >= lambda)`` for ``conf ~ U(0, 1)``, ``P(disagree | c) = (1 - c)/2``: ``(1 - lambda)/4``."""
    return (1.0 - lam) / 4.0


def test_over_1000_calibration_draws_the_kept_disagreement_exceeds_alpha_at_most_delta_of_the_time() -> None:
    # Independent generator: confidence uniform, disagreement with probability (1 - c)/2, so the
    # kept items' risk at lambda is (1 - lambda)/4 exactly and exceeds alpha = .1 below lambda = .6.
    rng = np.random.default_rng(20261202)
    n_runs, n, alpha, delta = 1000, 400, 0.1, 0.1
    grid = np.linspace(0, 1, 201)
    over, naive_over = 0, 0
    for _ in range(n_runs):
        conf = rng.random(n)
        wrong = rng.random(n) < (1 - conf) / 2
        lam = calibrate_selective(conf, wrong, alpha=alpha, delta=delta, grid=grid).stages[0].threshold
        over += bool(np.isfinite(lam) and _true_risk(np.array(lam)) > alpha)
        # the rule without the bound: the lowest threshold whose empirical risk is <= alpha
        kept = conf[None, :] >= grid[:, None]
        emp = (kept & wrong[None, :]).sum(1) / np.maximum(kept.sum(1), 1)
        ok = (emp <= alpha) & (kept.sum(1) >= 30)
        naive_over += bool(ok.any() and _true_risk(grid[np.argmax(ok)]) > alpha)
    se = math.sqrt(delta * (1 - delta) / n_runs)
    print(f"P(kept risk > alpha): calibrated {over / n_runs:.3f}, without the bound {naive_over / n_runs:.3f}")
    assert over / n_runs <= delta + 2 * se
    assert naive_over / n_runs > delta + 2 * se  # not vacuous: without the exact bound the guarantee fails


def _mirrored_lines(path: str) -> list[dict[str, object]]:
    shown = subprocess.run(["git", f"--git-dir={CASCADE}", "show", f"HEAD:{path}"], capture_output=True, check=True)
    return [json.loads(line) for line in shown.stdout.decode().splitlines()]


def _their_threshold(phat: np.ndarray, wrong: np.ndarray, alpha: float, delta: float) -> float:
    """The paper code's ``SelectiveClassificationUtil.lambda_hat``, re-read here in numpy (exact integer counts)."""
    every = np.linspace(0, 1, 5000)
    lambdas = every[(phat[None, :] >= every[:, None]).sum(axis=1) >= 30]

    def bound(lam: float) -> float:
        n, k = int((phat >= lam).sum()), int(wrong[phat >= lam].sum())
        return float(brentq(lambda r: stats.binom.cdf(k, n, r) - delta, 0, 0.9999))

    if bound(lambdas[-1]) > alpha:
        return float(lambdas[-1])  # their fallback: the top candidate, though its test failed
    for lam in lambdas[::-1]:
        if bound(lam - 1 / lambdas.size) > alpha:
            return float(lam)
    return float(lambdas[0])


@pytest.mark.skipif(not CASCADE.exists(), reason="the cascaded-selective-evaluation repository is not mirrored here")
def test_the_authors_calibration_files_give_their_thresholds_where_their_test_passes() -> None:
    samples: dict[str, dict[str, object]] = {}
    for name in JUDGES:
        for row in _mirrored_lines(f"result/{name}.calibration.jsonl"):
            entry = samples.setdefault(
                f"{row['instruction']}-{row['outputs']}", {"preferences": row["preferences"], "probs": {}}
            )
            entry["probs"][name] = row["probs"]  # type: ignore[index]
    merged = [s for s in samples.values() if len(s["probs"]) == len(JUDGES)]  # type: ignore[arg-type]
    assert len(merged) == 500
    labels = np.array([int(Counter(s["preferences"].values()).most_common(1)[0][0]) - 1 for s in merged])  # type: ignore[attr-defined]
    probs = {name: np.array([s["probs"][name] for s in merged]) for name in JUDGES}  # type: ignore[index]
    phat = np.column_stack([probs[n].max(axis=1) for n in JUDGES])
    wrong = np.column_stack([probs[n].argmax(axis=1) for n in JUDGES]) != labels[:, None]
    alpha, delta = 0.15, 0.1  # the repository's example_apply_decision_rule.py
    theirs, reached = [], np.ones(500, dtype=bool)
    for j in range(3):
        lam = _their_threshold(phat[reached, j], wrong[reached, j], alpha, delta)
        theirs.append(lam)
        reached &= ~(phat[:, j] >= lam)
    ours = calibrate_selective(phat, wrong, alpha=alpha, delta=delta, grid=np.linspace(0, 1, 5000), split_delta=False)
    # gpt-3.5-turbo's threshold is theirs; mistral's and gpt-4-turbo's top candidates fail the test,
    # where their code keeps the top candidate anyway and ours keeps nothing (no guarantee to give).
    assert ours.stages[1].threshold == pytest.approx(theirs[1], abs=1e-12)
    assert theirs[1] == pytest.approx(0.792758551710342)
    assert [s.defined for s in ours.stages] == [False, True, False]
    assert theirs[0] == pytest.approx(np.linspace(0, 1, 5000)[4998]) and theirs[2] > 0.999
    for j in (0, 2):
        assert "fails the test" in ours.stages[j].reason
    their_cover = np.mean(selective_assignment(phat, theirs) >= 0)
    assert their_cover == pytest.approx(0.64)
    assert ours.coverage == pytest.approx(0.55) and ours.risk == pytest.approx(0.12) and ours.risk <= alpha
    alone = calibrate_selective(phat[:, 1], wrong[:, 1], alpha=alpha, delta=delta, grid=np.linspace(0, 1, 5000))
    assert alone.stages[0].threshold == pytest.approx(
        _their_threshold(phat[:, 1], wrong[:, 1], alpha, delta), abs=1e-12
    )
