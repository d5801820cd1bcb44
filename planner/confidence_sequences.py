"""Anytime-valid confidence sequences and e-processes for a bounded mean (docs/method.md §8).

The boundaries, bets and running sums that ``planner.sequential``'s monitor reads at every
look: a normal-mixture boundary, empirical-Bernstein and betting confidence sequences, and
the plug-in betting e-processes with their running state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import log_ndtr

CS_METHODS = ("betting", "empirical-bernstein", "normal-mixture")
_BET_CAP = 0.5  # c: a bet never risks more than half the capital (docs/method.md §8)
_GRID_CHUNK_CELLS = 4_000_000  # prefix x grid cells of the betting CS held at once

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
    alpha_iv(alpha, one_sided=one_sided)
    if not one_sided:
        return float(_two_sided_boundary(float(v), alpha, _mixture_rho(v_opt, alpha)))
    rho = _mixture_rho(v_opt, 2.0 * alpha)
    target = math.log(1.0 / alpha)

    def excess(s: float) -> float:
        return _one_sided_log_mixture(s, float(v), rho) - target

    from scipy import optimize  # deferred: importing scipy.optimize costs seconds; one-sided only

    high = _two_sided_boundary(float(v), alpha, rho) + 1.0  # the mixture exceeds 1/alpha here
    return float(optimize.brentq(excess, 0.0, float(high), xtol=1e-12, rtol=1e-14))


def alpha_iv(alpha: float, *, one_sided: bool = False) -> None:
    upper = 0.5 if one_sided else 1.0
    if not (isinstance(alpha, (int, float, np.floating)) and 0.0 < alpha < upper):
        raise ValueError(f"alpha must be in (0, {upper}), got {alpha!r}")


# --------------------------------------------------------------------------- bets


@dataclass(frozen=True)
class Running:
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
    wy_sum: float | None = None  # the served band's sums (PrPl-EB, :func:`running_eb_bounds`)
    cs_dev_sum: float | None = None
    cs_mu: float = 0.5  # its mu_0 and sigma_0^2
    cs_sigma2: float = 0.25
    lam_y_sum: float | None = None
    lam_w_sum: float | None = None
    penalty_sum: float | None = None
    low: float | None = None
    high: float | None = None
    mean: float = math.nan


def accumulated(ufunc: np.ufunc, a: np.ndarray, start: float | None) -> np.ndarray:
    """``ufunc.accumulate`` of ``a`` continuing from ``start`` (the running value of a prefix), each step
    taken in the order an accumulation over the whole path takes it: bit-identical to that path's tail
    (``np.add``: its prefix sums, as ``np.cumsum``)."""
    if start is None:
        out: np.ndarray = ufunc.accumulate(a)
        return out
    out = np.empty(a.size + 1, dtype=np.result_type(a, start))  # accumulated in place: no copy of the result
    out[0] = start
    out[1:] = a
    ufunc.accumulate(out, out=out)
    return out[1:]


def _plug_in_bets(y: np.ndarray, log_inv_a: float) -> np.ndarray:
    """Predictable plug-in empirical-Bernstein bets before the cap (Waudby-Smith & Ramdas 2024).

    ``lambda_i = sqrt(2 log(1/a) / (sigma_{i-1}^2 i log(1 + i)))``, with
    ``mu_t = (1/2 + sum y)/(t + 1)`` and ``sigma_t^2 = (1/4 + sum (y_j - mu_j)^2)/(t + 1)``;
    ``sigma_0^2 = 1/4``. Only ``y_1..y_{i-1}`` enter ``lambda_i``, through prefix sums.
    """
    return _running_bets(y, log_inv_a, Running())[0]


def _running_bets(
    y: np.ndarray, log_inv_a: float, start: Running
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_plug_in_bets` of a path's next ``y`` after a prefix ending with ``start``, and the
    prefix sums of ``y`` and ``(y - mu)^2`` and ``sigma^2`` along them."""
    t = np.arange(start.n + 1, start.n + y.size + 1, dtype=float)
    sums = accumulated(np.add, y, start.y_sum)
    mu = (0.5 + sums) / (t + 1.0)
    devs = accumulated(np.add, (y - mu) ** 2, start.dev_sum)
    sigma2 = (0.25 + devs) / (t + 1.0)
    previous = np.concatenate([[start.sigma2], sigma2[:-1]])
    bets: np.ndarray = np.sqrt(2.0 * log_inv_a / (previous * t * np.log1p(t)))
    return bets, sums, devs, sigma2


