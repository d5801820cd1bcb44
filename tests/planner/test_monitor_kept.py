"""planner.sequential.kept_monitoring: a monitoring brought up to date from the labels written since
equals monitor_judge on the whole matrix, bit for bit, whatever the writes in between (labels added,
changed, retracted; weighted or not; with a budget or not; ties read by row or by keys; planned lists or
not), and reads only
the rows written since: continued when labels were only added, its paths patched otherwise."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import planner.sequential as sequential
from planner.sequential import Monitoring, kept_monitoring, monitor_judge

N_LABELS = 3


def _same(a: Monitoring, b: Monitoring) -> None:
    """Every field equal, floats bit for bit (NaN equal to NaN)."""
    for name in ("decision", "reason", "looks", "decided_at", "needed", "n_items", "weighting", "budget"):
        assert getattr(a, name) == getattr(b, name), name
    assert len(a.raters) == len(b.raters)
    for x, y in zip(a.raters, b.raters, strict=True):
        for name in ("rater", "status", "n", "certified_at", "threshold"):
            assert getattr(x, name) == getattr(y, name), name
        for name in ("e_value", "e_value_lost", "d"):
            u, v = getattr(x, name), getattr(y, name)
            assert (math.isnan(u) and math.isnan(v)) or u == v, (name, u, v)
        assert x.cs.as_list() == y.cs.as_list() or (np.isnan(x.cs.low) and np.isnan(y.cs.low))
        for name in ("arrival", "lower", "upper"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)


# One write: (kind, item, column, label); kind 0-5 adds a label to an empty cell (skipped when the cell
# is labeled), 6 changes a labeled cell's label, 7 retracts it.
writes = st.lists(
    st.tuples(st.integers(0, 7), st.integers(0, 59), st.integers(0, 4), st.integers(0, N_LABELS - 1)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    n_items=st.integers(1, 60),
    n_humans=st.integers(2, 4),
    rounds=st.lists(st.tuples(st.booleans(), writes), min_size=1, max_size=6),
    weighted=st.booleans(),
    budget=st.sampled_from([None, 5, 40]),
    seed=st.integers(0, 2**16),
    listed=st.booleans(),
    chunk=st.sampled_from([1, 2, 3, 7, 1 << 16]),
)
def test_kept_monitoring_equals_a_fresh_monitoring_after_any_writes(
    n_items: int,
    n_humans: int,
    rounds: list[tuple[bool, list[tuple[int, int, int, int]]]],
    weighted: bool,
    budget: int | None,
    seed: int,
    listed: bool,
    chunk: int,
) -> None:
    """The kept monitoring reads its paths ``chunk`` entries at a time, the fresh one in one pass: a path
    read in chunks, each continuing from the sums of the one before, has the same numbers bit for bit."""
    rng = np.random.default_rng(seed)
    n_cols = n_humans + 1
    judge = int(rng.integers(0, n_cols))
    humans = [k for k in range(n_cols) if k != judge]
    inclusion = rng.choice([0.25, 0.5, 1.0], n_items) if weighted else None
    codes = np.full((n_items, n_cols), -1, dtype=np.int8)
    order = np.full((n_items, n_cols), -1, dtype=np.int32)
    seq, state = 0, None
    options = {
        "judge": judge,
        "humans": humans,
        "n_labels": N_LABELS,
        "epsilon": 0.1,
        "budget": budget,
        "inclusion": inclusion,
        # two humans' planned lists (docs/method.md §8.2), one of them over half the items
        "lists": [(h, rng.permutation(n_items)[: n_items // (1 + k)], k) for k, h in enumerate(humans[:2])]
        if listed
        else [],
    }
    for added_only, round_ in rounds:  # rounds of additions only are continued, others computed afresh
        codes, order = codes.copy(), order.copy()
        for kind, item, column, label in round_:
            kind = kind % 6 if added_only else kind
            i, c = item % n_items, column % n_cols
            if kind <= 5 and codes[i, c] < 0 or kind == 6 and codes[i, c] >= 0:
                seq += 1
                codes[i, c], order[i, c] = label, seq
            elif kind == 7 and codes[i, c] >= 0:
                seq += 1  # a retraction takes a label_seq of its own
                codes[i, c], order[i, c] = -1, -1
        default, sequential._PATH_CHUNK = sequential._PATH_CHUNK, chunk
        try:
            kept, state = kept_monitoring(codes, previous=state, order=order, **options)
        finally:
            sequential._PATH_CHUNK = default
        _same(kept, monitor_judge(codes, order=order, **options))


def test_only_the_rows_labeled_since_are_read_when_labels_were_only_added(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    n_items = 2_000
    codes = np.where(rng.random((n_items, 4)) < 0.6, rng.integers(0, 2, (n_items, 4)), -1)
    order = np.where(codes >= 0, rng.permutation(codes.size).reshape(codes.shape) + 1, -1)
    options = {"judge": 0, "humans": [1, 2, 3], "n_labels": 2}
    _, state = kept_monitoring(codes, previous=None, order=order, **options)
    assert codes.dtype == np.int64 and state.codes.dtype == np.int8  # kept in the compact type: 1/8 of the bytes
    empty = np.argwhere(codes < 0)[:50]
    codes, order = codes.copy(), order.copy()
    codes[empty[:, 0], empty[:, 1]] = 1
    order[empty[:, 0], empty[:, 1]] = codes.size + 1 + np.arange(50)
    read: list[int] = []
    differences = sequential.differences
    monkeypatch.setattr(sequential, "differences", lambda c, *a: read.append(c.shape[0]) or differences(c, *a))
    kept, _ = kept_monitoring(codes, previous=state, order=order, **options)
    assert read == [np.unique(empty[:, 0]).size]
    _same(kept, monitor_judge(codes, order=order, **options))
    changed = codes.copy()
    i, c = np.argwhere(codes >= 0)[0]
    changed[i, c] = 1 - changed[i, c]  # a label the state saw changed in place: its row read again
    kept, _ = kept_monitoring(changed, previous=state, order=order, **options)
    assert read[-1] == np.unique(np.append(empty[:, 0], i)).size
    _same(kept, monitor_judge(changed, order=order, **options))


def _opening_panel(rng: np.random.Generator, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """A judge and four humans, every label of the first 70% of the items at one rank (an opening: one tie
    for the whole path), the others labeled one by one after it."""
    truth = rng.integers(0, 2, n_items)
    p = np.array([0.93, 0.85, 0.85, 0.85, 0.85])
    codes = np.where(rng.random((n_items, 5)) < p, truth[:, None], 1 - truth[:, None])
    codes[rng.random(codes.shape) < 0.3] = -1
    order = np.where(codes >= 0, 1 + rng.permutation(codes.size).reshape(codes.shape), -1)
    order[: int(0.7 * n_items)] = np.where(codes[: int(0.7 * n_items)] >= 0, 1, -1)
    return codes, order


def _options(rng: np.random.Generator, n_items: int, *, keyed: bool, weighted: bool) -> dict[str, Any]:
    """The monitor's options for :func:`_opening_panel`'s judge and four humans: item keys and inclusion
    probabilities drawn from ``rng`` when asked for."""
    return {
        "judge": 0,
        "humans": [1, 2, 3, 4],
        "n_labels": 2,
        "tiebreak": rng.integers(0, 2**63, n_items, dtype=np.uint64) if keyed else None,
        "inclusion": rng.choice([0.25, 0.5, 1.0], n_items) if weighted else None,
    }


@pytest.mark.parametrize(("keyed", "weighted"), [(False, False), (True, False), (False, True), (True, True)])
def test_corrections_and_retractions_patch_the_kept_paths(
    keyed: bool, weighted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(17 + 2 * keyed + weighted)
    n_items = 3_000
    codes, order = _opening_panel(rng, n_items)
    options = _options(rng, n_items, keyed=keyed, weighted=weighted)
    _, state = kept_monitoring(codes, previous=None, order=order, **options)
    read: list[int] = []
    differences = sequential.differences
    monkeypatch.setattr(sequential, "differences", lambda c, *a: read.append(c.shape[0]) or differences(c, *a))
    seq = int(order.max())
    for _ in range(6):  # rounds of corrections, retractions and additions, in the opening and after it
        codes, order = codes.copy(), order.copy()
        cells = np.unique(rng.integers(0, codes.size, 40))
        rows, cols = np.unravel_index(cells, codes.shape)
        kind = rng.integers(0, 3, cells.size)
        labeled = codes[rows, cols] >= 0
        fix, drop, add = labeled & (kind == 0), labeled & (kind == 1), ~labeled
        codes[rows[fix], cols[fix]] = 1 - codes[rows[fix], cols[fix]]  # a correction keeps its rank
        codes[rows[drop], cols[drop]], order[rows[drop], cols[drop]] = -1, -1
        codes[rows[add], cols[add]] = rng.integers(0, 2, int(add.sum()))
        order[rows[add], cols[add]] = seq + 1 + np.arange(int(add.sum()))
        seq += cells.size
        kept, state = kept_monitoring(codes, previous=state, order=order, **options)
        assert read[-1] == np.unique(rows[fix | drop | add]).size  # the rows written since, not the matrix
        _same(kept, monitor_judge(codes, order=order, **options))
    assert any(r.status != "open" for r in kept.raters)  # not vacuous: certifications were patched too


def test_a_new_entry_tied_with_a_kept_one_reads_the_matrix_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    codes, order = _opening_panel(rng, 400)
    options = {"judge": 0, "humans": [1, 2, 3, 4], "n_labels": 2, "tiebreak": np.zeros(400, dtype=np.int64)}
    _, state = kept_monitoring(codes, previous=None, order=order, **options)  # every opening entry ties
    read: list[int] = []
    differences = sequential.differences
    monkeypatch.setattr(sequential, "differences", lambda c, *a: read.append(c.shape[0]) or differences(c, *a))
    codes = codes.copy()
    i = int(np.flatnonzero((codes[:100] >= 0).all(axis=1))[0])
    codes[i, 1] = 1 - codes[i, 1]
    kept, _ = kept_monitoring(codes, previous=state, order=order, **options)
    assert read == [1, 400]  # the patch found a tie on rank and key, and the matrix was read afresh
    _same(kept, monitor_judge(codes, order=order, **options))


def test_other_tiebreak_keys_read_the_matrix_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    codes, order = _opening_panel(rng, 400)
    options = {"judge": 0, "humans": [1, 2, 3, 4], "n_labels": 2}
    _, state = kept_monitoring(codes, previous=None, order=order, tiebreak=np.arange(400), **options)
    read: list[int] = []
    differences = sequential.differences
    monkeypatch.setattr(sequential, "differences", lambda c, *a: read.append(c.shape[0]) or differences(c, *a))
    keys = np.arange(400)[::-1].copy()
    kept, _ = kept_monitoring(codes, previous=state, order=order, tiebreak=keys, **options)
    assert read == [400]
    _same(kept, monitor_judge(codes, order=order, tiebreak=keys, **options))


def test_kept_monitoring_needs_the_arrival_order() -> None:
    with pytest.raises(ValueError, match="arrival order"):
        kept_monitoring(np.zeros((3, 3), dtype=int), previous=None, order=None, judge=0, humans=[1, 2], n_labels=2)


def test_corrections_before_a_certification_move_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(8)
    n_items = 3_000
    truth = rng.integers(0, 2, n_items)
    p = np.array([0.97, 0.85, 0.85, 0.85])
    codes = np.where(rng.random((n_items, 4)) < p, truth[:, None], 1 - truth[:, None])
    order = np.repeat(np.arange(1, n_items + 1), 4).reshape(n_items, 4)  # row by row
    options = {"judge": 0, "humans": [1, 2, 3], "n_labels": 2}
    before, state = kept_monitoring(codes, previous=None, order=order, **options)
    read: list[int] = []
    differences = sequential.differences
    monkeypatch.setattr(sequential, "differences", lambda c, *a: read.append(c.shape[0]) or differences(c, *a))
    for wrong in (20, 60):  # every other one of the judge's first labels corrected to a wrong one
        codes = codes.copy()
        codes[:wrong:2, 0] = 1 - truth[:wrong:2]
        read.clear()
        kept, state = kept_monitoring(codes, previous=state, order=order, **options)
        assert read[0] < 30
        _same(kept, monitor_judge(codes, order=order, **options))
        assert [r.certified_at for r in kept.raters] != [r.certified_at for r in before.raters]
        before = kept
    assert [r.status for r in kept.raters] == ["lost"] * 3  # certified won later, then lost


@pytest.mark.parametrize("weighted", [False, True])
def test_paths_read_in_chunks_have_the_numbers_of_one_pass(weighted: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths of thousands of entries (bands narrower than [-1, 1]) read 97 entries at a time, fresh and
    kept through a write of additions and corrections, equal one pass over each path, bit for bit."""
    rng = np.random.default_rng(11)
    n_items = 3_000
    truth = rng.integers(0, N_LABELS, n_items)
    codes = np.column_stack(
        [np.where(rng.random(n_items) < p, truth, (truth + 1) % N_LABELS) for p in (0.8, 0.8, 0.8, 0.9)]
    ).astype(np.int8)
    order = rng.integers(0, 500, codes.shape).astype(np.int32)
    options = {
        "judge": 3,
        "humans": [0, 1, 2],
        "n_labels": N_LABELS,
        "epsilon": 0.1,
        "inclusion": rng.choice([0.25, 0.5, 1.0], n_items) if weighted else None,
    }
    whole = monitor_judge(codes, order=order, **options)
    assert max(r.cs.high - r.cs.low for r in whole.raters) < 0.5  # the bands carry information
    later = codes.copy(), order.copy()
    later[0][:40, 3] = (later[0][:40, 3] + 1) % N_LABELS  # corrections keep their cells' ranks
    later[0][-30:, 0], later[1][-30:, 0] = 0, 600  # relabels read as later labels
    monkeypatch.setattr(sequential, "_PATH_CHUNK", 97)
    _same(monitor_judge(codes, order=order, **options), whole)
    _, state = kept_monitoring(codes, previous=None, order=order, **options)
    kept, _ = kept_monitoring(later[0], previous=state, order=later[1], **options)
    monkeypatch.setattr(sequential, "_PATH_CHUNK", 1 << 16)
    _same(kept, monitor_judge(later[0], order=later[1], **options))


