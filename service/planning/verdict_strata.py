"""A pairwise project's Strat strata: the first judge's verdict and whether it held in both answer orders
(docs/method.md §13)."""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from service.data.models import Project
from service.matrices.matrix import LabelMatrix
from service.matrices.shown_orders import ba_verdicts

CONSISTENCY = ("the same in both orders", "different in the two orders", "in one order")


def verdict_strata(session: Session, project: Project, matrix: LabelMatrix) -> tuple[np.ndarray, list[str]] | None:
    """Per item (the matrix's rows) its stratum, and the strata's names: the first judge's verdict (its AB
    order's, else its BA order's) crossed with whether its two orders agree, differ, or only one is in hand;
    items without a verdict of the judge are one more stratum. None for a pointwise project, or before the
    first judge has a verdict."""
    judges = matrix.columns("judge")
    if project.kind != "pairwise" or not judges:
        return None
    judge = matrix.raters[judges[0]]
    ab = matrix.codes[:, judges[0]].astype(np.int64)
    ba = ba_verdicts(session, matrix, judge.id, {label: k for k, label in enumerate(project.labels)})
    if not ((ab >= 0) | (ba >= 0)).any():
        return None
    verdict = np.where(ab >= 0, ab, ba)
    consistency = np.where((ab >= 0) & (ba >= 0), np.where(ab == ba, 0, 1), 2)
    cell = np.where(verdict >= 0, verdict * len(CONSISTENCY) + consistency, len(project.labels) * len(CONSISTENCY))
    cells, strata = np.unique(cell, return_inverse=True)
    names = [
        f"{judge.external_id}: no verdict"
        if c == len(project.labels) * len(CONSISTENCY)
        else f"{judge.external_id}: {project.labels[c // len(CONSISTENCY)]}, {CONSISTENCY[c % len(CONSISTENCY)]}"
        for c in cells.tolist()
    ]
    return strata.astype(np.int64), names
