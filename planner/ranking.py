"""Judges ranked by score against the human pool, with pairwise margins (docs/method.md §3, "Ranking").

Codes and patterns as in ``planner.decision``: each judge's score is a function of per-item sums,
and the pairwise margins are read from the same bootstrap replicates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.decision import TIE, OwnResample, replicated_stats
from planner.intervals import ConfidenceInterval, percentile_interval
from planner.patterns import item_patterns
from planner.rules import (
    checked_inputs,
    judge_score,
    judge_wins,
)


@dataclass(frozen=True)
class JudgeScore:
    """One judge in a ranking: its score (mean ``d_k``, or ``rho`` under the alt-test)."""

    judge: int
    score: float
    ci: ConfidenceInterval
    omega: float
    p_top1: float
    n_raters: int
    defined: bool
    reason: str


@dataclass(frozen=True)
class PairwiseMargin:
    """Score of ``better`` minus score of ``worse``, and how often resampling flips it."""

    better: int
    worse: int
    margin: float
    ci: ConfidenceInterval
    p_flip: float


@dataclass(frozen=True)
class Ranking:
    """Judges ranked by score (docs/method.md §3, "Ranking several judges").

    ``judges`` follows the input order; ``order`` lists judge columns best first
    (undefined scores last); ``margins`` holds every pair of defined judges;
    ``flip_share`` is the share of (pair, replicate) orders that differ from the point
    order.
    """

    judges: tuple[JudgeScore, ...]
    order: tuple[int, ...]
    margins: tuple[PairwiseMargin, ...]
    flip_share: float
    rule: str
    coefficient: str
    epsilon: float
    n_items: int


def _tie_sign(x: np.ndarray | float) -> np.ndarray:
    """Sign of a score difference, 0 within :data:`TIE` of zero."""
    return np.where(np.abs(x) <= TIE, 0.0, np.sign(x))


def rank_judges(
    codes: object,
    *,
    judges: list[int],
    humans: list[int],
    n_labels: int,
    rule: str = "margin",
    coefficient: str = "po",
    epsilon: float | None = None,
    q: float = 0.05,
    min_items: int | None = None,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = None,
) -> Ranking:
    """Rank judges by score with resampling uncertainty (docs/method.md §3, "Ranking several judges").

    The score is the mean over used humans of ``d_k`` (``rule="margin"``) or the average
    advantage probability ``rho = mean_k rho_f`` (``rule="alt-test"``). Only items that
    every judge labeled are used, so all judges are compared on the same items and the
    same bootstrap resamples. Reports each judge's interval, ``omega`` and probability
    of being top-1 (ties share it), every pairwise margin with its interval and flip
    probability, and the overall share of pairwise orders that flip.

    Examples
    --------
    >>> import numpy as np
    >>> truth = np.arange(60) % 2
    >>> humans = np.column_stack([truth, truth, np.where(np.arange(60) % 6 == 0, 1 - truth, truth)])
    >>> good, bad = truth, np.where(np.arange(60) % 3 == 0, 1 - truth, truth)
    >>> r = rank_judges(np.column_stack([humans, bad, good]), judges=[3, 4], humans=[0, 1, 2],
    ...                 n_labels=2, n_resamples=200, rng=0)
    >>> r.order
    (4, 3)
    """
    patterns = item_patterns(codes, n_labels)
    judges, humans, epsilon, min_items = checked_inputs(
        patterns.n_raters,
        judges,
        humans,
        rule=rule,
        coefficient=coefficient,
        epsilon=epsilon,
        min_items=min_items,
        q=q,
        n_resamples=n_resamples,
        confidence_level=confidence_level,
    )
    resample = OwnResample(patterns.n_items, n_resamples, rng)
    by_column = np.argsort(judges)
    point, reps = replicated_stats(
        patterns,
        sorted(judges),
        sorted(humans),
        rule,
        coefficient,
        epsilon,
        resample,
    )
    wins = judge_wins(point, rule, epsilon, q, min_items)
    rep_wins = judge_wins(reps, rule, epsilon, q, min_items)
    score = judge_score(point, wins, rule)[0]
    rep_score = judge_score(reps, rep_wins, rule)  # (B, J)
    best = np.nanmax(np.where(np.isfinite(rep_score), rep_score, -np.inf), axis=1, keepdims=True)
    top = (rep_score >= best - TIE) & np.isfinite(rep_score)
    p_top1 = np.mean(top / np.maximum(top.sum(axis=1, keepdims=True), 1), axis=0)
    column = np.array(sorted(judges))
    ranked = sorted(range(len(judges)), key=lambda j: (not np.isfinite(score[j]), -score[j], column[j]))
    scores: dict[int, JudgeScore] = {}
    for j, position in enumerate(by_column):
        n_used = int(wins.used[0, j].sum())
        defined = bool(np.isfinite(score[j]))
        scores[int(position)] = JudgeScore(
            judge=int(column[j]),
            score=float(score[j]),
            ci=percentile_interval(rep_score[:, j], confidence_level),
            omega=float(wins.omega[0, j]),
            p_top1=float(p_top1[j]),
            n_raters=n_used,
            defined=defined,
            reason="" if defined else "no human has usable overlap with this judge",
        )
    margins, flips = [], []
    defined_ranked = [j for j in ranked if np.isfinite(score[j])]
    for a_pos, a in enumerate(defined_ranked):
        for b in defined_ranked[a_pos + 1 :]:
            rep_margin = rep_score[:, a] - rep_score[:, b]
            point_sign = _tie_sign(score[a] - score[b])
            flipped = _tie_sign(rep_margin[np.isfinite(rep_margin)]) != point_sign
            flips.append(flipped)
            margins.append(
                PairwiseMargin(
                    better=int(column[a]),
                    worse=int(column[b]),
                    margin=float(score[a] - score[b]),
                    ci=percentile_interval(rep_margin, confidence_level),
                    p_flip=float(flipped.mean()) if flipped.size else np.nan,
                )
            )
    all_flips = np.concatenate(flips) if flips else np.zeros(0, dtype=bool)
    return Ranking(
        judges=tuple(scores[i] for i in range(len(judges))),
        order=tuple(int(column[j]) for j in ranked),
        margins=tuple(margins),
        flip_share=float(all_flips.mean()) if all_flips.size else np.nan,
        rule=rule,
        coefficient=coefficient,
        epsilon=epsilon,
        n_items=patterns.n_items,
    )
