"""Label matrices saved to disk or to the database, so that a starting worker need not read every current label.

A snapshot is one ``.npz`` file per (project, criterion, label_seq), under the snapshot directory
(``<directory>/<project id>/<criterion as hex>-<label_seq>.npz``) or as the ``body`` of a
``matrix_snapshots`` row (:class:`SnapshotTable`, PostgreSQL's default), holding the raw codes (int8),
the arrival seq of each labelled cell, the item ids, the rater columns, a mark of the history
it was taken at and a digest of all of it. A file is written to a temporary name and renamed into
place, a row in one transaction: a reader sees a whole snapshot or none. A snapshot is a cache: one
that is unreadable, of another format, whose bytes do not hash to its digest (damaged or edited), or
taken on another history (another database, a restored backup, changed labels, corpus or raters) is
ignored, and the worker reads the database as before. Deleting the directory or the rows is always
safe; a starting worker removes the folders of projects its database no longer has (rows go with
their project).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
from sqlalchemy import Connection, Engine, delete, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from planner.codes import code_type
from service.core.db import WRITE_OPTION
from service.core.sql import driver_rows
from service.data.models import MatrixSnapshot, Project
from service.matrices.matrix import LabelMatrix, RaterColumn, frozen_matrix, rank_type

log = logging.getLogger(__name__)

FORMAT = 2
"""Bumped whenever the file's content changes meaning: files of another format are ignored."""
KEPT = 2
"""Snapshots kept per (project, criterion): the newest, and one older for readers whose label_seq is behind it."""
_NAME = re.compile(r"^([0-9a-f]*)-([0-9]+)\.npz$")
_TEMPORARY = re.compile(r"^\..+\.tmp$")
_PROJECT_FOLDER = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


@dataclass(frozen=True)
class SnapshotTable:
    """Snapshots kept as rows of ``matrix_snapshots``: every worker of every host over one database reads them."""


SnapshotPlace = Path | SnapshotTable
"""Where snapshots live: a directory, or the database's ``matrix_snapshots`` table."""


def snapshot_place(database_url: str, configured: str | None) -> SnapshotPlace | None:
    """Where snapshots live: ``configured`` ("" = none), else beside a SQLite database file, else (PostgreSQL)
    the database's table."""
    if configured is not None:
        return Path(configured) if configured else None
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        return SnapshotTable()
    if url.database and url.database != ":memory:":
        return Path(url.database + ".matrices")
    return None


def history_mark(session: Session, project: Project, label_seq: int) -> str:
    """What identifies the project's history up to ``label_seq``: its creation time and its last event."""
    last = driver_rows(
        session,
        "SELECT seq, item_id, rater_id, value FROM label_events WHERE project_id = ? AND seq <= ? "
        "ORDER BY seq DESC LIMIT 1",
        (project.id, label_seq),
    )
    return json.dumps([str(project.created_at), [list(r) for r in last]])


def _snapshot_bytes(project_id: str, matrix: LabelMatrix, labels: tuple[str, ...], mark: str) -> bytes:
    """The snapshot file of ``matrix`` (taken on the history ``mark``): its meta, arrays and digest."""
    meta: dict[str, Any] = {
        "format": FORMAT,
        "project": project_id,
        "criterion": matrix.criterion,
        "label_seq": matrix.label_seq,
        "labels": list(labels),
        "mark": mark,
        "raters": [[r.id, r.external_id, r.kind] for r in matrix.raters],
    }
    arrays: dict[str, np.ndarray] = {
        "raw": matrix.raw.astype(np.int8),  # codes up to 101: a project has at most 100 labels
        "seqs": matrix.order[matrix.raw >= 0].astype(np.int64),  # the format: int64 whatever the kept type
        "item_ids": np.ascontiguousarray(matrix.item_ids, dtype=np.int64),
    }
    meta["digest"] = _digest(meta, arrays)
    out = io.BytesIO()
    np.savez(out, meta=np.array(json.dumps(meta)), raw=arrays["raw"], seqs=arrays["seqs"], item_ids=arrays["item_ids"])
    return out.getvalue()


def write_snapshot(directory: Path, project_id: str, matrix: LabelMatrix, labels: tuple[str, ...], mark: str) -> None:
    """Save ``matrix`` (taken on the history ``mark``), then drop all but the :data:`KEPT` newest of its kind."""
    folder = directory / project_id
    folder.mkdir(parents=True, exist_ok=True)
    stem = matrix.criterion.encode().hex()
    path = folder / f"{stem}-{matrix.label_seq}.npz"
    tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        f.write(_snapshot_bytes(project_id, matrix, labels, mark))
    os.replace(tmp, path)
    for _, old in _snapshots(folder, stem)[KEPT:]:
        old.unlink(missing_ok=True)


