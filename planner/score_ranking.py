"""Score judges ranked by the alignment score their numeric decision uses, with pairwise margins
(docs/method.md §3d, "Ranking score judges").

Ratings as in ``planner.score_decision``: floats of shape ``(n_items, n_raters)``, NaN where a rating
was not given. A judge's score is a mean of per-(human, item) quantities, so every bootstrap replicate
is one weighted sum: item counts drawn once, shared by every judge, over the groups of items with the same
quantities.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.intervals import percentile_interval
from planner.ranking import JudgeScore, PairwiseMargin
from planner.resampling import bootstrap_sums
from planner.rules import check_confidence_level
from planner.score_decision import ScoreRule, item_differences, validate_scores, validate_scores_iv

MAX_RANKING_WORK = 4_000_000_000
"""The largest ``n_resamples x n_groups x n_judges x n_humans`` accepted (multiply-adds of the replicates; a
group is the items with the same per-item quantities, at most the items)."""
TIE = 1e-12
"""Score differences within this are ties (the scores are means of bounded quantities)."""
SCORE_RANK_SHARE = 0.8
"""A ranking plan from a pilot plans ``m_rank`` at ``0.8 alpha_sig``: the pilot's variance is a plug-in, and the
misorder rate averaged over pilots is at or above the rate at the true variance, itself on the promise: the plain
``m`` is unresolved against .05 (.047 margin, .0505 alt-test, 400-item pilots), the share's kept (.043, .040),
13.5% / 7.7% above the smallest ``m`` that holds (docs/method.md §4b, "Ranking score judges")."""


@dataclass(frozen=True)
class ScoreRanking:
    """Score judges ranked best first (docs/method.md §3d, "Ranking score judges").

    ``judges`` follows the input order; ``order`` lists judge columns best first (undefined scores
    last); ``margins`` holds every pair of defined judges; ``flip_share`` is the share of (pair,
    replicate) orders that differ from the point order; ``n_items`` the items every judge and at least
    two humans rated, the only ones compared.
    """

    judges: tuple[JudgeScore, ...]
    order: tuple[int, ...]
    margins: tuple[PairwiseMargin, ...]
    flip_share: float
    rule: ScoreRule
    epsilon: float
    n_items: int


def _tie_sign(x: np.ndarray | float) -> np.ndarray:
    return np.where(np.abs(x) <= TIE, 0.0, np.sign(x))


def _per_item(
    ratings: np.ndarray, judges: list[int], humans: list[int], rule: str, span: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per item and (judge, held-out human) column: the quantity the score averages (``W_f`` under the
    alt-test, ``S_f - S_h`` under the margin rule; 0 off ``O_k``) and whether the item is in ``O_k``."""
    n = ratings.shape[0]
    value = np.zeros((n, len(judges) * len(humans)))
    inside = np.zeros_like(value)
    for a, judge in enumerate(judges):  # a few columns: the loop is over raters, never items
        for b, human in enumerate(humans):
            rows, advantage = item_differences(
                ratings, judge, human, [h for h in humans if h != human], rule=rule, span=span
            )
            column = a * len(humans) + b
            value[rows, column] = (advantage >= 0) if rule == "alt-test" else advantage
            inside[rows, column] = 1.0
    return value, inside


def _scores(sums: np.ndarray, counts: np.ndarray, n_judges: int, min_items: int) -> np.ndarray:
    """Each judge's score per replicate ``(B, J)``: the mean over used humans (``counts >= min_items``)
    of ``sums / counts``; NaN with no used human."""
    shape = (sums.shape[0], n_judges, -1)
    sums, counts = sums.reshape(shape), counts.reshape(shape)
    used = counts >= min_items
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(used, sums / np.where(used, counts, 1.0), 0.0)
        return np.asarray(mean.sum(axis=2) / used.sum(axis=2))


