"""The Bradley-Terry bootstrap interval's coverage (docs/method.md §13), simulated by an independent generator
of comparisons from known strengths; the same replications show that an interval half as wide falls short."""

from __future__ import annotations

import math

import numpy as np

from planner.preferences import bradley_terry

REPS, N_COMPARISONS, LEVEL = 100, 200, 0.95
THETA = np.array([0.6, 0.0, -0.6])  # centred log-strengths of three systems


def _coverage(seed: int) -> tuple[float, float]:
    """Shares of replications whose interval for the first system holds its strength: as computed, and shrunk
    to half its width about its midpoint."""
    rng = np.random.default_rng(seed)
    held = held_half = 0
    for r in range(REPS):
        first = rng.integers(0, 3, N_COMPARISONS)
        second = (first + rng.integers(1, 3, N_COMPARISONS)) % 3
        first_wins = rng.random(N_COMPARISONS) < 1 / (1 + np.exp(THETA[second] - THETA[first]))
        ci = bradley_terry(first, second, np.where(first_wins, 0, 1), n_systems=3, n_resamples=100, rng=r).intervals[0]
        mid, half = (ci.low + ci.high) / 2, (ci.high - ci.low) / 4
        held += ci.low <= THETA[0] <= ci.high
        held_half += mid - half <= THETA[0] <= mid + half
    return held / REPS, held_half / REPS


def test_the_interval_covers_at_its_level_and_a_narrower_one_does_not() -> None:
    covered, half = _coverage(seed=21)
    se = math.sqrt(LEVEL * (1 - LEVEL) / REPS)
    assert covered >= LEVEL - 2 * se
    assert half < LEVEL - 2 * se  # not vacuous: the check tells a too-narrow interval