def store_snapshot(
    bind: Engine | Connection, project_id: str, matrix: LabelMatrix, labels: tuple[str, ...], mark: str
) -> None:
    """Save ``matrix`` as a ``matrix_snapshots`` row in a write transaction of its own, then drop all but the
    :data:`KEPT` newest of its kind; a twin another worker saved first is kept as it is."""
    body = _snapshot_bytes(project_id, matrix, labels, mark)
    same = (MatrixSnapshot.project_id == project_id) & (MatrixSnapshot.criterion == matrix.criterion)
    try:
        with Session(bind.execution_options(**{WRITE_OPTION: True})) as writer, writer.begin():
            writer.add(
                MatrixSnapshot(project_id=project_id, criterion=matrix.criterion, label_seq=matrix.label_seq, body=body)
            )
            writer.flush()
            newest = select(MatrixSnapshot.label_seq).where(same).order_by(MatrixSnapshot.label_seq.desc()).limit(KEPT)
            writer.execute(
                delete(MatrixSnapshot).where(same, MatrixSnapshot.label_seq.not_in(newest.scalar_subquery()))
            )
    except IntegrityError:  # the same snapshot, saved by another worker first
        pass


def newest_snapshots(place: SnapshotPlace, session: Session, project_ids: list[str]) -> dict[tuple[str, str], int]:
    """The ``label_seq`` of the newest snapshot of each (project, criterion) of ``project_ids`` that has one."""
    if isinstance(place, SnapshotTable):
        rows = session.execute(
            select(MatrixSnapshot.project_id, MatrixSnapshot.criterion, func.max(MatrixSnapshot.label_seq))
            .where(MatrixSnapshot.project_id.in_(project_ids))
            .group_by(MatrixSnapshot.project_id, MatrixSnapshot.criterion)
        )
        return {(pid, criterion): int(seq) for pid, criterion, seq in rows}
    found: dict[tuple[str, str], int] = {}
    for pid in project_ids:
        try:
            names = os.listdir(place / pid)
        except FileNotFoundError:
            continue
        for name in names:
            if (m := _NAME.match(name)) is not None:
                key = (pid, bytes.fromhex(m.group(1)).decode())
                found[key] = max(found.get(key, -1), int(m.group(2)))
    return found


def _digest(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """A BLAKE2b hash of the snapshot: its meta fields (but the digest), each array's type, shape and bytes."""
    h = hashlib.blake2b(digest_size=32)
    h.update(json.dumps({k: v for k, v in meta.items() if k != "digest"}, sort_keys=True).encode())
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.data)
    return h.hexdigest()


def read_snapshot(
    place: SnapshotPlace, session: Session, project: Project, criterion: str
) -> tuple[LabelMatrix, tuple[str, ...]] | None:
    """The newest valid snapshot of ``criterion`` at or below ``project.label_seq`` and its labels, or ``None``.

    Valid: its bytes hash to its digest; same format, labels and history mark; its items still the
    corpus's first ones. What
    happened since (events, items, raters) is for the caller to apply.
    """
    if isinstance(place, SnapshotTable):
        same = (MatrixSnapshot.project_id == project.id) & (MatrixSnapshot.criterion == criterion)
        seqs = session.scalars(
            select(MatrixSnapshot.label_seq)
            .where(same, MatrixSnapshot.label_seq <= project.label_seq)
            .order_by(MatrixSnapshot.label_seq.desc())
        ).all()
        stored = [(int(seq), f"matrix_snapshots row ({project.id}, {criterion!r}, {seq})") for seq in seqs]
    else:
        stored = [(seq, str(path)) for seq, path in _snapshots(place / project.id, criterion.encode().hex())]
    for seq, name in stored:
        if seq > project.label_seq:
            continue
        try:
            if isinstance(place, SnapshotTable):
                body = session.scalar(select(MatrixSnapshot.body).where(same, MatrixSnapshot.label_seq == seq))
                if body is None:  # dropped meanwhile by a newer one's save
                    continue
                found = _loaded(io.BytesIO(body), name, session, project, criterion, seq)
            else:
                found = _loaded(Path(name), name, session, project, criterion, seq)
        except Exception as error:  # a cache: any unreadable snapshot means a full read, never a failed request
            log.warning("matrix snapshot %s ignored: %s", name, error)
            continue
        if found is not None:
            return found
    return None


