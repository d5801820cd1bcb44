"""Label matrices kept up to date from the label events, so a fresh document costs what was written since.

A worker keeps each project's :class:`~service.matrices.matrix.LabelMatrix` (per criterion) in memory and,
on the next read, applies only the events after its ``label_seq`` (labels and retractions), the
items uploaded since (appended rows) and the raters created since (appended columns). Anything
else (the project's labels changed, an id it cannot place) rebuilds it from ``current_labels``.
The database stays the only truth: any worker answers any request, and a restart loses nothing.

With snapshots (:mod:`service.matrices.snapshots`: a directory, or the database's table) a worker that
has no matrix yet starts from the newest valid snapshot and applies the events after it. A store that
``saves`` (a process that runs the job queue) saves a snapshot, in a thread of its own and outside any
database transaction, when it has built a large matrix from the database or advanced one far past the
last snapshot it knows; the job queue's periodic snapshot turn (:mod:`service.matrices.snapshot_turns`)
saves those of the large projects nobody read there.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.core.caches import RecentlyUsed
from service.core.sql import driver_rows
from service.data.labels import ONE_ORDER
from service.data.models import Project, Rater
from service.matrices.matrix import LabelMatrix, RaterColumn, cell_indices, frozen_matrix, load_matrix, rank_type
from service.matrices.snapshots import (
    SnapshotPlace,
    SnapshotTable,
    history_mark,
    read_snapshot,
    store_snapshot,
    write_snapshot,
)

STORE_KEY = "matrices"
"""Where a session's :class:`MatrixStore` is kept in ``Session.info`` (set by its sessionmaker)."""
REBUILD_AFTER = 50_000
"""Events since a kept matrix beyond half its cells plus this many: reading current labels is cheaper."""
SNAPSHOT_MIN_CELLS = 100_000
"""Matrices smaller than this are read from the database faster than from a snapshot: none is saved."""
SNAPSHOT_EVERY = 50
"""A new snapshot once the events since the last exceed 1/this of the matrix's cells (a starting
worker then applies at most that many events)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Kept:
    matrix: LabelMatrix
    labels: tuple[str, ...]
    sorter: np.ndarray  # np.argsort(matrix.item_ids)


class MatrixStore:
    """The label matrices of the projects read most recently, each brought up to date on read."""

    def __init__(
        self,
        size: int = 8,
        *,
        snapshots: SnapshotPlace | None = None,
        snapshot_min_cells: int = SNAPSHOT_MIN_CELLS,
        saves: bool = True,
    ):
        self._kept: RecentlyUsed[tuple[str, str], _Kept] = RecentlyUsed(size)
        self._lock = threading.Lock()
        self._updating: dict[tuple[str, str], threading.Lock] = {}
        self._snapshots = snapshots
        self._snapshot_min_cells = snapshot_min_cells
        self._snapshotted: dict[tuple[str, str], int] = {}  # label_seq of the newest snapshot known
        self._writer = ThreadPoolExecutor(1, "matrix-snapshots") if snapshots is not None and saves else None

    @property
    def snapshots(self) -> SnapshotPlace | None:
        """Where this store reads (and, when it saves, writes) snapshots."""
        return self._snapshots

    def matrix(self, session: Session, project: Project, criterion: str) -> LabelMatrix:
        """``criterion``'s labels at ``project.label_seq``: equal to :func:`~service.matrices.matrix.load_matrix`."""
        key = (project.id, criterion)
        with self._lock:
            gate = self._updating.setdefault(key, threading.Lock())
        with gate:  # one update per matrix at a time; readers of other projects are not held
            kept = self._kept.get(key)
            if kept is None and self._snapshots is not None:
                kept = self._snapshot(session, project, criterion)
            kept = _updated(session, project, criterion, kept)
            self._kept.put(key, kept)
        self._save_if_due(session, project, kept)
        return kept.matrix

    def item_sorter(self, project_id: str, matrix: LabelMatrix) -> np.ndarray:
        """``np.argsort(matrix.item_ids)``: the one kept beside ``matrix`` when this store keeps its item ids,
        so a worker holds one sort order of a project's items."""
        kept = self._kept.get((project_id, matrix.criterion))
        if kept is not None and kept.matrix.item_ids is matrix.item_ids:
            return kept.sorter
        return np.argsort(matrix.item_ids)

    def flush(self) -> None:
        """Wait for the snapshots being saved."""
        if self._writer is not None:
            self._writer.submit(lambda: None).result()

    def save_now(self, session: Session, project: Project, criterion: str) -> int:
        """Save a snapshot of ``criterion``'s matrix at ``project.label_seq`` (read through this store) and wait
        for it; its label_seq."""
        assert self._snapshots is not None
        key = (project.id, criterion)
        with self._lock:
            before = self._snapshotted.get(key)
        matrix = self.matrix(session, project, criterion)
        self.flush()
        with self._lock:
            if self._snapshotted.get(key) != before and self._snapshotted.get(key) == matrix.label_seq:
                return matrix.label_seq  # the read saved it (or loaded one taken at its label_seq)
            self._snapshotted[key] = matrix.label_seq
        kept = self._kept.get(key)
        labels = kept.labels if kept is not None else tuple(project.labels)
        self._save(session.get_bind(), project.id, matrix, labels, history_mark(session, project, matrix.label_seq))
        return matrix.label_seq

    def _snapshot(self, session: Session, project: Project, criterion: str) -> _Kept | None:
        assert self._snapshots is not None
        found = read_snapshot(self._snapshots, session, project, criterion)
        if found is None:
            return None
        matrix, labels = found
        with self._lock:
            self._snapshotted[(project.id, criterion)] = matrix.label_seq
        return _Kept(matrix, labels, np.argsort(matrix.item_ids))

    def _save_if_due(self, session: Session, project: Project, kept: _Kept) -> None:
        """Queue a snapshot of ``kept`` when it is large and far past the newest snapshot known."""
        matrix = kept.matrix
        if self._writer is None or matrix.raw.size < self._snapshot_min_cells:
            return
        key = (project.id, matrix.criterion)
        with self._lock:
            last = self._snapshotted.get(key)
            if last is not None and matrix.label_seq - last <= matrix.raw.size // SNAPSHOT_EVERY:
                return
            self._snapshotted[key] = matrix.label_seq
        mark = history_mark(session, project, matrix.label_seq)
        self._writer.submit(self._save, session.get_bind(), project.id, matrix, kept.labels, mark)

    def _save(
        self, bind: Engine | Connection, project_id: str, matrix: LabelMatrix, labels: tuple[str, ...], mark: str
    ) -> None:
        assert self._snapshots is not None
        try:
            if isinstance(self._snapshots, SnapshotTable):
                store_snapshot(bind, project_id, matrix, labels, mark)
            else:
                write_snapshot(self._snapshots, project_id, matrix, labels, mark)
        except (OSError, SQLAlchemyError) as error:  # a cache: a full disk costs the next starting worker a full read
            log.warning("matrix snapshot of project %s not saved: %s", project_id, error)


