"""``needed_ranks`` (docs/method.md §8) against its formula evaluated entry by entry in Python floats: the
smallest e-BH rank ``j`` with ``e >= K / (alpha j)``, ``K + 1`` for none, Bonferroni at rank 1 alone; and the
looks ``first_certified`` takes from those ranks."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.monitor_paths import NEVER, first_certified, needed_ranks


def _formula(log_e: float, n_humans: int, alpha: float, multiplicity: str) -> int:
    try:
        ratio = n_humans / alpha * math.exp(-min(log_e, 700.0)) * (1.0 - 1e-12)
    except OverflowError:  # a capital below e^-709: no rank
        ratio = math.inf
    rank = n_humans + 1 if ratio > n_humans + 1 else min(math.ceil(ratio), n_humans + 1)
    return rank if multiplicity == "e-bh" or rank == 1 else n_humans + 1


@settings(max_examples=200, deadline=None)
@given(
    log_e=st.lists(
        st.one_of(
            st.floats(-800.0, 800.0, allow_nan=False), st.sampled_from([math.log(9 / 0.05 / j) for j in range(1, 10)])
        ),
        min_size=1,
        max_size=40,
    ),
    n_humans=st.integers(1, 9),
    alpha=st.sampled_from([0.01, 0.05, 0.2]),
    multiplicity=st.sampled_from(["e-bh", "bonferroni"]),
)
def test_needed_ranks_are_the_formula_entry_by_entry(
    log_e: list[float], n_humans: int, alpha: float, multiplicity: str
) -> None:
    values = np.asarray(log_e)
    ranks = needed_ranks(values, n_humans, alpha, multiplicity)
    assert ranks.dtype == np.int64
    assert ranks.tolist() == [_formula(v, n_humans, alpha, multiplicity) for v in log_e]
    np.testing.assert_array_equal(values, np.asarray(log_e))  # its input is left as it was


def test_a_needed_rank_that_changes_at_a_continued_paths_first_entry_is_a_look() -> None:
    """``first_certified`` compares each path's first needed rank with its rank before (``start``): a human
    whose rank drops to 1 at the first entry of a continued path is certified there, one whose rank stays as
    it was before is not looked at again."""
    times, ranks = [np.array([5, 6]), np.array([5, 7])], [np.array([1, 1]), np.array([3, 3])]
    first = first_certified(times, ranks, 2, start=[3, 3])
    assert first.tolist() == [5, NEVER]
