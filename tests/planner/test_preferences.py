"""Pairwise judges: position consistency and bias, accuracy in both orders, Bradley-Terry (docs/method.md §13)."""

from __future__ import annotations

import math

import choix
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.preferences import bradley_terry, pairwise_accuracy, position_consistency, ppi_bradley_terry


def _llmbar_gpt4_natural_vanilla() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """100 items, the right answer A: right in both orders 93, in the first only 2, the second only 3."""
    ab = np.repeat([0, 0, 1, 1], [93, 2, 3, 2])
    ba = np.repeat([0, 1, 0, 1], [93, 2, 3, 2])
    return np.zeros(100, dtype=np.int64), ab, ba


def test_llmbar_gpt4_natural_vanilla_statistics() -> None:
    # LLMBar: right with the first order 95, with the second 96, in both 93, same verdict in both 95, of 100
    reference, ab, ba = _llmbar_gpt4_natural_vanilla()
    accuracy = pairwise_accuracy(reference, ab, ba)
    assert (accuracy.right_ab, accuracy.right_ba, accuracy.right_both) == (0.95, 0.96, 0.93)
    consistency = position_consistency(ab, ba)
    assert (consistency.consistent, consistency.consistency) == (95, 0.95)
    # right only with A first: picked A (first shown) then B (first shown): favours the first position
    assert (consistency.first_favoured, consistency.second_favoured) == (2, 3)
    assert consistency.bias_direction == "second" and consistency.bias_p == 1.0
    assert consistency.bias_rate == pytest.approx(0.05)


def test_position_bias_exact_binomial_by_hand() -> None:
    ab = np.array([0] * 9 + [1] + [2] * 5)
    ba = np.array([1] * 9 + [0] + [2] * 5)
    result = position_consistency(ab, ba)
    assert (result.first_favoured, result.second_favoured, result.bias_direction) == (9, 1, "first")
    assert result.bias_p == pytest.approx(2 * 11 / 1024)  # 2 P[X <= 1], X ~ Bin(10, 1/2)
    assert result.consistent == 5


def test_pairwise_undefined_and_bad_input() -> None:
    assert not position_consistency([0, -1], [-1, 0]).defined
    assert not pairwise_accuracy([-1], [0], [0]).defined
    with pytest.raises(ValueError, match="outside"):
        position_consistency([3], [0])
    with pytest.raises(ValueError, match="differ in length"):
        position_consistency([0, 1], [0])


_pairs = st.lists(st.tuples(st.integers(-1, 2), st.integers(-1, 2)), min_size=1, max_size=40)
_swap = np.array([1, 0, 2])  # A <-> B; a tie and a missing verdict stay


def _renamed(codes: np.ndarray) -> np.ndarray:
    return np.where(codes >= 0, _swap[np.maximum(codes, 0)], -1)


@settings(max_examples=200, deadline=None)
@given(_pairs, st.randoms(use_true_random=False))
def test_renaming_the_answers_and_permuting_items_change_nothing(rows: list, shuffle) -> None:
    ab, ba = (np.array(column, dtype=np.int64) for column in zip(*rows))
    result = position_consistency(ab, ba)
    # calling B "A": what was shown AB is now shown BA, and every verdict is renamed
    renamed = position_consistency(_renamed(ba), _renamed(ab))
    assert repr(renamed) == repr(result)
    order = list(range(ab.size))
    shuffle.shuffle(order)
    assert repr(position_consistency(ab[order], ba[order])) == repr(result)


def _tournament(seed: int, k: int = 5, n: int = 400) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.MT19937(seed))
    theta = np.linspace(-1.0, 1.0, k)
    i = rng.integers(0, k, n)
    j = (i + rng.integers(1, k, n)) % k
    first_wins = rng.random(n) < 1.0 / (1.0 + np.exp(theta[j] - theta[i]))
    return i, j, np.where(first_wins, 0, 1)


