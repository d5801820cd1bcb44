"""Per-slice validation with multiplicity across slices (docs/method.md §3b)."""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.decision import validate_judge
from planner.sequential import monitor_judge
from planner.slices import monitor_judge_by_slice, usable_items, validate_judge_by_slice

ALTTEST = Path("/work/.mirror/nitaytech+AltTest/repo")  # a bare mirror: files are read with git show


def _mirrored(path: str) -> Any:
    """A JSON file of the AltTest repository's newest mirrored commit."""
    shown = subprocess.run(["git", f"--git-dir={ALTTEST}", "show", f"HEAD:{path}"], capture_output=True, check=True)
    return json.loads(shown.stdout)


def _two_slice_panel() -> tuple[np.ndarray, np.ndarray]:
    """90 items in "en" where the judge is the truth, 30 in "de" where it misses every third."""
    i = np.arange(120)
    truth = i % 2
    humans = np.column_stack([truth, truth, np.where(i % 6 == 0, 1 - truth, truth)])
    judge = np.where((i >= 90) & (i % 3 == 0), 1 - truth, truth)
    return np.column_stack([humans, judge]), np.where(i < 90, "en", "de")


def test_each_slice_reads_its_own_items_by_hand() -> None:
    # de: the judge misses 10 of 30 items (i % 3 == 0), 5 of them where h3 also misses (i % 6 == 0):
    # d_1 = d_2 = -5/30 (misses where h1 agrees with both others), d_3 = (-10 + 5)/30; all -1/6.
    # en: the judge is h1, so d_1 = d_2 = 0 and d_3 = +15/90 (h3's 15 misses).
    codes, slices = _two_slice_panel()
    s = validate_judge_by_slice(
        codes, slices, judge=3, humans=[0, 1, 2], n_labels=2, epsilon=0.08, n_resamples=200, rng=0
    )
    by_value = {o.value: o for o in s.slices}
    assert [r.d for r in by_value["de"].raters] == pytest.approx([-1 / 6] * 3)
    assert [r.d for r in by_value["en"].raters] == pytest.approx([0.0, 0.0, 1 / 6])
    assert (by_value["de"].n_items, by_value["en"].n_items) == (30, 90)
    assert by_value["de"].omega == 0.0 and by_value["en"].omega == 1.0
    # overall: d_1 = -5/120 >= -0.08, d_3 = (15 - 5)/120
    assert [r.d for r in s.overall.raters] == pytest.approx([-5 / 120, -5 / 120, 10 / 120])
    assert s.overall.decision == "pass" and s.failing == ("de",)
    assert [o.value for o in s.slices] == ["de", "en"]  # failing first
    assert s.headline == "passes overall; fails on slice de (omega 0.00, d -0.17)"
    assert s.correction == "none" and s.n_tested == 0


def test_a_slice_epsilon_overrides_the_projects_and_small_slices_lack_data() -> None:
    codes, slices = _two_slice_panel()
    s = validate_judge_by_slice(
        codes,
        slices,
        judge=3,
        humans=[0, 1, 2],
        n_labels=2,
        epsilon=0.08,
        slice_epsilon={"de": 0.2},
        n_resamples=200,
        rng=0,
    )
    de = next(o for o in s.slices if o.value == "de")
    assert de.epsilon == 0.2 and de.omega == 1.0  # -1/6 >= -0.2
    small = validate_judge_by_slice(
        codes, slices, judge=3, humans=[0, 1, 2], n_labels=2, min_slice_items=31, n_resamples=20, rng=0
    )
    de = next(o for o in small.slices if o.value == "de")
    assert de.decision == "insufficient_data" and "30 usable items < min_slice_items 31" in de.reason
    assert math.isnan(de.omega) and de.validation is None
    assert small.slices[-1].value == "de"  # undecided slices last


def test_bad_input_is_refused_with_a_reason() -> None:
    codes, slices = _two_slice_panel()
    kw: dict[str, Any] = {"judge": 3, "humans": [0, 1, 2], "n_labels": 2, "n_resamples": 10}
    with pytest.raises(ValueError, match="one feature value per item"):
        validate_judge_by_slice(codes, slices[:-1], **kw)
    with pytest.raises(ValueError, match="no item has"):
        validate_judge_by_slice(codes, slices, slice_epsilon={"fr": 0.1}, **kw)
    with pytest.raises(ValueError, match="across_slices"):
        validate_judge_by_slice(codes, slices, across_slices="bonferroni", **kw)
    with pytest.raises(ValueError, match="every item a value"):
        validate_judge_by_slice(codes, np.array([None] * 120, dtype=object), **kw)


