"""The leave-one-out decision rules, margin and alt-test, on per-rater sums (docs/method.md §3).

Shared by ``planner.decision`` (point estimate and bootstrap replicates),
``planner.recipes`` (pilot moments) and ``planner.simulate`` (trials): every array has a
leading batch axis ``B`` (replicates or trials), then judges ``J`` and held-out humans
``K``. Undefined values are NaN (never 0).
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

import numpy as np

from planner.significance import alt_test_p_values, by_rejections
from planner.tables import ratio, two_rater_coefficient

Rule = Literal["margin", "alt-test"]
"""A decision rule (docs/method.md §3)."""
Coefficient = Literal["po", "kappa", "alpha", "ac1"]
"""An agreement coefficient the decision and the simulator read (docs/method.md §2-§3)."""
RULES: tuple[Rule, ...] = get_args(Rule)
COEFFICIENTS: tuple[Coefficient, ...] = get_args(Coefficient)
DECISIONS = ("pass", "reject", "inconclusive", "insufficient_data")
DEFAULT_EPSILON = {"margin": 0.05, "alt-test": 0.2}
"""Default tolerance ``epsilon`` of each rule (docs/method.md §3)."""
ALT_TEST_MIN_ITEMS = 30
"""The alt-test skips a human with fewer usable items (docs/method.md §3)."""
DEFAULT_MIN_ITEMS = {"margin": 1, "alt-test": ALT_TEST_MIN_ITEMS}
TOLERANCE = 1e-12
"""Slack on ``d_k >= -epsilon`` and ``omega >= omega_threshold`` (float rounding of ratios)."""


class RaterStats(NamedTuple):
    """Per batch row (leading axis), judge and held-out human; NaN where undefined."""

    m: np.ndarray  # (B, K) items in O_k
    pool: np.ndarray  # (B, K) S_F(r_k; H_k)
    diff: np.ndarray  # (B, J, K) d_k, or rho_f - rho_h under the alt-test
    rho_f: np.ndarray  # (B, J, K)
    rho_h: np.ndarray  # (B, J, K)
    p_value: np.ndarray  # (B, J, K)


class Wins(NamedTuple):
    """Which held-out humans each judge wins, and the winning rate."""

    used: np.ndarray  # (B, J, K) human not skipped
    won: np.ndarray  # (B, J, K)
    omega: np.ndarray  # (B, J) NaN when no human is used


class CheckedInputs(NamedTuple):
    """Validated options of a leave-one-out computation."""

    judges: list[int]
    humans: list[int]
    epsilon: float
    min_items: int


def checked_inclusion(inclusion: object, n_items: int) -> np.ndarray | None:
    """Each item's probability of entering the overlap, checked (docs/method.md §9); None stays None."""
    if inclusion is None:
        return None
    prob = np.asarray(inclusion, dtype=float)
    if prob.shape != (n_items,):
        raise ValueError(f"inclusion must have shape ({n_items},), one probability per item, got {prob.shape}")
    if not np.all((prob > 0.0) & (prob <= 1.0)):
        raise ValueError("inclusion must hold probabilities in (0, 1], one per item (no NaN)")
    return prob


