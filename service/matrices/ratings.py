"""A numeric project's current labels as the planner's ratings matrix: items (corpus order) x raters, NaN =
no rating; CANNOT_ASSESS and INVALID are NaN too (excluded, docs/method.md §7)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy.orm import Session

from service.core.sql import driver_rows
from service.data.labels import CANNOT_ASSESS, INVALID
from service.data.models import Project
from service.matrices.matrix import RaterColumn, corpus


@dataclass(frozen=True)
class RatingsMatrix:
    """One criterion's current numeric labels: ``values`` ``(n_items, n_raters)`` float, NaN where a rater
    has no number (no label, or a special value); ``n_special`` counts the special values set NaN;
    ``order`` the arrival rank of each number (docs/method.md §8.2), NaN where there is none."""

    values: np.ndarray
    item_ids: np.ndarray
    raters: list[RaterColumn]
    criterion: str
    label_seq: int
    n_special: int
    order: np.ndarray

    def columns(self, *kinds: str) -> list[int]:
        """Column indices of raters of the given kinds, in rater order."""
        return [k for k, r in enumerate(self.raters) if r.kind in kinds]


def load_ratings(session: Session, project: Project, criterion: str) -> RatingsMatrix:
    """The current labels of ``criterion`` of a numeric project as floats (a rater's key range at a time)."""
    item_ids, raters = corpus(session, project)
    values = np.full((item_ids.size, len(raters)), np.nan)
    order = np.full(values.shape, np.nan)
    sorter = np.argsort(item_ids)
    n_special = 0
    for col, rater in enumerate(raters):
        cells = driver_rows(
            session,
            "SELECT item_id, value, COALESCE(rank, seq) FROM current_labels WHERE rater_id = ? AND criterion = ?",
            (rater.id, criterion),
        )
        if not cells:
            continue
        items = np.fromiter((c[0] for c in cells), np.int64, len(cells))
        text = np.array([c[1] for c in cells], dtype=object)
        number = ~np.isin(text, [CANNOT_ASSESS, INVALID])
        n_special += int((~number).sum())
        rows = sorter[np.searchsorted(item_ids, items[number], sorter=sorter)]
        values[rows, col] = text[number].astype(str).astype(float)
        order[rows, col] = np.fromiter((c[2] for c in cells), np.float64, len(cells))[number]
    values.flags.writeable = False
    order.flags.writeable = False
    return RatingsMatrix(values, item_ids, raters, criterion, project.label_seq, n_special, order)
