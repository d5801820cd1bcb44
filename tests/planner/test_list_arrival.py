"""planner.list_arrival: a secondary's planned list read in its own order (docs/method.md §8.2). A listed label
waits behind an unlabeled item of its list and is then dated by the latest rank before it; labels in hand before
the list (at or before ``since``) are read as they came; the monitor reads a listed human's path in list order
whatever order the labels were uploaded in, at every moment of the upload."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.codes import MISSING
from planner.list_arrival import listed_arrival
from planner.monitor_paths import differences, list_positions
from planner.sequential import Monitoring, monitor_judge
from planner.slices import monitor_judge_by_slice


def _with_judge_and_other(codes: np.ndarray, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``codes`` and ``ranks`` with a judge's and another human's labels of every row at rank 1 (columns 2, 3)."""
    n = codes.shape[0]
    return np.column_stack([codes, np.ones((n, 2), dtype=int)]), np.column_stack([ranks, np.ones((n, 2), dtype=int)])


JUDGE_AND_OTHER: dict[str, Any] = {"judge": 2, "humans": [0, 1, 3]}


def test_held_back_dated_and_before_the_list_by_hand() -> None:
    # one listed column (1), list order rows 3, 0, 2, 1, 4; since = 5; the judge's and another human's labels in hand
    codes, ranks = _with_judge_and_other(
        np.array([[0, 1], [0, 0], [1, -1], [1, 1], [0, 1]]), np.array([[1, 9], [1, 4], [1, -1], [1, 7], [1, 3]])
    )
    out_codes, out_ranks = listed_arrival(codes, ranks, [(1, np.array([3, 0, 2, 1, 4]), 5)], **JUDGE_AND_OTHER)
    # row 3 (rank 7 > since): first, no gap before it, dated 7; row 0: max(7, 9) = 9; row 2: the gap;
    # row 1 (rank 4 <= since: in hand before the list) read at 4; row 4 (rank 3 <= since) read at 3
    assert out_ranks[:, 1].tolist() == [9, 4, -1, 7, 3]
    assert out_codes[:, 1].tolist() == [1, 0, -1, 1, 1]
    # since 0: rows 1 and 4 are behind the gap and wait (code missing, rank -1)
    out_codes, out_ranks = listed_arrival(codes, ranks, [(1, np.array([3, 0, 2, 1, 4]), 0)], **JUDGE_AND_OTHER)
    assert out_ranks[:, 1].tolist() == [9, -1, -1, 7, -1]
    assert out_codes[:, 1].tolist() == [1, MISSING, -1, 1, MISSING]
    assert np.array_equal(out_ranks[:, [0, 2, 3]], ranks[:, [0, 2, 3]])  # other columns untouched
    # a row of -1 (an item with no row) is a gap
    _, out_ranks = listed_arrival(codes, ranks, [(1, np.array([3, -1, 0]), 0)], **JUDGE_AND_OTHER)
    assert out_ranks[:, 1].tolist() == [-1, 4, -1, 7, 3]
    assert listed_arrival(codes, ranks, [], **JUDGE_AND_OTHER)[0] is codes  # no list: the inputs themselves


@settings(max_examples=80, deadline=None)
@given(n_items=st.integers(1, 40), seed=st.integers(0, 2**32 - 1), since=st.integers(0, 3))
def test_a_listed_path_is_the_list_order_at_every_moment_of_any_upload(n_items: int, seed: int, since: int) -> None:
    rng = np.random.default_rng(seed)
    codes = np.column_stack([rng.integers(0, 2, n_items), rng.integers(0, 2, n_items), np.full(n_items, -1)])
    ranks = np.column_stack([np.ones(n_items, dtype=np.int64)] * 2 + [np.full(n_items, -1)])  # judge, primary
    planned = rng.permutation(n_items)  # the secondary's list, drawn before any of its labels
    upload = rng.permutation(n_items)  # the order its labels are uploaded in, one write each
    lists = [(2, planned, since)]
    positions = list_positions(lists, [1, 2], n_items)
    for write, row in enumerate(upload, start=10):
        codes[row, 2], ranks[row, 2] = rng.integers(0, 2), write
        c, r = listed_arrival(codes, ranks, lists, judge=0, humans=[1, 2])
        path = differences(c, r, 0, [1, 2], "margin", positions=positions)[1]
        gaps = np.flatnonzero(codes[planned, 2] < 0)
        reached = planned[: gaps[0] if gaps.size else n_items]  # the list up to its first gap
        assert path[2].tolist() == reached.tolist()
        assert np.all(np.diff(path[0]) >= 0)  # dated in arrival order


