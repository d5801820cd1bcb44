"""The leave-one-out decision on numeric ratings: the alt-test with the negative-RMSE alignment and the
margin rule on a range-scaled absolute difference (docs/method.md §3d).

Ratings are floats of shape ``(n_items, n_raters)``, ``NaN`` for a rating that was not given;
``judges`` and ``humans`` are column indices into them. Each human ``r_k`` is held out in turn; on
the items ``O_k`` that the judge, ``r_k`` and at least one other human rated, the judge's and
``r_k``'s alignments with the remaining humans are compared per item. The loops run over judges and
humans (a few columns), never over items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from planner.rules import ALT_TEST_MIN_ITEMS, DEFAULT_EPSILON, TOLERANCE, passes
from planner.significance import alt_test_p_values, by_rejections

ScoreRule = Literal["alt-test", "margin"]
SCORE_RULES: tuple[ScoreRule, ...] = get_args(ScoreRule)
TIE = 1e-9
"""Relative slack under which two alignments are tied (the ratings' rounding, not their scale)."""
MAX_CELLS = 50_000_000
"""The largest ratings matrix (cells) accepted: a few float64 copies of one column block are held at once."""


@dataclass(frozen=True, kw_only=True)
class ScoreRaterOutcome:
    """One held-out human ``r_k`` against one judge (docs/method.md §3d).

    ``m``: items in ``O_k``. Alt-test: ``rho_f``/``rho_h`` the advantage probabilities (mean ``W_f``,
    ``W_h``) and ``p_value`` the one-sided t-test of ``W_h - W_f`` against ``epsilon``; ``d`` is NaN.
    Margin: ``d`` the mean per-item agreement difference (judge minus ``r_k``); ``rho_f``, ``rho_h``,
    ``p_value`` are NaN. ``won`` is None when the human was skipped, ``reason`` saying why.
    """

    rater: int
    m: int
    d: float
    rho_f: float
    rho_h: float
    p_value: float
    won: bool | None
    reason: str


@dataclass(frozen=True, kw_only=True)
class ScoreValidation:
    """A judge's decision on numeric ratings (docs/method.md §3d).

    ``omega``: winning rate over the humans not skipped; ``rho``: the mean advantage probability over
    them (alt-test; the ranking score), or the mean ``d`` (margin). ``decision`` is ``"pass"``,
    ``"reject"`` or ``"insufficient_data"`` (``reason`` says why; ``""`` otherwise). The decision is
    the fixed-sample one, read once at the planned overlap.
    """

    judge: int
    raters: tuple[ScoreRaterOutcome, ...]
    omega: float
    rho: float
    omega_threshold: float
    decision: str
    rule: ScoreRule
    epsilon: float
    n_items: int
    reason: str

    @property
    def defined(self) -> bool:
        """Whether a winning rate exists (at least one human was used)."""
        return bool(np.isfinite(self.omega))


def _columns(columns: object, name: str, n_columns: int) -> list[int]:
    values = list(np.atleast_1d(np.asarray(columns)))
    if not values or not all(isinstance(v, (int, np.integer)) and 0 <= v < n_columns for v in values):
        raise ValueError(f"{name} must be one or more column indices in 0..{n_columns - 1}, got {columns!r}")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} must not repeat a column, got {columns!r}")
    return [int(v) for v in values]


