"""Labels in hand as the planner's code matrix: items (corpus order) x raters, -1 = missing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.label_store import CANNOT_ASSESS, INVALID
from service.models import CurrentLabel, Item, Project, Rater


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
    special values set missing (the exclusion rule of SPEC.md §7), which is what agreement
    and the validation decision use.
    """

    raw: np.ndarray
    item_ids: np.ndarray
    item_external: list[str]
    raters: list[RaterColumn]
    n_labels: int
    label_seq: int
    criterion: str

    @property
    def codes(self) -> np.ndarray:
        return np.where(self.raw >= self.n_labels, -1, self.raw)

    def columns(self, *kinds: str) -> list[int]:
        """Column indices of raters of the given kinds, in rater order."""
        return [k for k, r in enumerate(self.raters) if r.kind in kinds]


def load_matrix(session: Session, project: Project, criterion: str) -> LabelMatrix:
    """The current labels of ``criterion`` as a :class:`LabelMatrix`."""
    cells = session.execute(
        select(CurrentLabel.item_id, CurrentLabel.rater_id, CurrentLabel.value).where(
            CurrentLabel.project_id == project.id, CurrentLabel.criterion == criterion
        )
    ).all()
    return build_matrix(project, *corpus(session, project), cells, criterion, project.label_seq)


def corpus(session: Session, project: Project) -> tuple[list[tuple[int, str]], list[RaterColumn]]:
    """The project's items ``(id, external_id)`` in corpus order and its raters in creation order."""
    items = [
        (iid, ext) for iid, ext in session.execute(
            select(Item.id, Item.external_id).where(Item.project_id == project.id).order_by(Item.position)
        )
    ]
    raters = [
        RaterColumn(rid, ext, kind)
        for rid, ext, kind in session.execute(
            select(Rater.id, Rater.external_id, Rater.kind).where(Rater.project_id == project.id).order_by(Rater.id)
        )
    ]
    return items, raters


def build_matrix(
    project: Project,
    items: list[tuple[int, str]],
    raters: list[RaterColumn],
    cells: Sequence[tuple[int, int, str]],
    criterion: str,
    label_seq: int,
) -> LabelMatrix:
    """A :class:`LabelMatrix` from ``(item_id, rater_id, value)`` cells (one per cell)."""
    item_ids = np.array([i for i, _ in items], dtype=np.int64)
    raw = np.full((len(items), len(raters)), -1, dtype=np.int64)
    if cells and len(items):
        n_labels = len(project.labels)
        code_of = {v: c for c, v in enumerate(project.labels)} | {CANNOT_ASSESS: n_labels, INVALID: n_labels + 1}
        item_col, rater_col, values = zip(*cells, strict=True)
        order = np.argsort(item_ids)
        row_idx = order[np.searchsorted(item_ids, np.fromiter(item_col, np.int64), sorter=order)]
        col_of = {r.id: k for k, r in enumerate(raters)}
        col_idx = np.fromiter((col_of[r] for r in rater_col), np.int64, len(rater_col))
        raw[row_idx, col_idx] = np.fromiter((code_of[v] for v in values), np.int64, len(values))
    return LabelMatrix(
        raw=raw, item_ids=item_ids, item_external=[e for _, e in items], raters=raters,
        n_labels=len(project.labels), label_seq=label_seq, criterion=criterion,
    )
