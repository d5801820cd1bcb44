"""Anytime-valid monitoring: a judge decision that may be read at every look (docs/method.md §8).

A fixed-sample decision (docs/method.md §3) holds once, at the planned overlap. Here every
held-out human ``r_k`` gets two e-processes over its per-item differences ``xi_t`` in
arrival order: one that grows when the judge is within the margin (``won``), one that grows
when it is worse (``lost``). By Ville's inequality an e-process under its null crosses
``1/a`` with probability at most ``a`` over the whole, unbounded sequence of looks, so the
decision may be read after every label and acted on at once.

Codes follow ``planner.codes``: an int matrix ``(n_items, n_raters)``, ``-1`` for missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import log_ndtr

from planner.codes import MISSING, checked_code_array, code_type
from planner.intervals import ConfidenceInterval
from planner.rules import ALT_TEST_MIN_ITEMS, DEFAULT_EPSILON, RULES, TOLERANCE, checked_inclusion, passes
from planner.significance import alt_test_p_values, by_rejections

MULTIPLICITY = ("e-bh", "bonferroni")
CS_METHODS = ("betting", "empirical-bernstein", "normal-mixture")
DECISIONS = ("pass", "reject", "continue", "inconclusive", "insufficient_data")
STATUSES = ("won", "lost", "open")
_BET_CAP = 0.5  # c: a bet never risks more than half the capital (docs/method.md §8)
_GRID_CHUNK_CELLS = 4_000_000  # prefix x grid cells of the betting CS held at once
_POOL_CHUNK_CELLS = 4_000_000  # item x human x human cells of pool membership held at once
_NEVER = np.iinfo(np.int64).max  # arrival rank of a label that has not arrived


# --------------------------------------------------------------------------- boundaries


def _mixture_rho(v_opt: float, alpha: float) -> float:
    """Mixture precision making the two-sided boundary tightest at ``v_opt`` (Howard et al.)."""
    log_inv = math.log(1.0 / alpha)
    return v_opt / (2.0 * log_inv + math.log(1.0 + 2.0 * log_inv))


def _two_sided_boundary(v: np.ndarray | float, alpha: float, rho: float) -> np.ndarray:
    """``sqrt((v + r) log((v + r) / (alpha^2 r)))`` (docs/method.md §8)."""
    return np.sqrt((v + rho) * np.log((v + rho) / (alpha * alpha * rho)))


def _one_sided_log_mixture(s: float, v: float, rho: float) -> float:
    """Log half-normal mixture of ``exp(l s - l^2 v / 2)`` over ``l >= 0`` (Howard et al. 2021)."""
    scale = v + rho
    return 0.5 * math.log(4.0 * rho / scale) + s * s / (2.0 * scale) + float(log_ndtr(s / math.sqrt(scale)))


def normal_mixture_boundary(v: float, *, alpha: float = 0.05, v_opt: float, one_sided: bool = False) -> float:
    """Normal-mixture uniform boundary ``u(v)`` of Howard et al. (2021) (docs/method.md §8).

    For a sum ``S_t`` of sub-Gaussian increments with variance proxy ``V_t``,
    ``P(exists t: |S_t| >= u(V_t)) <= alpha`` (``S_t >= u`` when ``one_sided``). Two-sided:
    ``u = sqrt((v + r) log((v + r) / (alpha^2 r)))``,
    ``r = v_opt / (2 log(1/alpha) + log(1 + 2 log(1/alpha)))``. One-sided: the level at which the
    half-normal mixture reaches ``1/alpha``, with ``r`` tuned at ``2 alpha`` (found numerically).

    Examples
    --------
    >>> round(normal_mixture_boundary(100, alpha=0.05, v_opt=100), 5)
    30.35209
    >>> round(normal_mixture_boundary(100, alpha=0.05, v_opt=100, one_sided=True), 5)
    27.66071
    """
    if not (np.isfinite(v) and v >= 0):
        raise ValueError(f"v must be a finite number >= 0, got {v!r}")
    if not (np.isfinite(v_opt) and v_opt > 0):
        raise ValueError(f"v_opt must be a finite number > 0, got {v_opt!r}")
    _alpha_iv(alpha, one_sided=one_sided)
    if not one_sided:
        return float(_two_sided_boundary(float(v), alpha, _mixture_rho(v_opt, alpha)))
    rho = _mixture_rho(v_opt, 2.0 * alpha)
    target = math.log(1.0 / alpha)

    def excess(s: float) -> float:
        return _one_sided_log_mixture(s, float(v), rho) - target

    from scipy import optimize  # deferred: importing scipy.optimize costs seconds; one-sided only

    high = _two_sided_boundary(float(v), alpha, rho) + 1.0  # the mixture exceeds 1/alpha here
    return float(optimize.brentq(excess, 0.0, float(high), xtol=1e-12, rtol=1e-14))


def _alpha_iv(alpha: float, *, one_sided: bool = False) -> None:
    upper = 0.5 if one_sided else 1.0
    if not (isinstance(alpha, (int, float, np.floating)) and 0.0 < alpha < upper):
        raise ValueError(f"alpha must be in (0, {upper}), got {alpha!r}")


# --------------------------------------------------------------------------- bets


@dataclass(frozen=True)
class _Running:
    """The running sums a path of ``y`` ends with, from which its bets, capitals and bounds continue
    exactly as if computed over the whole path (``None``: an empty path, whose sums start fresh)."""

    n: int = 0
    y_sum: float | None = None
    dev_sum: float | None = None
    sigma2: float = 0.25  # sigma_0^2
    won: float | None = None
    lost: float | None = None
    x_sum: float | None = None
    w_sum: float | None = None
    wy_sum: float | None = None  # the served band's sums (PrPl-EB, :func:`_running_eb_bounds`)
    cs_dev_sum: float | None = None
    cs_mu: float = 0.5  # its mu_0 and sigma_0^2
    cs_sigma2: float = 0.25
    lam_y_sum: float | None = None
    lam_w_sum: float | None = None
    penalty_sum: float | None = None
    low: float | None = None
    high: float | None = None
    mean: float = math.nan


def _accumulated(ufunc: np.ufunc, a: np.ndarray, start: float | None) -> np.ndarray:
    """``ufunc.accumulate`` of ``a`` continuing from ``start`` (the running value of a prefix), each step
    taken in the order an accumulation over the whole path takes it: bit-identical to that path's tail
    (``np.add``: its prefix sums, as ``np.cumsum``)."""
    if start is None:
        out: np.ndarray = ufunc.accumulate(a)
        return out
    out = ufunc.accumulate(np.concatenate([[start], a]))[1:]
    return out


def _plug_in_bets(y: np.ndarray, log_inv_a: float) -> np.ndarray:
    """Predictable plug-in empirical-Bernstein bets before the cap (Waudby-Smith & Ramdas 2024).

    ``lambda_i = sqrt(2 log(1/a) / (sigma_{i-1}^2 i log(1 + i)))``, with
    ``mu_t = (1/2 + sum y)/(t + 1)`` and ``sigma_t^2 = (1/4 + sum (y_j - mu_j)^2)/(t + 1)``;
    ``sigma_0^2 = 1/4``. Only ``y_1..y_{i-1}`` enter ``lambda_i``, through prefix sums.
    """
    return _running_bets(y, log_inv_a, _Running())[0]


def _running_bets(
    y: np.ndarray, log_inv_a: float, start: _Running
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_plug_in_bets` of a path's next ``y`` after a prefix ending with ``start``, and the
    prefix sums of ``y`` and ``(y - mu)^2`` and ``sigma^2`` along them."""
    t = np.arange(start.n + 1, start.n + y.size + 1, dtype=float)
    sums = _accumulated(np.add, y, start.y_sum)
    mu = (0.5 + sums) / (t + 1.0)
    devs = _accumulated(np.add, (y - mu) ** 2, start.dev_sum)
    sigma2 = (0.25 + devs) / (t + 1.0)
    previous = np.concatenate([[start.sigma2], sigma2[:-1]])
    bets: np.ndarray = np.sqrt(2.0 * log_inv_a / (previous * t * np.log1p(t)))
    return bets, sums, devs, sigma2