def rank_score_judges(
    ratings: np.ndarray,
    judges: object,
    humans: object,
    *,
    rule: ScoreRule = "alt-test",
    epsilon: float | None = None,
    value_range: tuple[float, float] | None = None,
    min_items: int | None = None,
    q: float = 0.05,
    omega_threshold: float = 0.5,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = None,
) -> ScoreRanking:
    """Score judges ranked by their decision's alignment score, with item-bootstrap uncertainty
    (docs/method.md §3d, "Ranking score judges").

    The score is ``rho = mean_k rho_f`` (alt-test: the mean advantage probability, the authors'
    ranking) or the mean ``d_k`` (margin), over the humans used by :func:`validate_scores`, computed
    on the items every judge and at least two humans rated so that all judges meet the same items and
    the same resamples. Each judge's ``omega`` is its winning rate on those items. Reports each score's
    percentile interval, the probability of ranking first (ties share it), every pairwise margin with
    its interval and flip probability, and the share of pairwise orders that flip.

    >>> r = np.array([[1.0, 2, 1, 1, 2], [3, 3, 2, 3, 3], [5, 4, 4, 5, 5], [2, 1, 2, 2, 1]])
    >>> s = rank_score_judges(r, [0, 1], [2, 3, 4], rule="margin", value_range=(1, 5), n_resamples=50, rng=0)
    >>> s.order, [round(j.score, 4) for j in s.judges]
    ((0, 1), [0.0833, 0.0208])
    """
    array, judge_columns, human_columns, epsilon, min_items, span = validate_scores_iv(
        ratings, judges, humans, rule, epsilon, value_range, min_items, q, omega_threshold
    )
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    confidence_level = check_confidence_level(confidence_level)
    observed = ~np.isnan(array)
    common = observed[:, judge_columns].all(axis=1) & (observed[:, human_columns].sum(axis=1) >= 2)
    array = array[common]
    n_items, n_pairs = array.shape[0], len(judge_columns) * len(human_columns)
    validations = validate_scores(
        array,
        judge_columns,
        human_columns,
        rule=rule,
        epsilon=epsilon,
        value_range=value_range,
        min_items=min_items,
        q=q,
        omega_threshold=omega_threshold,
    )
    value, inside = _per_item(array, judge_columns, human_columns, rule, span)
    n_judges = len(judge_columns)
    score = _scores(value.sum(axis=0)[None], inside.sum(axis=0)[None], n_judges, min_items)[0]
    # items with the same per-item quantities are interchangeable: a multinomial draw of the items merged
    # into such groups is the multinomial of the groups' counts (docs/method.md §3, "Ranking judges")
    generator = np.random.default_rng(rng)
    groups, counts = np.unique(np.column_stack([value, inside]), axis=0, return_counts=True)
    work = int(n_resamples) * counts.size * n_pairs
    if work > MAX_RANKING_WORK:
        raise ValueError(
            f"ranking {n_judges} judges against {len(human_columns)} humans on {n_items:,} items ({counts.size:,} "
            f"groups of items with the same quantities) with {n_resamples} resamples is {work:,} multiply-adds, "
            f"more than the {MAX_RANKING_WORK:,} accepted"
        )
    replicated = np.full((int(n_resamples), n_judges), np.nan)
    if n_items:
        sums = bootstrap_sums(groups, counts, n_items, int(n_resamples), generator)  # (B, 2 P): values, then counts
        replicated = _scores(sums[:, :n_pairs], sums[:, n_pairs:], n_judges, min_items)
    best = np.max(np.where(np.isfinite(replicated), replicated, -np.inf), axis=1, keepdims=True)
    top = (replicated >= best - TIE) & np.isfinite(replicated)
    p_top1 = np.mean(top / np.maximum(top.sum(axis=1, keepdims=True), 1), axis=0)
    p_top1 = np.where(np.isfinite(score), p_top1, np.nan)  # a judge without a score has no rank, not rank 0
    ranked = sorted(range(n_judges), key=lambda j: (not np.isfinite(score[j]), -score[j], judge_columns[j]))
    entries = tuple(
        JudgeScore(
            judge=judge_columns[j],
            score=float(score[j]),
            ci=percentile_interval(replicated[:, j], confidence_level),
            omega=validations[j].omega,
            p_top1=float(p_top1[j]),
            n_raters=sum(h.won is not None for h in validations[j].raters),
            defined=bool(np.isfinite(score[j])),
            reason="" if np.isfinite(score[j]) else validations[j].reason or "no human is used on the common items",
        )
        for j in range(n_judges)
    )
    margins, flips = [], []
    defined = [j for j in ranked if np.isfinite(score[j])]
    for position, a in enumerate(defined):
        for b in defined[position + 1 :]:
            gap = replicated[:, a] - replicated[:, b]
            flipped = _tie_sign(gap[np.isfinite(gap)]) != _tie_sign(score[a] - score[b])
            flips.append(flipped)
            margins.append(
                PairwiseMargin(
                    better=judge_columns[a],
                    worse=judge_columns[b],
                    margin=float(score[a] - score[b]),
                    ci=percentile_interval(gap, confidence_level),
                    p_flip=float(flipped.mean()) if flipped.size else np.nan,
                )
            )
    every = np.concatenate(flips) if flips else np.zeros(0, dtype=bool)
    return ScoreRanking(
        judges=entries,
        order=tuple(judge_columns[j] for j in ranked),
        margins=tuple(margins),
        flip_share=float(every.mean()) if every.size else np.nan,
        rule=rule,
        epsilon=epsilon,
        n_items=n_items,
    )