@pytest.mark.parametrize("weighted", [False, True])
def test_a_correction_is_computed_again_from_the_mark_before_its_rank(
    weighted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept path keeps its sums every ``_PATH_CHUNK`` entries: after corrections of the judge's latest
    labels only the entries from the mark before their rank are computed again, after one of an opening
    label every entry is (a correction early in a path changes every later bet); the monitoring equals the
    fresh one bit for bit either way, its certifications too."""
    rng = np.random.default_rng(23 + weighted)
    n_items = 3_000
    codes, order = _opening_panel(rng, n_items)
    options = _options(rng, n_items, keyed=False, weighted=weighted)
    monkeypatch.setattr(sequential, "_PATH_CHUNK", 97)
    kept, state = kept_monitoring(codes, previous=None, order=order, **options)
    assert any(r.status != "open" for r in kept.raters)  # not vacuous: certifications to keep
    read: list[int] = []
    continued = sequential._continued_path
    monkeypatch.setattr(sequential, "_continued_path", lambda xi, *a: read.append(xi.size) or continued(xi, *a))
    n_entries = sum(p.times.size for p in state.paths)
    # the judge's five latest labels, a human's (its item's other entries, ranked before it, read it in no
    # pool: they stay as they were), then one of the judge's opening labels
    latest = [(np.argsort(np.where(codes[:, c] >= 0, order[:, c], -1))[-5:], c) for c in (0, 2)]
    opening = (np.flatnonzero(order[:, 0] == 1)[:1], 0)
    for (rows, column), at_most in ((latest[0], n_entries // 5), (latest[1], n_entries // 5), (opening, None)):
        codes = codes.copy()
        codes[rows, column] = 1 - codes[rows, column]  # corrections keep their cells' ranks
        read.clear()
        kept, state = kept_monitoring(codes, previous=state, order=order, **options)
        computed = sum(read)
        _same(kept, monitor_judge(codes, order=order, **options))
        if at_most is None:  # an opening label: every path from its first entry
            assert computed == n_entries
        else:
            assert 0 < computed <= at_most


def test_a_frozen_matrix_is_kept_as_it_is_and_one_that_may_change_is_copied() -> None:
    """The kept state holds a read-only matrix that owns its cells as it is (no copy of the codes per
    update); a read-only view of a writable array is copied, so a write through that array afterwards is a
    change the next call sees (the result equals a fresh monitoring)."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, N_LABELS, (200, 4)).astype(np.int8)
    order = rng.integers(0, 50, codes.shape).astype(np.int32)
    options: dict[str, Any] = {"judge": 3, "humans": [0, 1, 2], "n_labels": N_LABELS, "epsilon": 0.1}
    frozen = codes.copy()
    frozen.flags.writeable = False
    assert kept_monitoring(frozen, previous=None, order=order, **options)[1].codes is frozen
    view = codes[:]
    view.flags.writeable = False
    _, state = kept_monitoring(view, previous=None, order=order, **options)
    assert state.codes is not view
    codes[:20, 3] = (codes[:20, 3] + 1) % N_LABELS  # corrections through the writable array
    kept, _ = kept_monitoring(view, previous=state, order=order, **options)
    _same(kept, monitor_judge(view, order=order, **options))
