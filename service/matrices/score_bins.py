"""A numeric project's ratings as score bins: the code matrix that drawing a plan's lists reads (the
primary's bin is the stratum of an item, docs/method.md §4b)."""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from service.data.models import Project
from service.matrices.matrix import LabelMatrix
from service.matrices.ratings import RatingsMatrix, load_ratings
from service.matrices.store import current_matrix

MAX_BINS = 10
"""Bins a range is cut into at most: the declared steps when there are this few, else equal widths."""


def score_bins(ratings: RatingsMatrix, value_range: dict[str, float]) -> LabelMatrix:
    """``ratings`` as codes ``0..B-1`` of ``B`` bins of the declared range (``-1`` where no number): one bin per
    value when the range holds at most ``MAX_BINS`` steps, else ``MAX_BINS`` bins of equal width."""
    low, high, step = value_range["min"], value_range["max"], value_range.get("step")
    values = np.nan_to_num(ratings.values, nan=low)
    if step and round((high - low) / step) < MAX_BINS:
        n_bins, bins = round((high - low) / step) + 1, np.round((values - low) / step)
    else:
        n_bins, bins = MAX_BINS, np.floor((values - low) / (high - low) * MAX_BINS)
    codes = np.where(np.isnan(ratings.values), -1, np.clip(bins, 0, n_bins - 1)).astype(np.int64)
    codes.flags.writeable = False
    order = np.full(codes.shape, -1, dtype=np.int64)
    order.flags.writeable = False
    return LabelMatrix(
        raw=codes,
        item_ids=ratings.item_ids,
        raters=ratings.raters,
        n_labels=n_bins,
        label_seq=ratings.label_seq,
        criterion=ratings.criterion,
        order=order,
    )


def list_matrix(session: Session, project: Project) -> LabelMatrix:
    """The labels in hand as a plan's lists are drawn from them: the code matrix of the first criterion, or a
    numeric project's score bins."""
    if project.scale == "numeric":
        return score_bins(load_ratings(session, project, project.criteria[0]), project.value_range or {})
    return current_matrix(session, project, project.criteria[0])
