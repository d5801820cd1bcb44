"""The numeric decision per slice of the items, with multiplicity across slices (docs/method.md §3d,
"Slices of score judges").

Ratings as in ``planner.score_decision`` (floats ``(n_items, n_raters)``, NaN where missing); ``slices``
gives each item's feature value, shape ``(n_items,)``. The slices and their corrections are §3b's, the
decision inside a slice §3d's (fixed) or §8b's (anytime).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from planner.rules import passes
from planner.score_decision import ScoreRaterOutcome, ScoreRule, ScoreValidation, validate_scores
from planner.score_monitor import ScoreMonitoring, monitor_scores
from planner.significance import by_rejections
from planner.slices import (
    ACROSS_SLICES,
    DEFAULT_MIN_SLICE_ITEMS,
    monitored_slice_summary,
    slice_epsilons,
    slice_headline,
)


@dataclass(frozen=True)
class ScoreSliceOutcome:
    """The §3d decision on one slice: ``n_items`` its usable items (the judge and two humans rated them),
    ``raters`` with ``won`` after the multiplicity step, ``d`` the mean over used humans of ``d_k`` (margin)
    or ``rho_f - rho_h`` (alt-test), NaN when undefined."""

    value: str
    n_items: int
    epsilon: float
    omega: float
    d: float
    decision: str
    reason: str
    raters: tuple[ScoreRaterOutcome, ...]


@dataclass(frozen=True)
class ScoreSliceValidation:
    """The overall decision and one per slice, failing slices first; ``correction`` and ``n_tested`` as in
    :class:`planner.slices.SliceValidation` (``"by-joint"``, ``"per-slice"`` or ``"none"``)."""

    overall: ScoreValidation
    slices: tuple[ScoreSliceOutcome, ...]
    correction: str
    q: float
    n_tested: int
    failing: tuple[str, ...]
    headline: str


@dataclass(frozen=True)
class ScoreSliceMonitoring:
    """The anytime decision overall and per slice, each slice at ``alpha / n_slices`` (None: too small)."""

    overall: ScoreMonitoring
    slices: tuple[tuple[str, int, ScoreMonitoring | None], ...]
    alpha: float
    slice_alpha: float
    failing: tuple[str, ...]
    headline: str


def _slices_iv(
    ratings: object, slices: object, judge: object, humans: list[int], min_slice_items: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ratings as floats, each item's slice as text, and which items are usable (judge and two humans)."""
    array = np.asarray(ratings, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"ratings must be 2-D (n_items, n_raters), got shape {array.shape}")
    if not isinstance(judge, (int, np.integer)) or not 0 <= judge < array.shape[1]:
        raise ValueError(f"judge must be a single column index in 0..{array.shape[1] - 1}, got {judge!r}")
    values = np.asarray(slices, dtype=object)
    if values.shape != (array.shape[0],):
        raise ValueError(f"slices must have shape ({array.shape[0]},), one value per item, got {values.shape}")
    if any(v is None for v in values):
        raise ValueError("slices must give every item a value (leave items without one out of ratings)")
    if not isinstance(min_slice_items, (int, np.integer)) or min_slice_items < 1:
        raise ValueError(f"min_slice_items must be an integer >= 1, got {min_slice_items!r}")
    rated = ~np.isnan(array)
    usable = rated[:, judge] & (rated[:, humans].sum(axis=1) >= 2)
    return array, np.array([str(v) for v in values], dtype=object), usable


def _gap(raters: tuple[ScoreRaterOutcome, ...], rule: str) -> float:
    """Mean over used humans of ``d_k`` (margin) or ``rho_f - rho_h`` (alt-test)."""
    gaps = np.array([r.d if rule == "margin" else r.rho_f - r.rho_h for r in raters if r.won is not None])
    return float(gaps.mean()) if gaps.size else float("nan")


