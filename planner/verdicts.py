"""Verdict tables: counts of (human, judge) verdict pairs and their statistics (docs/method.md §7).

Verdicts are 1-d sequences of label strings, one per item; ``"CANNOT_ASSESS"`` (an
abstention, CA) and ``"INVALID"`` (an unparseable output) are the special values. Tables
have rows = human, columns = judge, categories ``(*labels, CANNOT_ASSESS, INVALID)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.codes import SPECIAL
from planner.tables import kappa_terms, phi_terms

BINARY_METRICS = ("accuracy", "kappa", "f1_met", "phi")


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class VerdictTable:
    """Counts of (human, judge) verdict pairs: rows human, columns judge (docs/method.md §7)."""

    categories: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]

    @property
    def n(self) -> int:
        """Number of pairs in the table."""
        return int(sum(map(sum, self.counts)))

    @classmethod
    def of(cls, categories: Sequence[str], counts: np.ndarray) -> VerdictTable:
        """The table of ``counts`` ``(k, k)`` over ``categories``."""
        return cls(tuple(categories), tuple(tuple(int(v) for v in row) for row in counts))

    def array(self) -> np.ndarray:
        """The counts as an int64 array ``(len(categories), len(categories))``."""
        size = len(self.categories)
        return np.array(self.counts, dtype=np.int64).reshape(size, size)


def checked_labels(labels: object) -> tuple[str, ...]:
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise ValueError(f"labels must be a sequence of label strings, got {labels!r}")
    out = tuple(labels)
    if len(out) < 2 or not all(isinstance(v, str) for v in out):
        raise ValueError(f"labels must be at least 2 label strings, got {out!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"labels must be distinct, got {out!r}")
    special = [v for v in out if v in SPECIAL]
    if special:
        raise ValueError(f"labels must not include the special values {SPECIAL}, got {special}")
    return out


def _verdict_codes(verdicts: object, categories: tuple[str, ...], side: str) -> np.ndarray:
    """Index of each verdict in ``categories``; unknown strings are an error."""
    arr = np.asarray(verdicts)
    if arr.ndim != 1:
        raise ValueError(f"{side} verdicts must be a 1-d sequence of label strings")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind != "U":
        raise ValueError(f"{side} verdicts must be label strings, got dtype {arr.dtype}")
    order = np.argsort(categories)
    known = np.array(categories)[order]
    position = np.minimum(np.searchsorted(known, arr), known.size - 1)
    found = known[position] == arr
    if not np.all(found):
        unknown = np.unique(arr[~found])[:5].tolist()
        raise ValueError(f"{side} verdicts contain {unknown}, not in labels {categories[:-2]} or {SPECIAL}")
    return np.asarray(order[position], dtype=np.int64)


def verdict_pair_codes(human: object, judge: object, categories: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    h = _verdict_codes(human, categories, "human")
    j = _verdict_codes(judge, categories, "judge")
    if h.size != j.size:
        raise ValueError(f"human and judge must have the same length, got {h.size} and {j.size}")
    return h, j


def verdict_table(human: Sequence[str], judge: Sequence[str], *, labels: Sequence[str]) -> VerdictTable:
    """Full contingency table of the verdict pairs, CA and INVALID included (docs/method.md §7).

    ``human``, ``judge``: verdicts of shape ``(n_items,)``; ``labels``: the regular labels.
    The table is ``(L+2) x (L+2)`` over ``(*labels, CANNOT_ASSESS, INVALID)``.

    >>> t = verdict_table(["MET", "MET", "CANNOT_ASSESS"], ["MET", "NOT_MET", "INVALID"],
    ...                   labels=["MET", "NOT_MET"])
    >>> t.categories
    ('MET', 'NOT_MET', 'CANNOT_ASSESS', 'INVALID')
    >>> t.counts[0], t.counts[2], t.n
    ((1, 1, 0, 0), (0, 0, 0, 1), 3)
    """
    categories = checked_labels(labels) + SPECIAL
    h, j = verdict_pair_codes(human, judge, categories)
    size = len(categories)
    return VerdictTable.of(categories, np.bincount(h * size + j, minlength=size * size).reshape(size, size))


# --------------------------------------------------------------------------- statistics


def two_by_two(t: np.ndarray, h: np.ndarray, j: np.ndarray, n: np.ndarray | int) -> np.ndarray:
    """2x2 tables ``(..., 2, 2)`` (index 1 = positive, rows human) from TP, both marginals, n."""
    return np.stack([n - h - j + t, j - t, h - t, t], axis=-1).reshape(*np.shape(t), 2, 2)


def positive_vs_rest(tables: np.ndarray, pos: int) -> np.ndarray:
    """Tables ``(..., k, k)`` collapsed to positive-vs-rest 2x2 tables (index 1 = positive)."""
    t = tables[..., pos, pos]
    h = tables[..., pos, :].sum(axis=-1)
    j = tables[..., :, pos].sum(axis=-1)
    return two_by_two(t, h, j, tables.sum(axis=(-2, -1)))


def diagonal_share(tables: np.ndarray) -> np.ndarray:
    """Share of pairs on the diagonal of tables ``(..., k, k)``; NaN for an empty table."""
    n = tables.sum(axis=(-2, -1)).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.trace(tables, axis1=-2, axis2=-1) / n, np.nan)


def binary_metric(tables: np.ndarray, metric: str) -> np.ndarray:
    """``metric`` of 2x2 tables ``(B, 2, 2)``, index 1 = positive; NaN where undefined.

    F1 of the positive class ``2 TP / (2 TP + FP + FN)`` (docs/method.md §7); phi and kappa are
    docs/method.md §2 via ``planner.tables``.
    """
    tables = tables.astype(float)
    if metric == "accuracy":
        return diagonal_share(tables)
    if metric == "kappa":
        return kappa_terms(tables, np.eye(2))[0]
    if metric == "phi":
        return phi_terms(tables)[0]
    either = tables[:, 1, :].sum(axis=1) + tables[:, :, 1].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(either > 0, 2.0 * tables[:, 1, 1] / either, np.nan)
