"""Agreement with the held-in pool, as per-item sums (docs/method.md §3).

For each held-out human ``r_k`` the other humans form the pool ``H_k``. Every statistic
of the leave-one-out decision is a function of per-item sums over ``O_k`` (the items the
judges, ``r_k`` and at least one pool member labeled); this module builds those per-item
quantities from distinct item patterns ``[judges..., humans...]`` (codes, ``-1`` missing).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from planner.codes import MISSING
from planner.patterns import ItemPatterns
from planner.resampling import grouped_rows


class PoolCounts(NamedTuple):
    """Per pattern and held-out human ``k``: pool size and agreeing pool members."""

    observed: np.ndarray  # (G, K) bool: r_k labeled the item
    pool_size: np.ndarray  # (G, 1) humans other than r_k who labeled it (k observed)
    human_agree: np.ndarray  # (G, K) pool members agreeing with r_k
    judge_agree: np.ndarray  # (G, J, K) pool members agreeing with judge j


def overlap_rows(
    patterns: ItemPatterns, judges: list[int], humans: list[int], *, tag: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows ``[judges..., humans...]`` of items that can enter some ``O_k``, and their items.

    An item enters ``O_k`` when every judge, ``r_k`` and at least one other human
    labeled it (docs/method.md §3); items with fewer than two humans enter none. A
    ``tag`` (one int ``>= 0`` per pattern, e.g. its weight class) is kept as a last column,
    so items with different tags never merge.

    >>> from planner.patterns import item_patterns
    >>> p = item_patterns(np.array([[0, 0, 1], [0, -1, 1], [0, 0, 1]]), 2)
    >>> rows, counts = overlap_rows(p, [2], [0, 1])
    >>> rows.tolist(), counts.tolist()
    ([[1, 0, 0]], [2])
    """
    rows, counts, _ = overlap_groups(patterns, judges, humans, tag=tag)
    return rows, counts


