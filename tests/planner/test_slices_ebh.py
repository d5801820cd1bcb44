"""Anytime slices decided by one e-BH over every slice's humans (docs/method.md §3b): by hand, against e-BH
written out look by look, never fewer certifications than Bonferroni, and the error it promises simulated in
the order labels arrive."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.monitor_paths import NEVER, first_certified, needed_ranks
from planner.sequential import monitor_judge
from planner.slices import joint_first_certified, monitor_judge_by_slice

ALPHA = 0.05


def _paths(*e_values: list[float]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each process's entries at looks 1, 2, ... with the given e-values."""
    times = [np.arange(1, len(e) + 1, dtype=np.int64) for e in e_values]
    return times, [np.log(np.asarray(e, dtype=float)) for e in e_values]


def test_the_joint_family_by_hand() -> None:
    # Two slices of two humans, N = 4 e-processes, alpha = .05: e-BH needs e_(j) >= 4 / (.05 j) = 80, 40, 26.7, 20.
    # Look 1: e = 30, 35, 28, 5 sorted 35, 30, 28, 5: j = 3 holds (28 >= 26.7), j = 4 not (5 < 20): the first three.
    # Look 2: the fourth rises to 22: 35, 30, 28, 22 and j = 4 holds (22 >= 20): it is certified at look 2.
    times, log_e = _paths([30, 30], [35, 35], [28, 28], [5, 22])
    assert joint_first_certified(times, log_e, 4, ALPHA).tolist() == [1, 1, 1, 2]
    # Each slice alone at alpha / 2 (e-BH over its 2 humans needs 2 / (.025 j) = 80, 40) certifies none, and
    # Bonferroni (every e against 4 / .05 = 80) none.
    for pair in ((0, 1), (2, 3)):
        ranks = [needed_ranks(log_e[k], 2, ALPHA / 2, "e-bh") for k in pair]
        assert first_certified([times[k] for k in pair], ranks, 2).tolist() == [NEVER, NEVER]
    assert all(np.all(needed_ranks(e, 4, ALPHA, "bonferroni") > 1) for e in log_e)
    # A fifth process in the family, never given (e = 1), raises the levels to 100, 50, 33.3, 25, 20: none passes.
    assert joint_first_certified(times, log_e, 5, ALPHA).tolist() == [NEVER] * 4
    with pytest.raises(ValueError, match="4 e-processes given for a family of 3"):
        joint_first_certified(times, log_e, 3, ALPHA)


def _e_bh_look_by_look(times: list[np.ndarray], log_e: list[np.ndarray], n_tested: int, alpha: float) -> list[int]:
    """e-BH written out: at every look, each process's e-value is its last entry's (1 before any), sorted
    decreasingly, ``k* = max{j : e_(j) >= n / (alpha j)}``; a process's first look in the certified set."""
    first = [NEVER] * len(times)
    for look in np.unique(np.concatenate(times)):
        now = []
        for t, e in zip(times, log_e, strict=True):
            seen = np.flatnonzero(t <= look)
            now.append(math.exp(e[seen[-1]]) if seen.size else 1.0)
        order = sorted(range(len(now)), key=lambda k: -now[k])
        k_star = max([j for j in range(1, len(now) + 1) if now[order[j - 1]] >= n_tested / (alpha * j)], default=0)
        for k in order[:k_star]:
            first[k] = min(first[k], int(look))
    return first


@st.composite
def _families(draw: Any) -> tuple[list[np.ndarray], list[np.ndarray], int, int, float]:
    """A few slices of a few e-processes, each a path of log e-values at increasing looks."""
    n_slices, k = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    times, log_e = [], []
    for _ in range(n_slices * k):
        n = draw(st.integers(0, 6))
        looks = sorted(draw(st.sets(st.integers(1, 12), min_size=n, max_size=n)))
        times.append(np.asarray(looks, dtype=np.int64))
        log_e.append(np.asarray(draw(st.lists(st.floats(-3, 8), min_size=n, max_size=n)), dtype=float))
    return times, log_e, n_slices, k, draw(st.sampled_from([0.05, 0.2]))