def test_an_item_waits_for_the_judge_and_another_human_by_hand() -> None:
    # columns: the listed secondary, the judge, the primary; list order rows 0, 1, 2, 3; since 0
    codes = np.array([[1, 1, 0], [0, 1, 1], [1, -1, 0], [0, 1, -1], [1, 0, 0]])
    ranks = np.array([[5, 2, 1], [6, 20, 1], [7, -1, 1], [8, 3, -1], [9, 3, 1]])
    lists = [(0, np.array([0, 1, 2, 3]), 0)]
    out_codes, out_ranks = listed_arrival(codes, ranks, lists, judge=1, humans=[0, 2])
    # row 0 complete at max(5, 2, 1) = 5; row 1 at 20 (the judge came last); row 2 lacks the judge: it waits,
    # and holds row 3 (which also lacks another human); row 4 is off the list: as it came
    assert out_ranks[:, 0].tolist() == [5, 20, -1, -1, 9]
    assert out_codes[:, 0].tolist() == [1, 0, MISSING, MISSING, 1]
    # the judge's label of row 2 arrives (rank 30): row 2 complete at 30; row 3 still lacks another human
    codes[2, 1], ranks[2, 1] = 1, 30
    out_codes, out_ranks = listed_arrival(codes, ranks, lists, judge=1, humans=[0, 2])
    assert out_ranks[:, 0].tolist() == [5, 20, 30, -1, 9]  # row 3 itself incomplete: it waits
    codes[3, 2], ranks[3, 2] = 0, 31  # the primary labels row 3: complete at 31
    out_codes, out_ranks = listed_arrival(codes, ranks, lists, judge=1, humans=[0, 2])
    assert out_ranks[:, 0].tolist() == [5, 20, 30, 31, 9] and np.array_equal(out_codes, codes)
    # complete by since (40 here): read as it came
    _, out_ranks = listed_arrival(codes, ranks, [(0, np.array([0, 1, 2, 3]), 40)], judge=1, humans=[0, 2])
    assert out_ranks[:, 0].tolist() == ranks[:, 0].tolist()


def test_a_secondary_held_back_on_its_list_is_no_other_human_for_another_list() -> None:
    # two secondaries (columns 1, 2) share rows 0 and 1 with no primary; the judge (column 0) in hand at rank 1
    codes = np.array([[1, 0, 1], [0, 1, 1], [1, 1, -1]])
    ranks = np.array([[1, 5, 6], [1, 7, 4], [1, 3, -1]])
    lists = [(1, np.array([2, 0, 1]), 0), (2, np.array([2, 1, 0]), 0)]  # column 2's gap (row 2) holds its rows 1, 0
    out_codes, out_ranks = listed_arrival(codes, ranks, lists, judge=0, humans=[1, 2])
    # column 1's row 2 lacks another human: it waits and holds its rows 0 and 1, so every listed label waits
    assert out_codes[:, 1].tolist() == [MISSING] * 3 and out_codes[:, 2].tolist() == [MISSING] * 3
    codes[2, 2], ranks[2, 2] = 0, 9  # column 2 labels row 2: every item is complete, released by that write
    out_codes, out_ranks = listed_arrival(codes, ranks, lists, judge=0, humans=[1, 2])
    assert out_ranks[:, 1].tolist() == [9, 9, 9] and out_ranks[:, 2].tolist() == [9, 9, 9]
    assert np.array_equal(out_codes, codes)


