"""Which secondary holds which item, as coverage-aware designs read it (service.planning.lists._assigned)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.planning.lists import ListCorpus, _assigned


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.integers(1, 60), min_size=1, max_size=30, unique=True),
    rows=st.lists(st.tuples(st.integers(1, 80), st.integers(1, 6)), max_size=60, unique=True),
)
def test_each_assignment_marks_its_items_row_and_its_raters_column(items: list[int], rows: list[tuple[int, int]]):
    """Rows follow the matrix's item order (any order, not sorted), columns the raters' ids in
    increasing order; assignments of items outside the matrix are left out."""
    matrix: Any = SimpleNamespace(item_ids=np.array(items, dtype=np.int64))
    raters = sorted({rater for _, rater in rows})
    expected = np.zeros((len(items), len(raters)), dtype=bool)
    for item, rater in rows:
        if item in items:
            expected[items.index(item), raters.index(rater)] = True
    with pytest.MonkeyPatch.context() as patch:  # the database answers ``rows`` as (item, rater) integers
        patch.setattr("service.planning.lists.integer_rows", lambda *_: np.array(rows, dtype=np.int64).reshape(-1, 2))
        got = _assigned(None, "p", ListCorpus(matrix))  # type: ignore[arg-type]
    assert got.dtype == bool
    np.testing.assert_array_equal(got, expected)
