"""Distinct rows by packed keys against ``np.unique(axis=0)`` (hypothesis), and the item bootstrap's
chunking."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from planner.resampling import distinct_rows

PROPERTY = settings(max_examples=80, deadline=None)


@st.composite
def int_rows(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """Rows ``(n, k)`` with values ``-1..n_values-1``; wide enough, they need several keys."""
    n_values = draw(st.sampled_from([1, 2, 3, 5, 40, 3000]))
    shape = (draw(st.integers(0, 60)), draw(st.integers(1, 70)))
    rows = draw(hnp.arrays(np.int64, shape, elements=st.integers(-1, n_values - 1)))
    repeats = draw(st.integers(0, shape[0]))  # duplicated rows, so frequencies exceed one
    return np.concatenate([rows, rows[:repeats]]), n_values


@PROPERTY
@given(int_rows(), st.booleans())
def test_distinct_rows_equal_numpy_unique_in_order(case: tuple[np.ndarray, int], given_n: bool) -> None:
    rows, n_values = case
    distinct, frequency = distinct_rows(rows, n_values if given_n else None)
    expected, expected_frequency = np.unique(rows, axis=0, return_counts=True)
    np.testing.assert_array_equal(distinct, expected.reshape(-1, rows.shape[1]))
    np.testing.assert_array_equal(frequency, expected_frequency)


def test_rows_without_columns_are_one_empty_pattern() -> None:
    distinct, frequency = distinct_rows(np.zeros((4, 0), dtype=np.int64))
    assert distinct.shape == (1, 0) and frequency.tolist() == [4]
    distinct, frequency = distinct_rows(np.zeros((2, 0), dtype=np.int64), counts=np.array([3, 5]))
    assert distinct.shape == (1, 0) and frequency.tolist() == [8]