def log_e_processes(
    y: np.ndarray, null_mean: float, log_inv_a: float, weights: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Log capital of the bets against ``E[y] <= m0`` (won) and ``E[y] >= m0`` (lost) per prefix.

    ``K_t = prod (1 + lambda_i (y_i - m0))``, ``lambda_i`` capped at ``c/m0``; the mirror uses
    ``1 - lambda_i (y_i - m0)`` capped at ``c/(1 - m0)`` (docs/method.md §8). With
    ``weights`` ``w_i`` in ``(0, 1]`` the bets are on ``w_i (y_i - m0)``, i.e. on
    ``m0 + w_i (y_i - m0)``, which stays in ``[0, 1]`` (docs/method.md §9, weighted monitor).
    """
    won, lost, _ = running_e_processes(y, null_mean, log_inv_a, weights, Running())
    return won, lost


def running_e_processes(
    y: np.ndarray, null_mean: float, log_inv_a: float, weights: np.ndarray | None, start: Running
) -> tuple[np.ndarray, np.ndarray, Running]:
    """:func:`log_e_processes` of a path's next ``y`` after a prefix ending with ``start``, and the
    sums the longer path ends with (its bounds' sums left as ``start`` has them)."""
    if weights is not None:
        y = null_mean + weights * (y - null_mean)
    bets, sums, devs, sigma2 = _running_bets(y, log_inv_a, start)
    excess = y - null_mean
    won = accumulated(np.add, np.log1p(np.minimum(bets, _BET_CAP / null_mean) * excess), start.won)
    lost = accumulated(np.add, np.log1p(-np.minimum(bets, _BET_CAP / (1.0 - null_mean)) * excess), start.lost)
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


def running_eb_bounds(
    x: np.ndarray, alpha: float, weights: np.ndarray | None, start: Running
) -> tuple[np.ndarray, np.ndarray, np.ndarray, Running]:
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
    # unweighted, w = 1: the products by w are left out (exact) and the sums of w are counts (exact)
    w = weights
    w_sums = t - start.n + (start.w_sum or 0.0) if w is None else accumulated(np.add, w, start.w_sum)
    x_sums = accumulated(np.add, x if w is None else w * x, start.x_sum)
    wy_sums = accumulated(np.add, y if w is None else w * y, start.wy_sum)
    mu = (0.5 + wy_sums) / (1.0 + w_sums)
    mu_before = np.concatenate([[start.cs_mu], mu[:-1]])
    dev = y - mu
    if w is not None:
        dev *= w
    devs = accumulated(np.add, np.square(dev, out=dev), start.cs_dev_sum)
    sigma2 = (0.25 + devs) / (t + 1.0)
    sigma2_before = np.concatenate([[start.cs_sigma2], sigma2[:-1]])
    log_two = math.log(2.0 / alpha)
    bets = np.minimum(np.sqrt(2.0 * log_two / (sigma2_before * t * np.log1p(t))), _BET_CAP)
    penalty = _band_penalty(y, mu_before, bets, w)
    lam_y = accumulated(np.add, bets * y if w is None else bets * w * y, start.lam_y_sum)
    lam_w = accumulated(np.add, bets if w is None else bets * w, start.lam_w_sum)
    pen = accumulated(np.add, penalty, start.penalty_sum)
    low, high = _band_limits(lam_y, lam_w, pen, log_two)
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


def _band_penalty(y: np.ndarray, mu_before: np.ndarray, bets: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """The band's penalties ``4 (w (y - mu_before))^2 psi(bets)``, ``psi(l) = (-log(1 - l) - l)/4``, computed
    in place (docs/method.md §8)."""
    penalty: np.ndarray = y - mu_before
    if w is not None:
        penalty *= w
    np.square(penalty, out=penalty)
    penalty *= 4.0
    psi = np.negative(bets)
    np.log1p(psi, out=psi)
    psi += bets
    np.negative(psi, out=psi)
    psi /= 4.0
    penalty *= psi
    return penalty


def _band_limits(
    lam_y: np.ndarray, lam_w: np.ndarray, pen: np.ndarray, log_two: float
) -> tuple[np.ndarray, np.ndarray]:
    """The band's bounds on the mean of ``x`` per prefix from its running sums (docs/method.md §8), each in
    ``[-1, 1]``."""
    centre = lam_y / lam_w
    half = log_two + pen
    half /= lam_w
    low = centre - half  # 2 max(centre - half, 0) - 1, in place
    np.maximum(low, 0.0, out=low)
    low *= 2.0
    low -= 1.0
    high = np.add(centre, half, out=centre)  # 2 min(centre + half, 1) - 1
    np.minimum(high, 1.0, out=high)
    high *= 2.0
    high -= 1.0
    return low, high


def running_monitor_path(
    x: np.ndarray, null_mean: float, log_inv_a: float, alpha: float, start: Running
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Running]:
    """:func:`running_e_processes` and :func:`running_eb_bounds` of an unweighted path's next ``x`` (at least
    one) after a prefix ending with ``start``, in one pass: the log e-processes won and lost, the running
    bounds (each intersected with the prefix's) and the sums the longer path ends with, bit for bit those of
    the two functions (docs/method.md §8).

    Unweighted, the band's ``mu``, ``sigma^2`` and their sums are the bets' (the same ``y``, the same steps,
    counts for the sums of ``w``), so they are computed once, as is ``sigma_{i-1}^2 i log(1 + i)``, which the
    two bets divide. ``start`` must be such a path's (:func:`shares_band_sums`)."""
    n = x.size
    t = np.arange(start.n + 1, start.n + n + 1, dtype=float)
    t_next = t + 1.0
    y = x + 1.0
    y /= 2.0
    sums = accumulated(np.add, y, start.y_sum)
    y_sum = float(sums[-1])
    mu = np.add(sums, 0.5, out=sums)  # only the last sum is kept
    mu /= t_next
    dev = y - mu
    devs = accumulated(np.add, np.square(dev, out=dev), start.dev_sum)
    dev_sum = float(devs[-1])
    sigma2 = np.add(devs, 0.25, out=devs)
    sigma2 /= t_next
    scale = np.empty(n)  # sigma_{i-1}^2 i log(1 + i)
    scale[0] = start.sigma2
    scale[1:] = sigma2[:-1]
    scale *= t
    scale *= np.log1p(t)
    bets = np.divide(2.0 * log_inv_a, scale)
    np.sqrt(bets, out=bets)
    excess = y - null_mean
    up = np.minimum(bets, _BET_CAP / null_mean)
    up *= excess
    won = accumulated(np.add, np.log1p(up, out=up), start.won)
    down = np.minimum(bets, _BET_CAP / (1.0 - null_mean), out=bets)
    np.negative(down, out=down)
    down *= excess
    lost = accumulated(np.add, np.log1p(down, out=down), start.lost)
    log_two = math.log(2.0 / alpha)
    band_bets = np.divide(2.0 * log_two, scale, out=scale)
    np.sqrt(band_bets, out=band_bets)
    np.minimum(band_bets, _BET_CAP, out=band_bets)
    mu_before = np.empty(n)
    mu_before[0] = start.cs_mu
    mu_before[1:] = mu[:-1]
    penalty = _band_penalty(y, mu_before, band_bets, None)
    lam_y = accumulated(np.add, np.multiply(band_bets, y, out=y), start.lam_y_sum)
    lam_w = accumulated(np.add, band_bets, start.lam_w_sum)
    pen = accumulated(np.add, penalty, start.penalty_sum)
    low, high = _band_limits(lam_y, lam_w, pen, log_two)
    lows = accumulated(np.maximum, low, start.low)
    highs = accumulated(np.minimum, high, start.high)
    x_sum = float(accumulated(np.add, x, start.x_sum)[-1])
    end = replace(
        start,
        n=start.n + n,
        y_sum=y_sum,
        dev_sum=dev_sum,
        sigma2=float(sigma2[-1]),
        won=float(won[-1]),
        lost=float(lost[-1]),
        x_sum=x_sum,
        w_sum=float(t[-1]),
        wy_sum=y_sum,
        cs_dev_sum=dev_sum,
        cs_mu=float(mu[-1]),
        cs_sigma2=float(sigma2[-1]),
        lam_y_sum=float(lam_y[-1]),
        lam_w_sum=float(lam_w[-1]),
        penalty_sum=float(pen[-1]),
        low=float(lows[-1]),
        high=float(highs[-1]),
        mean=x_sum / float(t[-1]),
    )
    return won, lost, lows, highs, end


def shares_band_sums(start: Running) -> bool:
    """Whether ``start``'s band sums are its bets' (an unweighted path's, :func:`running_monitor_path`)."""
    same = (start.y_sum, start.dev_sum, start.sigma2) == (start.wy_sum, start.cs_dev_sum, start.cs_sigma2)
    return same and (start.w_sum or 0.0) == start.n


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
    alpha_iv(alpha)
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
        _, low, high, _ = running_eb_bounds(arr, alpha, None, Running())
    else:
        low, high = _betting_bounds(arr, alpha, int(grid_size))
    low = np.maximum.accumulate(np.maximum(low, -1.0))
    high = np.minimum.accumulate(np.minimum(high, 1.0))
    return ConfidenceSequence(estimate, low, high, float(alpha), method)


# --------------------------------------------------------------------------- monitoring