def pool_average(values: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """``S_F(x; H_k)``: coefficient over pool members weighted by common items (docs/method.md §3)."""
    usable = np.isfinite(values) & (sizes > 0)
    weight = np.where(usable, sizes, 0.0)
    return ratio(np.sum(weight * np.where(usable, values, 0.0), axis=-1), weight.sum(axis=-1))


def rater_stats(
    sums: np.ndarray,
    n_judges: int,
    n_humans: int,
    n_labels: int,
    rule: str,
    coefficient: str,
    epsilon: float,
) -> RaterStats:
    """Decode per-rater feature sums (``planner.pools.item_features``) into statistics.

    docs/method.md §3.
    """
    b, j, k, l_ = sums.shape[0], n_judges, n_humans, n_labels
    m = sums[:, :k]
    nan = np.full((b, j, k), np.nan)
    if coefficient == "po":
        pool = ratio(sums[:, k : 2 * k], m)
        mm = m[:, None, :]
        if rule == "margin":
            judge = sums[:, 2 * k :].reshape(b, j, k)
            return RaterStats(m, pool, ratio(judge - sums[:, None, k : 2 * k], mm), nan, nan, nan)
        w_f, diff, absd = (sums[:, 2 * k :].reshape(b, 3, j, k)[:, i] for i in range(3))
        rho_f = ratio(w_f, mm)
        rho_h = ratio(w_f + diff, mm)
        p = alt_test_p_values(diff, absd, np.broadcast_to(mm, diff.shape), epsilon)
        return RaterStats(m, pool, rho_f - rho_h, rho_f, rho_h, p)
    sizes = [k, k * k, k * k * l_, j * k * k, j * k * k * l_]
    _, h_same, h_marg, j_same, j_marg = np.split(sums, np.cumsum(sizes)[:-1], axis=1)
    h_same = h_same.reshape(b, k, k)
    h_marg = h_marg.reshape(b, k, k, l_)  # [k, k', l]: marginals of r_k' on I_k ∩ I_k'
    j_same = j_same.reshape(b, j, k, k)
    j_marg = j_marg.reshape(b, j, k, k, l_)
    common = h_marg.sum(axis=-1)
    human_f = two_rater_coefficient(h_same, h_marg.transpose(0, 2, 1, 3), h_marg, coefficient)
    judge_f = two_rater_coefficient(j_same, j_marg, h_marg[:, None], coefficient)
    pool = pool_average(human_f, common)
    judge = pool_average(judge_f, common[:, None])
    return RaterStats(m, pool, judge - pool[:, None, :], nan, nan, nan)


def judge_wins(st: RaterStats, rule: str, epsilon: float, q: float, min_items: int) -> Wins:
    """Which humans the judge wins, and the winning rate ``omega`` (docs/method.md §3).

    Margin: won when ``d_k >= -epsilon``; alt-test: won when Benjamini–Yekutieli at ``q``
    rejects the human's t-test. Humans with fewer than ``min_items`` items, or an
    undefined statistic, are skipped and leave the denominator of ``omega``.
    """
    enough = (st.m >= max(min_items, 1))[:, None, :]
    if rule == "margin":
        used = enough & np.isfinite(st.diff)
        won = used & (st.diff >= -epsilon - TOLERANCE)
    else:
        used = enough & np.isfinite(st.p_value)
        won = by_rejections(st.p_value, used, q) & used
    omega = ratio(won.sum(axis=-1).astype(float), used.sum(axis=-1).astype(float))
    return Wins(used, won, omega)


def passes(omega: np.ndarray | float, omega_threshold: float) -> np.ndarray:
    """Pass when ``omega >= omega_threshold`` (docs/method.md §3); ``omega = omega*`` passes.

    >>> passes(np.array([1 / 3, 0.5, np.nan]), 0.5).tolist()
    [False, True, False]
    """
    with np.errstate(invalid="ignore"):
        return np.asarray(np.asarray(omega) >= omega_threshold - TOLERANCE)


def pool_score(st: RaterStats, min_items: int) -> np.ndarray:
    """Mean over used humans of ``S_F(r_k; H_k)`` per batch row (docs/method.md §6)."""
    used = (st.m >= max(min_items, 1)) & np.isfinite(st.pool)
    return ratio(np.sum(np.where(used, st.pool, 0.0), axis=-1), used.sum(axis=-1).astype(float))


def judge_score(st: RaterStats, won: Wins, rule: str) -> np.ndarray:
    """Ranking score per batch row and judge: mean ``d_k``, or ``rho`` (docs/method.md §3)."""
    value = st.diff if rule == "margin" else st.rho_f
    used = won.used & np.isfinite(value)
    return ratio(np.sum(np.where(used, value, 0.0), axis=-1), used.sum(axis=-1).astype(float))


def _columns_iv(columns: object, name: str, n_columns: int) -> list[int]:
    values = list(np.atleast_1d(np.asarray(columns)))
    if not all(isinstance(v, (int, np.integer)) and 0 <= v < n_columns for v in values):
        raise ValueError(f"{name} must be column indices in 0..{n_columns - 1}, got {columns!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a column, got {columns!r}")
    return [int(v) for v in values]


def check_confidence_level(confidence_level: object) -> float:
    """``confidence_level`` as a float in (0, 1), or a ValueError saying what was wrong."""
    if not isinstance(confidence_level, (float, int, np.floating)) or not (0.0 < float(confidence_level) < 1.0):
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    return float(confidence_level)


def checked_inputs(
    n_raters: int,
    judges: object,
    humans: object,
    *,
    rule: str,
    coefficient: str,
    epsilon: float | None,
    min_items: int | None,
    q: float,
    n_resamples: int,
    confidence_level: float,
    judges_name: str = "judges",
) -> CheckedInputs:
    """Validate the options shared by validation, ranking and pilot moments (``n_raters`` columns)."""
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if coefficient not in COEFFICIENTS:
        raise ValueError(f"coefficient must be one of {COEFFICIENTS}, got {coefficient!r}")
    if rule == "alt-test" and coefficient != "po":
        raise ValueError("rule='alt-test' compares per-item agreement; use coefficient='po'")
    judge_columns = _columns_iv(judges, judges_name, n_raters)
    if not judge_columns:
        raise ValueError(f"{judges_name} must name at least one column")
    human_columns = _columns_iv(humans, "humans", n_raters)
    if set(judge_columns) & set(human_columns):
        raise ValueError("a judge column must not also be listed in humans")
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    if not (np.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    min_items = DEFAULT_MIN_ITEMS[rule] if min_items is None else min_items
    if not isinstance(min_items, (int, np.integer)) or min_items < 1:
        raise ValueError(f"min_items must be an integer >= 1, got {min_items!r}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    check_confidence_level(confidence_level)
    return CheckedInputs(judge_columns, human_columns, float(epsilon), int(min_items))
