"""Item patterns: a code matrix as its distinct rows and how many items share each (docs/method.md §2).

Every statistic of the validation decision, the pilot and the agreement table is a function of
the items' rows of codes, and items with the same row are interchangeable (also for the item
bootstrap). So a matrix of a million items and ten raters, which usually holds a few thousand
distinct rows, is read once into :class:`ItemPatterns` and every statistic then costs a pass over
those rows, not over the items.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.codes import checked_code_array
from planner.resampling import distinct_rows, grouped_rows
from planner.rules import checked_inclusion


@dataclass(frozen=True)
class ItemPatterns:
    """The items of a code matrix ``(n_items, n_raters)`` grouped by their row of codes.

    ``rows`` ``(G, n_raters)`` int64: the distinct rows (codes ``0..n_labels-1``, ``-1``
    missing) in lexicographic order; ``counts`` ``(G,)``: how many items have each row (they
    sum to ``n_items``, empty rows included). With ``inclusion`` (each item's probability of
    entering the overlap, docs/method.md §9) items are grouped by row and probability, rows
    may repeat, and ``inclusion`` ``(G,)`` holds each group's probability. Built by
    :func:`item_patterns`.
    """

    rows: np.ndarray
    counts: np.ndarray
    n_labels: int
    inclusion: np.ndarray | None = None

    @property
    def n_items(self) -> int:
        """Items of the matrix."""
        return int(self.counts.sum())

    @property
    def n_raters(self) -> int:
        """Columns of the matrix."""
        return int(self.rows.shape[1])

    def select(self, columns: list[int]) -> ItemPatterns:
        """The patterns of ``codes[:, columns]`` (items merged over the other columns and inclusion).

        >>> p = item_patterns(np.array([[0, 1], [0, 0], [1, 0]]), 2).select([1])
        >>> p.rows.tolist(), p.counts.tolist()
        ([[0], [1]], [2, 1])
        """
        return self.grouped(columns)[0]

    def grouped(self, columns: list[int]) -> tuple[ItemPatterns, np.ndarray]:
        """:meth:`select`, and each of these patterns' row in it (to merge their resamples:
        ``planner.resampling.ItemResample.merged``).

        >>> p, groups = item_patterns(np.array([[0, 1], [0, 0], [1, 0]]), 2).grouped([1])
        >>> p.rows.tolist(), groups.tolist()
        ([[0], [1]], [0, 1, 0])
        """
        rows, counts, groups = grouped_rows(self.rows[:, columns], self.n_labels, counts=self.counts)
        return ItemPatterns(rows.astype(np.int64, copy=False), counts, self.n_labels), groups


def item_patterns(codes: object, n_labels: int, *, inclusion: object = None) -> ItemPatterns:
    """``codes`` ``(n_items, n_raters)`` (``-1`` missing) as :class:`ItemPatterns`, checked.

    ``codes`` may be of any integer dtype (int8 is read without a copy). ``inclusion``
    ``(n_items,)`` in ``(0, 1]``: the items' probabilities of entering the overlap, kept per
    group. An :class:`ItemPatterns` is returned as it is (``n_labels`` must match and
    ``inclusion`` be None: it was fixed when the patterns were built).

    >>> p = item_patterns(np.array([[1, -1], [0, 1], [1, -1]]), 2)
    >>> p.rows.tolist(), p.counts.tolist(), p.n_items
    ([[0, 1], [1, -1]], [1, 2], 3)
    """
    if isinstance(codes, ItemPatterns):
        if codes.n_labels != n_labels:
            raise ValueError(f"the patterns were built for n_labels={codes.n_labels}, got n_labels={n_labels}")
        if inclusion is not None:
            raise ValueError("pass inclusion to item_patterns when building the patterns, not with them")
        return codes
    arr = checked_code_array(codes, n_labels)
    prob = checked_inclusion(inclusion, arr.shape[0])
    if prob is None:
        rows, counts = distinct_rows(arr, n_labels)
        return ItemPatterns(rows.astype(np.int64, copy=False), counts, n_labels)
    classes, tag = np.unique(prob, return_inverse=True)
    dtype = np.promote_types(arr.dtype, np.min_scalar_type(-classes.size))
    rows, counts = distinct_rows(
        np.column_stack([arr.astype(dtype, copy=False), tag.astype(dtype)]), max(n_labels, classes.size)
    )
    rows = rows.astype(np.int64, copy=False)
    return ItemPatterns(rows[:, :-1], counts, n_labels, classes[rows[:, -1]])