def overlap_groups(
    patterns: ItemPatterns, judges: list[int], humans: list[int], *, tag: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`overlap_rows`, and each pattern's row among them (``-1``: its items enter no ``O_k``).

    >>> from planner.patterns import item_patterns
    >>> p = item_patterns(np.array([[0, 0, 1], [0, -1, 1], [0, 0, 1]]), 2)
    >>> overlap_groups(p, [2], [0, 1])[2].tolist()
    [-1, 0]
    """
    sub = patterns.rows[:, judges + humans]
    judged = np.all(sub[:, : len(judges)] != MISSING, axis=1)
    n_humans = np.sum(sub[:, len(judges) :] != MISSING, axis=1)
    if tag is not None:
        sub = np.column_stack([sub, tag])
    keep = judged & (n_humans >= 2)
    rows, counts, kept_groups = grouped_rows(sub[keep], counts=patterns.counts[keep])
    groups = np.full(keep.size, -1, dtype=np.int64)
    groups[keep] = kept_groups
    return rows, counts, groups


def pool_counts(rows: np.ndarray, n_judges: int, n_labels: int, held_out: np.ndarray | None = None) -> PoolCounts:
    """Agreement counts of the judges and each held-out human with ``H_k`` (docs/method.md §2).

    ``held_out``: the held-out humans (sorted indices) to count for; all by default.

    >>> pc = pool_counts(np.array([[1, 1, 1, 0]]), 1, 2)  # judge 1; humans 1, 1, 0
    >>> pc.pool_size.tolist(), pc.human_agree.tolist(), pc.judge_agree.tolist()
    ([[2]], [[1, 1, 0]], [[[1, 1, 2]]])
    """
    judge_codes, human_codes = rows[:, :n_judges], rows[:, n_judges:]
    n_rows = human_codes.shape[0]
    observed = human_codes != MISSING
    offsets = np.arange(n_rows)[:, None] * n_labels
    label_counts = np.bincount((offsets + human_codes)[observed], minlength=n_rows * n_labels).reshape(n_rows, n_labels)
    pool_size = observed.sum(axis=1, keepdims=True) - 1
    if held_out is not None:
        observed, human_codes = observed[:, held_out], human_codes[:, held_out]
    own = np.take_along_axis(label_counts, np.where(observed, human_codes, 0), axis=1)
    human_agree = np.where(observed, own - 1, 0)
    judge_counts = np.take_along_axis(label_counts, judge_codes, axis=1)  # (G, J)
    same = judge_codes[:, :, None] == human_codes[:, None, :]
    judge_agree = np.where(observed[:, None, :], judge_counts[:, :, None] - same, 0)
    return PoolCounts(observed, pool_size, human_agree, judge_agree)


def _flat(x: np.ndarray) -> np.ndarray:
    """``(G, ...)`` as float ``(G, prod(...))``, also for ``G = 0``."""
    return x.reshape(x.shape[0], int(np.prod(x.shape[1:]))).astype(float)


def po_features(
    rows: np.ndarray, n_judges: int, n_labels: int, rule: str, held_out: np.ndarray | None = None
) -> np.ndarray:
    """Per-item sums for ``F = p_o`` (docs/method.md §3): ``[m_k, S(r_k), judge terms]``.

    Margin rule: judge terms are the per-item agreement ``agree(j, pool_i)``. Alt-test:
    ``W_f``, ``W_h - W_f`` and ``|W_h - W_f|`` per judge and held-out human.
    """
    pc = pool_counts(rows, n_judges, n_labels, held_out)
    size = np.maximum(pc.pool_size, 1)
    m = pc.observed.astype(float)
    human = pc.human_agree / size
    if rule == "margin":
        judge = pc.judge_agree / size[:, None, :]
        return np.hstack([m, human, _flat(judge)])
    obs = pc.observed[:, None, :]
    w_f = obs & (pc.judge_agree >= pc.human_agree[:, None, :])
    diff = np.where(obs, np.sign(pc.human_agree[:, None, :] - pc.judge_agree), 0)
    return np.hstack([m, human] + [_flat(x) for x in (w_f, diff, diff != 0)])


def ratio_features(rows: np.ndarray, n_judges: int, n_labels: int, held_out: np.ndarray | None = None) -> np.ndarray:
    """Per-item pair tables for kappa/alpha/AC1 on ``I_k ∩ I_k'`` (docs/method.md §3).

    For every ordered human pair ``(k, k')``: agreement and the marginals of ``r_k'``;
    for every judge ``j`` and pair: agreement of ``j`` with ``r_k'`` and the marginals
    of ``j``. Those are the sufficient sums of a two-rater coefficient.
    """
    judge_codes, human_codes = rows[:, :n_judges], rows[:, n_judges:]
    n_humans = human_codes.shape[1]
    ks = np.arange(n_humans) if held_out is None else held_out
    observed = human_codes != MISSING
    pair = observed[:, ks, None] & observed[:, None, :] & ~np.eye(n_humans, dtype=bool)[ks]
    labels = np.arange(n_labels)
    human_hot = human_codes[:, :, None] == labels  # (G, K, L)
    judge_hot = judge_codes[:, :, None] == labels  # (G, J, L)
    human_same = pair & (human_codes[:, ks, None] == human_codes[:, None, :])
    human_margins = pair[..., None] & human_hot[:, None, :, :]
    judge_same = pair[:, None] & (judge_codes[:, :, None, None] == human_codes[:, None, None, :])
    judge_margins = pair[:, None, :, :, None] & judge_hot[:, :, None, None, :]
    parts = (observed[:, ks], human_same, human_margins, judge_same, judge_margins)
    return np.hstack([_flat(x) for x in parts])


def item_features(
    rows: np.ndarray,
    n_judges: int,
    n_labels: int,
    rule: str,
    coefficient: str,
    held_out: np.ndarray | None = None,
) -> np.ndarray:
    """Per-item quantities whose sums determine every statistic of docs/method.md §3.

    ``held_out`` (sorted human indices): only the columns of those held-out humans,
    ``item_features(...)[:, held_out_columns(..., held_out)]`` without the others.
    """
    if coefficient == "po":
        return po_features(rows, n_judges, n_labels, rule, held_out)
    return ratio_features(rows, n_judges, n_labels, held_out)


def held_out_columns(
    n_judges: int, n_humans: int, n_labels: int, rule: str, coefficient: str, held_out: np.ndarray
) -> np.ndarray:
    """Indices of the ``item_features`` columns that belong to the held-out humans ``held_out``."""
    k = np.arange(n_humans)
    if coefficient == "po":
        n_judge_parts = 1 if rule == "margin" else 3
        owner = np.concatenate([k, k] + [np.tile(k, n_judges)] * n_judge_parts)
    else:
        pairs, cells = np.repeat(k, n_humans), np.repeat(k, n_humans * n_labels)
        owner = np.concatenate([k, pairs, cells, np.tile(pairs, n_judges), np.tile(cells, n_judges)])
    return np.flatnonzero(np.isin(owner, held_out))


def feature_width(n_judges: int, n_humans: int, n_labels: int, rule: str, coefficient: str) -> int:
    """Number of per-item sums ``item_features`` returns."""
    j, k = n_judges, n_humans
    if coefficient != "po":
        return k + (j + 1) * k * k * (n_labels + 1)
    return 2 * k + (j * k if rule == "margin" else 3 * j * k)
