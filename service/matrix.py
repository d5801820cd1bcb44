"""Labels in hand as the planner's code matrix: items (corpus order) x raters, -1 = missing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.label_store import CANNOT_ASSESS, INVALID
from service.models import Project, Rater
from service.sql import driver_rows


@dataclass(frozen=True)
class RaterColumn:
    id: int
    external_id: str
    kind: str


@dataclass(frozen=True)
class LabelMatrix:
    """One criterion's current labels.

    ``raw`` holds codes ``0..L-1`` for the project's labels, ``L`` for CANNOT_ASSESS and
    ``L+1`` for INVALID, ``-1`` where a rater has no label; ``codes`` is ``raw`` with the two
    special values set missing (the exclusion rule of docs/method.md §7), which is what agreement
    and the validation decision use. Rows follow ``item_ids`` (corpus order). ``order`` holds the
    ``label_seq`` of each current label (-1 where none): the arrival order of docs/method.md §8.
    The arrays are read-only: a matrix is shared by every document built at its ``label_seq``.
    """

    raw: np.ndarray
    item_ids: np.ndarray
    raters: list[RaterColumn]
    n_labels: int
    label_seq: int
    criterion: str
    order: np.ndarray

    @cached_property
    def codes(self) -> np.ndarray:
        codes = np.where(self.raw >= self.n_labels, -1, self.raw)
        codes.flags.writeable = False
        return codes

    def columns(self, *kinds: str) -> list[int]:
        """Column indices of raters of the given kinds, in rater order."""
        return [k for k, r in enumerate(self.raters) if r.kind in kinds]


def load_matrix(session: Session, project: Project, criterion: str) -> LabelMatrix:
    """The current labels of ``criterion`` as a :class:`LabelMatrix`.

    Read through the driver: this runs for every fresh reliability document, and ORM rows
    would cost more than the statistics.
    """
    cells = driver_rows(
        session, "SELECT item_id, rater_id, value, seq FROM current_labels WHERE project_id = ? AND criterion = ?",
        (project.id, criterion),
    )
    return build_matrix(project, *corpus(session, project), cells, criterion, project.label_seq)


def corpus(session: Session, project: Project) -> tuple[np.ndarray, list[RaterColumn]]:
    """The project's item ids in corpus order and its raters in creation order."""
    items = driver_rows(session, "SELECT id FROM items WHERE project_id = ? ORDER BY position", (project.id,))
    raters = [
        RaterColumn(rid, ext, kind)
        for rid, ext, kind in session.execute(
            select(Rater.id, Rater.external_id, Rater.kind).where(Rater.project_id == project.id).order_by(Rater.id)
        )
    ]
    return np.fromiter((i for (i,) in items), np.int64, len(items)), raters


def cell_indices(
    project: Project,
    item_ids: np.ndarray,
    raters: list[RaterColumn],
    cells: Sequence[Sequence[Any]],
    *,
    sorter: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row, column and raw code of each ``(item_id, rater_id, value, ...)`` cell (see :class:`LabelMatrix`).

    A retraction event (value ``None``) has code ``-1``: the cell is missing again. ``sorter``
    is ``np.argsort(item_ids)`` when the caller keeps it.
    """
    n_labels = len(project.labels)
    code_of = {v: c for c, v in enumerate(project.labels)} | {CANNOT_ASSESS: n_labels, INVALID: n_labels + 1, None: -1}
    col_of = {r.id: k for k, r in enumerate(raters)}
    n = len(cells)
    order = np.argsort(item_ids) if sorter is None else sorter
    rows = order[np.searchsorted(item_ids, np.fromiter((c[0] for c in cells), np.int64, n), sorter=order)]
    cols = np.fromiter((col_of[c[1]] for c in cells), np.int64, n)
    return rows, cols, np.fromiter((code_of[c[2]] for c in cells), np.int64, n)


def build_matrix(
    project: Project,
    item_ids: np.ndarray,
    raters: list[RaterColumn],
    cells: Sequence[tuple[int, int, str, int]],
    criterion: str,
    label_seq: int,
) -> LabelMatrix:
    """A :class:`LabelMatrix` from ``(item_id, rater_id, value, seq)`` cells (one per cell)."""
    raw = np.full((item_ids.size, len(raters)), -1, dtype=np.int64)
    order = np.full(raw.shape, -1, dtype=np.int64)
    if cells and item_ids.size:
        rows, cols, codes = cell_indices(project, item_ids, raters, cells)
        raw[rows, cols] = codes
        order[rows, cols] = np.fromiter((c[3] for c in cells), np.int64, len(cells))
    return frozen_matrix(raw, order, item_ids, raters, project, criterion, label_seq)


def frozen_matrix(
    raw: np.ndarray,
    order: np.ndarray,
    item_ids: np.ndarray,
    raters: list[RaterColumn],
    project: Project,
    criterion: str,
    label_seq: int,
) -> LabelMatrix:
    """A :class:`LabelMatrix` over these arrays, which become read-only."""
    for a in (raw, order, item_ids):
        a.flags.writeable = False
    return LabelMatrix(
        raw=raw, item_ids=item_ids, raters=raters, n_labels=len(project.labels), label_seq=label_seq,
        criterion=criterion, order=order,
    )
