"""Bounds on what abstentions hide, and the exact McNemar test (docs/method.md §7, "Coverage")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from planner.codes import SPECIAL
from planner.verdicts import BINARY_METRICS, VerdictTable, binary_metric, two_by_two

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


_AXIS_OFFSETS = np.arange(-2, 3)  # integer lines near a vertical or horizontal locus
_DIAGONAL_OFFSETS = np.arange(-5, 6)  # near a diagonal locus: also where it meets a crossing direction
_ROOT_OFFSETS = np.arange(-1, 3)  # integers around a stationary point (floor - 1 .. floor + 2)
# a lattice line: a point (h, j) plus integer multiples of its step
_STEPS = np.array([[0, 1], [1, 0], [1, 1], [1, -1]])  # vertical, horizontal, diagonal, antidiagonal


def _constraints(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ten bounds on TP as rows ``(P, Q, R)`` with a flag: ``2 TP <= P h + Q j + R`` if upper, else ``>=``.

    ``h``/``j`` are the completed human/judge positive counts. The completions form a
    Minkowski sum of simplices (one per unknown group), an M-convex set: exactly the integer
    cell vectors ``x >= 0`` with ``x(S) >= (pairs of groups whose cells lie inside S)`` for
    every set ``S`` of cells; with ``h`` and ``j`` fixed every cell is affine in TP, and these
    ten inequalities are all that remain (the others bound ``h`` and ``j`` alone).
    """
    n = int(counts.sum())
    a, b, c, d = (int(v) for v in counts[:2, :2].ravel())  # TP, FN, FP, TN
    up, un = int(counts[0, 2:].sum()), int(counts[1, 2:].sum())  # human known, judge unknown
    vp, vn = int(counts[2:, 0].sum()), int(counts[2:, 1].sum())  # human unknown, judge known
    w = int(counts[2:, 2:].sum())  # both unknown: any cell
    rows = [
        (2, 0, -2 * b, True),  # FN keeps its known pairs
        (0, 0, 2 * (a + up + vp + w), True),  # TP gains at most the unknowns that can reach it
        (0, 2, -2 * c, True),  # FP keeps its known pairs
        (2, 2, 2 * (un + vn + w + d - n), True),  # TN gains at most the unknowns that reach it
        (1, 1, -b - c, True),  # FN + FP keep their known pairs
        (0, 0, 2 * a, False),  # TP keeps its known pairs
        (2, 0, -2 * (b + up + vn + w), False),  # FN gains at most the unknowns that reach it
        (2, 2, 2 * (d - n), False),  # TN keeps its known pairs
        (0, 2, -2 * (c + un + vp + w), False),  # FP gains at most the unknowns that reach it
        (1, 1, a + d - n, False),  # TP + TN keep their known pairs
    ]
    return np.array([r[:3] for r in rows], dtype=np.int64), np.array([r[3] for r in rows])


