"""A pairwise judge's verdicts in the BA order as a column beside the label matrix (docs/method.md §13): the
matrix holds the AB order, the label every label-set statistic reads."""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from service.core.sql import driver_rows
from service.matrices.matrix import LabelMatrix


def ba_verdicts(session: Session, matrix: LabelMatrix, rater_id: int, codes: dict[str, int]) -> np.ndarray:
    """A judge's current verdicts in the BA order by the matrix's rows (-1: none, or not a verdict)."""
    column = np.full(matrix.item_ids.size, -1, np.int64)
    rows = driver_rows(
        session,
        "SELECT item_id, value FROM current_labels WHERE rater_id = ? AND criterion = ? AND shown_order = 'BA'",
        (rater_id, matrix.criterion),
    )
    if rows:
        sorter = np.argsort(matrix.item_ids)
        at = sorter[
            np.searchsorted(matrix.item_ids, np.fromiter((r[0] for r in rows), np.int64, len(rows)), sorter=sorter)
        ]
        column[at] = [codes.get(r[1], -1) for r in rows]
    return column