def _quantity(
    array: np.ndarray, judges: tuple[int, ...], human: int, pool: int, rule: str, span: float
) -> tuple[np.ndarray, np.ndarray]:
    """The rows where ``judges``, ``human`` and ``pool`` rated, and there ``D``: ``q_a - q_b`` for ``judges =
    (a, b)``, ``q_a`` for ``(a,)``, ``q`` the quantity :func:`rank_score_judges` averages with ``human`` held
    out against the pool of one ``pool``."""
    per_judge = [item_differences(array, j, human, [pool], rule=rule, span=span) for j in judges]
    rows = per_judge[0][0]
    for other_rows, _ in per_judge[1:]:
        rows = np.intersect1d(rows, other_rows)
    quantity = [
        (advantage >= 0).astype(float)[np.isin(r, rows)] if rule == "alt-test" else advantage[np.isin(r, rows)]
        for r, advantage in per_judge
    ]
    return rows, quantity[0] - quantity[1] if len(quantity) == 2 else quantity[0]


def score_rank_variance(
    ratings: np.ndarray,
    judges: object,
    humans: object,
    *,
    rule: ScoreRule = "margin",
    value_range: tuple[float, float] | None = None,
    n_humans: int | None = None,
) -> float:
    """Per-item variance of a judge pair's score margin under the disjoint design, for ``m_rank``'s ``m`` per
    secondary (docs/method.md §4b, "Ranking score judges"); ``humans[0]`` is the primary.

    With ``K`` humans (``n_humans``, default ``len(humans)``), the primary ``p`` on every planned item and
    secondary ``s`` on its own ``m``, the margin ``(1/K) sum_k`` of the held-out humans' means of ``D`` is
    ``(1 / (K m)) sum_i Y_i`` over the ``(K - 1) m`` items, ``Y_i = D_i(s held out, pool p) + D_i(p held
    out, pool s) / (K - 1)`` on ``s``'s items, so ``Var = (K - 1) Var(Y) / (K^2 m)``. Returned: ``(K - 1)
    / K^2`` times the largest pilot ``Var(Y)`` (ddof 1) over the secondaries and the pairs of ``judges``.
    With one judge in the pilot there is no pair: ``D = q_a`` and twice its value (a second judge like
    it, its errors independent). NaN when a secondary shares fewer than two items with the primary.

    >>> r = np.array([[1.0, 2, 1, 1, 2], [3, 3, 2, 3, 3], [5, 4, 4, 5, 5], [2, 1, 2, 2, 1]])
    >>> round(score_rank_variance(r, [0, 1], [2, 3, 4], value_range=(1, 5)), 6)
    0.014757
    """
    array, judge_columns, human_columns, _, _, span = validate_scores_iv(
        ratings, judges, humans, rule, None, value_range, None, 0.05, 0.5
    )
    k = len(human_columns) if n_humans is None else int(n_humans)
    if k < 2:
        raise ValueError(f"n_humans must be at least 2, got {n_humans!r}")
    pairs: list[tuple[int, ...]] = [(a, b) for n, a in enumerate(judge_columns) for b in judge_columns[n + 1 :]]
    factor = 1.0
    if len(judge_columns) == 1:
        pairs, factor = [(judge_columns[0],)], 2.0
    primary, largest = human_columns[0], 0.0
    for pair in pairs:
        for secondary in human_columns[1:]:
            rows_s, held_s = _quantity(array, pair, secondary, primary, rule, span)
            rows_p, held_p = _quantity(array, pair, primary, secondary, rule, span)
            both = np.intersect1d(rows_s, rows_p)
            if both.size < 2:
                return float("nan")
            y = held_s[np.isin(rows_s, both)] + held_p[np.isin(rows_p, both)] / (k - 1)
            largest = max(largest, factor * (k - 1) / k**2 * float(np.var(y, ddof=1)))
    return largest