def test_bradley_terry_matches_choix() -> None:
    i, j, y = _tournament(1)
    result = bradley_terry(i, j, y, n_systems=5, n_resamples=200, rng=0)
    data = [(a, b) if o == 0 else (b, a) for a, b, o in zip(i.tolist(), j.tolist(), y.tolist())]
    peer = choix.mm_pairwise(5, data, tol=1e-12, max_iter=100_000)
    assert result.strengths == pytest.approx(peer - peer.mean(), abs=1e-6)
    assert all(ci.low < s < ci.high for ci, s in zip(result.intervals, result.strengths))


def test_ties_are_half_wins_as_choix_sees_two_games() -> None:
    i, j, y = _tournament(2, n=200)
    y = np.where(np.arange(200) % 7 == 0, 2, y)
    result = bradley_terry(i, j, y, n_systems=5, n_resamples=50, rng=0)
    # a decisive game counted twice and a tie as one win each: the same likelihood, doubled
    data = []
    for a, b, o in zip(i.tolist(), j.tolist(), y.tolist()):
        data += [(a, b), (b, a)] if o == 2 else [(a, b) if o == 0 else (b, a)] * 2
    peer = choix.mm_pairwise(5, data, tol=1e-12, max_iter=100_000)
    assert result.strengths == pytest.approx(peer - peer.mean(), abs=1e-6)
    games = np.bincount(i, minlength=5) + np.bincount(j, minlength=5)
    wins = np.bincount(np.where(y == 1, j, i), weights=np.where(y == 2, 0.5, 1.0), minlength=5)
    wins += np.bincount(j, weights=(y == 2) * 0.5, minlength=5)
    assert result.win_rates == pytest.approx(wins / games)


def test_bradley_terry_undefined_when_a_system_never_loses() -> None:
    result = bradley_terry([0, 0, 1], [1, 2, 2], [0, 0, 1], n_systems=3)
    assert not result.defined and result.reason and np.isnan(result.strengths).all()
    with pytest.raises(ValueError, match="two different"):
        bradley_terry([0], [0], [0], n_systems=2)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.permutations(range(4)))
def test_bradley_terry_relabelling_and_swapping_sides_change_nothing(seed: int, labels: list[int]) -> None:
    i, j, y = _tournament(seed, k=4, n=60)
    y = np.where(np.arange(60) % 5 == 0, 2, y)
    base = bradley_terry(i, j, y, n_systems=4, n_resamples=5, rng=0)
    perm = np.array(labels)
    relabelled = bradley_terry(perm[i], perm[j], y, n_systems=4, n_resamples=5, rng=0)
    swapped = bradley_terry(j, i, np.select([y == 0, y == 1], [1, 0], 2), n_systems=4, n_resamples=5, rng=0)
    assert base.defined == relabelled.defined == swapped.defined
    if base.defined:
        assert relabelled.strengths[perm] == pytest.approx(base.strengths, abs=1e-7)
        assert swapped.strengths == pytest.approx(base.strengths, abs=1e-7)
        assert math.isclose(float(base.strengths.sum()), 0.0, abs_tol=1e-9)