def _snapshots(folder: Path, stem: str) -> list[tuple[int, Path]]:
    """``(label_seq, path)`` of the folder's snapshots of one criterion, newest first."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    found = [(int(m.group(2)), folder / n) for n in names if (m := _NAME.match(n)) and m.group(1) == stem]
    return sorted(found, reverse=True)


def _loaded(
    source: Path | IO[bytes], name: str, session: Session, project: Project, criterion: str, seq: int
) -> tuple[LabelMatrix, tuple[str, ...]] | None:
    with np.load(source, allow_pickle=False) as data:
        meta: dict[str, Any] = json.loads(str(data["meta"]))
        expected = {"format": FORMAT, "project": project.id, "criterion": criterion, "label_seq": seq}
        if {k: meta.get(k) for k in expected} != expected or meta["labels"] != list(project.labels):
            return None
        if meta["mark"] != history_mark(session, project, seq):
            log.info("matrix snapshot %s ignored: taken on another history", name)
            return None
        raw8, seqs, item_ids = data["raw"], data["seqs"], data["item_ids"]
    if meta.get("digest") != _digest(meta, {"raw": raw8, "seqs": seqs, "item_ids": item_ids}):
        log.warning("matrix snapshot %s ignored: its content does not match its digest", name)
        return None
    raters = [RaterColumn(int(i), str(e), str(k)) for i, e, k in meta["raters"]]
    n = item_ids.size
    labelled = raw8 >= 0
    if (
        raw8.dtype != np.int8
        or raw8.shape != (n, len(raters))
        or item_ids.dtype != np.int64
        or seqs.dtype != np.int64
        or seqs.shape != (int(labelled.sum()),)
        or (raw8 > len(project.labels) + 1).any()
        or (raw8 < -1).any()
        or n > project.item_count
    ):
        raise ValueError("arrays of the wrong shape, type or range")
    if n and not _first_items(session, project, item_ids):
        log.info("matrix snapshot %s ignored: the corpus changed", name)
        return None
    raw = raw8.astype(code_type(len(project.labels)), copy=False)
    order = np.full(raw.shape, -1, dtype=rank_type(seq))
    order[labelled] = seqs
    return frozen_matrix(raw, order, item_ids, raters, project, criterion, seq), tuple(meta["labels"])


def _first_items(session: Session, project: Project, item_ids: np.ndarray) -> bool:
    """Whether the corpus still begins with ``item_ids`` (its first, middle and last ids checked)."""
    positions = sorted({0, item_ids.size // 2, item_ids.size - 1})
    marks = ", ".join("?" * len(positions))
    found = dict(
        driver_rows(
            session,
            f"SELECT id, position FROM items WHERE project_id = ? AND id IN ({marks})",
            (project.id, *(int(item_ids[p]) for p in positions)),
        )
    )
    return all(found.get(int(item_ids[p])) == p for p in positions)


def remove_orphan_snapshots(directory: Path, session: Session) -> list[str]:
    """Remove the snapshot folders of projects the database no longer has; the ids removed.

    Projects are deleted in the database (their rows cascade), so their folders would stay
    forever. Only a folder named like a project id that holds nothing but snapshots and their
    temporary files is removed; anything else in the directory is left alone. The folders are
    listed before the projects are read, so a project created meanwhile is never mistaken for
    a deleted one (its folder appears only after it exists).
    """
    try:
        folders = [e.name for e in os.scandir(directory) if e.is_dir() and _PROJECT_FOLDER.match(e.name)]
    except OSError as error:  # none yet, or unreadable: a cache, never a failed start
        if not isinstance(error, FileNotFoundError):
            log.warning("matrix snapshot directory %s not cleaned: %s", directory, error)
        return []
    if not folders:
        return []
    known = set(session.scalars(select(Project.id)))
    removed = []
    for name in sorted(set(folders) - known):
        folder = directory / name
        try:
            files = os.listdir(folder)
            if not all(_NAME.match(f) or _TEMPORARY.match(f) for f in files):
                log.warning("matrix snapshot folder %s kept: it holds files that are not snapshots", folder)
                continue
            for f in files:
                (folder / f).unlink(missing_ok=True)
            folder.rmdir()
        except OSError as error:  # e.g. a worker saving into it right now: removed at the next start
            log.warning("matrix snapshot folder %s not removed: %s", folder, error)
            continue
        removed.append(name)
    if removed:
        log.info("removed the matrix snapshots of %d deleted project(s)", len(removed))
    return removed
