"""Simulated error rates of the paired, PPI++ and Neyman estimates of ``d`` (docs/method.md §9).

A plan's check: for the project's ``n`` items and each estimator's recommended overlap
``m``, how often the margin decision ``d_k >= -epsilon`` for one held-out secondary (pool =
primary) is wrong. The corpus of each trial is drawn from the prior; the decision is
compared with the same rule on the dense corpus, as in docs/method.md §3. Only the counts of
the four cells ``(A, B)`` matter (``A = 1[judge = primary]``, ``B = 1[r_k = primary]``), so a
trial draws cell counts, and the overlap's counts are hypergeometric draws from them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.neyman import neyman_allocation, prior_cells, prior_variances
from planner.overlap_samples import hypergeometric_split
from planner.plan_check import mirror_accuracy, needs_no_raise, promise_status, raised_m
from planner.ppi import ppi_gap_features, ppi_gaps
from planner.trial_decisions import DecisionRule

ESTIMATORS = ("paired", "ppi", "neyman")


@dataclass(frozen=True)
class EstimatorCheck:
    """One estimator at its overlap ``m``: simulated FR (judge as the prior says) and FA
    (a judge as far below ``-epsilon`` as that one is above it), with Monte Carlo SE, and FR's
    ``promise_status`` against ``promise`` (docs/method.md §6: the Monte Carlo error inside the promise).

    A rate is NaN when no trial had the dense decision it conditions on; ``fa`` is NaN
    when no judge accuracy gives the mirrored margin.
    """

    estimator: str
    m: int
    fr: float
    fr_se: float
    fa: float
    fa_se: float
    trials: int
    promise: float
    promise_status: str


def estimator_check(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    n_items: int,
    m: dict[str, int],
    epsilon: float = 0.05,
    trials: int = 1000,
    promise: float = 0.025,
    rng: int | np.random.Generator | None = None,
) -> dict[str, EstimatorCheck]:
    """FR and FA of each estimator in ``m`` (keys from ``ESTIMATORS``) at its overlap, FR against ``promise``.

    docs/method.md §9. ``paired``: mean of ``A - B`` over a simple random overlap.
    ``ppi``: ``mean_all(A)`` minus the PPI++ estimate of ``mean(B)`` on that overlap.
    ``neyman``: overlap allocated over the strata ``A = 0, 1`` by ``neyman_allocation``
    with the prior's ``S_h``; estimate ``mean_all(A) - sum_h W_h mean_h(B)`` (inverse
    inclusion weights).
    """
    if not isinstance(n_items, (int, np.integer)) or n_items < 4:
        raise ValueError(f"n_items must be an integer >= 4, got {n_items!r}")
    if not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"trials must be a positive integer, got {trials!r}")
    unknown = set(m) - set(ESTIMATORS)
    if unknown:
        raise ValueError(f"m names unknown estimators {sorted(unknown)}; use {ESTIMATORS}")
    gen = np.random.default_rng(rng)
    mirror = mirror_accuracy(p_h, p_j, n_labels=n_labels, rule=DecisionRule("margin", epsilon, 0.5, 0.05))
    out = {}
    for name, size in m.items():
        if not isinstance(size, (int, np.integer)) or not 2 <= size <= n_items:
            raise ValueError(f"m[{name!r}] must be an integer in 2..{n_items}, got {size!r}")
        fr, fr_se = _error_rate(name, p_h, p_j, n_labels, n_items, int(size), epsilon, trials, gen, True)
        fa, fa_se = (
            (math.nan, math.nan)
            if math.isnan(mirror)
            else _error_rate(name, p_h, mirror, n_labels, n_items, int(size), epsilon, trials, gen, False)
        )
        status = promise_status(fr, fr_se, promise)
        out[name] = EstimatorCheck(name, int(size), fr, fr_se, fa, fa_se, int(trials), promise, status)
    return out


def _error_rate(
    name: str,
    p_h: float,
    p_j: float,
    n_labels: int,
    n_items: int,
    m: int,
    epsilon: float,
    trials: int,
    gen: np.random.Generator,
    good: bool,
) -> tuple[float, float]:
    """Share of trials, among those whose dense decision is ``good``, decided the other way."""
    cell, b_rate = prior_cells(p_h, p_j, n_labels=n_labels)
    agree = np.eye(n_labels, dtype=bool)
    p_a1 = float(cell[agree].sum())
    p_ab = float(np.sum((cell * b_rate)[agree]))
    p_b = float(np.sum(cell * b_rate))
    # Cells (A, B): (0,0), (0,1), (1,0), (1,1).
    law = np.array([1 - p_a1 - (p_b - p_ab), p_b - p_ab, p_a1 - p_ab, p_ab])
    counts = gen.multinomial(n_items, np.clip(law, 0.0, None) / np.clip(law, 0.0, None).sum(), size=trials)
    a_all = counts[:, 2] + counts[:, 3]
    dense = (a_all - counts[:, 1] - counts[:, 3]) / n_items
    sds = np.asarray(prior_variances(p_h, p_j, n_labels=n_labels).stratum_sd)
    estimate = _estimates(name, counts, m, sds, gen)
    won = estimate >= -epsilon - 1e-12
    dense_won = dense >= -epsilon - 1e-12
    among = dense_won if good else ~dense_won
    if not among.any():
        return math.nan, math.nan
    wrong = (~won if good else won)[among]
    rate = float(wrong.mean())
    return rate, math.sqrt(max(rate * (1 - rate), 1e-12) / among.sum())


def _estimates(name: str, cells: np.ndarray, m: int, sds: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Per trial, the estimate of ``d`` from corpus cell counts ``[(0,0), (0,1), (1,0), (1,1)]``."""
    n = cells.sum(axis=1)
    mean_a = (cells[:, 2] + cells[:, 3]) / n
    if name == "neyman":
        sizes = np.column_stack([cells[:, 0] + cells[:, 1], cells[:, 2] + cells[:, 3]])
        ones = cells[:, [1, 3]]
        take = neyman_allocation(sizes, sds, m)  # one allocation per corpus
        drawn = gen.hypergeometric(ones, sizes - ones, take)
        mean_b = drawn / np.maximum(take, 1)
        return np.asarray(mean_a - np.sum(sizes * mean_b, axis=1) / n)
    sample = hypergeometric_split(cells, np.full(cells.shape[0], m), gen)
    if name == "paired":
        return np.asarray((sample[:, 2] - sample[:, 1]) / m)
    a = np.array([0, 0, 1, 1])
    features = np.vstack(
        [
            ppi_gap_features(a, np.array([[0], [1], [0], [1]]), np.ones(4), np.ones(4)),
            ppi_gap_features(a, np.full((4, 1), -1), np.ones(4), np.ones(4)),
        ]
    )
    sums = np.hstack([sample, cells - sample]) @ features
    return np.asarray(ppi_gaps(sums, 1).d[:, 0])


def raised_estimator_checks(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    n_items: int,
    m: dict[str, int],
    promise: float,
    epsilon: float = 0.05,
    trials: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> dict[str, EstimatorCheck]:
    """``estimator_check`` of each estimator at its ``m``, raised (``planner.plan_check.raised_m``)
    until ``needs_no_raise``: FR kept with its Monte Carlo error inside ``promise``, or not shown broken
    at the recipe's own ``m`` (docs/method.md §6 and §9). A check whose ``m`` differs from the one asked
    for was raised."""
    gen = np.random.default_rng(rng)

    def checks(sizes: dict[str, int]) -> dict[str, EstimatorCheck]:
        return estimator_check(
            p_h,
            p_j,
            n_labels=n_labels,
            n_items=n_items,
            m=sizes,
            epsilon=epsilon,
            trials=trials,
            promise=promise,
            rng=gen,
        )

    out = {}
    for name, check in checks(m).items():

        def at(size: int, name: str = name) -> EstimatorCheck:
            return checks({name: size})[name]

        def stands(current: EstimatorCheck, recipe_m: int = check.m) -> bool:
            return needs_no_raise(current, recipe_m)

        out[name], _ = raised_m(at, check.m, n_items=n_items, keeps=stands, first=check)
    return out