def _sparse_humans(seed: int, k: int = 4, n: int = 150, big_n: int = 1500, right: float = 0.8):
    """Human verdicts on n comparisons, a judge (right with probability ``right``) on those and on big_n more."""
    rng = np.random.Generator(np.random.MT19937(seed))
    theta = np.linspace(-0.8, 0.8, k)

    def games(size: int):
        i = rng.integers(0, k, size)
        j = (i + rng.integers(1, k, size)) % k
        truth = np.where(rng.random(size) < 1.0 / (1.0 + np.exp(theta[j] - theta[i])), 0, 1)
        judge = np.where(rng.random(size) < right, truth, 1 - truth)
        return i, j, truth, judge

    i, j, human, judge = games(n)
    iu, ju, _, judge_u = games(big_n)
    return i, j, human, judge, iu, ju, judge_u


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_ppi_bradley_terry_matches_ppi_py_logistic(lam: float) -> None:
    from ppi_py import ppi_logistic_pointestimate

    i, j, human, judge, iu, ju, judge_u = _sparse_humans(3)
    result = ppi_bradley_terry(i, j, human, judge, iu, ju, judge_u, n_systems=4, lam=lam, n_resamples=30, rng=0)

    def design(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        x = np.zeros((a.size, 4))
        x[np.arange(a.size), a] += 1
        x[np.arange(a.size), b] -= 1
        return x[:, :3]

    peer = ppi_logistic_pointestimate(
        design(i, j), 1 - human, 1 - judge, design(iu, ju), 1 - judge_u, lam=lam, optimizer_options={"gtol": 1e-12}
    )
    full = np.append(peer, 0.0)
    assert result.strengths == pytest.approx(full - full.mean(), abs=1e-5)
    assert all(ci.low < s < ci.high for ci, s in zip(result.intervals, result.strengths))


def test_ppi_bradley_terry_with_lam_0_is_the_humans_bradley_terry() -> None:
    i, j, human, judge, iu, ju, judge_u = _sparse_humans(4)
    ppi = ppi_bradley_terry(i, j, human, judge, iu, ju, judge_u, n_systems=4, lam=0.0, n_resamples=5, rng=0)
    plain = bradley_terry(i, j, human, n_systems=4, n_resamples=5, rng=0)
    assert ppi.strengths == pytest.approx(plain.strengths, abs=1e-7)


def test_ppi_bradley_terry_narrows_the_humans_interval() -> None:
    # a judge right 97% on thirty times the comparisons: PPI's interval is narrower than the humans' alone
    i, j, human, judge, iu, ju, judge_u = _sparse_humans(5, n=100, big_n=3000, right=0.97)
    ppi = ppi_bradley_terry(i, j, human, judge, iu, ju, judge_u, n_systems=4, lam=1.0, n_resamples=200, rng=1)
    alone = bradley_terry(i, j, human, n_systems=4, n_resamples=200, rng=1)
    width = lambda cis: np.mean([ci.high - ci.low for ci in cis])  # noqa: E731
    assert width(ppi.intervals) < width(alone.intervals)


def test_ppi_bradley_terry_undefined_and_bad_input() -> None:
    # the humans never saw system 2 lose: undefined, whatever the judge says
    result = ppi_bradley_terry([0, 2], [1, 0], [0, 0], [0, 0], [0, 1], [1, 2], [1, 0], n_systems=3, n_resamples=3)
    assert not result.defined and result.reason and np.isnan(result.strengths).all()
    # the humans connect every system both ways and agree with the judge, who alone decides one comparison:
    # at lam = 1 the humans enter linearly and one comparison bounds no strength, so there is no finite minimum
    i, j, y = [0, 1, 2, 0, 1, 2], [1, 2, 0, 1, 2, 0], [0, 0, 0, 1, 1, 1]
    alone = ppi_bradley_terry(i, j, y, y, [0], [1], [0], n_systems=3, n_resamples=5, rng=0)
    assert not alone.defined and "no finite estimate" in (alone.reason or "")
    assert np.isnan(alone.strengths).all() and all(np.isnan(ci.low) for ci in alone.intervals)
    tied = ppi_bradley_terry(i, j, y, y, [0], [1], [0], n_systems=3, lam=0.5, n_resamples=5, rng=0)
    assert tied.defined and np.isfinite(tied.strengths).all()  # the humans' own loss bounds them at lam < 1
    with pytest.raises(ValueError, match="lam"):
        ppi_bradley_terry([0], [1], [0], [0], [0], [1], [0], n_systems=2, lam=1.5)
    with pytest.raises(ValueError, match="only the judge"):
        empty = np.zeros(0, dtype=np.int64)
        ppi_bradley_terry([0], [1], [0], [0], empty, empty, empty, n_systems=2)
