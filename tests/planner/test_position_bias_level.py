"""The position-bias test's error rate (docs/method.md §13): an exact binomial test of the flips that favour
the first position, simulated by an independent generator of a judge's two verdicts per item."""

from __future__ import annotations

import math

import numpy as np

from planner.preferences import position_consistency

REPS, N_ITEMS, LEVEL = 1000, 60, 0.05


def _judge(rng: np.random.Generator, flip_rate: float, first_share: float) -> tuple[np.ndarray, np.ndarray]:
    """A judge's verdicts with A shown first and with B shown first: consistent (a random answer, or a tie one
    time in ten) except on a share ``flip_rate`` of items, where it picks the answer in one position both times,
    the first with probability ``first_share``."""
    consistent = np.where(rng.random(N_ITEMS) < 0.1, 2, rng.integers(0, 2, N_ITEMS))
    flips = rng.random(N_ITEMS) < flip_rate
    first = rng.random(N_ITEMS) < first_share
    # the first-shown answer is A in AB and B in BA: favouring it is (A, B); favouring the second, (B, A)
    shown_ab = np.where(flips, np.where(first, 0, 1), consistent)
    shown_ba = np.where(flips, np.where(first, 1, 0), consistent)
    return shown_ab, shown_ba


def _rejection_rate(flip_rate: float, first_share: float, seed: int) -> float:
    rng = np.random.default_rng(seed)
    rejected = sum(position_consistency(*_judge(rng, flip_rate, first_share)).bias_p <= LEVEL for _ in range(REPS))
    return rejected / REPS


def test_an_unbiased_judge_is_called_biased_at_most_at_the_level() -> None:
    rate = _rejection_rate(0.3, 0.5, seed=11)
    assert rate <= LEVEL + 2 * math.sqrt(LEVEL * (1 - LEVEL) / REPS)


def test_a_judge_favouring_the_first_position_is_found() -> None:
    """Not vacuous: with four flips in five to the first position the test rejects most of the time."""
    assert _rejection_rate(0.3, 0.8, seed=12) > 0.6