def _tp_limits(lines: np.ndarray, upper: np.ndarray, h: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest feasible TP at marginals ``(h, j)`` (docs/method.md §7)."""
    value = lines[:, 0, None] * h + lines[:, 1, None] * j + lines[:, 2, None]
    return np.max(-(-value[~upper] // 2), axis=0), np.min(value[upper] // 2, axis=0)


def _lattice_lines(lines: np.ndarray, n: int, h_range: tuple[int, int], j_range: tuple[int, int]) -> np.ndarray:
    """Integer lines ``(L, 4)`` (base h, base j, step h, step j) that hold an extreme of every metric.

    Where two bounds on TP cross, in the (h, j) plane, lies a vertical, horizontal, diagonal or
    antidiagonal line (the bounds' coefficients on h and j are 0, 1/2 or 1). Along a column
    (fixed h) accuracy, kappa and F1 are linear-fractional in j between crossings, hence
    monotone: their extremes lie within two of a crossing, an end of the range or an
    undefined margin (h or j at 0 or n); rows likewise. Phi has no interior extreme of the
    needed kind along a column or row except where TP is one of the halved bounds, and there
    along the antidiagonal (fixed h + j, fixed TP) it is unimodal in ``p = h j`` with a
    maximum, so the minimum lies at an end or at ``h ~ j``; the maximum follows by swapping
    the judge's labels (phi changes sign; ``h + j ~ n``). Ends along an antidiagonal lie
    within five of a diagonal crossing, so diagonal lines get wider offsets.
    """
    p, q, r = lines[:, 0], lines[:, 1], lines[:, 2]
    k, m = np.triu_indices(len(lines), 1)
    dp, dq, dr = p[k] - p[m], q[k] - q[m], r[k] - r[m]
    kind = np.select([dq == 0, dp == 0, dp == -dq, dp == dq], [0, 1, 2, 3], -1)
    kind[(dp == 0) & (dq == 0)] = -1
    slope = np.where(kind == 1, dq, dp)
    found = kind >= 0
    kind, constant = kind[found], (-dr[found]) // slope[found]  # floor of the crossing's constant
    h_lo, h_hi = h_range
    j_lo, j_hi = j_range
    kind = np.concatenate([kind, [0, 0, 0, 0, 1, 1, 1, 1, 2, 3]])
    constant = np.concatenate([constant, [h_lo, h_hi, 0, n, j_lo, j_hi, 0, n, 0, n]])
    kinds, constants = [], []
    for line_kind, offsets in ((0, _AXIS_OFFSETS), (1, _AXIS_OFFSETS), (2, _DIAGONAL_OFFSETS), (3, _DIAGONAL_OFFSETS)):
        values = np.unique(constant[kind == line_kind][:, None] + offsets)
        kinds.append(np.full(values.size, line_kind))
        constants.append(values)
    kind, constant = np.concatenate(kinds), np.concatenate(constants)
    base_h = np.where((kind == 0) | (kind == 2), constant, 0)  # h = c; h - j = c
    base_j = np.where(kind == 0, 0, np.where(kind == 2, 0, constant))  # j = c; h + j = c
    return np.column_stack([base_h, base_j, _STEPS[kind]])


def _feasible_steps(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer ``m`` with ``a m >= b`` as bounds ``(lo, hi)`` (empty: lo > hi), vectorised."""
    big = np.iinfo(np.int64).max // 4
    safe = np.where(a == 0, 1, a)
    lo = np.where(a > 0, -(-b // safe), np.where((a == 0) & (b > 0), big, -big))
    hi = np.where(a < 0, b // safe, np.where((a == 0) & (b > 0), -big, big))
    return lo, hi


def _polynomial_product(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Products of polynomials row by row, coefficients lowest degree first."""
    out = np.zeros((x.shape[0], x.shape[1] + y.shape[1] - 1))
    for i in range(x.shape[1]):
        out[:, i : i + y.shape[1]] += x[:, i : i + 1] * y
    return out


def _derivative(x: np.ndarray) -> np.ndarray:
    return x[:, 1:] * np.arange(1, x.shape[1])


def _real_roots(poly: np.ndarray) -> np.ndarray:
    """Real parts ``(M, deg)`` of each row's roots (NaN where fewer), by batched companion matrices."""
    scale = np.max(np.abs(poly), axis=1, keepdims=True)
    poly = np.divide(poly, scale, out=np.zeros_like(poly), where=scale > 0)
    significant = np.abs(poly) > 1e-11
    degree = np.where(significant.any(axis=1), poly.shape[1] - 1 - np.argmax(significant[:, ::-1], axis=1), 0)
    out = np.full((poly.shape[0], poly.shape[1] - 1), np.nan)
    for d in range(1, poly.shape[1]):
        rows = np.flatnonzero(degree == d)
        if rows.size == 0:
            continue
        monic = poly[rows, :d] / poly[rows, d : d + 1]
        companion = np.zeros((rows.size, d, d))
        companion[:, np.arange(1, d), np.arange(d - 1)] = 1.0
        companion[:, :, d - 1] = -monic
        out[rows, :d] = np.linalg.eigvals(companion).real
    return out


def _stationary_points(terms: dict[str, np.ndarray], n: int) -> np.ndarray:
    """Stationary points ``(M, 6)`` in ``y`` of kappa and phi where h, j and TP are affine in ``y``.

    ``terms``: h, j, t as ``(M, 2)`` coefficients (constant, slope). Kappa
    ``2 (n t - h j) / (n (h + j) - 2 h j)`` and phi ``(n t - h j) / sqrt(h (n - h) j (n - j))``
    are stationary where ``N' D - N D' = 0`` and ``2 N' Q - N Q' = 0`` (docs/method.md §7).
    """
    h, j, t = terms["h"], terms["j"], terms["t"]
    numerator = np.column_stack([n * t[:, 0], n * t[:, 1], np.zeros(len(t))]) - _polynomial_product(h, j)
    hj = _polynomial_product(h, j)
    kappa_d = n * np.column_stack([h[:, 0] + j[:, 0], h[:, 1] + j[:, 1], np.zeros(len(h))]) - 2 * hj
    kappa = _polynomial_product(_derivative(numerator), kappa_d) - _polynomial_product(numerator, _derivative(kappa_d))
    spread_h = _polynomial_product(h, np.column_stack([n - h[:, 0], -h[:, 1]]))
    spread_j = _polynomial_product(j, np.column_stack([n - j[:, 0], -j[:, 1]]))
    spread = _polynomial_product(spread_h, spread_j)
    phi = 2 * _polynomial_product(_derivative(numerator), spread) - _polynomial_product(numerator, _derivative(spread))
    return np.concatenate([_real_roots(kappa[:, :3]), _real_roots(phi[:, :5])], axis=1)


@dataclass(frozen=True)
class _Walks:
    """Lattice lines in two parity classes: ``h = hb + hs m``, ``j = jb + js m`` for ``lo <= m <= hi``,
    with every bound on TP as ``slope m + intercept`` (``(10, M)``; a step of two keeps the
    halved bounds affine with integer coefficients)."""

    hb: np.ndarray
    jb: np.ndarray
    hs: np.ndarray
    js: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    slope: np.ndarray
    intercept: np.ndarray

    def marginals(self, steps: np.ndarray) -> np.ndarray:
        """Distinct ``(h, j)`` pairs ``(2, K)`` reached by ``steps`` ``(M, S)`` along the walks."""
        h = self.hb[:, None] + self.hs[:, None] * steps
        j = self.jb[:, None] + self.js[:, None] * steps
        key = np.unique((h * (h.max() + j.max() + 2) + j).ravel())
        return np.stack(np.divmod(key, h.max() + j.max() + 2))


def _walks(lattice: np.ndarray, lines: np.ndarray, upper: np.ndarray, ranges: np.ndarray) -> _Walks:
    """The feasible part of each lattice line, in two parity classes (docs/method.md §7)."""
    base = np.concatenate([lattice[:, :2], lattice[:, :2] + lattice[:, 2:]])
    step = 2 * np.concatenate([lattice[:, 2:], lattice[:, 2:]])
    hb, jb, hs, js = base[:, 0], base[:, 1], step[:, 0], step[:, 1]
    value = lines[:, 0, None] * hb + lines[:, 1, None] * jb + lines[:, 2, None]
    slope = (lines[:, 0, None] * hs + lines[:, 1, None] * js) // 2
    intercept = np.where(upper[:, None], value // 2, -(-value // 2))
    u, low = (i.ravel() for i in np.meshgrid(np.flatnonzero(upper), np.flatnonzero(~upper), indexing="ij"))
    # inside the ranges of h and j, and no lower bound above an upper one
    a = np.concatenate([np.stack([hs, -hs, js, -js]), slope[u] - slope[low]])
    b = np.concatenate(
        [np.stack([ranges[0] - hb, hb - ranges[1], ranges[2] - jb, jb - ranges[3]]), intercept[low] - intercept[u]]
    )
    lo, hi = _feasible_steps(a, b)
    lo, hi = lo.max(axis=0), hi.min(axis=0)
    keep = lo <= hi
    return _Walks(hb[keep], jb[keep], hs[keep], js[keep], lo[keep], hi[keep], slope[:, keep], intercept[:, keep])


def _candidate_steps(walks: _Walks, upper: np.ndarray, n: int) -> np.ndarray:
    """Steps ``(M, K)`` along each walk that hold its extremes (docs/method.md §7).

    Between two of these steps the active bound on TP is one affine function and the metric
    is smooth and has no stationary point, so it is monotone: the ends, the crossings of two
    bounds of the same side (floor and ceiling), two either side of where h or j reaches 0 or
    n (undefined there), and the integers around each bound's stationary points.
    """
    lo, hi, slope, intercept = walks.lo, walks.hi, walks.slope, walks.intercept
    points = [lo[:, None], hi[:, None]]
    for side in (upper, ~upper):
        rows = np.flatnonzero(side)
        k, m = (rows[i] for i in np.triu_indices(rows.size, 1))
        d_slope = slope[k] - slope[m]
        crossing = (intercept[m] - intercept[k]) // np.where(d_slope == 0, 1, d_slope)
        crossing = np.where(d_slope == 0, lo, crossing).T
        points += [crossing, crossing + 1]
    for base, step in ((walks.hb, walks.hs), (walks.jb, walks.js)):
        for margin in (0, n):
            at = ((margin - base) // np.where(step == 0, 1, step))[:, None]
            points.append(np.where(step[:, None] == 0, lo[:, None], at + np.arange(-1, 3)))
    middle = (lo + hi) // 2
    half = np.maximum((hi - lo) / 2.0, 1.0)
    bounds = len(slope)
    terms = {  # affine in y, m = middle + half y, for each bound of TP taken as active
        "h": np.column_stack([np.tile(walks.hb + walks.hs * middle, bounds), np.tile(walks.hs * half, bounds)]),
        "j": np.column_stack([np.tile(walks.jb + walks.js * middle, bounds), np.tile(walks.js * half, bounds)]),
        "t": np.column_stack([(slope * middle + intercept).ravel(), (slope * half).ravel()]),
    }
    roots = _stationary_points({k: v.astype(float) for k, v in terms.items()}, n).reshape(bounds, lo.size, -1)
    roots = np.where(np.abs(roots) <= 1.5, roots, 0.0)  # outside the walk (or none): the middle, harmless
    steps = np.floor(middle[:, None, None] + half[:, None, None] * roots.transpose(1, 0, 2)).astype(np.int64)
    points.append((steps.reshape(lo.size, -1)[:, :, None] + _ROOT_OFFSETS).reshape(lo.size, -1))
    return np.asarray(np.clip(np.concatenate(points, axis=1), lo[:, None], hi[:, None]))


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
    feasible pair of marginals matters; the pairs that can be extreme lie on a few integer
    lines of that plane, each searched in closed form (``_lattice_lines``,
    ``_candidate_steps``): the cost does not grow with the number of abstained pairs.

    >>> allocation_bounds([[3, 1, 1], [0, 4, 0], [0, 1, 0]], metric="accuracy")
    (0.7, 0.9)
    >>> allocation_bounds([[0, 0, 2], [0, 0, 0], [0, 0, 0]], metric="phi") is None
    True
    """
    if metric not in BINARY_METRICS:
        raise ValueError(f"metric must be one of {BINARY_METRICS}, got {metric!r}")
    return sharp_bounds(binary_table(table, positive), (metric,))[metric]


def sharp_bounds(counts: np.ndarray, metrics: tuple[str, ...]) -> dict[str, tuple[float, float] | None]:
    """:func:`allocation_bounds` of several metrics of one ``(4, 4)`` table, positive first."""
    n = int(counts.sum())
    if n == 0:
        return dict.fromkeys(metrics)
    lines, upper = _constraints(counts)
    a, b, c = int(counts[0, 0]), int(counts[0, 1]), int(counts[1, 0])
    h_lo, j_lo = a + b + int(counts[0, 2:].sum()), a + c + int(counts[2:, 0].sum())
    ranges = np.array([h_lo, h_lo + int(counts[2:, :].sum()), j_lo, j_lo + int(counts[:, 2:].sum())])
    lattice = _lattice_lines(lines, n, (int(ranges[0]), int(ranges[1])), (int(ranges[2]), int(ranges[3])))
    walks = _walks(lattice, lines, upper, ranges)
    h, j = walks.marginals(_candidate_steps(walks, upper, n))
    t_low, t_high = _tp_limits(lines, upper, h, j)
    low_tables, high_tables = two_by_two(t_low, h, j, n), two_by_two(t_high, h, j, n)
    out: dict[str, tuple[float, float] | None] = {}
    for metric in metrics:
        lows = binary_metric(low_tables, metric)
        defined = np.isfinite(lows)
        highs = binary_metric(high_tables, metric)
        out[metric] = (float(np.min(lows[defined])), float(np.max(highs[defined]))) if defined.any() else None
    return out


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
