"""The per-item inclusion probabilities of a Neyman plan, in matrix order, are a vectorised lookup:
equal to looking each item up (items off the plan certain), whatever the order of the item ids."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import service.planning.lists as planned_lists
from service.matrices.matrix import LabelMatrix


@settings(max_examples=60, deadline=None)
@given(
    ids=st.lists(st.integers(1, 10**6), min_size=0, max_size=60, unique=True),
    shuffled=st.booleans(),
    on_plan=st.dictionaries(st.integers(1, 10**6), st.floats(0.01, 1.0), max_size=40),
    rng=st.integers(0, 2**32 - 1),
)
def test_inclusion_by_item_is_the_lookup_of_each_item(
    ids: list[int], shuffled: bool, on_plan: dict[int, float], rng: int
) -> None:
    item_ids = np.array(sorted(ids), dtype=np.int64)
    if shuffled:
        item_ids = np.random.default_rng(rng).permutation(item_ids)
    on_plan |= {int(i): 0.5 for i in item_ids[::3]}  # some of the corpus on the plan, some ids not in it
    matrix = LabelMatrix(
        raw=np.full((item_ids.size, 0), -1),
        item_ids=item_ids,
        raters=[],
        n_labels=2,
        label_seq=0,
        criterion="default",
        order=np.full((item_ids.size, 0), -1),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(planned_lists, "plan_inclusion", lambda session, plan: on_plan)
        got = planned_lists.inclusion_by_item(None, None, matrix)  # type: ignore[arg-type]
    assert got is not None
    assert got.tolist() == [on_plan.get(int(i), 1.0) for i in item_ids]