def validate_scores_iv(
    ratings: object,
    judges: object,
    humans: object,
    rule: str,
    epsilon: float | None,
    value_range: tuple[float, float] | None,
    min_items: int | None,
    q: float,
    omega_threshold: float,
) -> tuple[np.ndarray, list[int], list[int], float, int, float]:
    """Checked inputs: ratings, judge and human columns, epsilon, min_items, and the range's span."""
    array = np.asarray(ratings)
    if array.ndim != 2:
        raise ValueError(f"ratings must be 2-D (n_items, n_raters), got shape {array.shape}")
    if array.size > MAX_CELLS:
        raise ValueError(f"ratings has {array.size:,} cells, more than the {MAX_CELLS:,} accepted")
    if array.dtype.kind not in "biuf":
        raise ValueError(f"ratings must be numeric (NaN for a missing rating), got dtype {array.dtype}")
    array = array.astype(float, copy=False)
    if np.isinf(array).any():
        raise ValueError("ratings holds an infinite rating; use NaN for a missing one")
    if rule not in SCORE_RULES:
        raise ValueError(f"rule must be one of {SCORE_RULES}, got {rule!r}")
    judge_columns = _columns(judges, "judges", array.shape[1])
    human_columns = _columns(humans, "humans", array.shape[1])
    if set(judge_columns) & set(human_columns):
        raise ValueError("a judge column must not also be listed in humans")
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else float(epsilon)
    if not (np.isfinite(epsilon) and epsilon >= 0.0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    min_items = (ALT_TEST_MIN_ITEMS if rule == "alt-test" else 1) if min_items is None else min_items
    if not isinstance(min_items, (int, np.integer)) or min_items < 1:
        raise ValueError(f"min_items must be an integer >= 1, got {min_items!r}")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if not 0.0 < omega_threshold <= 1.0:
        raise ValueError(f"omega_threshold must be in (0, 1], got {omega_threshold!r}")
    span = float("nan")
    if rule == "margin":
        if value_range is None:
            raise ValueError("rule='margin' needs value_range=(min, max): its agreement is 1 - |x - y| / (max - min)")
        low, high = (float(v) for v in value_range)
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise ValueError(f"value_range must be finite (min, max) with min < max, got {value_range!r}")
        observed = array[:, judge_columns + human_columns]
        if np.any((observed < low) | (observed > high)):
            raise ValueError(f"ratings fall outside value_range {value_range!r}")
        span = high - low
    return array, judge_columns, human_columns, epsilon, int(min_items), span


def _pool_alignment(values: np.ndarray, others: np.ndarray, rule: str, span: float) -> np.ndarray:
    """Per item, the alignment of ``values`` ``(n,)`` with the other humans' ratings ``(n, K-1)`` (NaN:
    none): alt-test ``-sqrt(mean_h (x - x_h)^2)``, margin ``mean_h (1 - |x - x_h| / span)``."""
    present = ~np.isnan(others)
    count = present.sum(axis=1)
    gap = np.where(present, values[:, None] - np.where(present, others, 0.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        if rule == "alt-test":
            return np.asarray(-np.sqrt(np.square(gap).sum(axis=1) / count))
        return np.asarray(1.0 - np.abs(gap).sum(axis=1) / (count * span))


def item_differences(
    ratings: np.ndarray, judge: int, human: int, others: list[int], *, rule: str, span: float
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``O_k`` (``human`` held out against ``judge``, pool ``others``) and per row the judge's
    alignment advantage: margin ``S_f - S_h`` (in ``[-1, 1]``), alt-test ``W_f - W_h`` (in ``{-1, 0, 1}``)."""
    pool = ratings[:, others]
    on = ~np.isnan(ratings[:, judge]) & ~np.isnan(ratings[:, human]) & (~np.isnan(pool)).any(axis=1)
    rows = np.flatnonzero(on)
    s_f = _pool_alignment(ratings[rows, judge], pool[rows], rule, span)
    s_h = _pool_alignment(ratings[rows, human], pool[rows], rule, span)
    if rule == "margin":
        return rows, s_f - s_h
    # a tie within rounding of the alignments' own magnitude is a tie: equal RMSEs of other values
    # (1 and 3 against 2) must stay tied after the ratings are rescaled
    tied = np.abs(s_f - s_h) <= TIE * np.maximum(np.abs(s_f), np.abs(s_h))
    return rows, np.where(tied, 0.0, np.sign(s_f - s_h))


def _held_out(
    ratings: np.ndarray, judge: int, human: int, others: list[int], rule: str, epsilon: float, span: float
) -> tuple[int, float, float, float, float]:
    """``m``, ``d``, ``rho_f``, ``rho_h`` and the p-value of ``human`` held out against ``judge``."""
    rows, advantage = item_differences(ratings, judge, human, others, rule=rule, span=span)
    m = int(rows.size)
    if m == 0:
        return 0, np.nan, np.nan, np.nan, np.nan
    if rule == "margin":
        return m, float(np.mean(advantage)), np.nan, np.nan, np.nan
    diff = -advantage  # W_h - W_f; a tie sets both W, so W_f = 1 unless the human is strictly closer
    w_f, w_h = (advantage >= 0).mean(), (advantage <= 0).mean()
    p = alt_test_p_values(np.array(diff.sum()), np.array(np.abs(diff).sum()), np.array(float(m)), epsilon)
    return m, np.nan, float(w_f), float(w_h), float(p)


def validate_scores(
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
) -> tuple[ScoreValidation, ...]:
    """Each judge's leave-one-out decision on numeric ``ratings`` ``(n_items, n_raters)`` (docs/method.md §3d).

    ``rule="alt-test"`` (Calderon et al. 2025): per item of ``O_k``, ``S(x) = -sqrt(mean_h (x - x_h)^2)``
    over the other humans who rated it, ``W_f = 1[S_f >= S_h]``, ``W_h = 1[S_h >= S_f]``; the human is
    won when Benjamini–Yekutieli at ``q`` rejects ``H0: rho_f <= rho_h - epsilon`` (one-sided paired
    t); humans with fewer than ``min_items`` (default 30) items are skipped. ``rule="margin"``: the
    per-item agreement is ``mean_h (1 - |x - x_h| / (max - min))`` over ``value_range``, ``d_k`` the mean
    over ``O_k`` of the judge's minus ``r_k``'s; won when ``d_k >= -epsilon``. ``omega`` is the share won
    among used humans; the judge passes when ``omega >= omega_threshold``.

    >>> r = np.array([[1.0, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]])
    >>> v = validate_scores(r, [0], [1, 2, 3], rule="margin", epsilon=0.0, value_range=(1, 5))[0]
    >>> v.decision, round(v.omega, 4), [round(h.d, 4) for h in v.raters]
    ('pass', 1.0, [0.125, 0.125, 0.0])
    """
    array, judge_columns, human_columns, epsilon, min_items, span = validate_scores_iv(
        ratings, judges, humans, rule, epsilon, value_range, min_items, q, omega_threshold
    )
    results = []
    for judge in judge_columns:
        stats = [
            _held_out(array, judge, h, [o for o in human_columns if o != h], rule, epsilon, span) for h in human_columns
        ]
        m = np.array([s[0] for s in stats])
        compared = np.array([s[1] if rule == "margin" else s[4] for s in stats])
        used = (m >= min_items) & np.isfinite(compared)
        if rule == "margin":
            won = used & (compared >= -epsilon - TOLERANCE)
        else:
            won = by_rejections(np.where(used, compared, 1.0), used, q) & used
        outcomes = tuple(
            ScoreRaterOutcome(
                rater=h,
                m=s[0],
                d=s[1],
                rho_f=s[2],
                rho_h=s[3],
                p_value=s[4],
                won=bool(won[i]) if used[i] else None,
                reason="" if used[i] else _skip_reason(s[0], min_items),
            )
            for i, (h, s) in enumerate(zip(human_columns, stats, strict=True))
        )
        n_used = int(used.sum())
        omega = float(won.sum() / n_used) if n_used else float("nan")
        score = np.array([s[1] if rule == "margin" else s[2] for s in stats])
        rho = float(score[used].mean()) if n_used else float("nan")
        reason = ""
        if len(human_columns) < 2:
            reason = "fewer than two humans: no human can be compared with a pool"
        elif not n_used:
            reason = f"no human has {min_items} or more items rated by the judge, it and another human"
        decision = "insufficient_data" if reason else ("pass" if bool(passes(omega, omega_threshold)) else "reject")
        on_any = ~np.isnan(array[:, judge]) & ((~np.isnan(array[:, human_columns])).sum(axis=1) >= 2)
        results.append(
            ScoreValidation(
                judge=judge,
                raters=outcomes,
                omega=omega if not reason else float("nan"),
                rho=rho if not reason else float("nan"),
                omega_threshold=omega_threshold,
                decision=decision,
                rule=rule,
                epsilon=epsilon,
                n_items=int(on_any.sum()),
                reason=reason,
            )
        )
    return tuple(results)


def _skip_reason(m: int, min_items: int) -> str:
    if m == 0:
        return "no item rated by the judge, this human and another human"
    return f"{m} items rated by the judge, this human and another human, fewer than {min_items}"
