"""Bounds on what abstentions hide, and the exact McNemar test (docs/method.md §7, "Coverage")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from planner.codes import SPECIAL
from planner.verdicts import BINARY_METRICS, VerdictTable, binary_metric, two_by_two

_GRID_CELLS = 1_000_000  # candidate (human positives, judge positives) pairs held at once


# --------------------------------------------------------------------------- bounds


def manski_bounds(coverage: float, covered_accuracy: float | None) -> tuple[float, float]:
    """Worst-case full-set accuracy under exclusion (docs/method.md §7, "Coverage", Manski bound).

    ``[gamma A_cov, gamma A_cov + 1 - gamma]`` with ``gamma`` the joint coverage; with
    ``gamma = 0`` nothing is known and ``covered_accuracy`` may be ``None``.

    >>> [round(v, 6) for v in manski_bounds(0.8, 0.9)]
    [0.72, 0.92]
    >>> manski_bounds(0.0, None)
    (0.0, 1.0)
    """
    if not isinstance(coverage, (int, float)) or not 0.0 <= coverage <= 1.0:
        raise ValueError(f"coverage must be a number in [0, 1], got {coverage!r}")
    if coverage == 0:
        return 0.0, 1.0
    if not isinstance(covered_accuracy, (int, float)) or not 0.0 <= covered_accuracy <= 1.0:
        raise ValueError(f"covered_accuracy must be a number in [0, 1], got {covered_accuracy!r}")
    low = coverage * covered_accuracy
    return float(low), float(low + 1.0 - coverage)


def binary_table(table: object, positive: object) -> np.ndarray:
    """A binary verdict table as int counts ``(4, 4)`` ordered positive, negative, CA, INVALID."""
    if isinstance(table, VerdictTable):
        labels = table.categories[:-2]
        if len(labels) != 2 or table.categories[-2:] != SPECIAL:
            raise ValueError(
                f"allocation_bounds needs a binary verdict table (2 labels + {SPECIAL}), "
                f"got categories {table.categories}"
            )
        positive = labels[0] if positive is None else positive
        if positive not in labels:
            raise ValueError(f"positive must be one of {labels}, got {positive!r}")
        order = [labels.index(positive), 1 - labels.index(positive), 2, 3]
        return table.array()[np.ix_(order, order)]
    if positive is not None:
        raise ValueError("positive applies to a VerdictTable; an array is ordered positive first")
    arr = np.asarray(table, dtype=float)
    if arr.shape not in ((3, 3), (4, 4)):
        raise ValueError(
            "table must be a VerdictTable or a (3, 3) / (4, 4) count array ordered "
            f"positive, negative, CANNOT_ASSESS[, INVALID]; got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr != np.round(arr)):
        raise ValueError("table entries must be non-negative integer counts")
    out = np.zeros((4, 4), dtype=np.int64)
    out[: arr.shape[0], : arr.shape[1]] = arr.astype(np.int64)
    return out


def _tp_lines(h: np.ndarray, known: tuple[int, ...], groups: tuple[int, ...]) -> list[tuple[Any, ...]]:
    """Bounds on TP as lines in the judge-positive count ``j``, for human-positive counts ``h``.

    Each line is ``(slope, intercept, divisor, upper)``: TP <= floor((slope j + intercept) /
    divisor) if ``upper`` else TP >= ceil(...). The completions form a Minkowski sum of
    simplices (one per unknown group), an M-convex set: exactly the integer cell vectors
    ``x >= 0`` with ``x(S) >= (pairs of groups whose cells lie inside S)`` for every set
    ``S`` of cells; with ``h`` and ``j`` fixed every cell is affine in TP, and these ten
    inequalities are all that remain (the others only bound ``h`` and ``j``).
    """
    a, b, c, d = known
    up, un, vp, vn, w = groups
    n = sum(known) + sum(groups)
    return [
        (0, h - b, 1, True),  # FN keeps its known pairs
        (0, a + up + vp + w, 1, True),  # TP gains at most the unknowns that can reach it
        (1, -c, 1, True),  # FP keeps its known pairs
        (1, un + vn + w + h + d - n, 1, True),  # TN gains at most the unknowns that reach it
        (1, h - b - c, 2, True),  # FN + FP keep their known pairs
        (0, a, 1, False),  # TP keeps its known pairs
        (0, h - b - up - vn - w, 1, False),  # FN gains at most the unknowns that reach it
        (1, h + d - n, 1, False),  # TN keeps its known pairs
        (1, -c - un - vp - w, 1, False),  # FP gains at most the unknowns that reach it
        (1, h + a + d - n, 2, False),  # TP + TN keep their known pairs
    ]


def _tp_limits(lines: list[tuple[Any, ...]], j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest feasible TP at judge-positive counts ``j`` (docs/method.md §7)."""
    low = np.full(j.shape, np.iinfo(np.int64).min // 4)
    high = np.full(j.shape, np.iinfo(np.int64).max // 4)
    for slope, intercept, divisor, upper in lines:
        value = slope * j + intercept
        if upper:
            high = np.minimum(high, value // divisor)
        else:
            low = np.maximum(low, -((-value) // divisor))
    return low, high


def _candidate_js(lines: list[tuple[Any, ...]], h: np.ndarray, n: int, j_lo: int, j_hi: int) -> np.ndarray:
    """Judge-positive counts ``(len(h), K)`` where some metric can reach its extreme.

    For fixed ``h`` the extreme TP is piecewise linear in ``j`` (pieces end where two lines
    cross) and along each piece (and parity class, for the halved lines) accuracy, kappa
    and F1 are linear-fractional, hence monotone, and phi ``(alpha j + beta) /
    sqrt(j (n - j))`` has one stationary point ``j* = beta n / (alpha n + 2 beta)``. So
    the extremes lie within two of a crossing, a stationary point or an end of the range.
    """
    real = [(slope / divisor, intercept / divisor) for slope, intercept, divisor, _ in lines]
    points = [
        (q2 - q1) / (s1 - s2)
        for i, (s1, q1) in enumerate(real)
        for s2, q2 in real[i + 1 :]
        if s1 != s2
    ]
    halves = (-0.5, 0.0, 0.5)  # a halved line floors/ceils to one of these shifts per parity
    shifted = [(s, q + shift) for s, q in real for shift in (halves if s == 0.5 else (0.0,))]
    for s, q in shifted:
        alpha, beta = n * s - h, n * q
        with np.errstate(invalid="ignore", divide="ignore"):
            points.append(beta * n / (alpha * n + 2.0 * beta))
    base = np.floor(np.stack(np.broadcast_arrays(*points), axis=1))
    base = np.where(np.isfinite(base), np.clip(base, j_lo - 3, j_hi + 3), j_lo)
    near = (base[:, :, None] + np.arange(-2, 3)).reshape(h.size, -1)
    ends = np.broadcast_to(np.array([j_lo, j_lo + 1, j_hi - 1, j_hi, 1, n - 1]), (h.size, 6))
    return np.asarray(np.clip(np.concatenate([near, ends], axis=1), j_lo, j_hi), dtype=np.int64)


def allocation_bounds(
    table: VerdictTable | Sequence[Sequence[int]],
    *,
    metric: str,
    positive: str | None = None,
) -> tuple[float, float] | None:
    """Sharp bounds of a binary metric over every allocation of the abstained cases (docs/method.md §7).

    Each pair with a CA or INVALID side is completed to a regular label on that side in
    every way compatible with the observed counts; the bounds are the min and max of
    ``metric`` (``"accuracy"``, ``"kappa"``, ``"f1_met"`` for the positive class, ``"phi"``)
    over the completed 2x2 tables where it is defined, ``None`` if no completion defines
    it. ``table``: a binary :class:`VerdictTable` (``positive`` defaults to its first
    label) or a count array ordered positive, negative, CA[, INVALID]. With both
    marginals fixed every metric increases with TP, so only the extreme TP of each
    feasible pair of marginals matters; the pairs that can be extreme are enumerated,
    vectorised over the human marginal (see ``_tp_lines`` and ``_candidate_js``).

    >>> allocation_bounds([[3, 1, 1], [0, 4, 0], [0, 1, 0]], metric="accuracy")
    (0.7, 0.9)
    >>> allocation_bounds([[0, 0, 2], [0, 0, 0], [0, 0, 0]], metric="phi") is None
    True
    """
    if metric not in BINARY_METRICS:
        raise ValueError(f"metric must be one of {BINARY_METRICS}, got {metric!r}")
    return sharp_bounds(binary_table(table, positive), (metric,))[metric]


def sharp_bounds(
    counts: np.ndarray, metrics: tuple[str, ...]
) -> dict[str, tuple[float, float] | None]:
    """:func:`allocation_bounds` of several metrics of one ``(4, 4)`` table, positive first."""
    n = int(counts.sum())
    known = tuple(int(v) for v in counts[:2, :2].ravel())  # TP, FN, FP, TN
    a, b, c, _ = known
    groups = (
        int(counts[0, 2:].sum()),  # human positive, judge unknown: TP or FN
        int(counts[1, 2:].sum()),  # human negative, judge unknown: FP or TN
        int(counts[2:, 0].sum()),  # human unknown, judge positive: TP or FP
        int(counts[2:, 1].sum()),  # human unknown, judge negative: FN or TN
        int(counts[2:, 2:].sum()),  # both unknown: any cell
    )
    up, un, vp, vn, w = groups
    h_all = np.arange(a + b + up, a + b + up + vp + vn + w + 1) if n else np.zeros(0, np.int64)
    j_lo, j_hi = a + c + vp, a + c + vp + up + un + w
    low = dict.fromkeys(metrics, np.inf)
    high = dict.fromkeys(metrics, -np.inf)
    rows = max(1, _GRID_CELLS // 256)
    for start in range(0, h_all.size, rows):
        h = h_all[start : start + rows]
        j = np.sort(_candidate_js(_tp_lines(h, known, groups), h, n, j_lo, j_hi), axis=1)
        distinct = np.ones(j.shape, dtype=bool)
        distinct[:, 1:] = j[:, 1:] != j[:, :-1]
        h, j = np.broadcast_to(h[:, None], j.shape)[distinct], j[distinct]
        t_low, t_high = _tp_limits(_tp_lines(h, known, groups), j)
        feasible = t_low <= t_high
        h, j = h[feasible], j[feasible]
        low_tables = two_by_two(t_low[feasible], h, j, n)
        high_tables = two_by_two(t_high[feasible], h, j, n)
        for metric in metrics:
            lows = binary_metric(low_tables, metric)
            if np.any(np.isfinite(lows)):
                highs = binary_metric(high_tables, metric)
                low[metric] = min(low[metric], float(np.nanmin(lows)))
                high[metric] = max(high[metric], float(np.nanmax(highs)))
    return {m: (low[m], high[m]) if np.isfinite(low[m]) else None for m in metrics}


# --------------------------------------------------------------------------- McNemar


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (docs/method.md §2; McNemar 1947).

    ``b``: pairs only the judge gets right, ``c``: pairs only the baseline gets right.
    Under H0 ``b ~ Binomial(b + c, 1/2)``; ``p = min(1, 2 P[X <= min(b, c)])``.

    >>> round(mcnemar_exact(1, 9), 6)
    0.021484
    >>> mcnemar_exact(0, 0)
    1.0
    """
    for name, value in (("b", b), ("c", c)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer count, got {value!r}")
    from scipy.stats import binom  # deferred: scipy.stats costs seconds at import

    return float(min(1.0, 2.0 * binom.cdf(min(b, c), b + c, 0.5)))


