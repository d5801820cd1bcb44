"""Label matrices saved to disk, so that a starting worker need not read every current label.

A snapshot is one ``.npz`` file per (project, criterion, label_seq) under the snapshot directory:
``<directory>/<project id>/<criterion as hex>-<label_seq>.npz`` holding the raw codes (int8),
the arrival seq of each labelled cell, the item ids, the rater columns, a mark of the history
it was taken at and a digest of all of it. It is written to a temporary file and renamed into
place, so a reader sees a whole file or none. A snapshot is a cache: one that is unreadable, of
another format, whose bytes do not hash to its digest (damaged or edited), or taken on another
history (another database, a restored backup, changed labels, corpus or raters) is ignored, and
the worker reads the database as before. Deleting the directory is always safe;
a starting worker removes the folders of projects its database no longer has.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from planner.codes import code_type
from service.core.sql import driver_rows
from service.data.models import Project
from service.matrices.matrix import LabelMatrix, RaterColumn, frozen_matrix, rank_type

log = logging.getLogger(__name__)

FORMAT = 2
"""Bumped whenever the file's content changes meaning: files of another format are ignored."""
KEPT = 2
"""Snapshots kept per (project, criterion): the newest, and one older for readers whose label_seq is behind it."""
_NAME = re.compile(r"^([0-9a-f]*)-([0-9]+)\.npz$")
_TEMPORARY = re.compile(r"^\..+\.tmp$")
_PROJECT_FOLDER = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def snapshot_directory(database_url: str, configured: str | None) -> Path | None:
    """Where snapshots live: ``configured`` ("" = none), else beside a SQLite database file, else none."""
    if configured is not None:
        return Path(configured) if configured else None
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
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


def write_snapshot(directory: Path, project_id: str, matrix: LabelMatrix, labels: tuple[str, ...], mark: str) -> None:
    """Save ``matrix`` (taken on the history ``mark``), then drop all but the :data:`KEPT` newest of its kind."""
    folder = directory / project_id
    folder.mkdir(parents=True, exist_ok=True)
    stem = matrix.criterion.encode().hex()
    path = folder / f"{stem}-{matrix.label_seq}.npz"
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
    tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    with open(tmp, "wb") as f:
        np.savez(
            f, meta=np.array(json.dumps(meta)), raw=arrays["raw"], seqs=arrays["seqs"], item_ids=arrays["item_ids"]
        )
    os.replace(tmp, path)
    for _, old in _snapshots(folder, stem)[KEPT:]:
        old.unlink(missing_ok=True)


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
    directory: Path, session: Session, project: Project, criterion: str
) -> tuple[LabelMatrix, tuple[str, ...]] | None:
    """The newest valid snapshot of ``criterion`` at or below ``project.label_seq`` and its labels, or ``None``.

    Valid: its bytes hash to its digest; same format, labels and history mark; its items still the
    corpus's first ones. What
    happened since (events, items, raters) is for the caller to apply.
    """
    folder = directory / project.id
    for seq, path in _snapshots(folder, criterion.encode().hex()):
        if seq > project.label_seq:
            continue
        try:
            found = _loaded(path, session, project, criterion, seq)
        except Exception as error:  # a cache: any unreadable file means a full read, never a failed request
            log.warning("matrix snapshot %s ignored: %s", path, error)
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
    path: Path, session: Session, project: Project, criterion: str, seq: int
) -> tuple[LabelMatrix, tuple[str, ...]] | None:
    with np.load(path, allow_pickle=False) as data:
        meta: dict[str, Any] = json.loads(str(data["meta"]))
        expected = {"format": FORMAT, "project": project.id, "criterion": criterion, "label_seq": seq}
        if {k: meta.get(k) for k in expected} != expected or meta["labels"] != list(project.labels):
            return None
        if meta["mark"] != history_mark(session, project, seq):
            log.info("matrix snapshot %s ignored: taken on another history", path)
            return None
        raw8, seqs, item_ids = data["raw"], data["seqs"], data["item_ids"]
    if meta.get("digest") != _digest(meta, {"raw": raw8, "seqs": seqs, "item_ids": item_ids}):
        log.warning("matrix snapshot %s ignored: its content does not match its digest", path)
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
        log.info("matrix snapshot %s ignored: the corpus changed", path)
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
