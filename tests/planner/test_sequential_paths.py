"""The per-item differences of the anytime monitor (docs/method.md §8) on compact rows.

``planner.sequential.differences`` works only on the rows that carry a comparison (the judge
and at least two humans), grouped by their number of humans. The reference here is the
previous dense implementation: every item x held-out human x pool member at once. Both must
give the same paths (arrival ranks, rows, ``xi``) and so the same monitor, on random matrices
built from write sequences (labels, corrections that move an item's arrival, retractions),
with and without inclusion weights.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import sequential
from planner.sequential import monitor_judge

NEVER = np.iinfo(np.int64).max


def _dense_pool_differences(labels, times, judge_labels, judge_times, rule):
    """Usable, entry rank and ``xi`` of every item x held-out human (the dense reference)."""
    n_humans = labels.shape[1]
    first = np.argmin(times, axis=1)
    two = np.partition(times, 1, axis=1)
    is_first = np.arange(n_humans)[None, :] == first[:, None]
    other_first = np.where(is_first, two[:, 1:2], two[:, 0:1])
    usable = (judge_times[:, None] < NEVER) & (times < NEVER) & (other_first < NEVER)
    entry = np.maximum(np.maximum(judge_times[:, None], times), other_first)
    pool = (times[:, None, :] <= entry[:, :, None]) & ~np.eye(n_humans, dtype=bool)
    judge_agree = np.sum(pool & (labels == judge_labels[:, None])[:, None, :], axis=2)
    human_agree = np.sum(pool & (labels[:, None, :] == labels[:, :, None]), axis=2)
    if rule == "margin":
        xi = (judge_agree - human_agree) / np.maximum(pool.sum(axis=2), 1)
    else:
        xi = np.sign(judge_agree - human_agree).astype(float)
    return usable, entry, xi


def _dense_differences(codes, order, judge, humans, rule, tiebreak=None, positions=None):
    """Per held-out human: arrival ranks, ``xi`` and rows in arrival order, ties by the human's list
    ``positions`` (when it has a list), then ``tiebreak`` keys (dense reference)."""
    labels = codes[:, humans]
    times = np.where(labels != -1, order[:, humans], NEVER)
    judge_times = np.where(codes[:, judge] != -1, order[:, judge], NEVER)
    usable, entry, xi = _dense_pool_differences(labels, times, codes[:, judge], judge_times, rule)
    paths = []
    for k in range(len(humans)):
        rows = np.flatnonzero(usable[:, k])
        keys = rows if tiebreak is None else tiebreak[rows]
        listed = positions[k] if positions else None
        by = (keys, entry[rows, k]) if listed is None else (keys, listed[rows], entry[rows, k])
        arrival = rows[np.lexsort(by)]
        paths.append((entry[arrival, k], xi[arrival, k], arrival))
    return paths


@st.composite
def _written(draw):
    """Codes and arrival ranks after a random write sequence, the judge in a random column."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n_items = draw(st.integers(0, 40))
    n_cols = draw(st.integers(3, 7))
    n_labels = draw(st.integers(2, 4))
    codes = np.full((n_items, n_cols), -1, dtype=np.int64)
    order = np.full((n_items, n_cols), -1, dtype=np.int64)
    if n_items:
        density = draw(st.sampled_from([0.3, 0.6, 1.0]))
        n_writes = draw(st.integers(0, 3 * n_items * n_cols))
        seq = 0
        for _ in range(n_writes):  # a label, a correction (a later rank), or a retraction
            i, k = rng.integers(n_items), rng.integers(n_cols)
            if codes[i, k] >= 0 and rng.random() < 0.15:
                codes[i, k], order[i, k] = -1, -1
            elif rng.random() < density:
                codes[i, k], order[i, k] = rng.integers(n_labels), seq
            seq += 1
    if draw(st.booleans()):  # ranks with ties (row order, or a coarse clock)
        order = np.where(codes >= 0, rng.integers(0, max(1, n_items // 2), codes.shape), -1)
    judge = int(rng.integers(n_cols))
    humans = [h for h in rng.permutation(n_cols).tolist() if h != judge]
    rule = draw(st.sampled_from(["margin", "alt-test"]))
    weighted = n_items > 0 and draw(st.booleans())
    inclusion = rng.choice([0.1, 0.25, 1.0], n_items) if weighted else None
    return codes, order, judge, humans, n_labels, rule, inclusion


@settings(max_examples=300, deadline=None)
@given(_written())
def test_compact_paths_equal_the_dense_reference(case) -> None:
    codes, order, judge, humans, _, rule, _ = case
    got = sequential.differences(codes, order, judge, humans, rule)
    want = _dense_differences(codes, order, judge, humans, rule)
    assert len(got) == len(want) == len(humans)
    for (entry, xi, rows), (entry_ref, xi_ref, rows_ref) in zip(got, want, strict=True):
        assert np.array_equal(rows, rows_ref) and np.array_equal(entry, entry_ref)
        np.testing.assert_allclose(xi, xi_ref, rtol=0, atol=1e-12)


@settings(max_examples=150, deadline=None)
@given(_written())
def test_the_monitor_on_compact_paths_equals_the_dense_one(case) -> None:
    codes, order, judge, humans, n_labels, rule, inclusion = case
    kwargs = dict(
        judge=judge,
        humans=humans,
        n_labels=n_labels,
        order=order,
        rule=rule,
        alpha=0.3,
        inclusion=inclusion,
    )
    got = monitor_judge(codes, **kwargs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sequential, "differences", _dense_differences)
        want = monitor_judge(codes, **kwargs)
    assert (got.decision, got.decided_at, got.looks) == (want.decision, want.decided_at, want.looks)
    for r, ref in zip(got.raters, want.raters, strict=True):
        assert (r.rater, r.status, r.n, r.certified_at) == (ref.rater, ref.status, ref.n, ref.certified_at)
        assert np.array_equal(r.arrival, ref.arrival)
        for a, b in ((r.e_value, ref.e_value), (r.e_value_lost, ref.e_value_lost), (r.d, ref.d)):
            assert a == pytest.approx(b, rel=1e-12, abs=1e-12, nan_ok=True)
        np.testing.assert_allclose(r.lower, ref.lower, rtol=0, atol=1e-12)
        np.testing.assert_allclose(r.upper, ref.upper, rtol=0, atol=1e-12)


@pytest.mark.parametrize("differences", [sequential.differences, _dense_differences])
def test_hand_computed_pools_follow_arrival(differences) -> None:
    """Humans 0..2, judge 3. Human 2 labels after the item was complete (rank 9 > 2): it is not
    in human 0's pool (with it, xi would be (2 - 1)/2), and its own pool is {0, 1}."""
    codes = np.array([[0, 0, 1, 0]])
    order = np.array([[0, 1, 9, 2]])
    first, second, late = differences(codes, order, 3, [0, 1, 2], "margin")
    assert first[0].tolist() == [2] and first[1].tolist() == [0.0]  # pool {1}: 1 - 1
    assert second[0].tolist() == [2] and second[1].tolist() == [0.0]  # pool {0}: 1 - 1
    assert late[0].tolist() == [9] and late[1].tolist() == [1.0]  # pool {0, 1}: (2 - 0)/2
    alt = differences(codes, order, 3, [0, 1, 2], "alt-test")
    assert [p[1].tolist() for p in alt] == [[0.0], [0.0], [1.0]]


@settings(max_examples=150, deadline=None)
@given(_written(), st.sampled_from([np.int8, np.int16]), st.sampled_from([np.int32, np.int64]))
def test_the_monitor_reads_compact_integer_types_as_int64(case, code_type, rank_type) -> None:
    """A child process receives int8 codes and int32 ranks; the monitor reads them without
    widening and gives bit-identical results (same ranks, same floats)."""
    codes, order, judge, humans, n_labels, rule, inclusion = case
    kwargs = dict(judge=judge, humans=humans, n_labels=n_labels, rule=rule, alpha=0.3, inclusion=inclusion)
    got = monitor_judge(codes.astype(code_type), order=order.astype(rank_type), **kwargs)
    want = monitor_judge(codes, order=order, **kwargs)
    assert (got.decision, got.decided_at, got.looks) == (want.decision, want.decided_at, want.looks)
    for r, ref in zip(got.raters, want.raters, strict=True):
        assert (r.rater, r.status, r.n, r.certified_at) == (ref.rater, ref.status, ref.n, ref.certified_at)
        assert np.array_equal(r.arrival, ref.arrival)
        assert np.array_equal([r.e_value, r.e_value_lost, r.d], [ref.e_value, ref.e_value_lost, ref.d], equal_nan=True)
        assert np.array_equal(r.lower, ref.lower) and np.array_equal(r.upper, ref.upper)
