"""The numeric decision per slice (planner.score_slices; docs/method.md §3d "Slices of score judges"): a
hand-computed two-slice panel, each slice as validate_scores on its rows, the joint Benjamini–Yekutieli
family against a hand-written BY, its false-win rate by simulation (and the uncorrected one failing it),
the anytime slices at alpha / S, the authors' four numeric datasets as one sliced project, and refusals."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from planner.score_decision import validate_scores
from planner.score_monitor import monitor_scores
from planner.score_slices import monitor_scores_by_slice, validate_scores_by_slice

# judge, h1, h2, h3: slice a is the §3d check excerpt; slice b the judge far off the humans
EXCERPT = np.array([[1.0, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]])
TWO_SLICES = np.vstack([EXCERPT, np.column_stack([[5.0, 1, 1, 5], EXCERPT[:, 1:]])])
NAMES = np.array(["a"] * 4 + ["b"] * 4)


def test_margin_slices_by_hand() -> None:
    """Slice a: d = (.125, .125, 0) (docs/method.md §3d). Slice b, agreement 1 - |x - y|/4, judge 5, 1, 1, 5:
    h1 held out, per item S_f - S_h = .125 - .875, .5 - .75, 0 - .75, .125 - .875: d_1 = -2.5/4; h2: -.75,
    .625 - .875, .125 - .875, .25 - .75: d_2 = -2.25/4; h3: -.75, -.25, -.75, -.75: d_3 = -2.5/4. Slice b
    rejects (omega 0, d = -1.8125/3), slice a passes, and b is listed first."""
    s = validate_scores_by_slice(
        TWO_SLICES, NAMES, judge=0, humans=[1, 2, 3], rule="margin", epsilon=0.0, value_range=(1, 5), min_slice_items=4
    )
    b, a = s.slices
    assert (b.value, b.decision, b.omega, b.n_items) == ("b", "reject", 0.0, 4)
    assert [r.d for r in b.raters] == pytest.approx([-0.625, -0.5625, -0.625], abs=1e-15)
    assert b.d == pytest.approx(-1.8125 / 3) and a.d == pytest.approx(0.25 / 3)
    assert (a.value, a.decision, a.omega) == ("a", "pass", 1.0)
    assert s.correction == "none" and s.n_tested == 0 and s.failing == ("b",)
    assert s.headline == "fails overall; fails on slice b (omega 0.00, d -0.60)"


def test_a_small_slice_lacks_data_and_slice_epsilon_overrides() -> None:
    s = validate_scores_by_slice(
        TWO_SLICES,
        NAMES,
        judge=0,
        humans=[1, 2, 3],
        rule="margin",
        epsilon=0.0,
        slice_epsilon={"b": 0.7},
        value_range=(1, 5),
        min_slice_items=4,
    )
    assert {o.value: (o.decision, o.epsilon) for o in s.slices} == {"a": ("pass", 0.0), "b": ("pass", 0.7)}
    small = validate_scores_by_slice(TWO_SLICES, NAMES, judge=0, humans=[1, 2, 3], rule="margin", value_range=(1, 5))
    assert all(
        o.decision == "insufficient_data" and "4 usable items < min_slice_items 30" in o.reason for o in small.slices
    )
    assert small.headline.endswith("no slice fails (2 undecided)") and np.isnan(small.slices[0].omega)


def _panel(rng: np.random.Generator, n: int, n_slices: int, judge_noise: float) -> tuple[np.ndarray, np.ndarray]:
    """Judge (column 0) and four humans rating truth + noise on 1..9, slices of equal size."""
    truth = rng.integers(2, 9, size=(n, 1)).astype(float)
    humans = np.clip(np.round(truth + rng.normal(0, 1.0, (n, 4))), 1, 9)
    judge = np.clip(np.round(truth[:, 0] + rng.normal(0, judge_noise, n)), 1, 9)
    return np.column_stack([judge, humans]), np.repeat(np.arange(n_slices), n // n_slices)


def _by(p: list[float], q: float) -> list[bool]:
    """Benjamini–Yekutieli written from its definition."""
    n = len(p)
    c = sum(1 / r for r in range(1, n + 1))
    ranked = sorted(range(n), key=lambda i: p[i])
    k = max((r for r in range(1, n + 1) if p[ranked[r - 1]] <= r * q / (n * c)), default=0)
    chosen = set(ranked[:k])
    return [i in chosen for i in range(n)]


def test_each_slice_is_its_own_decision_and_the_joint_family_is_one_by_over_all() -> None:
    x, slices = _panel(np.random.default_rng(11), 240, 3, 0.9)
    kw: dict[str, Any] = {"judge": 0, "humans": [1, 2, 3, 4], "epsilon": 0.15}
    per = validate_scores_by_slice(x, slices, across_slices="per-slice", **kw)
    joint = validate_scores_by_slice(x, slices, **kw)
    assert per.correction == "per-slice" and joint.correction == "by-joint" and joint.n_tested == 12
    own = {o.value: o for o in per.slices}
    tests = []
    for value in ("0", "1", "2"):
        (v,) = validate_scores(x[slices == int(value)], [0], [1, 2, 3, 4], epsilon=0.15)
        assert own[value].omega == v.omega and own[value].raters == v.raters
        tests += [(value, r.rater, r.p_value) for r in v.raters]
    won = dict(zip([(v, k) for v, k, _ in tests], _by([p for *_, p in tests], 0.05), strict=True))
    for o in joint.slices:
        assert [r.won for r in o.raters] == [won[(o.value, r.rater)] for r in o.raters]
        assert o.omega == pytest.approx(np.mean([won[(o.value, r.rater)] for r in o.raters]))
    assert joint.overall == validate_scores(x, [0], [1, 2, 3, 4], epsilon=0.15)[0]


def test_outcomes_do_not_depend_on_row_order() -> None:
    rng = np.random.default_rng(5)
    x, slices = _panel(rng, 180, 3, 1.2)
    x[:, 1:][rng.random((180, 4)) < 0.2] = np.nan
    kw: dict[str, Any] = {"judge": 0, "humans": [1, 2, 3, 4], "epsilon": 0.1}
    perm = rng.permutation(180)
    a, b = validate_scores_by_slice(x, slices, **kw), validate_scores_by_slice(x[perm], slices[perm], **kw)
    assert [(o.value, o.omega, o.d, o.decision) for o in a.slices] == [
        (o.value, o.omega, o.d, o.decision) for o in b.slices
    ]
    assert sum(o.n_items for o in a.slices) == int((((~np.isnan(x[:, 1:])).sum(axis=1)) >= 2).sum())


def test_the_joint_family_keeps_false_wins_within_q_and_per_slice_does_not() -> None:
    """The judge is a fifth human (same noise): at epsilon 0 every human's null holds at its boundary in every
    slice, so any "won" is false. Over 8 slices the joint family's chance of one is at most q (FWER = FDR when
    every null holds); each slice's own family controls only its slice and exceeds q."""
    rng = np.random.default_rng(20261203)
    n_runs, q = 150, 0.05
    hits = {"joint": 0, "per-slice": 0}
    for _ in range(n_runs):
        x, slices = _panel(rng, 8 * 40, 8, 1.0)
        for across in hits:
            v = validate_scores_by_slice(x, slices, judge=0, humans=[1, 2, 3, 4], epsilon=0.0, across_slices=across)
            hits[across] += any(r.won for o in v.slices for r in o.raters)
    se = math.sqrt(q * (1 - q) / n_runs)
    assert hits["joint"] / n_runs <= q + 2 * se
    assert hits["per-slice"] / n_runs > q + 2 * se


