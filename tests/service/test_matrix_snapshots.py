"""A worker that starts from another worker's snapshot holds the same matrix as a fresh read.

Two app instances on one database and one snapshot directory stand for two workers; the
second starts (an empty store) at a random point of a random history and must agree with
``load_matrix``. Corrupt, foreign and stale snapshots are ignored (a full read instead).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import service.matrices.store
from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.models import CurrentLabel, Item, Project, Rater
from service.matrices.matrix import LabelMatrix, load_matrix
from service.matrices.snapshots import (
    KEPT,
    SnapshotTable,
    _digest,
    read_snapshot,
    remove_orphan_snapshots,
    snapshot_place,
    write_snapshot,
)
from service.matrices.store import STORE_KEY, MatrixStore, current_matrix
from tests.conftest import ADMIN_KEY
from tests.factories import create_project
from tests.service.test_matrix_store import CRITERIA, _apply, _same, operations


@pytest.fixture
def snapshots(tmp_path: Path) -> Path:
    return tmp_path / "snapshots"


@pytest.fixture
def workers(settings: Settings, snapshots: Path) -> Iterator[list[TestClient]]:
    """Two clients of two app instances on the same database and snapshot directory, saving every matrix."""
    shared = settings.model_copy(update={"matrix_snapshot_dir": str(snapshots), "matrix_snapshot_min_cells": 0})
    with ExitStack() as stack:
        clients = [stack.enter_context(TestClient(create_app(shared), raise_server_exceptions=False)) for _ in "ab"]
        for c in clients:
            c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield clients


def _store(worker: TestClient) -> MatrixStore:
    store = worker.app.state.sessions.kw["info"][STORE_KEY]  # type: ignore[attr-defined]
    assert isinstance(store, MatrixStore)
    return store


def _restart(worker: TestClient, snapshots: Path) -> MatrixStore:
    """The worker with an empty store on the shared directory (a restarted process)."""
    store = MatrixStore(snapshots=snapshots, snapshot_min_cells=0)
    worker.app.state.sessions.kw["info"][STORE_KEY] = store  # type: ignore[attr-defined]
    return store


def _read(worker: TestClient, pid: str, criterion: str = "default") -> tuple[LabelMatrix, LabelMatrix]:
    """The worker's matrix of ``criterion`` and a fresh read of it."""
    with session_scope(worker.app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        return current_matrix(session, project, criterion), load_matrix(session, project, criterion)


def _no_full_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: Any) -> None:
        raise AssertionError("a full read where a snapshot should have served")

    monkeypatch.setattr(service.matrices.store, "load_matrix", refused)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ops=operations,
    reads=st.lists(st.booleans(), min_size=10, max_size=10),
    start=st.integers(0, 9),
)
def test_a_worker_starting_from_the_others_snapshot_equals_a_fresh_read(
    workers: list[TestClient], snapshots: Path, ops: list[tuple[Any, ...]], reads: list[bool], start: int
) -> None:
    """Worker a reads (and saves snapshots) at random points; worker b starts at a random point from them."""
    pid = create_project(workers[0], criteria=CRITERIA, allow_abstain=True, items=[f"i{k}" for k in range(6)])
    n_items = [6]
    ops = [op for op in ops if op[0] != "restart"]
    for k, op in enumerate(ops):
        _apply(workers[k % 2], pid, op, n_items)
        if reads[k]:
            for criterion in CRITERIA:
                _same(*_read(workers[0], pid, criterion))
            _store(workers[0]).flush()
        if k == min(start, len(ops) - 1):
            _restart(workers[1], snapshots)
            for criterion in CRITERIA:
                _same(*_read(workers[1], pid, criterion))
    for worker in workers:
        for criterion in CRITERIA:
            _same(*_read(worker, pid, criterion))


def _labelled(worker: TestClient, n: int = 4) -> str:
    pid = create_project(worker, items=[f"i{k}" for k in range(n)])
    body = [{"item": f"i{k}", "rater": "judge", "value": "pass"} for k in range(n)]
    assert worker.post(f"/projects/{pid}/labels", json=body).status_code == 200
    return pid


def _snapshot_files(snapshots: Path, pid: str) -> list[Path]:
    return sorted((snapshots / pid).glob("*.npz"))