def _by(p: np.ndarray, q: float) -> np.ndarray:
    """Benjamini–Yekutieli written out from the paper (1995/2001), for comparison."""
    m = p.size
    c = sum(1.0 / i for i in range(1, m + 1))
    order = sorted(range(m), key=lambda i: p[i])
    k = max((r for r in range(1, m + 1) if p[order[r - 1]] <= r * q / (m * c)), default=0)
    out = np.zeros(m, dtype=bool)
    out[order[:k]] = True
    return out


def _alt_test_panel(
    rng: np.random.Generator, n: int, accuracies: list[float], n_slices: int
) -> tuple[np.ndarray, np.ndarray]:
    truth = rng.integers(0, 3, n)
    right = rng.random((n, len(accuracies))) < np.array(accuracies)
    codes = np.where(right, truth[:, None], (truth[:, None] + rng.integers(1, 3, (n, len(accuracies)))) % 3)
    return codes, np.repeat(np.arange(n_slices), n // n_slices)


def test_the_joint_family_is_one_by_over_every_slices_humans_and_per_slice_is_each_slices_own() -> None:
    codes, slices = _alt_test_panel(np.random.default_rng(5), 240, [0.8, 0.8, 0.8, 0.9], 4)
    kw: dict[str, Any] = {
        "judge": 3,
        "humans": [0, 1, 2],
        "n_labels": 3,
        "rule": "alt-test",
        "epsilon": 0.1,
        "n_resamples": 20,
        "rng": 0,
    }
    per = validate_judge_by_slice(codes, slices, across_slices="per-slice", **kw)
    joint = validate_judge_by_slice(codes, slices, across_slices="joint", **kw)
    for o in per.slices:
        own = validate_judge(
            codes[slices == int(o.value)], judge=3, humans=[0, 1, 2], n_labels=3, rule="alt-test", epsilon=0.1
        )
        assert [r.won for r in o.raters] == [r.won for r in own.raters]
        assert [r.p_value for r in o.raters] == pytest.approx([r.p_value for r in own.raters])
    rows = [(o.value, r) for o in sorted(joint.slices, key=lambda o: o.value) for r in o.raters]
    expected = _by(np.array([r.p_value for _, r in rows]), 0.05)
    assert [r.won for _, r in rows] == expected.tolist()
    assert joint.correction == "by-joint" and joint.n_tested == 12 and per.n_tested == 12
    for o in joint.slices:
        assert o.omega == pytest.approx(np.mean([r.won for r in o.raters]))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["margin", "alt-test"]))
def test_outcomes_do_not_depend_on_row_order_or_slice_names(seed: int, rule: str) -> None:
    rng = np.random.default_rng(seed)
    codes, slices = _alt_test_panel(rng, 120, [0.8, 0.7, 0.9, 0.85], 3)
    codes[rng.random(codes.shape) < 0.1] = -1
    kw: dict[str, Any] = {
        "judge": 3,
        "humans": [0, 1, 2],
        "n_labels": 3,
        "rule": rule,
        "n_resamples": 5,
        "rng": 0,
        "min_slice_items": 20,
    }
    base = validate_judge_by_slice(codes, slices, **kw)
    perm = rng.permutation(120)
    names = np.array(["x", "y", "z"])
    moved = validate_judge_by_slice(codes[perm], names[slices[perm]], **kw)
    point = {o.value: (o.n_items, o.omega, o.d, [r.won for r in o.raters]) for o in base.slices}
    moved_point = {
        str(np.flatnonzero(names == o.value)[0]): (o.n_items, o.omega, o.d, [r.won for r in o.raters])
        for o in moved.slices
    }
    assert point.keys() == moved_point.keys()
    for key, (n, omega, d, won) in point.items():
        n2, omega2, d2, won2 = moved_point[key]
        assert n == n2 and won == won2
        assert omega == pytest.approx(omega2, nan_ok=True) and d == pytest.approx(d2, nan_ok=True)
    assert sum(o.n_items for o in base.slices) == int(usable_items(codes, 3, [0, 1, 2]).sum())
    single = validate_judge_by_slice(codes, np.zeros(120, dtype=int), **kw)
    assert single.slices[0].omega == pytest.approx(single.overall.omega, nan_ok=True)