@settings(max_examples=80, deadline=None)
@given(n_items=st.integers(1, 30), seed=st.integers(0, 2**32 - 1))
def test_a_listed_path_is_the_list_order_whoever_uploads_in_whatever_order(n_items: int, seed: int) -> None:
    """Every label (the judge's, the primary's and the listed secondary's) uploaded one write each in any order:
    at every moment the secondary's path, and the primary's, is the list up to the first item lacking one of
    the three labels."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 2, (n_items, 3))
    codes, ranks = np.full((n_items, 3), -1), np.full((n_items, 3), -1)
    planned = rng.permutation(n_items)
    lists = [(2, planned, 0)]
    positions = list_positions(lists, [1, 2], n_items)
    for write, cell in enumerate(rng.permutation(3 * n_items), start=1):
        row, column = divmod(int(cell), 3)
        codes[row, column], ranks[row, column] = values[row, column], write
        c, r = listed_arrival(codes, ranks, lists, judge=0, humans=[1, 2])
        gaps = np.flatnonzero(np.any(codes[planned] < 0, axis=1))
        for path in differences(c, r, 0, [1, 2], "margin", positions=positions):  # the primary's, the secondary's
            assert path[2].tolist() == planned[: gaps[0] if gaps.size else n_items].tolist()
            assert np.all(np.diff(path[0]) >= 0) and (path[0].size == 0 or path[0][-1] <= write)


def test_the_monitor_reads_the_lists_it_is_given() -> None:
    """monitor_judge with ``lists`` equals monitor_judge on the codes and ranks listed_arrival gives when each
    list's ties are read in list order, and differs from the labels read by their writes."""
    rng = np.random.default_rng(4)
    n = 300
    truth = rng.integers(0, 2, n)
    codes = np.where(rng.random((n, 4)) < [0.9, 0.8, 0.8, 0.8], truth[:, None], 1 - truth[:, None])
    ranks = np.column_stack([np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64)] + [2 + np.arange(n)] * 2)
    lists = [(2, rng.permutation(n), 1), (3, rng.permutation(n), 1)]
    options: dict[str, Any] = {"judge": 0, "humans": [1, 2, 3], "n_labels": 2}
    with_lists = monitor_judge(codes, order=ranks, lists=lists, **options)
    by_writes = monitor_judge(codes, order=ranks, **options)
    assert [r.n for r in with_lists.raters] == [r.n for r in by_writes.raters] == [n] * 3  # nothing held at the end
    assert [r.e_value for r in with_lists.raters] != [r.e_value for r in by_writes.raters]  # another order
    half = np.where(ranks < 2 + n // 2, ranks, -1), np.where(ranks < 2 + n // 2, codes, -1)
    held = monitor_judge(half[1], order=half[0], lists=lists, **options)
    assert held.raters[1].n < n // 2 and held.raters[2].n < n // 2  # half uploaded: listed labels wait


def _same(a: Monitoring, b: Monitoring) -> bool:
    """The same decision, looks and per-human path (n, e-values, arrival ranks)."""
    return (a.decision, a.looks, a.decided_at) == (b.decision, b.looks, b.decided_at) and all(
        (x.n, x.e_value, x.e_value_lost, x.status) == (y.n, y.e_value, y.e_value_lost, y.status)
        and np.array_equal(x.arrival, y.arrival)
        for x, y in zip(a.raters, b.raters, strict=True)
    )


def test_a_slice_reads_its_part_of_each_list_in_list_order() -> None:
    """monitor_judge_by_slice with lists: overall the monitor of the whole matrix with them, and each slice the
    monitor of its rows with each list's items in that slice, in list order (restricted here by hand)."""
    rng = np.random.default_rng(9)
    n = 240
    truth = rng.integers(0, 2, n)
    codes = np.where(rng.random((n, 4)) < [0.9, 0.8, 0.8, 0.8], truth[:, None], 1 - truth[:, None])
    ranks = np.column_stack([np.ones(n, dtype=np.int64)] * 2 + [2 + rng.permutation(n), 2 + rng.permutation(n)])
    ranks[rng.random((n, 4)) < 0.1] = -1
    codes = np.where(ranks >= 0, codes, -1)
    lists = [(2, rng.permutation(n), 1), (3, rng.permutation(n), 1)]
    sliced = np.array(["a", "b"])[rng.integers(0, 2, n)]
    # Bonferroni: each slice's certifications are its own (e-BH's joint family may certify a slice's human sooner)
    options: dict[str, Any] = {"judge": 0, "humans": [1, 2, 3], "n_labels": 2, "multiplicity": "bonferroni"}
    got = monitor_judge_by_slice(codes, sliced, order=ranks, lists=lists, min_slice_items=1, **options)
    assert _same(got.overall, monitor_judge(codes, order=ranks, lists=lists, **options))
    for value, _, fit in got.slices:
        rows = np.flatnonzero(sliced == value)
        local = {int(r): k for k, r in enumerate(rows)}
        own = [(c, np.array([local[int(r)] for r in listed if int(r) in local]), s) for c, listed, s in lists]
        alone = monitor_judge(codes[rows], order=ranks[rows], lists=own, alpha=got.slice_alpha, **options)
        assert fit is not None and _same(fit, alone)
    assert not _same(got.overall, monitor_judge(codes, order=ranks, **options))  # the lists change the path
