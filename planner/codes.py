"""Label codes: matrices of shape ``(n_items, n_raters)``, ``-1`` = missing; the special values."""

from __future__ import annotations

from typing import Any

import numpy as np

MISSING = -1
"""The code of a cell that was not labeled."""

CANNOT_ASSESS = "CANNOT_ASSESS"
"""A rater's abstention (docs/method.md §7); never mapped to a category silently."""
INVALID = "INVALID"
"""An unparseable judge output (docs/method.md §7); counted, never scored."""
SPECIAL = (CANNOT_ASSESS, INVALID)


def code_type(n_labels: int) -> np.dtype[Any]:
    """The compact type of codes: the smallest signed integer type holding ``-1`` (missing) ..
    ``n_labels + 1`` (the labels and the two special values): int8 up to 126 labels."""
    return np.min_scalar_type(-(n_labels + 2))


def check_codes(codes: object, n_labels: int, *, ndim: int = 2) -> np.ndarray:
    """Return ``codes`` as an int64 array after checking shape and range.

    Codes are ``0..n_labels-1``; ``MISSING`` (-1) marks a cell that was not labeled.
    """
    return checked_code_array(codes, n_labels, ndim=ndim).astype(np.int64, copy=False)


def checked_code_array(codes: object, n_labels: int, *, ndim: int = 2) -> np.ndarray:
    """``codes`` checked as :func:`check_codes` does, kept in its own integer dtype (no copy).

    Float input with integral values becomes int64.
    """
    if not isinstance(n_labels, (int, np.integer)) or n_labels < 2:
        raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}")
    arr = np.asarray(codes)
    if arr.ndim != ndim:
        raise ValueError(f"codes must have {ndim} dimension(s), got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if arr.size and not np.all(np.equal(np.mod(arr, 1), 0)):
            raise ValueError("codes must be integers (-1 for missing)")
        arr = arr.astype(np.int64)
    if arr.size:
        low, high = int(arr.min()), int(arr.max())
        if low < MISSING or high >= n_labels:
            raise ValueError(
                f"codes must lie in 0..{n_labels - 1} or be {MISSING} for missing; found values in {low}..{high}"
            )
    return arr