def validate_scores_by_slice(
    ratings: np.ndarray,
    slices: object,
    *,
    judge: int,
    humans: list[int],
    rule: ScoreRule = "alt-test",
    epsilon: float | None = None,
    slice_epsilon: Mapping[str, float] | None = None,
    value_range: tuple[float, float] | None = None,
    omega_threshold: float = 0.5,
    q: float = 0.05,
    min_items: int | None = None,
    min_slice_items: int = DEFAULT_MIN_SLICE_ITEMS,
    across_slices: str = "joint",
) -> ScoreSliceValidation:
    """The §3d decision overall and per slice, corrected across slices (docs/method.md §3d, "Slices").

    Each slice gets :func:`validate_scores` on its rows (``slice_epsilon[value]`` when given, else
    ``epsilon``); one with fewer than ``min_slice_items`` usable items is ``insufficient_data``. Under the
    alt-test, ``across_slices="joint"`` (default) decides every (slice, human) test in one
    Benjamini–Yekutieli family at ``q``, so with the judge worse than the margin everywhere P(some slice
    passes) <= q; ``"per-slice"`` keeps each slice's own family. The margin rule has no test to correct.

    >>> r = np.array([[1.0, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]] * 2)
    >>> r[4:, 0] = [5, 1, 1, 5]
    >>> s = validate_scores_by_slice(r, ["a"] * 4 + ["b"] * 4, judge=0, humans=[1, 2, 3], rule="margin",
    ...                              epsilon=0.0, value_range=(1, 5), min_slice_items=4)
    >>> s.headline, [round(o.d, 4) for o in s.slices]
    ('fails overall; fails on slice b (omega 0.00, d -0.60)', [-0.6042, 0.0833])
    """
    array, labels, usable = _slices_iv(ratings, slices, judge, humans, min_slice_items)
    if across_slices not in ACROSS_SLICES:
        raise ValueError(f"across_slices must be one of {ACROSS_SLICES}, got {across_slices!r}")

    def fit(rows: np.ndarray, eps: float | None) -> ScoreValidation:
        return validate_scores(
            rows,
            [judge],
            humans,
            rule=rule,
            epsilon=eps,
            value_range=value_range,
            min_items=min_items,
            q=q,
            omega_threshold=omega_threshold,
        )[0]

    overall = fit(array, epsilon)
    values = sorted(set(labels.tolist()))
    epsilons = slice_epsilons(values, rule, epsilon, slice_epsilon)
    results: list[tuple[str, int, ScoreValidation | None]] = []
    for value in values:  # one validation per slice: a handful, not a loop over items
        rows = labels == value
        n_usable = int(np.count_nonzero(rows & usable))
        results.append((value, n_usable, fit(array[rows], epsilons[value]) if n_usable >= min_slice_items else None))
    joint = rule == "alt-test" and across_slices == "joint"
    keys = [(v, r.rater) for v, _, f in results if f is not None for r in f.raters if r.won is not None]
    p = np.array([r.p_value for _, _, f in results if f is not None for r in f.raters if r.won is not None])
    won_joint = (
        dict(zip(keys, by_rejections(p, np.ones(p.size, dtype=bool), q).tolist(), strict=True))
        if joint and keys
        else {}
    )
    outcomes = []
    for value, n_usable, result in results:
        if result is None:
            reason = f"{n_usable} usable items < min_slice_items {min_slice_items}"
            outcomes.append(
                ScoreSliceOutcome(value, n_usable, epsilons[value], np.nan, np.nan, "insufficient_data", reason, ())
            )
            continue
        raters, omega, decision = result.raters, result.omega, result.decision
        if joint:
            raters = tuple(r if r.won is None else replace(r, won=won_joint[(value, r.rater)]) for r in raters)
            used = [r.won for r in raters if r.won is not None]
            omega = float(np.mean(used)) if used else float("nan")
            if decision in ("pass", "reject"):
                decision = "pass" if bool(passes(omega, omega_threshold)) else "reject"
        outcomes.append(
            ScoreSliceOutcome(
                value, n_usable, epsilons[value], omega, _gap(raters, rule), decision, result.reason, raters
            )
        )
    order = {"reject": 0, "pass": 1, "insufficient_data": 2}
    outcomes.sort(key=lambda o: (order[o.decision], np.nan_to_num(o.omega, nan=np.inf), o.value))
    failing = [(o.value, o.omega, o.d) for o in outcomes if o.decision == "reject"]
    n_tested = (
        (len(keys) if joint else sum(r.won is not None for o in outcomes for r in o.raters))
        if rule == "alt-test"
        else 0
    )
    return ScoreSliceValidation(
        overall=overall,
        slices=tuple(outcomes),
        correction="none" if rule != "alt-test" else ("by-joint" if joint else "per-slice"),
        q=float(q),
        n_tested=n_tested,
        failing=tuple(v for v, _, _ in failing),
        headline=slice_headline(overall.decision, failing, sum(o.decision == "insufficient_data" for o in outcomes)),
    )