def test_the_joint_family_keeps_false_wins_across_slices_within_q_and_per_slice_does_not() -> None:
    # The judge is another human (same accuracy): at epsilon = 0 every human's null holds on
    # its boundary, in every slice. Any "won" is false; under the joint family the chance of
    # one over 8 slices is at most q (FWER = FDR when every null holds). Each slice's own family
    # controls only its own slice, so some slice wins falsely far more often.
    rng = np.random.default_rng(20261202)
    n_runs, q, n_slices = 100, 0.05, 8
    hits = {"joint": 0, "per-slice": 0}
    for _ in range(n_runs):
        codes, slices = _alt_test_panel(rng, 30 * n_slices, [0.8] * 4, n_slices)
        for multiplicity in hits:
            v = validate_judge_by_slice(
                codes, slices, judge=3, humans=[0, 1, 2], n_labels=3, rule="alt-test", epsilon=0.0,
                across_slices=multiplicity, n_resamples=1, rng=0,
            )  # fmt: skip
            hits[multiplicity] += any(r.won for o in v.slices for r in o.raters)
    se = math.sqrt(q * (1 - q) / n_runs)
    assert hits["joint"] / n_runs <= q + 2 * se
    assert hits["per-slice"] / n_runs > q + 2 * se  # not vacuous: uncorrected slices exceed q


def test_monitoring_per_slice_runs_each_slice_at_alpha_over_the_number_of_slices() -> None:
    rng = np.random.default_rng(3)
    codes, slices = _alt_test_panel(rng, 1200, [0.85, 0.85, 0.85, 0.97], 2)
    codes[600:, 3] = np.where(rng.random(600) < 0.5, codes[600:, 3], (codes[600:, 3] + 1) % 3)
    m = monitor_judge_by_slice(codes, slices, judge=3, humans=[0, 1, 2], n_labels=3, alpha=0.05)
    assert m.slice_alpha == 0.025
    fits = {v: fit for v, _, fit in m.slices}
    assert fits["0"] is not None and fits["0"].alpha == 0.025 and fits["0"].decision == "pass"
    assert m.failing == ("1",) and m.slices[0][0] == "1"
    assert m.headline.startswith(
        f"{ {'pass': 'passes', 'reject': 'fails'}[m.overall.decision] } overall; fails on slice 1"
    )


def test_the_slices_monitors_read_ties_in_the_tiebreak_order_and_a_bad_key_shape_is_refused() -> None:
    """Every label at one arrival rank (one write): each slice is ``monitor_judge`` on its rows with their keys,
    and a permutation of the rows that carries the keys along leaves every slice's monitoring as it is."""
    rng = np.random.default_rng(8)
    codes, slices = _alt_test_panel(rng, 600, [0.85, 0.85, 0.85, 0.95], 2)
    order = np.where(codes >= 0, 1, -1)
    keys = rng.permutation(600).astype(np.int64)
    options: dict[str, Any] = {"judge": 3, "humans": [0, 1, 2], "n_labels": 3}
    m = monitor_judge_by_slice(codes, slices, order=order, tiebreak=keys, **options)
    for value, _, fit in m.slices:
        rows = slices.astype(str) == value
        alone = monitor_judge(codes[rows], order=order[rows], tiebreak=keys[rows], alpha=m.slice_alpha, **options)
        assert fit is not None and [r.e_value for r in fit.raters] == [r.e_value for r in alone.raters]
    shuffled = rng.permutation(600)
    again = monitor_judge_by_slice(
        codes[shuffled], slices[shuffled], order=order[shuffled], tiebreak=keys[shuffled], **options
    )
    assert [[r.e_value for r in f.raters] for _, _, f in again.slices if f is not None] == [
        [r.e_value for r in f.raters] for _, _, f in m.slices if f is not None
    ]
    in_rows = monitor_judge_by_slice(codes, slices, order=order, **options)  # ties in row order: another reading
    assert [r.e_value for _, _, f in in_rows.slices if f is not None for r in f.raters] != [
        r.e_value for _, _, f in m.slices if f is not None for r in f.raters
    ]
    with pytest.raises(ValueError, match="tiebreak must have one key per item"):
        monitor_judge_by_slice(codes, slices, order=order, tiebreak=keys[:10], **options)