@settings(max_examples=100, deadline=None)
@given(_families())
def test_the_joint_family_is_e_bh_at_every_look_and_never_certifies_later_than_alpha_over_s(
    family: tuple[list[np.ndarray], list[np.ndarray], int, int, float],
) -> None:
    """The joint certifications equal e-BH written out look by look, and every process is first certified no
    later than by its slice's own e-BH at ``alpha / S`` or by Bonferroni at ``S K / alpha`` (docs/method.md §3b:
    the union of the per-slice sets is self-consistent at ``alpha``, so e-BH's set contains it)."""
    times, log_e, n_slices, k, alpha = family
    n = n_slices * k
    joint = joint_first_certified(times, log_e, n, alpha)
    assert joint.tolist() == _e_bh_look_by_look(times, log_e, n, alpha)
    for multiplicity in ("e-bh", "bonferroni"):
        for s in range(n_slices):
            part = slice(s * k, (s + 1) * k)
            ranks = [needed_ranks(e, k, alpha / n_slices, multiplicity) for e in log_e[part]]
            alone = first_certified(times[part], ranks, k)
            assert np.all(joint[part] <= alone)


def _arriving_panel(
    rng: np.random.Generator, n_slices: int, per_slice: int, accuracy: np.ndarray, write: int = 4
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three humans and a judge (column 3) labeling two-class items, each column right with its ``accuracy``
    (per slice: shape ``(n_slices, 4)``); the labels arrive one cell at a time in a random order, in writes of
    ``write`` labels (a write's labels share an arrival rank: the monitor looks once per write)."""
    n = n_slices * per_slice
    truth = rng.integers(0, 2, n)
    right = rng.random((n, 4)) < np.repeat(accuracy, per_slice, axis=0)
    codes = np.where(right, truth[:, None], 1 - truth[:, None])
    ranks = np.empty(4 * n, dtype=np.int64)
    ranks[rng.permutation(4 * n)] = np.arange(4 * n) // write
    return codes, np.repeat(np.arange(n_slices), per_slice).astype(str), ranks.reshape(n, 4)


OPTIONS: dict[str, Any] = {"judge": 3, "humans": [0, 1, 2], "n_labels": 2, "epsilon": 0.0}


def test_seeded_panels_pass_every_slice_bonferroni_passes_and_more() -> None:
    """On the same data the joint e-BH decides every slice that Bonferroni (or an e-BH per slice at
    ``alpha / S``) decides, the same way and no later, and on these panels decides some slice sooner."""
    rng = np.random.default_rng(35)
    sooner = 0
    for _ in range(6):
        accuracy = np.tile([0.85, 0.85, 0.85, 0.95], (4, 1))
        codes, slices, ranks = _arriving_panel(rng, 4, 150, accuracy)
        joint = monitor_judge_by_slice(codes, slices, order=ranks, alpha=ALPHA, **OPTIONS)
        bonferroni = monitor_judge_by_slice(
            codes, slices, order=ranks, alpha=ALPHA, multiplicity="bonferroni", **OPTIONS
        )
        assert (joint.correction, bonferroni.correction, joint.n_tested) == ("e-bh-joint", "bonferroni-slices", 12)
        by_value = {v: fit for v, _, fit in joint.slices}
        for value, _, fit in bonferroni.slices:
            rows = slices == value
            own = monitor_judge(codes[rows], order=ranks[rows], alpha=ALPHA / 4, **OPTIONS)
            got = by_value[value]
            assert fit is not None and got is not None
            assert [r.e_value for r in got.raters] == [r.e_value for r in own.raters]  # the same e-processes
            for other in (fit, own):
                if other.decision in ("pass", "reject"):
                    assert got.decision == other.decision and got.decided_at is not None
                    assert other.decided_at is not None and got.decided_at <= other.decided_at
                    sooner += got.decided_at < other.decided_at
    assert sooner > 0


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.sampled_from([0.6, 0.8, 0.9, 0.97]), min_size=2, max_size=4),
    st.sampled_from([0.05, 0.2]),
)
def test_e_bh_decides_every_slice_bonferroni_decides_on_the_same_data(
    seed: int, judge_accuracy: list[float], alpha: float
) -> None:
    """Slices whose judge ranges from far worse than the humans to far better, labels arriving in writes:
    every human Bonferroni certifies, e-BH certifies the same way and no later, so every slice Bonferroni
    decides e-BH decides the same way, no later, and e-BH decides at least as many slices."""
    rng = np.random.default_rng(seed)
    accuracy = np.column_stack([np.full((len(judge_accuracy), 3), 0.8), judge_accuracy])
    codes, slices, ranks = _arriving_panel(rng, len(judge_accuracy), 60, accuracy)
    joint = monitor_judge_by_slice(codes, slices, order=ranks, alpha=alpha, **OPTIONS)
    bonferroni = monitor_judge_by_slice(codes, slices, order=ranks, alpha=alpha, multiplicity="bonferroni", **OPTIONS)
    by_value = {v: fit for v, _, fit in joint.slices}
    for value, _, fit in bonferroni.slices:
        got = by_value[value]
        assert fit is not None and got is not None
        for mine, theirs in zip(got.raters, fit.raters, strict=True):
            if theirs.status != "open":
                assert mine.status == theirs.status and mine.certified_at is not None
                assert theirs.certified_at is not None and mine.certified_at <= theirs.certified_at
        if fit.decision in ("pass", "reject"):
            assert got.decision == fit.decision and got.decided_at is not None and fit.decided_at is not None
            assert got.decided_at <= fit.decided_at
    decided = [
        sum(f is not None and f.decision in ("pass", "reject") for _, _, f in m.slices) for m in (joint, bonferroni)
    ]
    assert decided[0] >= decided[1]


