"""The §3 decision read on simulated panels, vectorised across trials (docs/method.md §6).

Arrays are rater-major, ``(n_raters, trials, n_items)``, as in ``planner.simulate``: the
agreement of each rater with its held-in pool (``p_o`` per item, or a ratio coefficient on
common items), the per-human differences, and the judge's won humans and pass per trial.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.rules import (
    DEFAULT_MIN_ITEMS,
    RaterStats,
    judge_wins,
    passes,
)
from planner.significance import alt_test_p_values
from planner.tables import two_rater_coefficient

# --- agreement with the held-in pool, vectorised across trials --------------------------


def _confusions(x: np.ndarray, y: np.ndarray, used: np.ndarray, n_labels: int) -> np.ndarray:
    """Per trial, the ``L x L`` table of ``(x, y)`` over the items in ``used``; shape ``(T, L, L)``."""
    trials = used.shape[0]
    cell = (np.arange(trials)[:, None] * n_labels + x) * n_labels + y
    counts = np.bincount(cell[used], minlength=trials * n_labels * n_labels)
    return counts.reshape(trials, n_labels, n_labels)


def _po_scores(humans: np.ndarray, judges: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``S_po(r_k; H_k)`` ``(T, K)`` and ``S_po(j; H_k)`` ``(T, J, K)`` (docs/method.md §2-§3).

    Per item, ``r_k``'s pool has ``n_obs - 1`` members (``n_obs`` observed humans); the
    per-item agreement of ``x`` is the count of observed pool members equal to ``x``
    divided by that size, averaged over ``O_k`` (``r_k`` and >= 1 pool member observed).
    """
    n_humans = humans.shape[0]
    pool = mask.sum(axis=0, dtype=np.int16) - 1  # pool size when r_k is observed
    table = np.zeros(n_humans)
    table[1:] = 1.0 / np.arange(1, n_humans)
    inverse = np.take(table, pool, mode="clip")  # 1/|pool|, 0 without a pool member
    used = np.count_nonzero(mask & (pool > 0), axis=2).T  # (T, K) items in O_k
    own = np.zeros(used.shape)
    for a in range(n_humans):
        for b in range(a + 1, n_humans):
            # items where r_a and r_b both labeled and agree, each weighted 1/|pool|: the
            # pair's share in S(r_a; H_a) and in S(r_b; H_b) alike
            pair = np.einsum("tn,tn->t", (humans[a] == humans[b]) & mask[a] & mask[b], inverse)
            own[:, a] += pair
            own[:, b] += pair
    judge = np.empty((used.shape[0], judges.shape[0], n_humans))
    for j, x in enumerate(judges):
        hits = (x == humans) & mask  # (K, T, n)
        per_item = hits.sum(axis=0, dtype=np.int16) * inverse
        for k in range(n_humans):
            # pool members of r_k agreeing with x: all observed hits minus r_k's own
            judge[:, j, k] = np.einsum("tn,tn->t", mask[k], per_item) - np.einsum("tn,tn->t", hits[k], inverse)
    scale = np.where(used > 0, used, np.nan)
    return own / scale, judge / scale[:, None, :]


def _ratio_score(
    x: np.ndarray, humans: np.ndarray, mask: np.ndarray, k: int, coefficient: str, n_labels: int
) -> np.ndarray:
    """``S_F(x; H_k)`` per trial for a ratio coefficient (docs/method.md §3); NaN where undefined.

    ``F`` between ``x`` and each pool member on their common items of ``O_k``, averaged
    with weights equal to the common counts; undefined pairs are left out.
    """
    pool = [j for j in range(humans.shape[0]) if j != k]
    items = mask[k] & mask[pool].any(axis=0)
    weighted = np.zeros(humans.shape[1])
    weight = np.zeros(humans.shape[1])
    for j in pool:
        common = items & mask[j]
        table = _confusions(x, humans[j], common, n_labels)
        value = two_rater_coefficient(
            np.trace(table, axis1=1, axis2=2), table.sum(axis=2), table.sum(axis=1), coefficient
        )
        defined = np.isfinite(value)
        count = common.sum(axis=1)
        weighted += np.where(defined, count * np.nan_to_num(value), 0.0)
        weight += np.where(defined, count, 0)
    return np.asarray(np.divide(weighted, weight, out=np.full(weight.shape, np.nan), where=weight > 0))