DATASET_EPSILON = {"wax": 0.1, "lgbteen": 0.2, "mtbench": 0.2, "framing": 0.15, "cebab_aspects": 0.1}


def _published() -> dict[tuple[str, str], tuple[float, float]]:
    """Parse the notebook's printed per-dataset results (read from the mirror at test time)."""
    notebook = _mirrored("alt_test_example.ipynb")
    cell = next(c for c in notebook["cells"] if "datasets_epsilons" in "".join(c["source"]))
    out: dict[tuple[str, str], tuple[float, float]] = {}
    for line in "".join(cell["outputs"][0]["text"]).splitlines():
        match = re.match(r"(\S+) (\S+) \[\w+\]:\s+Winning Rate=([\d.]+)\s+Advantage Probability=([\d.]+)", line)
        if match and match[1] in DATASET_EPSILON:
            out[(match[1], match[2])] = (float(match[3]), float(match[4]))
    return out


def _merged_alt_test_project() -> tuple[np.ndarray, np.ndarray, list[str], int]:
    """The five datasets as one project: a column per human (per dataset) and per LLM, ``dataset`` the feature."""
    humans: dict[str, dict[str, str]] = {}
    llms: dict[str, dict[str, str]] = {}
    slice_of: dict[str, str] = {}
    for dataset in DATASET_EPSILON:
        for h, labels in _mirrored(f"data/{dataset}/human_annotations.json").items():
            humans[f"{dataset}/{h}"] = {f"{dataset}/{i}": str(v) for i, v in labels.items()}
        for name, labels in _mirrored(f"data/{dataset}/llm_annotations.json").items():
            llms.setdefault(name, {}).update({f"{dataset}/{i}": str(v) for i, v in labels.items()})
        slice_of.update({i: dataset for labels in humans.values() for i in labels if i.startswith(f"{dataset}/")})
    items = sorted(slice_of)
    row = {i: r for r, i in enumerate(items)}
    columns = list(humans.values()) + list(llms.values())
    values = sorted({v for c in columns for v in c.values()})
    code = {v: c for c, v in enumerate(values)}
    codes = np.full((len(items), len(columns)), -1)
    for c, labels in enumerate(columns):
        cells = [(row[i], code[v]) for i, v in labels.items() if i in row]
        codes[[r for r, _ in cells], c] = [v for _, v in cells]
    return codes, np.array([slice_of[i] for i in items]), list(llms), len(values)


@pytest.mark.skipif(not ALTTEST.exists(), reason="the AltTest repository is not mirrored here")
def test_the_authors_five_datasets_as_one_project_give_their_published_per_dataset_results() -> None:
    published = _published()
    assert len(published) == 30  # 5 datasets x 6 LLMs
    codes, slices, llms, n_labels = _merged_alt_test_project()
    n_humans = codes.shape[1] - len(llms)
    humans = list(range(n_humans))
    changed = 0
    for j, name in enumerate(llms):
        kw: dict[str, Any] = {
            "judge": n_humans + j,
            "humans": humans,
            "n_labels": n_labels,
            "rule": "alt-test",
            "n_resamples": 2,
            "rng": 0,
        }
        s = validate_judge_by_slice(codes, slices, slice_epsilon=DATASET_EPSILON, across_slices="per-slice", **kw)
        for o in s.slices:
            used = [r for r in o.raters if r.won is not None]
            rho = float(np.mean([r.rho_f for r in used]))
            assert (round(o.omega, 2), round(rho, 2)) == pytest.approx(published[(o.value, name)], abs=1e-9), (
                o.value,
                name,
            )
            assert o.epsilon == DATASET_EPSILON[o.value]
        joint = validate_judge_by_slice(codes, slices, slice_epsilon=DATASET_EPSILON, **kw)
        assert joint.n_tested == sum(sum(r.won is not None for r in o.raters) for o in joint.slices)
        changed += sum(
            a.omega != b.omega
            for a, b in zip(
                sorted(s.slices, key=lambda o: o.value), sorted(joint.slices, key=lambda o: o.value), strict=True
            )
        )
    print("slices whose omega the joint family moves:", changed)
    assert changed < 30
