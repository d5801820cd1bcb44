"""Selective evaluation: the judge keeps the items it is sure of, humans take the rest (docs/method.md §3c).

A judge label may carry a ``confidence`` in ``[0, 1]`` (a log-probability-derived score or the
vote share of several samples). From a human-labelled calibration set, a threshold ``lambda``
is chosen so that among the items the judge keeps (``confidence >= lambda``) its disagreement
with the human majority is at most ``alpha``, with probability at least ``1 - delta``
(fixed-sequence testing over a ``lambda`` grid with exact binomial tests; Jung, Brahman & Choi,
ICLR 2025, "Trust or Escalate"). Several judges form a cascade, cheapest first: each one is
calibrated on the items the ones before it did not keep.

Arrays: ``confidence`` and ``disagree`` of shape ``(n_items, n_judges)`` (a vector is one judge);
``disagree[i, j]`` is True when judge ``j``'s label on item ``i`` differs from the human majority.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.codes import MISSING

DEFAULT_GRID_SIZE = 1001
"""Candidate thresholds ``0, 0.001, ..., 1`` unless a grid is given."""
DEFAULT_MIN_KEPT = 30
"""A threshold keeping fewer calibration items is not a candidate (as the paper's code)."""


@dataclass(frozen=True)
class SelectiveStage:
    """One judge of the cascade (docs/method.md §3c).

    ``threshold`` is the calibrated ``lambda`` (NaN when no candidate passed: the judge keeps
    nothing and ``defined`` is False with a ``reason``); ``n_reached`` calibration items reached
    this judge, ``n_kept`` of them it keeps, with ``disagreements`` among them (``risk`` their
    share) and ``upper_bound`` the exact binomial (Clopper–Pearson) upper bound at ``delta``.
    """

    judge: int
    threshold: float
    n_reached: int
    n_kept: int
    disagreements: int
    risk: float
    upper_bound: float
    delta: float
    defined: bool
    reason: str


@dataclass(frozen=True)
class CoverageCurve:
    """For the first judge: coverage, empirical risk and bound at every candidate threshold."""

    thresholds: np.ndarray
    coverage: np.ndarray
    risk: np.ndarray
    upper_bound: np.ndarray


@dataclass(frozen=True)
class SelectiveCalibration:
    """Thresholds of a judge cascade with a disagreement guarantee (docs/method.md §3c).

    ``coverage`` is the share of the ``n_items`` calibration items some judge keeps, ``risk`` the
    disagreement among them (NaN when none is kept). The guarantee: with probability at least
    ``1 - delta`` over the calibration draw, on new items from the same distribution, each judge's
    disagreement on the items it keeps is at most ``alpha`` (so is the cascade's, a mixture of
    them); ``split_delta`` says whether each of the ``J`` judges was tested at ``delta / J`` (the
    cascade's statement) or at ``delta`` (each judge's own, as the paper's code).
    """

    stages: tuple[SelectiveStage, ...]
    alpha: float
    delta: float
    split_delta: bool
    n_items: int
    coverage: float
    risk: float
    curve: CoverageCurve
    guarantee: str


def _selective_iv(confidence: object, disagree: object, alpha: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    conf = np.asarray(confidence, dtype=float)
    wrong = np.asarray(disagree)
    if conf.ndim == 1:
        conf = conf[:, None]
    if wrong.ndim == 1:
        wrong = wrong[:, None]
    if conf.ndim != 2 or conf.shape != wrong.shape or conf.shape[1] < 1:
        raise ValueError(
            f"confidence and disagree must have one shape (n_items, n_judges), got {conf.shape} and {wrong.shape}"
        )
    if not np.all((conf >= 0.0) & (conf <= 1.0)):
        raise ValueError("confidence must lie in [0, 1] (no NaN)")
    if wrong.dtype != bool:
        if not np.all(np.isin(wrong, (0, 1))):
            raise ValueError("disagree must be booleans (or 0/1)")
        wrong = wrong.astype(bool)
    for name, value in (("alpha", alpha), ("delta", delta)):
        if not isinstance(value, (int, float, np.floating)) or not 0.0 < float(value) < 1.0:
            raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return conf, wrong


def _grid_iv(grid: object) -> np.ndarray:
    if grid is None:
        return np.linspace(0.0, 1.0, DEFAULT_GRID_SIZE)
    values = np.unique(np.asarray(grid, dtype=float))
    if values.ndim != 1 or values.size == 0 or not np.all((values >= 0.0) & (values <= 1.0)):
        raise ValueError("grid must hold candidate thresholds in [0, 1]")
    return values


def binomial_upper_bound(disagreements: np.ndarray, n: np.ndarray, delta: float) -> np.ndarray:
    """Exact (Clopper–Pearson) one-sided upper bound on a rate at ``1 - delta`` (docs/method.md §3c).

    The ``r`` with ``P(Bin(n, r) <= k) = delta``: ``Beta(1 - delta; k + 1, n - k)``; 1 when
    ``k = n``, NaN when ``n = 0``.

    >>> round(float(binomial_upper_bound(np.array([0]), np.array([30]), 0.1)[0]), 5)
    0.07388
    """
    from scipy import stats  # deferred: importing scipy.stats costs seconds

    k = np.asarray(disagreements, dtype=float)
    m = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        bound = stats.beta.ppf(1.0 - delta, k + 1.0, np.maximum(m - k, 1e-300))
    bound = np.where(k >= m, 1.0, bound)
    return np.asarray(np.where(m > 0, bound, np.nan), dtype=float)


def _stage(
    conf: np.ndarray, wrong: np.ndarray, grid: np.ndarray, alpha: float, delta: float, min_kept: int
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fixed-sequence testing of ``H0: risk(lambda) > alpha`` from the top threshold down.

    Returns the smallest threshold of the passing prefix (NaN when the first fails), with each
    candidate's kept count, disagreement count, p-value ``P(Bin(n, alpha) <= k)`` and whether
    it is a candidate (keeps ``>= min_kept`` items).
    """
    from scipy import stats  # deferred, as above

    order = np.sort(conf)
    n_kept = conf.size - np.searchsorted(order, grid, side="left")  # items with conf >= lambda
    wrong_sorted = wrong[np.argsort(conf, kind="stable")]
    tail = np.concatenate([np.cumsum(wrong_sorted[::-1])[::-1], [0]])  # disagreements from each rank up
    k = tail[conf.size - n_kept]
    candidate = n_kept >= min_kept
    p_value = np.where(candidate, stats.binom.cdf(k, np.maximum(n_kept, 1), alpha), np.nan)
    tested = np.flatnonzero(candidate)[::-1]  # highest threshold first
    passing = np.logical_and.accumulate(p_value[tested] <= delta)
    if not passing.size or not passing[0]:
        return float("nan"), n_kept, k, p_value, candidate
    return float(grid[tested[passing][-1]]), n_kept, k, p_value, candidate


def calibrate_selective(
    confidence: object,
    disagree: object,
    *,
    alpha: float,
    delta: float,
    grid: object = None,
    min_kept: int = DEFAULT_MIN_KEPT,
    split_delta: bool = True,
) -> SelectiveCalibration:
    """Calibrate the confidence thresholds of a judge cascade, cheapest first (docs/method.md §3c).

    For judge ``j`` on the items no earlier judge kept, candidates ``lambda`` of ``grid`` keeping
    at least ``min_kept`` items are tested from the highest down against
    ``H0: P(disagree | conf >= lambda) > alpha`` by the exact binomial p-value
    ``P(Bin(n_lambda, alpha) <= k_lambda)`` at level ``delta_j`` (``delta / J`` with
    ``split_delta``, else ``delta``); the threshold is the lowest candidate before the first test
    that fails (fixed-sequence testing: no multiplicity cost). With probability ``>= 1 - delta``
    the kept items' disagreement is at most ``alpha``.

    Examples
    --------
    >>> conf = np.linspace(0.5, 1.0, 200)
    >>> wrong = (np.arange(200) % 4 == 0) & (conf < 0.75)  # a quarter wrong below 0.75, none above
    >>> c = calibrate_selective(conf, wrong, alpha=0.1, delta=0.1)
    >>> c.stages[0].threshold, c.stages[0].n_kept, c.stages[0].disagreements
    (0.661, 135, 8)
    """
    conf, wrong = _selective_iv(confidence, disagree, alpha, delta)
    candidates = _grid_iv(grid)
    if not isinstance(min_kept, (int, np.integer)) or min_kept < 1:
        raise ValueError(f"min_kept must be an integer >= 1, got {min_kept!r}")
    n_items, n_judges = conf.shape
    stage_delta = delta / n_judges if split_delta else delta
    reached = np.ones(n_items, dtype=bool)
    stages: list[SelectiveStage] = []
    curve: CoverageCurve | None = None
    for j in range(n_judges):  # a cascade of a few judges, each vectorised over items and the grid
        c, w = conf[reached, j], wrong[reached, j]
        threshold, n_kept, k, _, candidate = _stage(c, w, candidates, alpha, stage_delta, min_kept)
        if curve is None:
            with np.errstate(invalid="ignore", divide="ignore"):
                curve = CoverageCurve(
                    thresholds=candidates,
                    coverage=n_kept / max(n_items, 1),
                    risk=np.where(n_kept > 0, k / np.maximum(n_kept, 1), np.nan),
                    upper_bound=binomial_upper_bound(k, n_kept, stage_delta),
                )
        kept = c >= threshold if np.isfinite(threshold) else np.zeros(c.size, dtype=bool)
        n, d = int(kept.sum()), int(w[kept].sum())
        reason = ""
        if not np.isfinite(threshold):
            reason = (
                f"no threshold keeps {min_kept} or more of the {c.size} items reaching this judge"
                if not candidate.any()
                else f"even the highest candidate threshold fails the test at alpha {alpha}, delta {stage_delta:.4g}"
            )
        stages.append(
            SelectiveStage(
                judge=j,
                threshold=threshold,
                n_reached=int(c.size),
                n_kept=n,
                disagreements=d,
                risk=d / n if n else float("nan"),
                upper_bound=float(binomial_upper_bound(np.array([d]), np.array([n]), stage_delta)[0]),
                delta=stage_delta,
                defined=bool(np.isfinite(threshold)),
                reason=reason,
            )
        )
        index = np.flatnonzero(reached)
        reached[index[kept]] = False
    assert curve is not None  # n_judges >= 1 was checked
    n_kept_all = sum(s.n_kept for s in stages)
    d_all = sum(s.disagreements for s in stages)
    statement = (
        f"with probability >= {1 - delta:g}, the judges' disagreement with the human majority on the items "
        f"they keep is <= {alpha:g}" + ("" if split_delta or n_judges == 1 else " (each judge at its own delta)")
    )
    return SelectiveCalibration(
        stages=tuple(stages),
        alpha=float(alpha),
        delta=float(delta),
        split_delta=bool(split_delta),
        n_items=n_items,
        coverage=n_kept_all / n_items if n_items else float("nan"),
        risk=d_all / n_kept_all if n_kept_all else float("nan"),
        curve=curve,
        guarantee=statement,
    )


def selective_assignment(confidence: object, thresholds: object) -> np.ndarray:
    """Which judge of the cascade takes each item, ``-1`` for the humans (docs/method.md §3c).

    The first judge ``j`` (in order) with ``confidence[:, j] >= thresholds[j]`` takes the item;
    a NaN threshold keeps nothing, and a NaN confidence (the judge gave none) is not kept.

    >>> selective_assignment(np.array([[0.9, 0.2], [0.4, 0.8], [np.nan, 0.9], [0.1, 0.1]]), [0.5, 0.7]).tolist()
    [0, 1, 1, -1]
    """
    conf = np.asarray(confidence, dtype=float)
    if conf.ndim == 1:
        conf = conf[:, None]
    lam = np.asarray(thresholds, dtype=float)
    if lam.shape != (conf.shape[1],):
        raise ValueError(f"thresholds must have one value per judge ({conf.shape[1]}), got shape {lam.shape}")
    if not np.all(np.isnan(conf) | ((conf >= 0.0) & (conf <= 1.0))):
        raise ValueError("confidence must lie in [0, 1] (NaN: none given)")
    with np.errstate(invalid="ignore"):
        keeps = conf >= lam[None, :]  # a NaN threshold compares False
    first = np.argmax(keeps, axis=1)
    return np.asarray(np.where(keeps.any(axis=1), first, -1), dtype=np.int64)


def majority_labels(codes: object, humans: list[int]) -> np.ndarray:
    """Each item's human majority label, ``-1`` when no human labeled it or the top is tied (§3c).

    >>> majority_labels(np.array([[0, 0, 1], [1, 0, -1], [-1, -1, -1]]), [0, 1, 2]).tolist()
    [0, -1, -1]
    """
    matrix = np.asarray(codes)
    block = matrix[:, humans]
    n_labels = int(block.max(initial=0)) + 1
    counts = np.stack([(block == c).sum(axis=1) for c in range(n_labels)], axis=1)  # labels, not items
    top = counts.max(axis=1)
    unique = (counts == top[:, None]).sum(axis=1) == 1
    return np.asarray(np.where((top > 0) & unique, counts.argmax(axis=1), MISSING), dtype=np.int64)