def _won(monitored: Any) -> list[bool]:
    """Per (slice, human) of a slice monitoring: certified won."""
    return [r.status == "won" for _, _, fit in monitored.slices if fit is not None for r in fit.raters]


def test_a_judge_on_the_margin_everywhere_passes_no_slice_but_with_probability_alpha() -> None:
    """Every null on its boundary (the judge exchangeable with the humans at epsilon 0) in 8 slices of 80
    items, labels arriving a write of 4 at a time, looked at after every write: some slice's human certified
    won at some look (a false pass is one) in at most alpha + 2 SE of runs, alpha = .2; monitoring each slice
    at alpha with no correction across slices does so in far more (here .05 against .52 of 60 runs)."""
    rng = np.random.default_rng(20261203)
    runs, alpha, n_slices = 60, 0.2, 8
    accuracy = np.full((n_slices, 4), 0.8)
    joint = uncorrected = 0
    for _ in range(runs):
        codes, slices, ranks = _arriving_panel(rng, n_slices, 80, accuracy)
        joint += any(_won(monitor_judge_by_slice(codes, slices, order=ranks, alpha=alpha, **OPTIONS)))
        uncorrected += any(
            r.status == "won"
            for value in np.unique(slices)
            for r in monitor_judge(codes[slices == value], order=ranks[slices == value], alpha=alpha, **OPTIONS).raters
        )
    se = math.sqrt(alpha * (1 - alpha) / runs)
    assert joint / runs <= alpha + 2 * se
    assert uncorrected / runs > alpha + 2 * se  # not vacuous: without the correction some slice passes falsely


def test_false_certifications_stay_within_a_share_alpha_when_some_slices_are_good() -> None:
    """Four slices where the judge is far better than the humans and four where it sits on the margin: the
    share of false "won" certifications among all slices' (a human of a margin slice certified won) averages
    at most alpha + 2 SE (e-BH's FDR; docs/method.md §3b), alpha = .2 (.07 over 40 runs, 3.9 true ones a run)."""
    rng = np.random.default_rng(11)
    runs, alpha = 40, 0.2
    accuracy = np.vstack([np.tile([0.8, 0.8, 0.8, 0.97], (4, 1)), np.full((4, 4), 0.8)])
    shares, true_ones = [], 0
    for _ in range(runs):
        codes, slices, ranks = _arriving_panel(rng, 8, 80, accuracy)
        m = monitor_judge_by_slice(codes, slices, order=ranks, alpha=alpha, **OPTIONS)
        won = [(int(v), r.status == "won") for v, _, fit in m.slices if fit is not None for r in fit.raters]
        false = sum(w for v, w in won if v >= 4)
        certified = sum(w for _, w in won)
        true_ones += certified - false
        shares.append(false / max(certified, 1))
    se = float(np.std(shares, ddof=1)) / math.sqrt(runs)
    assert float(np.mean(shares)) <= alpha + 2 * se
    assert true_ones > 0  # the good slices are certified: the share is not an empty family's