def test_a_starting_worker_applies_the_events_after_the_snapshot_without_a_full_read(
    workers: list[TestClient], snapshots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _labelled(workers[0])
    _read(workers[0], pid)
    _store(workers[0]).flush()
    assert [p.name for p in _snapshot_files(snapshots, pid)] == [f"{b'default'.hex()}-4.npz"]
    body = [{"item": "i0", "rater": "prim", "value": "fail"}, {"item": "i1", "rater": "judge", "value": "fail"}]
    assert workers[1].post(f"/projects/{pid}/labels", json=body).status_code == 200
    assert workers[1].post(f"/projects/{pid}/items", json=[{"external_id": "new"}]).status_code == 200
    _restart(workers[1], snapshots)
    with session_scope(workers[1].app.state.sessions) as session:  # type: ignore[attr-defined]
        fresh = load_matrix(session, session.get(Project, pid), "default")
    _no_full_read(monkeypatch)
    kept, _ = _read(workers[1], pid)
    _same(kept, fresh)
    assert kept.label_seq == 6 and kept.raw.shape == (5, 4)


def test_snapshots_are_saved_by_the_store_thread_and_only_the_newest_are_kept(
    workers: list[TestClient], snapshots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []

    def recorded(*args: Any) -> None:
        threads.append(threading.current_thread().name)
        write_snapshot(*args)

    monkeypatch.setattr(service.matrices.store, "write_snapshot", recorded)
    pid = _labelled(workers[0])
    for value in ["fail", "pass", "fail"]:
        body = [{"item": "i0", "rater": "judge", "value": value}]
        assert workers[0].post(f"/projects/{pid}/labels", json=body).status_code == 200
        _read(workers[0], pid)
    _store(workers[0]).flush()
    assert len(threads) == 3 and all(t.startswith("matrix-snapshots") for t in threads)
    assert [p.name.split("-")[1] for p in _snapshot_files(snapshots, pid)] == ["6.npz", "7.npz"][:KEPT]


def test_small_matrices_are_not_saved(settings: Settings, tmp_path: Path) -> None:
    with TestClient(create_app(settings.model_copy(update={"matrix_snapshot_dir": str(tmp_path)}))) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        pid = _labelled(c)
        _read(c, pid)
        _store(c).flush()
    assert not (tmp_path / pid).exists()


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b"not a zip"),
        lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size // 2]),
        lambda path: path.write_bytes(b""),
    ],
    ids=["garbage", "truncated", "empty"],
)
def test_a_corrupt_snapshot_means_a_full_read(
    workers: list[TestClient], snapshots: Path, damage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    pid = _labelled(workers[0])
    _read(workers[0], pid)
    _store(workers[0]).flush()
    (path,) = _snapshot_files(snapshots, pid)
    damage(path)
    _restart(workers[1], snapshots)
    with caplog.at_level(logging.WARNING):
        _same(*_read(workers[1], pid))
    assert "ignored" in caplog.text


def _rewritten(path: Path, *, signed: bool = True, **changes: Any) -> None:
    """The snapshot at ``path`` with some of its arrays or meta fields replaced and, when ``signed``, its
    digest recomputed (as a writer would: only the check of what changed can then refuse it)."""
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays.pop("meta"))) | changes.pop("meta", {})
    arrays.update(changes)
    if signed:
        meta["digest"] = _digest(meta, arrays)
    arrays["meta"] = np.array(json.dumps(meta))
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize(
    "change",
    [
        {"meta": {"format": 0}},
        {"meta": {"mark": '["another database", []]'}},
        {"meta": {"labels": ["fail", "pass"]}},
        {"item_ids": np.array([7, 8, 9, 10], dtype=np.int64)},
        {"raw": np.zeros((4, 3), dtype=np.int8)},
        {"raw": np.full((4, 4), 9, dtype=np.int8)},
        {"seqs": np.arange(3, dtype=np.int64)},
    ],
    ids=["format", "history", "labels", "corpus", "shape", "codes", "seqs"],
)
def test_a_snapshot_of_another_state_is_ignored(
    workers: list[TestClient], snapshots: Path, change: dict[str, Any]
) -> None:
    """Each change alone, on a snapshot that is otherwise loaded, makes the worker read the database."""
    pid = _labelled(workers[0])
    _read(workers[0], pid)
    _store(workers[0]).flush()
    (path,) = _snapshot_files(snapshots, pid)
    with session_scope(workers[1].app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        assert read_snapshot(snapshots, session, project, "default") is not None  # the intact file serves
        _rewritten(path, **change)
        assert read_snapshot(snapshots, session, project, "default") is None
    _restart(workers[1], snapshots)
    _same(*_read(workers[1], pid))


@pytest.mark.parametrize("part", ["raw", "seqs", "item_ids", "meta"])
def test_a_snapshot_edited_without_its_digest_is_ignored(
    workers: list[TestClient], snapshots: Path, part: str, caplog: pytest.LogCaptureFixture
) -> None:
    """One value changed within its valid range (a label flipped, an arrival rank moved, two item ids swapped, a
    rater renamed): every other check passes, the digest does not, and the worker reads the database."""
    pid = _labelled(workers[0], 6)
    _read(workers[0], pid)
    _store(workers[0]).flush()
    (path,) = _snapshot_files(snapshots, pid)
    with np.load(path) as data:
        arrays = {k: data[k].copy() for k in data.files}
    meta = json.loads(str(arrays["meta"]))
    if part == "raw":
        raw = arrays["raw"]
        at = tuple(np.argwhere((raw >= 0) & (raw <= 1))[0])
        raw[at] = 1 - raw[at]  # pass <-> fail
        change: dict[str, Any] = {"raw": raw}
    elif part == "meta":
        meta["raters"][0][1] = "someone else"
        change = {"meta": {"raters": meta["raters"]}}
    elif part == "seqs":  # the labels of one write share an arrival rank (docs/method.md §8.2): one moved earlier
        seqs = arrays["seqs"]
        assert seqs[0] > 1
        seqs[0] -= 1
        change = {"seqs": seqs}
    else:
        change = {part: arrays[part][[0, 2, 1, *range(3, arrays[part].size)]]}  # the corpus check reads 0, 3, 5
    with session_scope(workers[1].app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        _rewritten(path, **change)  # re-signed: this edit passes every check
        served = read_snapshot(snapshots, session, project, "default")
        assert served is not None and not _equal_snapshot(served[0], load_matrix(session, project, "default"))
        _rewritten(path, signed=False, **change | {"meta": {"digest": meta["digest"]}})
        with caplog.at_level(logging.WARNING):
            assert read_snapshot(snapshots, session, project, "default") is None
        assert "does not match its digest" in caplog.text
    _restart(workers[1], snapshots)
    _same(*_read(workers[1], pid))


def _equal_snapshot(a: LabelMatrix, b: LabelMatrix) -> bool:
    return (
        np.array_equal(a.raw, b.raw)
        and np.array_equal(a.order, b.order)
        and np.array_equal(a.item_ids, b.item_ids)
        and a.raters == b.raters
    )


def test_a_snapshot_beyond_the_database_is_ignored(workers: list[TestClient], snapshots: Path) -> None:
    """A reader whose label_seq is behind the newest snapshot (an older transaction, a restored backup)."""
    pid = _labelled(workers[0])
    _read(workers[0], pid)
    _store(workers[0]).flush()
    with session_scope(workers[1].app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        assert read_snapshot(snapshots, session, project, "default") is not None
        project.label_seq = 3
        assert read_snapshot(snapshots, session, project, "default") is None
        session.rollback()


def test_a_snapshot_taken_before_the_labels_changed_is_ignored(workers: list[TestClient], snapshots: Path) -> None:
    pid = create_project(workers[0], items=["a", "b"])
    _read(workers[0], pid)
    _store(workers[0]).flush()
    assert len(_snapshot_files(snapshots, pid)) == 1
    assert workers[0].patch(f"/projects/{pid}", json={"labels": ["pass", "fail", "meh"]}).status_code == 200
    _restart(workers[1], snapshots)
    after, fresh = _read(workers[1], pid)
    _same(after, fresh)
    assert after.n_labels == 3


def test_another_history_at_the_same_label_seq_is_ignored(workers: list[TestClient], snapshots: Path) -> None:
    """A snapshot of one project presented as another's (same label_seq, another database's history)."""
    first, second = _labelled(workers[0]), _labelled(workers[0])
    _read(workers[0], first)
    _store(workers[0]).flush()
    (path,) = _snapshot_files(snapshots, first)
    (snapshots / second).mkdir()
    _rewritten(path, meta={"project": second})
    path.rename(snapshots / second / path.name)
    with session_scope(workers[1].app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, second)
        assert project is not None
        assert read_snapshot(snapshots, session, project, "default") is None


def test_where_snapshots_live() -> None:
    assert snapshot_place("sqlite:////data/a.db", None) == Path("/data/a.db.matrices")
    assert snapshot_place("sqlite:///:memory:", None) is None
    assert snapshot_place("postgresql+psycopg://u@h/db", None) == SnapshotTable()
    assert snapshot_place("postgresql+psycopg://u@h/db", "/shared/m") == Path("/shared/m")
    assert snapshot_place("postgresql+psycopg://u@h/db", "") is None
    assert snapshot_place("sqlite:////data/a.db", "") is None


def test_the_full_read_equals_the_labels_row_by_row(client: TestClient) -> None:
    """``load_matrix`` (text aggregates parsed by numpy, a rater at a time) against the ORM rows placed one by one."""
    pid = create_project(client, criteria=CRITERIA, allow_abstain=True, items=["a", "b", "c"])
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": "d"}]).status_code == 200
    rows = [
        ("d", "judge", "tone", "INVALID"),
        ("a", "prim", "tone", "CANNOT_ASSESS"),
        ("b", "h2", "facts", "fail"),
        ("a", "judge", "tone", "pass"),
        ("c", "h3", "tone", "fail"),
        ("d", "prim", "tone", "pass"),
    ]
    body = [{"item": i, "rater": r, "criterion": c, "value": v} for i, r, c, v in rows]
    assert client.post(f"/projects/{pid}/labels", json=body).status_code == 200
    assert client.post(f"/projects/{pid}/labels", json=[{**body[3], "value": "fail"}]).status_code == 200
    # the corrected label keeps the first write's arrival rank (its last seq, 6), not its own seq (7)
    with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        items = [i for (i,) in session.query(Item.id).filter(Item.project_id == pid).order_by(Item.position)]
        raters = [r for (r,) in session.query(Rater.id).filter(Rater.project_id == pid).order_by(Rater.id)]
        code = {"pass": 0, "fail": 1, "CANNOT_ASSESS": 2, "INVALID": 3}
        raw = np.full((4, len(raters)), -1)
        order = np.full((4, len(raters)), -1)
        labels = session.query(CurrentLabel).filter(CurrentLabel.project_id == pid, CurrentLabel.criterion == "tone")
        for label in labels:
            raw[items.index(label.item_id), raters.index(label.rater_id)] = code[label.value]
            order[items.index(label.item_id), raters.index(label.rater_id)] = label.rank  # arrival rank (§8.2)
        matrix = load_matrix(session, project, "tone")
    np.testing.assert_array_equal(matrix.item_ids, items)
    np.testing.assert_array_equal(matrix.raw, raw)
    np.testing.assert_array_equal(matrix.order, order)
    assert (raw >= 0).sum() == 5 and raw[0, 0] == 1 and order[0, 0] == 6  # the correction counted once, at its rank


def test_a_starting_worker_removes_the_snapshots_of_deleted_projects(
    workers: list[TestClient], snapshots: Path, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    kept, deleted = _labelled(workers[0]), _labelled(workers[0])
    for pid in (kept, deleted):
        _read(workers[0], pid)
    _store(workers[0]).flush()
    (snapshots / deleted / ".half-written.npz.1.2.tmp").write_bytes(b"")
    foreign = snapshots / "prj_not_ours"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("an operator's file")
    (snapshots / "stray.npz").write_bytes(b"")
    with session_scope(workers[0].app.state.sessions, write=True) as session:  # type: ignore[attr-defined]
        session.delete(session.get(Project, deleted))
    assert _snapshot_files(snapshots, deleted)  # nothing removes them while the workers run
    shared = settings.model_copy(update={"matrix_snapshot_dir": str(snapshots)})
    with caplog.at_level(logging.INFO, logger="service.matrices.snapshots"), TestClient(create_app(shared)):
        pass
    assert not (snapshots / deleted).exists()
    assert [p.name for p in _snapshot_files(snapshots, kept)] == [f"{b'default'.hex()}-4.npz"]
    assert (foreign / "notes.txt").read_text() == "an operator's file"  # not a snapshot folder: left alone
    assert (snapshots / "stray.npz").exists()
    assert "removed the matrix snapshots of 1 deleted project(s)" in caplog.text
    assert "prj_not_ours kept: it holds files that are not snapshots" in caplog.text


def test_cleaning_a_missing_or_empty_snapshot_directory_removes_nothing(
    workers: list[TestClient], tmp_path: Path
) -> None:
    with session_scope(workers[0].app.state.sessions) as session:  # type: ignore[attr-defined]
        assert remove_orphan_snapshots(tmp_path / "none", session) == []
        assert remove_orphan_snapshots(tmp_path, session) == []
