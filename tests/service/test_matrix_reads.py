"""What a document reads of a label matrix every request (``LabelMatrix.codes``, ``monitored_ranks``) against
the masked forms written here, and that a matrix without CANNOT_ASSESS or INVALID codes is read without a copy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.matrices.arrival import ArrivalOrder, monitored_ranks
from service.matrices.matrix import LabelMatrix, RaterColumn

N_LABELS = 3


def _matrix(raw: np.ndarray, order: np.ndarray, *, frozen: bool) -> LabelMatrix:
    for a in (raw, order):
        a.flags.writeable = not frozen
    return LabelMatrix(
        raw=raw,
        item_ids=np.arange(raw.shape[0]),
        raters=[RaterColumn(k + 1, f"r{k}", "human") for k in range(raw.shape[1])],
        n_labels=N_LABELS,
        label_seq=int(order.max(initial=0)),
        criterion="default",
        order=order,
    )


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    special=st.booleans(),
    frozen=st.booleans(),
    opening=st.integers(0, 60),
    rank_type=st.sampled_from([np.int32, np.int64]),
    other_negative=st.booleans(),
)
def test_codes_and_monitored_ranks_equal_their_masked_forms(
    seed: int, special: bool, frozen: bool, opening: int, rank_type: type, other_negative: bool
) -> None:
    rng = np.random.default_rng(seed)
    raw = rng.integers(-1, N_LABELS + (2 if special else 0), (30, 4)).astype(np.int8)
    order = np.where(raw >= 0, rng.integers(0, 50, raw.shape), -1).astype(rank_type)
    if other_negative:  # not a matrix's (-1 alone marks no label), read as the masked form reads it
        order[0, 0] = -2
    matrix = _matrix(raw, order, frozen=frozen)
    np.testing.assert_array_equal(matrix.codes, np.where(raw >= N_LABELS, -1, raw))
    assert matrix.codes.dtype == raw.dtype and not matrix.codes.flags.writeable
    expected = np.where(order < 0, -1, np.maximum(order, opening))
    ranks = monitored_ranks(matrix, ArrivalOrder(opening=opening, seed=0))
    np.testing.assert_array_equal(ranks, expected)
    assert ranks.dtype == order.dtype


@pytest.mark.parametrize("special", [False, True])
def test_a_frozen_matrix_without_special_codes_is_its_own_codes(special: bool) -> None:
    raw = np.array([[0, 1, -1], [2, N_LABELS if special else 0, 1]], dtype=np.int8)
    matrix = _matrix(raw, np.where(raw >= 0, 1, -1).astype(np.int32), frozen=True)
    assert (matrix.codes is raw) is not special
    writable = _matrix(raw.copy(), np.where(raw >= 0, 1, -1).astype(np.int32), frozen=False)
    assert writable.codes is not writable.raw  # a writable matrix's codes are a copy: it may change
