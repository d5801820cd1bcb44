"""Neyman allocation of the overlap, and what the all-items layer saves (docs/method.md §9).

The judge and the primary label every item, so ``A_i = 1[judge_i = primary_i]`` (and the
cell ``(primary_i, judge_i)``) is known before any overlap. A secondary's agreement with the
primary, ``B_i = 1[r_k,i = primary_i]``, is seen on the overlap only. Strata built from the
all-items layer let the overlap go where ``B`` is most variable; ``d = mean(A) - mean(B)``
is then estimated by ``mean_all(A) - sum_h W_h mean_h(B)``, ``W_h = N_h / n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

_NEGLIGIBLE_SD = 1e-12  # a stratum whose S_h is below this is treated as constant

PPI_FR_SHARE = 0.9
"""The PPI++ estimate is planned for FR ``0.9 alpha_sig/2``: its ``lam`` is tuned on the overlap itself, so its FR
sits on the normal form's, and on the overlap's lattice above it (.026 at the normal form's 86 items, ``p_h = .85``,
``p_j = .9``, 200,000 trials); at the 90 items of the share it is .023 and falls on ``[m, 1.3 m]``
(docs/method.md §9)."""


@dataclass(frozen=True)
class AllItemsVariances:
    """Per-item variance constants of ``d`` under the prior, and the Neyman shares.

    ``paired``: ``Var(A - B)``, the overlap-only estimate (simple random overlap).
    ``ppi``: ``(1 - rho^2) Var(B)``, PPI++ with the judge's agreement on every item.
    ``proportional`` / ``neyman``: ``sum_h W_h S_h^2`` / ``(sum_h W_h S_h)^2``, the
    stratified estimate with overlap proportional to ``N_h`` / to ``N_h S_h``.
    ``stratum_share`` (``W_h``) and ``neyman_share`` (``W_h S_h / sum W S``) per stratum
    ``h`` of ``A`` (``0`` = judge and primary disagree, ``1`` = agree); ``stratum_sd`` is
    ``S_h``, the standard deviation of ``B`` within the stratum.
    """

    paired: float
    ppi: float
    proportional: float
    neyman: float
    stratum_share: tuple[float, ...]
    stratum_sd: tuple[float, ...]
    neyman_share: tuple[float, ...]


def prior_variances(p_h: float, p_j: float, *, n_labels: int, prevalence: object = None) -> AllItemsVariances:
    """Variance constants of the paired, PPI, proportional and Neyman estimates of ``d``.

    docs/method.md §9. Symmetric noise channel (human accuracy ``p_h``, judge ``p_j``, true
    labels ``~ prevalence``, uniform by default); strata are the judge-primary agreement
    cells ``A = 0, 1``.

    >>> v = prior_variances(0.85, 0.90, n_labels=2)
    >>> [round(x, 6) for x in (v.paired, v.ppi, v.proportional, v.neyman)]
    [0.218775, 0.160267, 0.160267, 0.157635]
    >>> [round(x, 4) for x in v.neyman_share]
    [0.2735, 0.7265]
    """
    cell, b_given_cell = prior_cells(p_h, p_j, n_labels=n_labels, prevalence=prevalence)
    agree = np.eye(n_labels, dtype=bool)
    p_b = float(np.sum(cell * b_given_cell))
    return agreement_variances(float(cell[agree].sum()), p_b, float(np.sum((cell * b_given_cell)[agree])))


def moment_variances(mu_d: float, sigma0_sq: float, *, judge_agreement: float) -> AllItemsVariances:
    """The constants from the paired moments and ``P(judge = primary)`` (docs/method.md §9).

    ``A`` and ``B`` are binary, so ``P(A) = judge_agreement``, ``P(B) = P(A) - mu_d`` and
    ``Cov(A, B) = (Var A + Var B - sigma0^2)/2`` fix their joint law. ``judge_agreement``
    is seen on every item before any overlap (or comes from the prior).

    >>> round(moment_variances(0.035, 0.218775, judge_agreement=0.78).ppi, 6)
    0.160267
    """
    p_a = float(judge_agreement)
    p_b = p_a - mu_d
    if not (0.0 <= p_a <= 1.0 and 0.0 <= p_b <= 1.0):
        raise ValueError(
            f"judge_agreement={p_a!r} and mu_d={mu_d!r} give P(r_k = primary) = {p_b!r}, not a probability"
        )
    cov = (p_a * (1 - p_a) + p_b * (1 - p_b) - sigma0_sq) / 2.0
    p_ab = cov + p_a * p_b
    if not max(0.0, p_a + p_b - 1.0) - 1e-9 <= p_ab <= min(p_a, p_b) + 1e-9:
        raise ValueError(
            f"sigma0_sq={sigma0_sq!r} is not a variance of A - B for binary A, B with "
            f"P(A) = {p_a:.4g}, P(B) = {p_b:.4g}"
        )
    return agreement_variances(p_a, p_b, float(np.clip(p_ab, 0.0, min(p_a, p_b))))


def agreement_variances(p_a: float, p_b: float, p_ab: float) -> AllItemsVariances:
    """Constants for binary ``A`` (judge = primary), ``B`` (r_k = primary) with
    ``P(A) = p_a``, ``P(B) = p_b``, ``P(A = B = 1) = p_ab``; strata ``A = 0, 1``.

    docs/method.md §9.
    """
    share = np.array([1.0 - p_a, p_a])
    b_mass = np.array([p_b - p_ab, p_ab])
    with np.errstate(divide="ignore", invalid="ignore"):
        b_rate = np.clip(np.where(share > 0, b_mass / share, 0.0), 0.0, 1.0)
    sd = np.sqrt(b_rate * (1.0 - b_rate))
    var_a, var_b, cov = p_a * (1 - p_a), p_b * (1 - p_b), p_ab - p_a * p_b
    ppi = var_b - cov**2 / var_a if var_a > 0 else var_b
    spread = share * sd
    neyman_share = spread / spread.sum() if spread.sum() > 0 else share
    return AllItemsVariances(
        paired=float(max(var_a + var_b - 2 * cov, 0.0)),
        ppi=float(max(ppi, 0.0)),
        proportional=float(share @ sd**2),
        neyman=float(spread.sum() ** 2),
        stratum_share=tuple(float(v) for v in share),
        stratum_sd=tuple(float(v) for v in sd),
        neyman_share=tuple(float(v) for v in neyman_share),
    )


def prior_cells(p_h: float, p_j: float, *, n_labels: int, prevalence: object = None) -> tuple[np.ndarray, np.ndarray]:
    """``P(primary = a, judge = b)`` and ``P(r_k = primary | a, b)``, shape ``(L, L)`` each.

    docs/method.md §9. By enumeration of the true label under the symmetric noise channel.

    >>> cell, b_rate = prior_cells(1.0, 0.5, n_labels=2)
    >>> cell.tolist(), b_rate.tolist()
    ([[0.25, 0.25], [0.25, 0.25]], [[1.0, 1.0], [1.0, 1.0]])
    """
    for name, value in (("p_h", p_h), ("p_j", p_j)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    if not isinstance(n_labels, (int, np.integer)) or n_labels < 2:
        raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}")
    pi = np.full(n_labels, 1.0 / n_labels) if prevalence is None else np.asarray(prevalence, float)
    if pi.shape != (n_labels,) or np.any(pi < 0) or not math.isclose(pi.sum(), 1.0):
        raise ValueError(f"prevalence must be {n_labels} probabilities summing to 1")
    human, judge = _channel(p_h, n_labels), _channel(p_j, n_labels)  # [truth, report]
    # joint[t, a, b] = pi_t P(primary = a | t) P(judge = b | t)
    joint = pi[:, None, None] * human[:, :, None] * judge[:, None, :]
    cell = joint.sum(axis=0)
    # P(r_k = a | t) = human[t, a]; average it over the truth given the cell.
    agree_mass = np.einsum("tab,ta->ab", joint, human)
    with np.errstate(divide="ignore", invalid="ignore"):
        b_rate = np.where(cell > 0, agree_mass / cell, 0.0)
    return cell, b_rate


def _channel(p: float, n_labels: int) -> np.ndarray:
    """Symmetric noise channel ``P(report | truth)``, shape ``(L, L)``."""
    return np.where(np.eye(n_labels, dtype=bool), p, (1.0 - p) / (n_labels - 1))


def m_cert_by_estimator(
    mu_d: float, variances: AllItemsVariances, *, epsilon: float = 0.05, alpha_sig: float = 0.05
) -> dict[str, int | float]:
    """``m_cert = ceil(z^2 V / (mu_d + eps)^2)`` for each estimator's constant ``V``, ``z = z_{1-alpha_sig/2}``
    (PPI++: ``z_{1-PPI_FR_SHARE alpha_sig/2}``).

    docs/method.md §4 item 2 and §9; ``inf`` when ``mu_d + eps <= 0``.

    >>> m_cert_by_estimator(0.035, prior_variances(0.85, 0.90, n_labels=2))
    {'paired': 117, 'ppi': 90, 'neyman': 84}
    """
    if not 0.0 < alpha_sig < 1.0:
        raise ValueError(f"alpha_sig must be in (0, 1), got {alpha_sig!r}")
    gap = mu_d + epsilon
    out: dict[str, int | float] = {}
    for name in ("paired", "ppi", "neyman"):
        z = float(ndtri(1.0 - (PPI_FR_SHARE if name == "ppi" else 1.0) * alpha_sig / 2.0))
        variance = getattr(variances, name)
        out[name] = max(1, math.ceil(z * z * variance / gap**2 - 1e-9)) if gap > 0 else math.inf
    return out


def neyman_allocation(sizes: object, sds: object, m: int, *, min_per_stratum: int = 2) -> np.ndarray:
    """Items per stratum, ``n_h ∝ N_h S_h`` with ``min(min_per_stratum, N_h) <= n_h <= N_h``.

    docs/method.md §9 (Neyman 1934). Strata pushed past a bound are held at it and the rest
    of ``m`` is shared among the others in the same proportion (``clip(c N_h S_h, low, N_h)``
    summing to ``m``); fractional shares are floored and the items left go to the largest
    remainders (ties to the lower stratum). When every ``S_h`` is 0 the allocation is
    proportional to ``N_h`` (every allocation then has zero variance). ``sizes`` of shape
    ``(T, n_strata)`` give one allocation per row (e.g. per simulated corpus), computed together.

    >>> neyman_allocation([780, 220], [0.369788, 0.493616], 84).tolist()
    [61, 23]
    >>> neyman_allocation([100, 3], [0.1, 0.5], 30).tolist()  # capped at N_h = 3
    [27, 3]
    >>> neyman_allocation([1000, 3], [0.1, 0.5], 10).tolist()  # held at 2
    [8, 2]
    >>> neyman_allocation([[780, 220], [100, 3]], [0.369788, 0.493616], 30).tolist()  # 21.8 + 8.2; held at 2
    [[22, 8], [28, 2]]
    """
    size = np.asarray(sizes, dtype=np.int64)
    sd = np.asarray(sds, dtype=float)
    if size.ndim not in (1, 2) or size.shape[-1] == 0 or size.size == 0 or size.min() < 0:
        raise ValueError("sizes must be a non-empty list of non-negative stratum sizes (or one per row)")
    if sd.shape != size.shape[-1:] or not np.all(np.isfinite(sd)) or sd.min() < 0:
        raise ValueError(f"sds must be {size.shape[-1]} finite non-negative standard deviations")
    if not isinstance(min_per_stratum, (int, np.integer)) or min_per_stratum < 0:
        raise ValueError(f"min_per_stratum must be a non-negative integer, got {min_per_stratum!r}")
    rows = size.reshape(-1, size.shape[-1])
    low = np.minimum(min_per_stratum, rows)
    if not isinstance(m, (int, np.integer)) or np.any(low.sum(axis=1) > m) or np.any(m > rows.sum(axis=1)):
        raise ValueError(
            f"m must be an integer in {int(low.sum(axis=1).max())}..{int(rows.sum(axis=1).min())} "
            f"(every stratum gets min(N_h, {min_per_stratum}) items), got {m!r}"
        )
    sd = np.where(sd < _NEGLIGIBLE_SD, 0.0, sd)
    weighted = rows * sd
    spread = np.where(np.any(weighted > 0, axis=1, keepdims=True), weighted, rows.astype(float))
    full = spread > 0
    out = np.empty_like(rows)
    overflow = np.where(full, rows, low).sum(axis=1) < m
    for t in np.flatnonzero(overflow):
        # Strata with spread are full; the rest goes to the others in proportion to N_h.
        out[t] = rows[t]
        out[t, ~full[t]] = neyman_allocation(
            rows[t, ~full[t]],
            np.ones(int((~full[t]).sum())),
            int(m - rows[t, full[t]].sum()),
            min_per_stratum=min_per_stratum,
        )
    out[~overflow] = _bounded_allocation(rows[~overflow], spread[~overflow], low[~overflow], int(m))
    return np.asarray(out.reshape(size.shape), dtype=np.int64)


def _bounded_allocation(size: np.ndarray, spread: np.ndarray, low: np.ndarray, m: int) -> np.ndarray:
    """Per row, ``clip(c spread_h, low_h, N_h)`` summing to ``m``, rounded by largest remainders.

    The sum is piecewise linear and increasing in ``c``, with breaks where a stratum hits a bound;
    ``c`` interpolates between the distinct breaks around ``m`` (strata without spread stay at ``low``).
    """
    full = spread > 0
    to_low = np.divide(low, spread, out=np.zeros(spread.shape), where=full)
    to_size = np.divide(size, spread, out=np.zeros(spread.shape), where=full)
    top = to_size.max(axis=1, initial=0.0)
    breaks = np.sort(np.column_stack([np.zeros(size.shape[0]), top, to_low, to_size]), axis=1)
    totals = np.clip(breaks[:, :, None] * spread[:, None, :], low[:, None, :], size[:, None, :]).sum(axis=2)
    rows = np.arange(size.shape[0])
    above = np.minimum((totals < m).sum(axis=1), breaks.shape[1] - 1)  # the first break reaching m
    below = np.maximum((breaks < breaks[rows, above][:, None]).sum(axis=1) - 1, 0)  # the distinct break before
    b1, t1, b0, t0 = breaks[rows, above], totals[rows, above], breaks[rows, below], totals[rows, below]
    flat = (breaks[rows, below] == b1) | (t1 == t0)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(flat, b1, b0 + (m - t0) * (b1 - b0) / (t1 - t0))
    share = np.clip(c[:, None] * spread, low, size)
    alloc = np.floor(share + 1e-9).astype(np.int64)
    order = np.argsort(-(share - alloc), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(size.shape[1]), axis=1)
    return np.asarray(alloc + (rank < (m - alloc.sum(axis=1))[:, None]), dtype=np.int64)


def prior_stratum_sds(agreement: object, *, p_h: float, p_j: float, n_labels: int) -> np.ndarray:
    """``S_h`` of ``B = 1[r_k = primary]`` in each stratum of a supplied feature, under the prior.

    docs/method.md §9. ``agreement`` is, per stratum, the share of its items on which the
    judge and the primary agree (NaN where none has both labels: the prior's share then).
    ``P(B = 1 | h) = a_h P(B = 1 | A = 1) + (1 - a_h) P(B = 1 | A = 0)``, the two rates from
    the symmetric noise channel; ``S_h = sqrt(P (1 - P))``.

    >>> prior_stratum_sds([1.0, 0.0, float("nan")], p_h=0.85, p_j=0.90, n_labels=2).round(6).tolist()
    [0.369786, 0.493632, 0.435861]
    """
    share = np.asarray(agreement, dtype=float)
    if share.ndim != 1 or share.size == 0 or np.any(share[np.isfinite(share)] < 0) or np.any(share > 1):
        raise ValueError("agreement must be one share in [0, 1] (or NaN) per stratum")
    cell, b_rate = prior_cells(p_h, p_j, n_labels=n_labels)
    agree = np.eye(n_labels, dtype=bool)
    p_a = float(cell[agree].sum())
    rate = [float(np.sum((cell * b_rate)[mask]) / max(cell[mask].sum(), 1e-300)) for mask in (~agree, agree)]
    a = np.where(np.isfinite(share), share, p_a)
    p_b = a * rate[1] + (1.0 - a) * rate[0]
    sds: np.ndarray = np.sqrt(p_b * (1.0 - p_b))
    return sds


def pilot_stratum_sds(agreements: object, pairs: object) -> np.ndarray:
    """``S_h`` of ``B`` per stratum from pilot pairs (secondary, primary), add-one smoothed.

    docs/method.md §9. ``agreements[h]`` of the ``pairs[h]`` pilot pairs in stratum ``h``
    agree; ``P_h = (agreements + 1) / (pairs + 2)`` (a stratum without pairs gets ``1/2``, the
    largest spread; a few agreeing pairs never give ``S_h = 0``), ``S_h = sqrt(P_h (1 - P_h))``.

    >>> pilot_stratum_sds([8, 0], [8, 0]).round(6).tolist()
    [0.3, 0.5]
    """
    agree = np.asarray(agreements, dtype=float)
    count = np.asarray(pairs, dtype=float)
    if agree.shape != count.shape or agree.ndim != 1 or np.any(agree < 0) or np.any(agree > count):
        raise ValueError("agreements and pairs must be per-stratum counts with 0 <= agreements <= pairs")
    rate = (agree + 1.0) / (count + 2.0)
    sds: np.ndarray = np.sqrt(rate * (1.0 - rate))
    return sds