def current_matrix(session: Session, project: Project, criterion: str) -> LabelMatrix:
    """The current labels of ``criterion``: from the session's :class:`MatrixStore` when it has one."""
    store = session.info.get(STORE_KEY)
    if isinstance(store, MatrixStore):
        return store.matrix(session, project, criterion)
    return load_matrix(session, project, criterion)


def item_sorter(session: Session, project: Project, matrix: LabelMatrix) -> np.ndarray:
    """``np.argsort(matrix.item_ids)``: through the session's :class:`MatrixStore` when it has one."""
    store = session.info.get(STORE_KEY)
    if isinstance(store, MatrixStore):
        return store.item_sorter(project.id, matrix)
    return np.argsort(matrix.item_ids)


def _fresh(session: Session, project: Project, criterion: str) -> _Kept:
    matrix = load_matrix(session, project, criterion)
    return _Kept(matrix, tuple(project.labels), np.argsort(matrix.item_ids))


def _updated(session: Session, project: Project, criterion: str, kept: _Kept | None) -> _Kept:
    """``kept`` brought to ``project.label_seq``, or a fresh matrix when it cannot be."""
    if (
        kept is None
        or kept.labels != tuple(project.labels)
        or not (
            kept.matrix.label_seq
            <= project.label_seq
            <= kept.matrix.label_seq + kept.matrix.raw.size // 2 + REBUILD_AFTER
        )
    ):
        return _fresh(session, project, criterion)
    old = kept.matrix
    raters = [
        RaterColumn(rid, ext, kind)
        for rid, ext, kind in session.execute(
            select(Rater.id, Rater.external_id, Rater.kind).where(Rater.project_id == project.id).order_by(Rater.id)
        )
    ]
    n_old, k_old = old.raw.shape
    if [r.id for r in raters[:k_old]] != [r.id for r in old.raters] or project.item_count < n_old:
        return _fresh(session, project, criterion)
    events = driver_rows(
        session,
        "SELECT item_id, rater_id, value, COALESCE(rank, seq) FROM label_events "  # rank: docs/method.md §8.2
        f"WHERE project_id = ? AND seq > ? AND seq <= ? AND criterion = ? AND {ONE_ORDER} ORDER BY seq",
        (project.id, old.label_seq, project.label_seq, criterion),
    )
    item_ids, sorter = old.item_ids, kept.sorter
    if project.item_count > n_old:
        new = driver_rows(
            session,
            "SELECT id FROM items WHERE project_id = ? AND position >= ? AND position < ? ORDER BY position",
            (project.id, n_old, project.item_count),
        )
        if len(new) != project.item_count - n_old:
            return _fresh(session, project, criterion)
        item_ids = np.concatenate([old.item_ids, np.fromiter((i for (i,) in new), np.int64, len(new))])
        sorter = np.argsort(item_ids)
    if not events and item_ids is old.item_ids and raters == old.raters and old.label_seq == project.label_seq:
        return kept
    if not events and item_ids is old.item_ids and len(raters) == k_old:
        matrix = frozen_matrix(old.raw, old.order, item_ids, raters, project, criterion, project.label_seq)
        return _Kept(matrix, kept.labels, sorter)
    if events and not _known(item_ids, sorter, np.fromiter((e[0] for e in events), np.int64, len(events))):
        return _fresh(session, project, criterion)
    raw, order = _grown(old.raw, item_ids.size, len(raters)), _grown(old.order, item_ids.size, len(raters))
    order = order.astype(np.promote_types(order.dtype, rank_type(project.label_seq)), copy=False)
    if events:
        rows, cols, codes = cell_indices(project, item_ids, raters, events, sorter=sorter)
        seqs = np.fromiter((e[3] for e in events), np.int64, len(events))
        flat = rows * raw.shape[1] + cols
        # Events come in seq order: a cell's last event is its state now (a retraction: missing).
        _, last_reversed = np.unique(flat[::-1], return_index=True)
        last = flat.size - 1 - last_reversed
        raw.flat[flat[last]] = codes[last]
        order.flat[flat[last]] = np.where(codes[last] >= 0, seqs[last], -1)
    matrix = frozen_matrix(raw, order, item_ids, raters, project, criterion, project.label_seq)
    return _Kept(matrix, kept.labels, sorter)


def _known(item_ids: np.ndarray, sorter: np.ndarray, wanted: np.ndarray) -> bool:
    """Whether every id of ``wanted`` is in ``item_ids`` (``sorter`` sorts it)."""
    if item_ids.size == 0:
        return wanted.size == 0
    at = np.searchsorted(item_ids, wanted, sorter=sorter).clip(max=item_ids.size - 1)
    return bool((item_ids[sorter[at]] == wanted).all())


def _grown(a: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """A writable copy of ``a`` with rows and columns appended up to the shape given, filled with -1."""
    if a.shape == (n_rows, n_cols):
        return a.copy()
    out = np.full((n_rows, n_cols), -1, dtype=a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    return out
