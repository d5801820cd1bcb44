"""Labels in hand as the planner's code matrix: items (corpus order) x raters, -1 = missing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.codes import MISSING, code_type
from service.core.errors import Conflict
from service.core.sql import integer_rows
from service.data.labels import CANNOT_ASSESS, INVALID, ONE_ORDER
from service.data.models import Project, Rater

SEQ_CHUNK = 1_000_000
"""Labels of ``label_seq`` ranges this long are read at a time (bounds the text the database builds)."""


def rank_type(label_seq: int) -> type[np.signedinteger[Any]]:
    """The type of arrival ranks (``label_seq`` values) up to ``label_seq``: int32 below 2**31, else int64."""
    return np.int32 if label_seq < 2**31 else np.int64


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
    arrival rank of each current label (-1 where none): the ``label_seq`` of the write that gave its
    cell a first label (docs/method.md §8.2).
    ``raw`` (and ``codes``) are in :func:`~planner.codes.code_type` (int8), ``order`` in :func:`rank_type`
    (int32): 5 bytes a cell, 50 MB at 1M items x 10 raters. The arrays are read-only: a matrix is shared
    by every document built at its ``label_seq``.
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
        if not self.raw.flags.writeable and int(self.raw.max(initial=MISSING)) < self.n_labels:
            return self.raw  # no CANNOT_ASSESS or INVALID to set missing: one pass, no copy
        codes = np.where(self.raw >= self.n_labels, -1, self.raw)
        codes.flags.writeable = False
        return codes

    def columns(self, *kinds: str) -> list[int]:
        """Column indices of raters of the given kinds, in rater order."""
        return rater_columns(self.raters, *kinds)


def rater_columns(raters: Sequence[RaterColumn], *kinds: str) -> list[int]:
    """Column indices of the ``raters`` of the given kinds, in rater order."""
    return [k for k, r in enumerate(raters) if r.kind in kinds]


def load_matrix(session: Session, project: Project, criterion: str) -> LabelMatrix:
    """The current labels of ``criterion`` as a :class:`LabelMatrix`.

    Read as integers (the value's code computed by the database) a rater at a time (a range of
    ``current_labels``' key), through :func:`~service.core.sql.integer_rows`: this runs for a worker's
    first document of a project, and a Python row per label would cost more than the statistics.
    """
    item_ids, raters = corpus(session, project)
    raw = np.full((item_ids.size, len(raters)), -1, dtype=code_type(len(project.labels)))
    order = np.full(raw.shape, -1, dtype=rank_type(project.label_seq))
    code_of = value_codes(project)
    code = "CASE value " + "WHEN ? THEN ? " * len(code_of) + "ELSE -2 END"
    sorter = np.argsort(item_ids)
    for col, rater in enumerate(raters):
        cells = integer_rows(
            session,
            ["item_id", code, "COALESCE(rank, seq)"],
            f"current_labels WHERE rater_id = ? AND criterion = ? AND {ONE_ORDER}",
            (*(x for pair in code_of.items() for x in pair), rater.id, criterion),
        )
        if (cells[:, 1] == -2).any():
            raise ValueError(f"a current label of {criterion!r} is not one of the project's values")
        rows = sorter[np.searchsorted(item_ids, cells[:, 0], sorter=sorter)]
        raw[rows, col] = cells[:, 1]
        order[rows, col] = cells[:, 2]
    return frozen_matrix(raw, order, item_ids, raters, project, criterion, project.label_seq)


def corpus(session: Session, project: Project) -> tuple[np.ndarray, list[RaterColumn]]:
    """The project's item ids in corpus order and its raters in creation order."""
    items = integer_rows(session, ["position", "id"], "items WHERE project_id = ?", (project.id,))
    raters = [
        RaterColumn(rid, ext, kind)
        for rid, ext, kind in session.execute(
            select(Rater.id, Rater.external_id, Rater.kind).where(Rater.project_id == project.id).order_by(Rater.id)
        )
    ]
    return items[np.argsort(items[:, 0], kind="stable"), 1].copy(), raters


def value_codes(project: Project) -> dict[str | None, int]:
    """The raw code of each value a label may have (see :class:`LabelMatrix`); 409 for a numeric project,
    whose labels are numbers, not codes of a label set."""
    if project.scale == "numeric":
        raise Conflict(
            "this reads labels as categories, and a numeric project's labels are numbers: its agreement "
            "and decision are not computed here yet (docs/method.md §2b, §3d)",
            code="numeric_scale",
        )
    codes: dict[str | None, int] = {v: c for c, v in enumerate(project.labels)}
    return codes | {CANNOT_ASSESS: len(codes), INVALID: len(codes) + 1}


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
    code_of = value_codes(project) | {None: -1}
    col_of = {r.id: k for k, r in enumerate(raters)}
    n = len(cells)
    order = np.argsort(item_ids) if sorter is None else sorter
    rows = order[np.searchsorted(item_ids, np.fromiter((c[0] for c in cells), np.int64, n), sorter=order)]
    cols = np.fromiter((col_of[c[1]] for c in cells), np.int64, n)
    return rows, cols, np.fromiter((code_of[c[2]] for c in cells), np.int64, n)


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
        raw=raw,
        item_ids=item_ids,
        raters=raters,
        n_labels=len(project.labels),
        label_seq=label_seq,
        criterion=criterion,
        order=order,
    )