def monitor_scores_by_slice(
    ratings: np.ndarray,
    order: object,
    slices: object,
    *,
    judge: int,
    humans: list[int],
    rule: ScoreRule = "margin",
    value_range: tuple[float, float],
    epsilon: float | None = None,
    slice_epsilon: Mapping[str, float] | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    budget: int | None = None,
    min_slice_items: int = DEFAULT_MIN_SLICE_ITEMS,
) -> ScoreSliceMonitoring:
    """The §8b decision overall and per slice, each slice at ``alpha / S`` for ``S`` slices (docs/method.md
    §3d, "Slices"): by the union bound the chance that some look of some slice decides wrongly is at most
    ``alpha``. ``order`` is the arrival rank of each rating (shape of ``ratings``); a slice with fewer than
    ``min_slice_items`` usable items is reported with no monitoring."""
    array, labels, usable = _slices_iv(ratings, slices, judge, humans, min_slice_items)
    ranks = np.asarray(order, dtype=float)
    if ranks.shape != array.shape:
        raise ValueError(f"order must have the shape of ratings {array.shape}, got {ranks.shape}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")

    def monitored(rows: np.ndarray, eps: float | None, level: float) -> ScoreMonitoring:
        return monitor_scores(
            array[rows],
            ranks[rows],
            judge,
            humans,
            rule=rule,
            value_range=value_range,
            epsilon=eps,
            alpha=level,
            omega_threshold=omega_threshold,
            budget=budget,
        )

    overall = monitored(np.ones(array.shape[0], dtype=bool), epsilon, alpha)
    values = sorted(set(labels.tolist()))
    epsilons = slice_epsilons(values, rule, epsilon, slice_epsilon)
    slice_alpha = alpha / len(values) if values else alpha
    out: list[tuple[str, int, ScoreMonitoring | None]] = []
    for value in values:
        rows = labels == value
        n_usable = int(np.count_nonzero(rows & usable))
        out.append(
            (value, n_usable, monitored(rows, epsilons[value], slice_alpha) if n_usable >= min_slice_items else None)
        )
    ordered, failing, headline = monitored_slice_summary(out, overall.decision, _monitored_omega, _monitored_gap)
    return ScoreSliceMonitoring(
        overall=overall,
        slices=ordered,
        alpha=float(alpha),
        slice_alpha=float(slice_alpha),
        failing=failing,
        headline=headline,
    )


def _monitored_omega(fit: ScoreMonitoring) -> float:
    """The slice's monitored omega."""
    return fit.omega


def _monitored_gap(fit: ScoreMonitoring) -> float:
    """Mean over a slice's humans of the monitored mean of ``xi``."""
    estimates = np.array([r.estimate for r in fit.raters], dtype=float)
    return float(np.nanmean(estimates)) if np.isfinite(estimates).any() else float("nan")