def test_anytime_slices_are_each_monitored_at_alpha_over_the_number_of_slices() -> None:
    rng = np.random.default_rng(3)
    x, slices = _panel(rng, 1600, 2, 0.3)
    x[800:, 0] = np.clip(x[800:, 0] + rng.choice([-3.0, 3.0], 800), 1, 9)  # slice 1: the judge is far off
    order = np.tile(np.arange(1600.0)[:, None], (1, 5))
    kw: dict[str, Any] = {"judge": 0, "humans": [1, 2, 3, 4], "rule": "margin", "value_range": (1, 9)}
    m = monitor_scores_by_slice(x, order, slices, alpha=0.05, **kw)
    assert m.slice_alpha == 0.025 and m.failing == ("1",) and m.slices[0][0] == "1"
    fits = {v: fit for v, _, fit in m.slices}
    for value, fit in fits.items():
        rows = slices == int(value)
        assert fit == monitor_scores(
            x[rows], order[rows], 0, [1, 2, 3, 4], alpha=0.025, rule="margin", value_range=(1, 9)
        )
    assert fits["0"] is not None and fits["0"].decision == "pass"
    assert m.overall == monitor_scores(x, order, 0, [1, 2, 3, 4], alpha=0.05, rule="margin", value_range=(1, 9))
    assert "fails on slice 1" in m.headline