def _log_e_processes(
    y: np.ndarray, null_mean: float, log_inv_a: float, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Log capital of the bets against ``E[y] <= m0`` (won) and ``E[y] >= m0`` (lost) per prefix.

    ``K_t = prod (1 + lambda_i (y_i - m0))``, ``lambda_i`` capped at ``c/m0``; the mirror uses
    ``1 - lambda_i (y_i - m0)`` capped at ``c/(1 - m0)`` (docs/method.md §8). With
    ``weights`` ``w_i`` in ``(0, 1]`` the bets are on ``w_i (y_i - m0)``, i.e. on
    ``m0 + w_i (y_i - m0)``, which stays in ``[0, 1]`` (docs/method.md §9, weighted monitor).
    """
    won, lost, _ = _running_e_processes(y, null_mean, log_inv_a, weights, _Running())
    return won, lost


def _running_e_processes(
    y: np.ndarray, null_mean: float, log_inv_a: float, weights: np.ndarray | None, start: _Running
) -> tuple[np.ndarray, np.ndarray, _Running]:
    """:func:`_log_e_processes` of a path's next ``y`` after a prefix ending with ``start``, and the
    sums the longer path ends with (its bounds' sums left as ``start`` has them)."""
    if weights is not None:
        y = null_mean + weights * (y - null_mean)
    bets, sums, devs, sigma2 = _running_bets(y, log_inv_a, start)
    excess = y - null_mean
    won = _accumulated(np.add, np.log1p(np.minimum(bets, _BET_CAP / null_mean) * excess), start.won)
    lost = _accumulated(np.add, np.log1p(-np.minimum(bets, _BET_CAP / (1.0 - null_mean)) * excess), start.lost)
    if y.size == 0:
        return won, lost, start
    end = replace(
        start,
        n=start.n + y.size,
        y_sum=float(sums[-1]),
        dev_sum=float(devs[-1]),
        sigma2=float(sigma2[-1]),
        won=float(won[-1]),
        lost=float(lost[-1]),
    )
    return won, lost, end


# --------------------------------------------------------------------------- confidence sequences


@dataclass(frozen=True)
class ConfidenceSequence:
    """Bounds on the mean of ``x`` valid simultaneously for every prefix (docs/method.md §8).

    ``lower[t-1]``, ``upper[t-1]`` bound the mean after ``t`` observations; ``estimate`` is
    the running mean. Bounds are running intersections, so they never widen.
    """

    estimate: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    alpha: float
    method: str


def _normal_mixture_bounds(x: np.ndarray, alpha: float, v_opt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Running mean and ``mean +- u(t)/t`` for ``x`` in ``[-1, 1]`` (variance proxy ``V_t = t``)."""
    t = np.arange(1, x.size + 1, dtype=float)
    mean = np.cumsum(x) / t
    half = _two_sided_boundary(t, alpha, _mixture_rho(v_opt, alpha)) / t
    return mean, mean - half, mean + half


def _running_eb_bounds(
    x: np.ndarray, alpha: float, weights: np.ndarray | None, start: _Running
) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Running]:
    """Predictable plug-in empirical-Bernstein confidence sequence (Waudby-Smith & Ramdas 2024, Thm 2) for
    ``x`` in ``[-1, 1]`` after a prefix ending with ``start``: the running (weighted) mean of ``x``, the
    bounds per prefix, and the sums the longer path ends with (docs/method.md §8).

    On ``y = (x + 1)/2`` with weights ``w_i`` in ``(0, 1]`` (1 unweighted):
    ``mu_t = (1/2 + sum w y)/(1 + sum w)``, ``sigma_t^2 = (1/4 + sum w^2 (y_i - mu_i)^2)/(t + 1)``,
    ``lambda_i = min(sqrt(2 log(2/alpha) / (sigma_{i-1}^2 i log(1 + i))), c)``,
    ``v_i = 4 w_i^2 (y_i - mu_{i-1})^2``, ``psi(l) = (-log(1 - l) - l)/4``; the mean of ``y`` lies in
    ``(sum l w y -+ (log(2/alpha) + sum v psi(l))) / sum l w`` at every ``t`` at once w.p. ``>= 1 - alpha``.
    """
    n = x.size
    t = np.arange(start.n + 1, start.n + n + 1, dtype=float)
    y = (x + 1.0) / 2.0
    w = np.ones(n) if weights is None else weights
    w_sums = _accumulated(np.add, w, start.w_sum)
    x_sums = _accumulated(np.add, x if weights is None else w * x, start.x_sum)
    wy_sums = _accumulated(np.add, w * y, start.wy_sum)
    mu = (0.5 + wy_sums) / (1.0 + w_sums)
    mu_before = np.concatenate([[start.cs_mu], mu[:-1]])
    devs = _accumulated(np.add, (w * (y - mu)) ** 2, start.cs_dev_sum)
    sigma2 = (0.25 + devs) / (t + 1.0)
    sigma2_before = np.concatenate([[start.cs_sigma2], sigma2[:-1]])
    log_two = math.log(2.0 / alpha)
    bets = np.minimum(np.sqrt(2.0 * log_two / (sigma2_before * t * np.log1p(t))), _BET_CAP)
    penalty = 4.0 * (w * (y - mu_before)) ** 2 * (-(np.log1p(-bets) + bets) / 4.0)
    lam_y = _accumulated(np.add, bets * w * y, start.lam_y_sum)
    lam_w = _accumulated(np.add, bets * w, start.lam_w_sum)
    pen = _accumulated(np.add, penalty, start.penalty_sum)
    centre, half = lam_y / lam_w, (log_two + pen) / lam_w
    low = 2.0 * np.maximum(centre - half, 0.0) - 1.0
    high = 2.0 * np.minimum(centre + half, 1.0) - 1.0
    mean = x_sums / w_sums
    if n == 0:
        return mean, low, high, start
    end = replace(
        start,
        x_sum=float(x_sums[-1]),
        w_sum=float(w_sums[-1]),
        wy_sum=float(wy_sums[-1]),
        cs_dev_sum=float(devs[-1]),
        cs_mu=float(mu[-1]),
        cs_sigma2=float(sigma2[-1]),
        lam_y_sum=float(lam_y[-1]),
        lam_w_sum=float(lam_w[-1]),
        penalty_sum=float(pen[-1]),
    )
    return mean, low, high, end


def _betting_bounds(x: np.ndarray, alpha: float, grid_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Hedged-capital confidence sequence on a grid (Waudby-Smith & Ramdas 2024, Thm 3).

    A candidate mean ``m`` of ``y = (x + 1)/2`` stays in the set while
    ``max(K_t^+(m), K_t^-(m)) / 2 < 1/alpha``, with the plug-in bets at ``log(2/alpha)``
    capped at ``c/m`` and ``c/(1-m)``. Both capitals are monotone in ``m``, so the set is an
    interval; the bounds returned are the grid points just outside it (conservative).
    """
    y = (x + 1.0) / 2.0
    n = y.size
    bets = _plug_in_bets(y, math.log(2.0 / alpha))[:, None]
    grid = np.linspace(0.0, 1.0, grid_size + 1)[1:-1]
    threshold = math.log(2.0 / alpha)  # log(1/alpha) for the capital halved
    first = np.full(n, grid.size, dtype=np.int64)  # first grid index inside the set
    last = np.full(n, -1, dtype=np.int64)  # last grid index inside the set
    step = max(1, _GRID_CHUNK_CELLS // max(n, 1))
    for start in range(0, grid.size, step):
        m = grid[start : start + step][None, :]
        excess = y[:, None] - m
        up = np.cumsum(np.log1p(np.minimum(bets, _BET_CAP / m) * excess), axis=0)
        down = np.cumsum(np.log1p(-np.minimum(bets, _BET_CAP / (1.0 - m)) * excess), axis=0)
        inside = np.maximum(up, down) < threshold
        any_inside = inside.any(axis=1)
        idx = np.arange(start, start + m.shape[1])
        first = np.where(any_inside, np.minimum(first, idx[np.argmax(inside, axis=1)]), first)
        last_here = idx[m.shape[1] - 1 - np.argmax(inside[:, ::-1], axis=1)]
        last = np.where(any_inside, np.maximum(last, last_here), last)
    edges = np.concatenate([[0.0], grid, [1.0]])  # grid index g sits at edges[g + 1]
    empty = first > last  # the set fits between two grid points: bracket the running mean
    cell = np.clip(np.searchsorted(grid, np.cumsum(y) / np.arange(1, n + 1)), 0, grid.size)
    low = np.where(empty, edges[cell], edges[first])  # the point below the first inside
    high = np.where(empty, edges[cell + 1], edges[last + 2])
    return 2.0 * low - 1.0, 2.0 * high - 1.0


def confidence_sequence(
    x: object,
    *,
    alpha: float = 0.05,
    method: str = "betting",
    v_opt: float | None = None,
    grid_size: int = 1000,
) -> ConfidenceSequence:
    """Confidence sequence for the mean of bounded ``x`` in ``[-1, 1]`` (docs/method.md §8).

    ``method="betting"``: hedged capital with predictable plug-in empirical-Bernstein bets
    (Waudby-Smith & Ramdas 2024), resolved on ``grid_size`` cells of ``[0, 1]`` for
    ``(x + 1)/2``. ``method="empirical-bernstein"``: the predictable plug-in empirical-Bernstein
    sequence of the same paper (Thm 2), closed form; the one the monitor serves per human.
    ``method="normal-mixture"``: ``mean +- u(t)/t`` with the two-sided
    normal-mixture boundary at variance proxy ``t`` (Howard et al. 2021), tightest near
    ``t = v_opt`` (default ``len(x)``; fix it before data arrive when ``x`` will grow).
    Each holds for all prefixes at once with probability ``>= 1 - alpha``.

    Examples
    --------
    >>> cs = confidence_sequence([0.5] * 200, method="normal-mixture", v_opt=100)
    >>> bool(cs.lower[-1] < 0.5 < cs.upper[-1]), bool(cs.upper[-1] - cs.lower[-1] < 0.6)
    (True, True)
    """
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"x must be a non-empty one-dimensional array, got shape {arr.shape}")
    if not np.all((arr >= -1.0) & (arr <= 1.0)):
        raise ValueError("x must lie in [-1, 1] (no NaN)")
    _alpha_iv(alpha)
    if method not in CS_METHODS:
        raise ValueError(f"method must be one of {CS_METHODS}, got {method!r}")
    if not isinstance(grid_size, (int, np.integer)) or grid_size < 4:
        raise ValueError(f"grid_size must be an integer >= 4, got {grid_size!r}")
    v_opt = float(arr.size) if v_opt is None else v_opt
    if not (np.isfinite(v_opt) and v_opt > 0):
        raise ValueError(f"v_opt must be a finite number > 0, got {v_opt!r}")
    estimate = np.cumsum(arr) / np.arange(1, arr.size + 1)
    if method == "normal-mixture":
        _, low, high = _normal_mixture_bounds(arr, alpha, v_opt)
    elif method == "empirical-bernstein":
        _, low, high, _ = _running_eb_bounds(arr, alpha, None, _Running())
    else:
        low, high = _betting_bounds(arr, alpha, int(grid_size))
    low = np.maximum.accumulate(np.maximum(low, -1.0))
    high = np.minimum.accumulate(np.minimum(high, 1.0))
    return ConfidenceSequence(estimate, low, high, float(alpha), method)


# --------------------------------------------------------------------------- monitoring


@dataclass(frozen=True)
class RaterMonitoring:
    """One held-out human ``r_k`` under anytime-valid monitoring (docs/method.md §8).

    ``status`` is ``"won"``/``"lost"`` once the corresponding e-process was certified at
    some look (the first certification stands), else ``"open"``. ``e_value`` and
    ``e_value_lost`` are the current capitals against "the judge is worse than the margin"
    and "the judge is within the margin"; ``threshold`` is what a lone e-value must reach
    (e-BH needs less when several humans are certified together). ``d`` is the mean of
    ``xi`` over the ``n`` usable items (weighted when the monitor is) and ``cs`` its
    confidence-sequence bounds now;
    ``arrival``, ``lower``, ``upper`` give the bounds after each usable item (by arrival rank).
    """

    rater: int
    status: str
    e_value: float
    e_value_lost: float
    threshold: float
    n: int
    d: float
    cs: ConfidenceInterval
    certified_at: int | None
    arrival: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


@dataclass(frozen=True)
class Monitoring:
    """The judge's decision valid at every look (docs/method.md §8).

    ``decision`` is one of ``DECISIONS``: the first look at which enough humans were
    certified won (pass) or lost (reject) fixes it; otherwise ``continue``, or
    ``inconclusive`` once every human reached ``budget`` usable items. ``looks`` counts the
    prefixes (distinct arrival ranks) at which it was evaluated; ``decided_at`` is the
    arrival rank of the deciding label (None while open). ``needed`` humans must be won
    to pass; more than ``len(raters) - needed`` lost rejects. ``weighting`` is ``"ht"`` when
    every item was weighted by its inverse inclusion probability (docs/method.md §9), else
    ``"none"``.
    """

    decision: str
    reason: str
    raters: tuple[RaterMonitoring, ...]
    looks: int
    decided_at: int | None
    needed: int
    rule: str
    epsilon: float
    alpha: float
    omega_threshold: float
    multiplicity: str
    budget: int | None
    n_items: int
    weighting: str


def _second_smallest(times: np.ndarray) -> np.ndarray:
    """Per row of ``times`` (at least two columns), the second-smallest value (ties count twice)."""
    low = np.minimum(times[:, 0], times[:, 1])
    second: np.ndarray = np.maximum(times[:, 0], times[:, 1])
    for j in range(2, times.shape[1]):
        second = np.minimum(second, np.maximum(low, times[:, j]))
        low = np.minimum(low, times[:, j])
    return second


def _block_differences(
    labels: np.ndarray, times: np.ndarray, judge_labels: np.ndarray, judge_times: np.ndarray, rule: str
) -> tuple[np.ndarray, np.ndarray]:
    """Entry rank and ``xi`` of rows labeled by the judge and by every one of ``c >= 2`` humans.

    ``labels`` and ``times`` are ``(rows, c)``. Human ``k`` enters when the judge, ``k`` and
    one other human have labeled the row, i.e. at ``max(t_judge, t_(2), t_k)`` with ``t_(2)``
    the second human to arrive (the first arrival's other is ``t_(2)``; anyone else is at or
    after it); the pool is the other humans present then (docs/method.md §8).
    """
    entry = np.maximum(np.maximum(judge_times, _second_smallest(times))[:, None], times)
    with_judge = labels == judge_labels[:, None]
    if times.shape[1] == 2:  # both enter together and each one's pool is the other
        diff = with_judge[:, ::-1].astype(np.int16) - (labels[:, :1] == labels[:, 1:])
        return entry, (diff.astype(float) if rule == "margin" else np.sign(diff).astype(float))
    size = np.full(entry.shape, -1, dtype=np.int16)  # k itself is always present: not its pool
    judge_agree = -with_judge.astype(np.int16)
    human_agree = np.full(entry.shape, -1, dtype=np.int16)
    for b in range(times.shape[1]):
        present = times[:, b : b + 1] <= entry
        size += present
        judge_agree += present & with_judge[:, b : b + 1]
        human_agree += present & (labels[:, b : b + 1] == labels)
    diff = judge_agree - human_agree
    xi = diff / size if rule == "margin" else np.sign(diff).astype(float)
    return entry, xi


def _flat(a: np.ndarray) -> np.ndarray:
    """``a`` as one dimension in C order (a view when ``a`` is contiguous)."""
    return a.reshape(-1)


def _differences(
    codes: np.ndarray,
    order: np.ndarray,
    judge: int,
    humans: list[int],
    rule: str,
    tiebreak: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per held-out human: arrival ranks, ``xi`` and rows of its usable items, in arrival order.

    Only rows with the judge and at least two humans carry a difference. They are grouped by
    their number ``c`` of humans, so each group is a dense ``(rows, c)`` block whose pools
    cost ``c^2`` cells a row, not ``K^2`` (docs/method.md §8).
    """
    n_humans = len(humans)
    present = (codes != MISSING)[:, humans]
    count = np.zeros(codes.shape[0], dtype=np.int16)
    for k in range(n_humans):
        count += present[:, k]
    rows = np.flatnonzero((codes[:, judge] != MISSING) & (count >= 2))
    by_count = np.argsort(count[rows], kind="stable")  # a radix sort of int16
    bounds = np.searchsorted(count[rows][by_count], np.arange(2, n_humans + 2))
    human_cols = np.asarray(humans)
    parts = []
    for c, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True), start=2):
        if hi == lo:
            continue
        block = rows[by_count[lo:hi]]
        held = (np.flatnonzero(present[block]) % n_humans).reshape(block.size, c)  # its humans
        cells = block[:, None] * codes.shape[1] + human_cols[held]
        entry, xi = _block_differences(
            _flat(codes)[cells], _flat(order)[cells], codes[block, judge], order[block, judge], rule
        )
        parts.append((held.ravel(), np.repeat(block, c), entry.ravel(), xi.ravel()))
    human, item, entry, xi = (
        np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype=np.int64) for i in range(4)
    )
    by_human = np.argsort(human.astype(np.int16), kind="stable")
    ends = np.concatenate([[0], np.cumsum(np.bincount(human, minlength=n_humans))])
    paths = []
    for k in range(n_humans):
        own = by_human[ends[k] : ends[k + 1]]
        ranks = entry[own]
        arrival = _arrival(ranks)
        if arrival is None:  # equal ranks: the row with the smaller tie-break key (default: the earlier row) first
            arrival = np.lexsort((item[own] if tiebreak is None else tiebreak[item[own]], ranks))
        own = own[arrival]
        paths.append((ranks[arrival], xi[own], item[own]))
    return paths


def _arrival(ranks: np.ndarray) -> np.ndarray | None:
    """The permutation sorting distinct ``ranks``, or None when some rank repeats.

    Ranks spanning under ``4 n`` values (``label_seq``) are placed in a table, others sorted.
    """
    if ranks.size == 0:
        return np.zeros(0, dtype=np.int64)
    low = int(ranks.min())
    span = int(ranks.max()) - low + 1
    if span <= 4 * ranks.size:
        slot = np.full(span, -1, dtype=np.int64)
        slot[ranks - low] = np.arange(ranks.size)
        placed = slot[slot >= 0]
        return placed if placed.size == ranks.size else None
    arrival = np.argsort(ranks, kind="stable")
    return None if np.any(np.diff(ranks[arrival]) == 0) else arrival


def _monitor_iv(
    codes: object,
    order: object,
    judge: object,
    humans: object,
    n_labels: int,
    rule: str,
    coefficient: str,
    epsilon: float | None,
    alpha: float,
    omega_threshold: float,
    multiplicity: str,
    budget: int | None,
) -> tuple[np.ndarray, np.ndarray, int, list[int], float]:
    """Validate ``monitor_judge``'s inputs (``inclusion`` apart: ``_monitor_weights``)."""
    if coefficient != "po":
        raise ValueError(
            f"coefficient {coefficient!r} is a ratio, not a bounded mean: anytime-valid "
            "monitoring covers p_o (rule='margin') and the alt-test only (docs/method.md §8); "
            "read it as a fixed-sample decision, provisional until the planned overlap"
        )
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES} for monitoring (docs/method.md §8), got {rule!r}")
    codes = checked_code_array(codes, n_labels)  # compact types stay compact: cells are gathered, not copied
    n_cols = codes.shape[1]
    if not (isinstance(judge, (int, np.integer)) and 0 <= judge < n_cols):
        raise ValueError(f"judge must be a single column index in 0..{n_cols - 1}, got {judge!r}")
    columns = list(np.atleast_1d(np.asarray(humans)))
    if not all(isinstance(h, (int, np.integer)) and 0 <= h < n_cols for h in columns):
        raise ValueError(f"humans must be column indices in 0..{n_cols - 1}, got {humans!r}")
    if len(set(columns)) != len(columns) or int(judge) in columns:
        raise ValueError("humans must not repeat a column or include the judge")
    if order is None:
        ranks = _row_order(codes)
    else:
        ranks = np.asarray(order)
        if ranks.shape != codes.shape or not np.issubdtype(ranks.dtype, np.integer):
            raise ValueError(
                f"order must be an integer array of the codes' shape {codes.shape}, got {ranks.dtype} {ranks.shape}"
            )
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    if not (np.isfinite(epsilon) and 0.0 <= epsilon < 1.0):
        raise ValueError(f"epsilon must be a number in [0, 1), got {epsilon!r}")
    _alpha_iv(alpha)
    if not 0.0 < omega_threshold <= 1.0:
        raise ValueError(f"omega_threshold must be in (0, 1], got {omega_threshold!r}")
    if multiplicity not in MULTIPLICITY:
        raise ValueError(f"multiplicity must be one of {MULTIPLICITY}, got {multiplicity!r}")
    if budget is not None and not (isinstance(budget, (int, np.integer)) and budget >= 1):
        raise ValueError(f"budget must be a positive integer or None, got {budget!r}")
    return codes, ranks, int(judge), [int(h) for h in columns], float(epsilon)


def _monitor_weights(inclusion: object, n_items: int) -> np.ndarray | None:
    """Per item ``min(pi) / pi_i`` in ``(0, 1]``, or None without ``inclusion`` (docs/method.md §9)."""
    prob = checked_inclusion(inclusion, n_items)
    if prob is None:
        return None
    weights: np.ndarray = prob.min() / prob
    return weights


def _needed_ranks(log_e: np.ndarray, n_humans: int, alpha: float, multiplicity: str) -> np.ndarray:
    """Smallest e-BH rank ``j`` with ``e >= K / (alpha j)`` per prefix (``K + 1``: none).

    Bonferroni certifies only at rank 1 (``e >= K / alpha``).
    """
    ratio = n_humans / alpha * np.exp(-np.minimum(log_e, 700.0))
    ranks: np.ndarray = np.minimum(np.ceil(ratio * (1.0 - 1e-12)), n_humans + 1).astype(np.int64)
    if multiplicity == "bonferroni":
        ranks = np.where(ranks == 1, 1, n_humans + 1)
    return ranks


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (a sort, which beats hashing for arrival ranks)."""
    ordered = np.sort(values, kind="stable")  # a merge when ``values`` are sorted runs
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if ordered.size else ordered


def _n_distinct(values: np.ndarray) -> int:
    """How many distinct values: a table when they span under ``4 n`` (``label_seq``), else a sort."""
    if values.size == 0:
        return 0
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span > 4 * values.size:
        return int(_distinct(values).size)
    seen = np.zeros(span, dtype=bool)
    seen[values - low] = True
    return int(np.count_nonzero(seen))


def _first_certified(
    times: list[np.ndarray], ranks: list[np.ndarray], n_humans: int, start: list[int] | None = None
) -> np.ndarray:
    """Arrival rank at which e-BH first certifies each human (``_NEVER``: not yet).

    The certified set only changes when some human's needed rank changes, so e-BH is
    evaluated at those looks only: at each, ``k* = max{j : #{k : rank_k <= j} >= j}`` and
    the humans with ``rank_k <= k*`` are certified. ``start``: each human's needed rank before
    ``times`` (paths continued after a look; ``K + 1``, none, by default).
    """
    start = [n_humans + 1] * n_humans if start is None else start
    changes = []
    for t, r, before in zip(times, ranks, start, strict=True):
        moved = np.flatnonzero(np.diff(r, prepend=before) != 0)
        changes.append((t[moved], r[moved]))
    first = np.full(n_humans, _NEVER, dtype=np.int64)
    looks = _distinct(np.concatenate([c[0] for c in changes])) if changes else np.zeros(0)
    if looks.size == 0:
        return first
    state = np.empty((looks.size, n_humans), dtype=np.int64)
    for k, ((t, r), before) in enumerate(zip(changes, start, strict=True)):
        state[:, k] = np.concatenate([[before], r])[np.searchsorted(t, looks, side="right")]
    j = np.arange(1, n_humans + 1)
    count = np.sum(state[:, :, None] <= j[None, None, :], axis=1)  # (looks, j)
    k_star = np.max(np.where(count >= j, j, 0), axis=1)
    certified = state <= k_star[:, None]
    hit = certified.any(axis=0)
    first[hit] = looks[np.argmax(certified, axis=0)[hit]]
    return first


def _certifications(
    paths: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    item_weights: list[np.ndarray | None],
    *,
    n_humans: int,
    epsilon: float,
    alpha: float,
    multiplicity: str,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray, np.ndarray]:
    """Per human of ``paths`` (``_differences``), the log e-processes won/lost and the arrival
    ranks at which each is first certified won and lost (docs/method.md §8)."""
    null_mean = (1.0 - epsilon) / 2.0
    log_inv_a = math.log(n_humans / alpha)
    processes = [
        _log_e_processes((xi + 1.0) / 2.0, null_mean, log_inv_a, w)
        for (_, xi, _), w in zip(paths, item_weights, strict=True)
    ]
    times = [t for t, _, _ in paths]
    first_won = _first_certified(
        times, [_needed_ranks(w, n_humans, alpha, multiplicity) for w, _ in processes], n_humans
    )
    first_lost = _first_certified(
        times, [_needed_ranks(lo, n_humans, alpha, multiplicity) for _, lo in processes], n_humans
    )
    return processes, first_won, first_lost


def monitor_judge(
    codes: object,
    *,
    judge: int,
    humans: list[int],
    n_labels: int,
    order: object = None,
    rule: str = "margin",
    coefficient: str = "po",
    epsilon: float | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    budget: int | None = None,
    inclusion: object = None,
    tiebreak: object = None,
) -> Monitoring:
    """Anytime-valid validation decision of a judge against humans (docs/method.md §8).

    Per held-out human, ``xi_t`` in ``[-1, 1]`` (margin rule with ``p_o``: agreement share of
    the judge minus that of ``r_k`` against the other humans; alt-test: ``W_f - W_h``) in
    arrival order (``order``: each label's arrival rank, shape of ``codes``; None = row
    order), ``y = (xi + 1)/2`` and ``m0 = (1 - epsilon)/2``. ``r_k`` is certified won when
    the plug-in empirical-Bernstein e-process against ``E[y] <= m0`` crosses its e-BH (or
    Bonferroni) threshold at level ``alpha`` over the humans, lost by the mirror against
    ``E[y] >= m0``. At every prefix: pass when ``ceil(omega_threshold K)`` humans are won,
    reject when more than ``K - ceil(omega_threshold K)`` are lost; the first such look
    decides. For a judge within the margin of every human, P(some look rejects) <= alpha;
    for one worse than the margin against every human, P(some look passes) <= alpha.
    ``budget`` is the planned usable overlap per human: reached and still open gives
    ``inconclusive``. Ratio coefficients raise ``ValueError`` (not bounded means). Each human's
    band (``cs``, ``lower``, ``upper``) is the predictable plug-in empirical-Bernstein confidence
    sequence of its ``xi`` at level ``alpha`` (weighted with ``inclusion``), valid at every look.

    ``inclusion`` (shape ``(n_items,)``, in ``(0, 1]``) is each item's probability of
    entering the overlap under an unequal-probability design (a Neyman panel). The bets are
    then on ``w_i (y_i - m0)`` with ``w_i = min(pi) / pi_i`` in ``(0, 1]``, and ``d`` and its
    band are the weighted means (docs/method.md §9): valid when each arriving item's stratum
    is drawn in proportion to the allocation (the panel's interleaved order keeps every
    prefix within an item of it); unweighted, the over-sampled strata bias every human.

    ``tiebreak`` (shape ``(n_items,)``, integers) orders entries of equal arrival rank: the smaller
    key first (None: the earlier row). A key drawn independently of the labels (the service's seeded
    item order, docs/method.md §8.2) reads the items of one write in a random order.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 2, 3000)
    >>> noisy = lambda p: np.where(rng.random(3000) < p, truth, 1 - truth)
    >>> codes = np.column_stack([noisy(0.85), noisy(0.85), noisy(0.85), noisy(0.97)])
    >>> m = monitor_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2)
    >>> m.decision, [r.status for r in m.raters]
    ('pass', ['won', 'won', 'won'])
    """
    codes, ranks, judge, humans, epsilon = _monitor_iv(
        codes,
        order,
        judge,
        humans,
        n_labels,
        rule,
        coefficient,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
    )
    weights = _monitor_weights(inclusion, codes.shape[0])
    return _monitoring(
        codes,
        ranks,
        judge,
        humans,
        n_labels,
        rule,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
        weights,
        None,
        keep=False,
        tiebreak=_monitor_tiebreak(tiebreak, codes.shape[0]),
    )[0]


@dataclass(frozen=True)
class _HumanPath:
    """A held-out human's monitored path so far: its items' arrival ranks and bounds, the sums it ends
    with and its needed e-BH ranks now (won, lost)."""

    times: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    running: _Running
    ranks: tuple[int, int]


@dataclass(frozen=True)
class MonitorState:
    """What :func:`kept_monitoring` keeps of a monitoring to bring it up to date from the labels added
    since (docs/method.md §8): its settings, the codes it saw and the largest arrival rank of their
    labels, each human's path and the first certifications."""

    settings: tuple[object, ...]
    weights: np.ndarray | None
    codes: np.ndarray
    last_rank: int
    paths: tuple[_HumanPath, ...]
    first_won: np.ndarray
    first_lost: np.ndarray
    looks: int


def kept_monitoring(
    codes: object,
    *,
    previous: MonitorState | None,
    judge: int,
    humans: list[int],
    n_labels: int,
    order: object,
    rule: str = "margin",
    coefficient: str = "po",
    epsilon: float | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    budget: int | None = None,
    inclusion: object = None,
    tiebreak: object = None,
) -> tuple[Monitoring, MonitorState]:
    """:func:`monitor_judge` and what it keeps to be brought up to date (docs/method.md §8).

    With ``previous`` (the state of an earlier call) the result is computed from the labels added
    since alone when they are additions only: every cell of the judge and humans that ``previous``
    saw labeled is unchanged, and every cell labeled since has an arrival rank above every rank it
    saw (``order`` holds label sequence numbers). A label added later dates only the items it
    completes, and is not in the pool of any earlier entry, so each human's path grows at its end
    and its e-processes, bounds and certifications continue from their sums: the same numbers as
    :func:`monitor_judge` on the whole matrix, bit for bit. Anything else (a changed or retracted
    label, another shape, setting or inclusion) computes it afresh.
    """
    if order is None:
        raise ValueError("kept_monitoring needs the arrival order (label sequence numbers) of the labels")
    codes, ranks, judge, humans, epsilon = _monitor_iv(
        codes,
        order,
        judge,
        humans,
        n_labels,
        rule,
        coefficient,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
    )
    weights = _monitor_weights(inclusion, codes.shape[0])
    monitoring, state = _monitoring(
        codes,
        ranks,
        judge,
        humans,
        n_labels,
        rule,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
        weights,
        previous,
        keep=True,
        tiebreak=_monitor_tiebreak(tiebreak, codes.shape[0]),
    )
    assert state is not None
    return monitoring, state


def _monitor_tiebreak(tiebreak: object, n_items: int) -> np.ndarray | None:
    """``tiebreak`` checked: None, or one integer key per item."""
    if tiebreak is None:
        return None
    keys = np.asarray(tiebreak)
    if keys.shape != (n_items,) or not np.issubdtype(keys.dtype, np.integer):
        raise ValueError(f"tiebreak must hold one integer key per item ({n_items}), got {keys.dtype} {keys.shape}")
    return keys


def _added_rows(
    previous: MonitorState,
    settings: tuple[object, ...],
    weights: np.ndarray | None,
    codes: np.ndarray,
    ranks: np.ndarray,
    columns: list[int],
) -> np.ndarray | None:
    """Rows where the judge or a human has a label added since ``previous`` (ranked above every rank it
    saw), or None when anything else changed for them: a label changed or retracted, the settings, the
    shape, the weights. Rows where nothing changed are found by one pass over the matrix; only the
    others are looked at column by column."""
    same_weights = (
        previous.weights is None
        if weights is None
        else previous.weights is not None and np.array_equal(previous.weights, weights)
    )
    if previous.settings != settings or not same_weights:
        return None
    moved = np.flatnonzero(np.any((codes != previous.codes) | (ranks > previous.last_rank), axis=1))
    old, new = previous.codes[moved][:, columns], codes[moved][:, columns]
    later = ranks[moved][:, columns] > previous.last_rank
    was = old != MISSING
    added = (new != MISSING) & ~was
    if np.any(was & ((new != old) | later)) or np.any(added & ~later):
        return None
    rows: np.ndarray = moved[added.any(axis=1)]
    return rows


def _last_rank(codes: np.ndarray, ranks: np.ndarray, below: int) -> int:
    """The largest rank of a labeled cell of ``codes``, or ``below`` when it is larger."""
    return max(below, int(np.max(ranks, where=codes != MISSING, initial=np.iinfo(ranks.dtype).min)))


def _monitoring(
    codes: np.ndarray,
    ranks: np.ndarray,
    judge: int,
    humans: list[int],
    n_labels: int,
    rule: str,
    epsilon: float,
    alpha: float,
    omega_threshold: float,
    multiplicity: str,
    budget: int | None,
    weights: np.ndarray | None,
    previous: MonitorState | None,
    *,
    keep: bool,
    tiebreak: np.ndarray | None = None,
) -> tuple[Monitoring, MonitorState | None]:
    """The monitoring of checked inputs, continued from ``previous`` when only labels were added since;
    with ``keep``, the state to continue it from."""
    n_humans = len(humans)
    needed = math.ceil(omega_threshold * n_humans - 1e-9)
    settings = (
        judge,
        tuple(humans),
        n_labels,
        rule,
        epsilon,
        alpha,
        omega_threshold,
        multiplicity,
        budget,
        codes.shape,
    )
    since = None
    if previous is not None and keep:
        since = _added_rows(previous, settings, weights, codes, ranks, [judge, *humans])
    if since is None or previous is None:
        found = _differences(codes, ranks, judge, humans, rule, tiebreak) if n_humans >= 2 else []
        before = [
            _HumanPath(np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0), _Running(), (n_humans + 1, n_humans + 1))
        ] * len(found)
        first_before = (np.full(n_humans, _NEVER, dtype=np.int64),) * 2
        looks_before, last_rank = 0, None
    else:
        last_rank = previous.last_rank
        keys = None if tiebreak is None else tiebreak[since]
        part = _differences(codes[since], ranks[since], judge, humans, rule, keys) if n_humans >= 2 else []
        found = [(t[t > last_rank], xi[t > last_rank], since[rows[t > last_rank]]) for t, xi, rows in part]
        before, first_before, looks_before = (
            list(previous.paths),
            (previous.first_won, previous.first_lost),
            previous.looks,
        )
    null_mean = (1.0 - epsilon) / 2.0
    log_inv_a = math.log(n_humans / alpha)
    paths, won_ranks, lost_ranks = [], [], []
    for (t, xi, rows), path in zip(found, before, strict=True):
        w = None if weights is None else weights[rows]
        won, lost, running = _running_e_processes((xi + 1.0) / 2.0, null_mean, log_inv_a, w, path.running)
        won_ranks.append(_needed_ranks(won, n_humans, alpha, multiplicity))
        lost_ranks.append(_needed_ranks(lost, n_humans, alpha, multiplicity))
        mean, low, high, bounds = _running_eb_bounds(xi, alpha, w, path.running)
        low = _accumulated(np.maximum, np.maximum(low, -1.0), path.running.low)
        high = _accumulated(np.minimum, np.minimum(high, 1.0), path.running.high)
        if xi.size:
            running = replace(
                bounds,
                n=running.n,
                y_sum=running.y_sum,
                dev_sum=running.dev_sum,
                sigma2=running.sigma2,
                won=running.won,
                lost=running.lost,
                low=float(low[-1]),
                high=float(high[-1]),
                mean=float(mean[-1]),
            )
        paths.append(
            _HumanPath(
                np.concatenate([path.times, t]),
                np.concatenate([path.lower, low]),
                np.concatenate([path.upper, high]),
                running,
                (int(won_ranks[-1][-1]), int(lost_ranks[-1][-1])) if xi.size else path.ranks,
            )
        )
    times = [t for t, _, _ in found]
    first_won, first_lost = (
        np.where(old < _NEVER, old, _first_certified(times, ranks_now, n_humans, [p.ranks[side] for p in before]))
        for old, ranks_now, side in ((first_before[0], won_ranks, 0), (first_before[1], lost_ranks, 1))
    )
    n_looks = looks_before + (_n_distinct(np.concatenate(times)) if times else 0)
    raters = tuple(
        _rater_monitoring(humans[k], path, first_won[k], first_lost[k], n_humans / alpha)
        for k, path in enumerate(paths)
    )
    decision, reason, decided_at = _monitor_decision(
        first_won, first_lost, needed, n_humans, n_looks, [r.n for r in raters], budget
    )
    monitoring = Monitoring(
        decision=decision,
        reason=reason,
        raters=raters,
        looks=n_looks,
        decided_at=decided_at,
        needed=needed,
        rule=rule,
        epsilon=epsilon,
        alpha=float(alpha),
        omega_threshold=float(omega_threshold),
        multiplicity=multiplicity,
        budget=None if budget is None else int(budget),
        n_items=int(codes.shape[0]),
        weighting="none" if weights is None else "ht",
    )
    if not keep:
        return monitoring, None
    if last_rank is None or since is None:
        last_rank = _last_rank(codes, ranks, int(np.iinfo(np.int64).min))
    elif since.size:
        last_rank = _last_rank(codes[since], ranks[since], last_rank)
    kept = codes.astype(code_type(n_labels))  # a copy in the compact type (int64 codes would be 8x the bytes)
    kept.flags.writeable = False
    state = MonitorState(settings, weights, kept, last_rank, tuple(paths), first_won, first_lost, n_looks)
    return monitoring, state


def _rater_monitoring(rater: int, path: _HumanPath, won_at: int, lost_at: int, threshold: float) -> RaterMonitoring:
    """One human's status (the first certification stands), e-values and confidence sequence."""
    status, at = "open", None
    if min(won_at, lost_at) < _NEVER and won_at != lost_at:
        status = "won" if won_at < lost_at else "lost"
        at = int(min(won_at, lost_at))
    running = path.running
    if running.n == 0:
        empty = np.zeros(0)
        return RaterMonitoring(
            rater,
            status,
            1.0,
            1.0,
            threshold,
            0,
            math.nan,
            ConfidenceInterval(math.nan, math.nan, method="confidence-sequence"),
            at,
            path.times,
            empty,
            empty,
        )
    assert running.won is not None and running.lost is not None
    assert running.low is not None and running.high is not None
    return RaterMonitoring(
        rater=rater,
        status=status,
        e_value=float(np.exp(min(running.won, 700.0))),
        e_value_lost=float(np.exp(min(running.lost, 700.0))),
        threshold=threshold,
        n=running.n,
        d=running.mean,
        cs=ConfidenceInterval(running.low, running.high, method="confidence-sequence"),
        certified_at=at,
        arrival=path.times,
        lower=path.lower,
        upper=path.upper,
    )


def _monitor_decision(
    first_won: np.ndarray,
    first_lost: np.ndarray,
    needed: int,
    n_humans: int,
    n_looks: int,
    counts: list[int],
    budget: int | None,
) -> tuple[str, str, int | None]:
    """First look at which the certified counts decide, or why there is no decision yet.

    A human counts from its first certification on; one certified both ways at the same
    look counts for neither.
    """
    if n_humans < 2:
        return "insufficient_data", "fewer than two humans", None
    if n_looks == 0:
        return "insufficient_data", "no item is labeled by the judge and two humans yet", None
    won_at = np.where(first_won < first_lost, first_won, _NEVER)
    lost_at = np.where(first_lost < first_won, first_lost, _NEVER)
    pass_at = np.sort(won_at)[needed - 1] if needed >= 1 else -1
    lost_needed = n_humans - needed + 1
    reject_at = np.sort(lost_at)[lost_needed - 1] if lost_needed <= n_humans else _NEVER
    if pass_at < reject_at:
        return "pass", f"{needed} of {n_humans} humans certified won", int(pass_at)
    if reject_at < pass_at:
        return "reject", f"{lost_needed} of {n_humans} humans certified lost", int(reject_at)
    if budget is not None and min(counts) >= budget:
        return "inconclusive", f"every human reached the budget of {budget} items undecided", None
    return "continue", "not enough humans certified yet", None


# --------------------------------------------------------------------------- simulated cost


@dataclass(frozen=True)
class DecisionRates:
    """Share of simulated trials whose decision was pass / reject (the rest stayed open)."""

    p_pass: float
    p_reject: float


@dataclass(frozen=True)
class MonitoringSimulation:
    """Simulated cost and errors of the monitored and the fixed-sample decision (docs/method.md §8).

    ``n_trials`` shared panels of ``horizon`` overlap items (every human labels each, in
    order). ``anytime``: ``monitor_judge`` over every prefix. ``fixed_once``: the fixed-sample
    rule read once at the planned ``m``. ``fixed_peeking``: that rule read every
    ``look_every`` items, the first look deciding. ``expected_stop`` is the mean overlap at
    the monitored decision over the decided trials (NaN if none), ``stop_quantile_90`` the
    overlap by which 90% of trials were decided (NaN when fewer were).
    """

    n_trials: int
    horizon: int
    look_every: int
    m: int
    expected_stop: float
    stop_quantile_90: float
    anytime: DecisionRates
    fixed_once: DecisionRates
    fixed_peeking: DecisionRates


def _noisy_panel(rng: np.random.Generator, n_items: int, accuracies: list[float], n_labels: int) -> np.ndarray:
    """Symmetric noise channel (docs/method.md §6): the true label w.p. ``p``, else another."""
    truth = rng.integers(0, n_labels, n_items)
    columns = []
    for p in accuracies:
        shift = rng.integers(1, n_labels, n_items)
        columns.append(np.where(rng.random(n_items) < p, truth, (truth + shift) % n_labels))
    return np.column_stack(columns)


def _fixed_rule_passes(
    xi: np.ndarray, looks: np.ndarray, rule: str, epsilon: float, q: float, omega_threshold: float
) -> np.ndarray:
    """The fixed-sample point decision at each look: True pass, False reject, per look (docs §3).

    ``xi`` is ``(n_items, K)`` in arrival order; at ``l`` items, margin: won when the mean of
    ``xi`` is ``>= -epsilon``; alt-test: BY over the t-tests of ``W_h - W_f`` (humans with
    fewer than 30 items skipped). Returns ``(len(looks),)`` float: 1 pass, 0 reject, NaN none.
    """
    n = looks.astype(float)[:, None]
    sums = np.cumsum(xi, axis=0)[looks - 1]
    if rule == "margin":
        won = sums / n >= -epsilon - TOLERANCE
        used = np.ones_like(won)
    else:
        abs_sums = np.cumsum(np.abs(xi), axis=0)[looks - 1]
        p = alt_test_p_values(-sums, abs_sums, np.broadcast_to(n, sums.shape), epsilon)
        used = (n >= ALT_TEST_MIN_ITEMS) & np.isfinite(p)
        won = by_rejections(p, used, q) & used
    n_used = used.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        omega = np.where(n_used > 0, won.sum(axis=1) / np.maximum(n_used, 1), np.nan)
    return np.where(np.isfinite(omega), passes(omega, omega_threshold).astype(float), np.nan)


def simulate_monitoring(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    n_humans: int,
    m: int,
    rule: str = "margin",
    epsilon: float | None = None,
    alpha: float = 0.05,
    q: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    horizon: int | None = None,
    look_every: int = 20,
    n_trials: int = 100,
    rng: int | np.random.Generator | None = None,
) -> MonitoringSimulation:
    """Expected stopping overlap and errors of anytime vs fixed-sample reading (docs/method.md §8).

    Shared panels from the symmetric noise channel (human accuracy ``p_h``, judge ``p_j``)
    of ``horizon`` items (default ``5 m``); the monitored decision of ``monitor_judge`` on
    each, and the fixed-sample point rule read once at ``m`` and every ``look_every`` items.
    """
    if not (isinstance(m, (int, np.integer)) and m >= 1):
        raise ValueError(f"m must be a positive integer, got {m!r}")
    if not (isinstance(n_humans, (int, np.integer)) and n_humans >= 2):
        raise ValueError(f"n_humans must be an integer >= 2, got {n_humans!r}")
    horizon = 5 * int(m) if horizon is None else int(horizon)
    if horizon < 1 or look_every < 1 or n_trials < 1:
        raise ValueError("horizon, look_every and n_trials must be positive")
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    gen = np.random.default_rng(rng)
    looks = np.arange(look_every, horizon + 1, look_every)
    looks = looks if looks.size else np.array([horizon])
    once = np.array([min(int(m), horizon)])
    needed = math.ceil(omega_threshold * n_humans - 1e-9)
    rows = np.arange(horizon)
    ranks = np.broadcast_to(rows[:, None], (horizon, n_humans))
    stops, anytime, peeking, fixed = [], [], [], []
    for _ in range(n_trials):
        codes = _noisy_panel(gen, horizon, [p_h] * n_humans + [p_j], n_labels)
        # every human and the judge label every row, in row order: one dense block (``_differences``)
        entry, xi_block = _block_differences(codes[:, :n_humans], ranks, codes[:, n_humans], ranks[:, 0], rule)
        paths = [(entry[:, k], xi_block[:, k], rows) for k in range(n_humans)]
        _, first_won, first_lost = _certifications(
            paths,
            [None] * n_humans,
            n_humans=n_humans,
            epsilon=epsilon,
            alpha=alpha,
            multiplicity=multiplicity,
        )
        decision, _, decided_at = _monitor_decision(
            first_won, first_lost, needed, n_humans, horizon, [x.size for _, x, _ in paths], None
        )  # monitor_judge's decision on the panel, without its per-human bands
        anytime.append(decision)
        stops.append(np.inf if decided_at is None else decided_at + 1.0)
        xi = np.column_stack([x for _, x, _ in paths])
        read = _fixed_rule_passes(xi, looks, rule, epsilon, q, omega_threshold)
        decided = read[np.isfinite(read)]
        peeking.append(decided[0] if decided.size else np.nan)
        fixed.append(_fixed_rule_passes(xi, once, rule, epsilon, q, omega_threshold)[0])
    stop = np.array(stops)
    done = np.isfinite(stop)
    return MonitoringSimulation(
        n_trials=n_trials,
        horizon=horizon,
        look_every=look_every,
        m=int(m),
        expected_stop=float(stop[done].mean()) if done.any() else math.nan,
        stop_quantile_90=float(np.quantile(stop, 0.9)) if done.mean() >= 0.9 else math.nan,
        anytime=DecisionRates(anytime.count("pass") / n_trials, anytime.count("reject") / n_trials),
        fixed_once=_rates(fixed),
        fixed_peeking=_rates(peeking),
    )


def _row_order(codes: np.ndarray) -> np.ndarray:
    """Arrival ranks when items arrive in row order (all labels of a row at once)."""
    return np.broadcast_to(np.arange(codes.shape[0], dtype=np.int64)[:, None], codes.shape)


def _rates(reads: list[float]) -> DecisionRates:
    values = np.array(reads, dtype=float)
    return DecisionRates(float(np.mean(values == 1.0)), float(np.mean(values == 0.0)))