def _pool_scores(
    humans: np.ndarray, judges: np.ndarray, mask: np.ndarray, coefficient: str, n_labels: int
) -> tuple[np.ndarray, np.ndarray]:
    """``S_F(r_k; H_k)`` ``(T, K)`` and ``S_F(j; H_k)`` ``(T, J, K)`` for every held-out human."""
    if coefficient == "po":
        return _po_scores(humans, judges, mask)

    def scores(x: np.ndarray | None) -> np.ndarray:  # x None: each held-out human itself
        return np.stack(
            [
                _ratio_score(humans[k] if x is None else x, humans, mask, k, coefficient, n_labels)
                for k in range(humans.shape[0])
            ],
            axis=1,
        )

    return scores(None), np.stack([scores(x) for x in judges], axis=1)


@dataclass(frozen=True)
class DecisionRule:
    """The declared decision rule and its thresholds (docs/method.md §3)."""

    name: str
    epsilon: float
    omega_threshold: float
    q: float


@dataclass(frozen=True)
class Evaluation:
    """Per-trial human-pool score and judge decisions of one mask (docs/method.md §3 and §6)."""

    score: np.ndarray  # (T,) human-pool score
    d: np.ndarray  # (T, J, K) d_k (alt-test: rho_f - rho_h), NaN where undefined
    won: np.ndarray  # (T, J, K) rater won by the judge
    defined: np.ndarray  # (T, J, K) rater used (not skipped)
    passed: np.ndarray  # (T, J) judge decision


def _alt_test_sums(
    humans: np.ndarray, judges: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per trial, judge and held-out human: ``m_k``, ``sum (W_h - W_f)`` and
    ``sum |W_h - W_f|`` over ``O_k`` (docs/method.md §3, alt-test).

    The judge's and ``r_k``'s alignment scores share the denominator ``|pool_i|``, so
    comparing them compares the counts of pool members each agrees with.
    """
    n_humans = humans.shape[0]
    pool = mask.sum(axis=0, dtype=np.int16) - 1
    items = mask & (pool > 0)  # (K, T, n)
    m = np.count_nonzero(items, axis=2).T  # (T, K)
    own = np.zeros(humans.shape, dtype=np.int16)
    for a in range(n_humans):
        for b in range(a + 1, n_humans):
            pair = (humans[a] == humans[b]) & mask[a] & mask[b]
            own[a] += pair
            own[b] += pair
    shape = (humans.shape[1], judges.shape[0], n_humans)
    diff, spread = np.empty(shape), np.empty(shape)
    for j, x in enumerate(judges):
        hits = (x == humans) & mask
        judge = hits.sum(axis=0, dtype=np.int16) - hits  # (K, T, n)
        sign = np.sign(own - judge) * items
        diff[:, j] = sign.sum(axis=2, dtype=np.int64).T
        spread[:, j] = np.count_nonzero(sign, axis=2).T
    return m, diff, spread


def evaluate_decisions(
    humans: np.ndarray,
    judges: np.ndarray,
    mask: np.ndarray,
    *,
    coefficient: str,
    n_labels: int,
    rule: DecisionRule,
) -> Evaluation:
    """Human-pool score and judge decisions per trial (docs/method.md §3 and §6).

    The human-pool score averages ``S_F(r_k; H_k)`` over every human with a defined
    value, whatever the rule.
    """
    own, judge = _pool_scores(humans, judges, mask, coefficient, n_labels)
    finite = np.isfinite(own)
    n_defined = finite.sum(axis=1)
    score = np.divide(
        np.where(finite, own, 0.0).sum(axis=1),
        n_defined,
        out=np.full(n_defined.shape, np.nan),
        where=n_defined > 0,
    )
    nan = np.full(judge.shape, np.nan)
    if rule.name == "margin":
        m = np.count_nonzero(mask & (mask.sum(axis=0) > 1), axis=2).T  # (T, K) items in O_k
        d = judge - own[:, None, :]
        stats = RaterStats(m, own, d, nan, nan, nan)
    else:
        m, diff, spread = _alt_test_sums(humans, judges, mask)
        per_judge = np.broadcast_to(m[:, None, :], diff.shape).astype(float)
        p = alt_test_p_values(diff, spread, per_judge, rule.epsilon)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = np.where(per_judge > 0, -diff / per_judge, np.nan)
        stats = RaterStats(m, own, d, nan, nan, p)
    won = judge_wins(stats, rule.name, rule.epsilon, rule.q, DEFAULT_MIN_ITEMS[rule.name])
    passed = passes(won.omega, rule.omega_threshold)
    return Evaluation(score, d, won.won, won.used, passed)
