"""The monitoring block's size is bounded: its bands are sampled, whatever the overlap."""

from __future__ import annotations

import json

import numpy as np

from service.documents.monitoring import BAND_POINTS, ArrivalOrder, judge_monitorings
from service.matrices.matrix import LabelMatrix, RaterColumn
from service.schemas.projects import DecisionSettings


def _matrix(n_items: int) -> LabelMatrix:
    """Judge, primary and two secondaries on every item, labels arriving item by item."""
    rng = np.random.default_rng(n_items)
    truth = rng.integers(0, 2, n_items)
    raw = np.column_stack([np.where(rng.random(n_items) < 0.9, truth, 1 - truth) for _ in range(4)])
    order = np.arange(raw.size).reshape(raw.shape)
    raters = [RaterColumn(1, "judge", "judge"), RaterColumn(2, "prim", "primary")] + [
        RaterColumn(3 + k, f"h{k}", "human") for k in range(2)
    ]
    return LabelMatrix(
        raw=raw,
        item_ids=np.arange(n_items),
        raters=raters,
        n_labels=2,
        label_seq=raw.size,
        criterion="default",
        order=order,
    )


def test_the_block_does_not_grow_with_the_overlap() -> None:
    sizes = {}
    for n_items in (200, 20_000):
        matrix = _matrix(n_items)
        [block] = judge_monitorings(
            matrix, [0], [1, 2, 3], DecisionSettings(), None, None, ArrivalOrder(opening=-1, seed=0)
        )
        assert [r["n"] for r in block["raters"]] == [n_items] * 3
        assert all(len(r["band"]) == BAND_POINTS for r in block["raters"])
        assert all(r["band"][-1]["n"] == n_items for r in block["raters"])
        sizes[n_items] = len(json.dumps(block))
    assert sizes[20_000] < 1.2 * sizes[200]  # the digits of label_seq grow, the points do not