def test_bad_input_is_refused() -> None:
    kw: dict[str, Any] = {"humans": [1, 2, 3], "rule": "margin", "value_range": (1, 5)}
    with pytest.raises(ValueError, match="one value per item"):
        validate_scores_by_slice(TWO_SLICES, NAMES[:3], judge=0, **kw)
    with pytest.raises(ValueError, match="every item a value"):
        validate_scores_by_slice(TWO_SLICES, np.array([None] * 8), judge=0, **kw)
    with pytest.raises(ValueError, match="single column"):
        validate_scores_by_slice(TWO_SLICES, NAMES, judge=[0], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="across_slices"):
        validate_scores_by_slice(TWO_SLICES, NAMES, judge=0, across_slices="all", **kw)
    with pytest.raises(ValueError, match="slice_epsilon names"):
        validate_scores_by_slice(TWO_SLICES, NAMES, judge=0, slice_epsilon={"c": 0.1}, **kw)
    with pytest.raises(ValueError, match="min_slice_items"):
        validate_scores_by_slice(TWO_SLICES, NAMES, judge=0, min_slice_items=0, **kw)
    with pytest.raises(ValueError, match="shape of ratings"):
        monitor_scores_by_slice(TWO_SLICES, np.zeros((8, 3)), NAMES, judge=0, **kw)


# --------------------------------------------------------------------------- the authors' four numeric datasets

ALT_TEST_MIRROR = Path("/work/.mirror/nitaytech+AltTest/repo")
DATASET_EPSILON = {"summeval": 0.2, "10k_prompts": 0.15, "cebab_stars": 0.1, "lesion": 0.15}


def _mirrored_json(path: str) -> dict[str, dict[str, float]]:
    shown = subprocess.run(
        ["git", "--git-dir", str(ALT_TEST_MIRROR), "show", f"HEAD:{path}"], capture_output=True, check=True
    )
    loaded: dict[str, dict[str, float]] = json.loads(shown.stdout)
    return loaded


@pytest.mark.skipif(not ALT_TEST_MIRROR.exists() or shutil.which("git") is None, reason="no AltTest mirror here")
def test_the_four_numeric_datasets_as_one_project_give_the_published_per_dataset_results() -> None:
    """One project, a column per (dataset, human) and per LLM, the dataset as the feature: each slice with its
    own family and the authors' epsilon is their per-dataset result (tests/planner/test_score_decision.py)."""
    from tests.planner.test_score_decision import PUBLISHED

    humans: dict[str, dict[str, float]] = {}
    llms: dict[str, dict[str, float]] = {}
    for dataset in DATASET_EPSILON:
        for h, ratings in _mirrored_json(f"data/{dataset}/human_annotations.json").items():
            humans[f"{dataset}/{h}"] = {f"{dataset}/{i}": v for i, v in ratings.items()}
        for name, ratings in _mirrored_json(f"data/{dataset}/llm_annotations.json").items():
            llms.setdefault(name, {}).update({f"{dataset}/{i}": v for i, v in ratings.items()})
    columns = [*humans.values(), *llms.values()]
    items = sorted({i for c in columns for i in c})
    row = {i: r for r, i in enumerate(items)}
    x = np.full((len(items), len(columns)), np.nan)
    for c, ratings in enumerate(columns):
        x[[row[i] for i in ratings], c] = list(ratings.values())
    slices = np.array([i.split("/")[0] for i in items])
    n_checked = 0
    for j, name in enumerate(llms):
        s = validate_scores_by_slice(
            x,
            slices,
            judge=len(humans) + j,
            humans=list(range(len(humans))),
            slice_epsilon=DATASET_EPSILON,
            across_slices="per-slice",
        )
        for o in s.slices:
            if (o.value, DATASET_EPSILON[o.value]) not in PUBLISHED or name not in PUBLISHED[
                (o.value, DATASET_EPSILON[o.value])
            ]:
                assert o.decision == "insufficient_data"  # lesion has four LLMs
                continue
            rho = float(np.mean([r.rho_f for r in o.raters if r.won is not None]))
            assert (round(o.omega, 2), round(rho, 2)) == PUBLISHED[(o.value, DATASET_EPSILON[o.value])][name]
            n_checked += 1
    assert n_checked == 22
