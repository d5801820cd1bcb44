"""The monitor's one-pass kernel of an unweighted path (``running_monitor_path``, docs/method.md §8) against
the e-processes and the band computed apart (``running_e_processes``, ``running_eb_bounds``, as the monitor
reads a weighted path: ``planner.sequential._chunk_apart``), bit for bit, over any split of a path into two
reads."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.confidence_sequences import (
    Running,
    running_e_processes,
    running_eb_bounds,
    running_monitor_path,
    shares_band_sums,
)
from planner.sequential import _chunk_apart

# the margin rule's xi with 2-4 humans (multiples of 1/2 and 1/3) and any value in [-1, 1]
xis = st.one_of(
    st.sampled_from([-1.0, -0.5, -1 / 3, 0.0, 1 / 3, 0.5, 1.0]),
    st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False),
)


@settings(max_examples=200, deadline=None)
@given(
    x=st.lists(xis, min_size=1, max_size=60),
    split=st.integers(0, 60),
    alpha=st.sampled_from([0.01, 0.05, 0.2]),
    epsilon=st.sampled_from([0.0, 0.05, 0.2]),
    n_humans=st.integers(2, 9),
)
def test_the_kernel_has_the_numbers_of_the_e_processes_and_the_band_apart(
    x: list[float], split: int, alpha: float, epsilon: float, n_humans: int
) -> None:
    xi = np.asarray(x)
    null_mean, log_inv_a = (1.0 - epsilon) / 2.0, math.log(n_humans / alpha)
    at = min(split, xi.size - 1)  # a first read of ``at`` entries (none: from a fresh start), then the rest
    starts = [Running(), Running()]
    if at:
        starts = [running_monitor_path(xi[:at], null_mean, log_inv_a, alpha, Running())[4], Running()]
        starts[1] = _chunk_apart(xi[:at], None, null_mean, log_inv_a, alpha, Running())[4]
        assert starts[0] == starts[1]
    assert shares_band_sums(starts[0])
    fused = running_monitor_path(xi[at:], null_mean, log_inv_a, alpha, starts[0])
    apart = _chunk_apart(xi[at:], None, null_mean, log_inv_a, alpha, starts[1])
    for name, a, b in zip(("won", "lost", "lows", "highs"), fused[:4], apart[:4], strict=False):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert fused[4] == apart[4]


def test_a_weighted_path_does_not_share_its_band_sums() -> None:
    """Weighted, the band's sums are not the bets' (the kernel does not apply): the monitor reads such a
    path through the two functions."""
    x, w = np.array([1.0, 0.0, -1.0, 0.5]), np.array([0.5, 1.0, 0.25, 1.0])
    _, _, sums = running_e_processes((x + 1.0) / 2.0, 0.45, math.log(40), w, Running())
    *_, bounds = running_eb_bounds(x, 0.05, w, sums)
    assert not shares_band_sums(bounds)
    assert shares_band_sums(running_monitor_path(x, 0.45, math.log(40), 0.05, Running())[4])
