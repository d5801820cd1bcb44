"""The validation decision per slice of the items, with multiplicity across slices (docs/method.md §3b).

A slice is the set of items that share one value of an item feature (a topic, a language, a
source). Codes are an int matrix of shape ``(n_items, n_raters)``, ``-1`` where a cell was not
labeled; ``slices`` gives each item's feature value, shape ``(n_items,)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np

from planner.codes import MISSING
from planner.confidence_sequences import log_e_processes
from planner.decision import RaterOutcome, Validation, validate_judge
from planner.list_arrival import PlannedList, lists_within
from planner.monitor_paths import NEVER, first_certified, monitor_decision, needed_ranks, row_order
from planner.rules import DEFAULT_EPSILON, passes
from planner.sequential import Monitoring, MonitorState, RaterMonitoring, kept_monitoring, monitor_judge
from planner.significance import by_rejections

ACROSS_SLICES = ("joint", "per-slice")
"""``joint``: one family over every slice's humans; ``per-slice``: each slice its own (§3b)."""
DEFAULT_MIN_SLICE_ITEMS = 30
"""A slice with fewer usable items (judge and two humans labeled) is ``insufficient_data``."""


@dataclass(frozen=True)
class SliceOutcome:
    """The §3 decision on one slice.

    ``n_items`` counts the slice's usable items (the judge and at least two humans labeled
    them); ``raters`` carry ``won`` after the multiplicity step; ``d`` is the mean over used
    humans of ``d_k`` (margin) or ``rho_f - rho_h`` (alt-test), NaN when undefined.
    ``validation`` is the slice's own §3 result (None when the slice is too small).
    """

    value: str
    n_items: int
    epsilon: float
    omega: float
    d: float
    decision: str
    reason: str
    raters: tuple[RaterOutcome, ...]
    validation: Validation | None


@dataclass(frozen=True)
class SliceValidation:
    """The overall decision and one decision per slice, failing slices first (docs/method.md §3b).

    ``correction`` says how the slices' tests were corrected: ``"by-joint"`` (one
    Benjamini–Yekutieli family over all slices' humans, alt-test), ``"per-slice"`` (each
    slice's own family) or ``"none"`` (the margin rule has no test to correct).
    ``n_tested`` counts the (slice, human) tests (0 under the margin rule): one family under
    ``"by-joint"``, one family per slice under ``"per-slice"``; ``failing`` the slices that reject.
    """

    overall: Validation
    slices: tuple[SliceOutcome, ...]
    correction: str
    q: float
    n_tested: int
    failing: tuple[str, ...]
    headline: str


@dataclass(frozen=True)
class SliceMonitoring:
    """The anytime-valid decision per slice, corrected across slices (docs/method.md §3b).

    ``correction`` is ``"e-bh-joint"`` (``multiplicity="e-bh"``: one e-BH at ``alpha`` over every
    slice's e-processes, ``n_tested = S K`` of them) or ``"bonferroni-slices"`` (each e-value against
    ``S K / alpha``: each slice at ``slice_alpha = alpha / S`` with Bonferroni over its humans). Every
    slice's e-processes are tuned at ``slice_alpha`` under both, so the e-values are the same.
    """

    overall: Monitoring
    slices: tuple[tuple[str, int, Monitoring | None], ...]
    alpha: float
    slice_alpha: float
    correction: str
    n_tested: int
    failing: tuple[str, ...]
    headline: str


def _slices_iv(codes: object, slices: object, judge: int, humans: list[int]) -> tuple[np.ndarray, np.ndarray]:
    matrix = np.asarray(codes)
    if matrix.ndim != 2:
        raise ValueError(f"codes must have shape (n_items, n_raters), got {matrix.shape}")
    values = np.asarray(slices, dtype=object)
    if values.shape != (matrix.shape[0],):
        raise ValueError(f"slices must have shape ({matrix.shape[0]},), one feature value per item, got {values.shape}")
    if any(v is None for v in values):
        raise ValueError("slices must give every item a value (leave items without one out of codes)")
    labels = np.array([str(v) for v in values], dtype=object)
    return matrix, labels


def usable_items(codes: np.ndarray, judge: int, humans: list[int]) -> np.ndarray:
    """Items the judge and at least two humans labeled: those that can enter any ``O_k`` (§3)."""
    observed = codes != MISSING
    return np.asarray(observed[:, judge] & (observed[:, humans].sum(axis=1) >= 2))


def slice_epsilons(values: list[str], rule: str, epsilon: float | None, slice_epsilon: object) -> dict[str, float]:
    """Each slice value's margin: ``slice_epsilon[value]`` when given, else ``epsilon`` (else the rule's default)."""
    base = DEFAULT_EPSILON[rule] if epsilon is None else float(epsilon)
    given = {} if slice_epsilon is None else slice_epsilon
    if not isinstance(given, Mapping):
        raise ValueError(f"slice_epsilon must map slice values to epsilons, got {slice_epsilon!r}")
    unknown = sorted(set(map(str, given)) - set(values))
    if unknown:
        raise ValueError(f"slice_epsilon names slices that no item has: {unknown}")
    out = dict.fromkeys(values, base)
    for key, eps in given.items():
        if not (isinstance(eps, (int, float)) and np.isfinite(eps) and eps >= 0):
            raise ValueError(f"slice_epsilon[{key!r}] must be a finite number >= 0, got {eps!r}")
        out[str(key)] = float(eps)
    return out


def _mean_gap(raters: tuple[RaterOutcome, ...], rule: str) -> float:
    """Mean over used humans of ``d_k`` (margin) or ``rho_f - rho_h`` (alt-test)."""
    gaps = np.array([r.d if rule == "margin" else r.rho_f - r.rho_h for r in raters if r.won is not None])
    return float(gaps.mean()) if gaps.size else float("nan")


def slice_headline(overall: str, failing: list[tuple[str, float, float]], undecided: int) -> str:
    """``passes overall; fails on slice X (omega .., d ..)``: what the document leads with."""
    words = {"pass": "passes", "reject": "fails", "inconclusive": "is inconclusive", "insufficient_data": "lacks data"}
    head = f"{words.get(overall, overall)} overall"
    if failing:
        named = ", ".join(f"{v} (omega {o:.2f}, d {d:+.2f})" for v, o, d in failing)
        return f"{head}; fails on slice{'s' if len(failing) > 1 else ''} {named}"
    if undecided:
        return f"{head}; no slice fails ({undecided} undecided)"
    return f"{head}; no slice fails"


class _Decided(Protocol):
    @property
    def decision(self) -> str: ...


MonitoredFit = TypeVar("MonitoredFit", bound=_Decided)


def monitored_slice_summary(
    out: list[tuple[str, int, MonitoredFit | None]],
    overall: str,
    omega_of: Callable[[MonitoredFit], float],
    gap_of: Callable[[MonitoredFit], float],
) -> tuple[tuple[tuple[str, int, MonitoredFit | None], ...], tuple[str, ...], str]:
    """The monitored slices with the rejecting ones first, the rejecting values and the headline
    (docs/method.md §3b); a slice with no monitoring (too small) counts as undecided."""
    failing = [(v, fit) for v, _, fit in out if fit is not None and fit.decision == "reject"]
    named = [(v, omega_of(fit), gap_of(fit)) for v, fit in failing]
    undecided = sum(fit is None or fit.decision != "pass" for _, _, fit in out) - len(failing)
    ordered = tuple(sorted(out, key=lambda s: (s[2] is None or s[2].decision != "reject", s[0])))
    return ordered, tuple(v for v, _ in failing), slice_headline(overall, named, undecided)


def validate_judge_by_slice(
    codes: object,
    slices: object,
    *,
    judge: int,
    humans: list[int],
    n_labels: int,
    rule: str = "margin",
    coefficient: str = "po",
    epsilon: float | None = None,
    slice_epsilon: Mapping[str, float] | None = None,
    omega_threshold: float = 0.5,
    q: float = 0.05,
    min_items: int | None = None,
    min_slice_items: int = DEFAULT_MIN_SLICE_ITEMS,
    across_slices: str = "joint",
    inconclusive_level: float = 0.2,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = None,
) -> SliceValidation:
    """The §3 decision overall and per slice, corrected across slices (docs/method.md §3b).

    Each slice (the items sharing one value of ``slices``) gets ``validate_judge`` on its
    rows, with ``slice_epsilon[value]`` when given, else ``epsilon``. A slice with fewer than
    ``min_slice_items`` usable items is ``insufficient_data``. Under the alt-test,
    ``across_slices="joint"`` replaces each slice's Benjamini–Yekutieli family by one family of
    every (slice, human) test at ``q``: the expected share of false "won" claims over all
    slices stays within ``q`` under any dependence, so with the judge worse than the margin
    everywhere P(some slice passes) <= q. ``"per-slice"`` keeps each slice's own family (the
    published per-dataset alt-test; no control across slices). The margin rule has no test,
    so nothing is corrected (``correction`` reads ``"none"``). A slice that the joint step
    changes is decided pass/reject on its corrected ``omega``; its own resampling still makes it
    ``inconclusive`` when that was unstable.

    Examples
    --------
    >>> import numpy as np
    >>> i = np.arange(120)
    >>> truth = i % 2
    >>> humans = np.column_stack([truth, truth, np.where(i % 6 == 0, 1 - truth, truth)])
    >>> judge = np.where((i >= 90) & (i % 3 == 0), 1 - truth, truth)
    >>> s = validate_judge_by_slice(np.column_stack([humans, judge]), np.where(i < 90, "en", "de"),
    ...                             judge=3, humans=[0, 1, 2], n_labels=2, epsilon=0.08, n_resamples=200, rng=0)
    >>> s.headline
    'passes overall; fails on slice de (omega 0.00, d -0.17)'
    """
    if not isinstance(judge, (int, np.integer)):
        raise ValueError(f"judge must be a single column index, got {judge!r}")
    matrix, labels = _slices_iv(codes, slices, judge, humans)
    if across_slices not in ACROSS_SLICES:
        raise ValueError(f"across_slices must be one of {ACROSS_SLICES}, got {across_slices!r}")
    if not isinstance(min_slice_items, (int, np.integer)) or min_slice_items < 1:
        raise ValueError(f"min_slice_items must be an integer >= 1, got {min_slice_items!r}")
    generator = np.random.default_rng(rng)

    def fit(rows: np.ndarray, eps: float | None) -> Validation:
        return validate_judge(
            rows,
            judge=judge,
            humans=humans,
            n_labels=n_labels,
            rule=rule,
            coefficient=coefficient,
            epsilon=eps,
            omega_threshold=omega_threshold,
            q=q,
            min_items=min_items,
            inconclusive_level=inconclusive_level,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            rng=generator,
        )

    overall = fit(matrix, epsilon)
    values = sorted(set(labels.tolist()))
    epsilons = slice_epsilons(values, rule, epsilon, slice_epsilon)
    usable = usable_items(matrix, judge, humans)
    results: list[tuple[str, int, Validation | None]] = []
    for value in values:  # one validation per slice: a handful, not a loop over items
        rows = labels == value
        n_usable = int(np.count_nonzero(rows & usable))
        results.append((value, n_usable, fit(matrix[rows], epsilons[value]) if n_usable >= min_slice_items else None))
    joint = rule == "alt-test" and across_slices == "joint"
    won_joint, n_tested = _joint_wins(results, q) if joint else (None, 0)
    outcomes = [
        _slice_outcome(value, n, fit, epsilons[value], rule, omega_threshold, min_slice_items, won_joint)
        for value, n, fit in results
    ]
    if rule != "alt-test":
        n_tested = 0
    elif not joint:
        n_tested = sum(sum(r.won is not None for r in o.raters) for o in outcomes)
    order = {"reject": 0, "inconclusive": 1, "pass": 2, "insufficient_data": 3}
    outcomes.sort(key=lambda o: (order[o.decision], np.nan_to_num(o.omega, nan=np.inf), o.value))
    failing = [(o.value, o.omega, o.d) for o in outcomes if o.decision == "reject"]
    undecided = sum(o.decision in ("inconclusive", "insufficient_data") for o in outcomes)
    return SliceValidation(
        overall=overall,
        slices=tuple(outcomes),
        correction="none" if rule != "alt-test" else ("by-joint" if joint else "per-slice"),
        q=float(q),
        n_tested=n_tested,
        failing=tuple(v for v, _, _ in failing),
        headline=slice_headline(overall.decision, failing, undecided),
    )


def _joint_wins(results: list[tuple[str, int, Validation | None]], q: float) -> tuple[dict[tuple[str, int], bool], int]:
    """Benjamini–Yekutieli over every slice's used humans at once (docs/method.md §3b)."""
    keys = [(value, r.rater) for value, _, fit in results if fit is not None for r in fit.raters if r.won is not None]
    p = np.array([r.p_value for _, _, fit in results if fit is not None for r in fit.raters if r.won is not None])
    if not keys:
        return {}, 0
    rejected = by_rejections(p, np.ones(p.size, dtype=bool), q)
    return dict(zip(keys, rejected.tolist(), strict=True)), len(keys)


def _slice_outcome(
    value: str,
    n_items: int,
    fit: Validation | None,
    epsilon: float,
    rule: str,
    omega_threshold: float,
    min_slice_items: int,
    won_joint: dict[tuple[str, int], bool] | None,
) -> SliceOutcome:
    """One slice's outcome, its humans' wins read from the joint family when there is one."""
    if fit is None:
        reason = f"{n_items} usable items < min_slice_items {min_slice_items}"
        return SliceOutcome(value, n_items, epsilon, np.nan, np.nan, "insufficient_data", reason, (), None)
    raters, decision, reason, omega = fit.raters, fit.decision, fit.reason, fit.omega
    if won_joint is not None:
        raters = tuple(r if r.won is None else replace(r, won=won_joint[(value, r.rater)]) for r in raters)
        used = [r.won for r in raters if r.won is not None]
        omega = float(np.mean(used)) if used else float("nan")
        if decision in ("pass", "reject") and np.isfinite(omega):
            decision = "pass" if bool(passes(omega, omega_threshold)) else "reject"
    return SliceOutcome(value, n_items, epsilon, omega, _mean_gap(raters, rule), decision, reason, raters, fit)


def monitor_judge_by_slice(
    codes: object,
    slices: object,
    *,
    judge: int,
    humans: list[int],
    n_labels: int,
    order: object = None,
    rule: str = "margin",
    epsilon: float | None = None,
    slice_epsilon: Mapping[str, float] | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    min_slice_items: int = DEFAULT_MIN_SLICE_ITEMS,
    budget: int | None = None,
    tiebreak: object = None,
    lists: Sequence[PlannedList] = (),
) -> SliceMonitoring:
    """The §8 decision overall and per slice, one family of every slice's humans (docs/method.md §3b).

    Every slice's humans get ``monitor_judge``'s two e-processes on the slice's rows (``order``: arrival
    ranks, shape of ``codes``), tuned at ``alpha / S`` for ``S`` slices. ``multiplicity="e-bh"``
    certifies them by one e-BH at ``alpha`` over all ``S K`` e-processes at every look (won and lost
    apart): the expected share of false certifications among all slices' certifications stays within
    ``alpha`` at any look, so a judge worse than the margin against every human of every slice passes
    some slice at some look with probability at most ``alpha`` (and one within it everywhere is rejected
    on some slice likewise). ``"bonferroni"`` holds each e-value to ``S K / alpha``: by the union bound
    the chance that any human of any slice is ever certified wrongly is at most ``alpha``. At every look
    the e-BH family certifies every human Bonferroni does (and every human an e-BH per slice at
    ``alpha / S`` does). A slice with fewer than ``min_slice_items`` usable items is reported with no
    monitoring; its humans count in ``S K`` uncertified.
    ``tiebreak`` (shape ``(n_items,)``, integers) orders entries of equal arrival rank, overall and in every
    slice, as in ``monitor_judge`` (the service's seeded item order, docs/method.md §8.2; None: row order).
    ``lists`` (``planner.list_arrival``) reads planned lists in list order, overall and, restricted to its
    rows, in every slice.
    """
    if not isinstance(judge, (int, np.integer)):
        raise ValueError(f"judge must be a single column index, got {judge!r}")
    matrix, labels = _slices_iv(codes, slices, judge, humans)
    ranks = None if order is None else np.asarray(order)
    if ranks is not None and ranks.shape != matrix.shape:
        raise ValueError(f"order must have the shape of codes {matrix.shape}, got {ranks.shape}")
    keys = None if tiebreak is None else np.asarray(tiebreak)
    if keys is not None and keys.shape != matrix.shape[:1]:
        raise ValueError(f"tiebreak must have one key per item {matrix.shape[:1]}, got {keys.shape}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")

    def monitored(
        rows: np.ndarray,
        part: np.ndarray,
        ties: np.ndarray | None,
        eps: float,
        level: float,
        listed: Sequence[PlannedList],
    ) -> tuple[Monitoring, MonitorState]:
        return kept_monitoring(
            rows,
            previous=None,
            judge=judge,
            humans=humans,
            n_labels=n_labels,
            order=part,
            rule=rule,
            epsilon=eps,
            alpha=level,
            omega_threshold=omega_threshold,
            multiplicity=multiplicity,
            budget=budget,
            tiebreak=ties,
            lists=listed,
        )

    overall = monitor_judge(
        matrix,
        judge=judge,
        humans=humans,
        n_labels=n_labels,
        order=ranks,
        rule=rule,
        epsilon=epsilon,
        alpha=alpha,
        omega_threshold=omega_threshold,
        multiplicity=multiplicity,
        budget=budget,
        tiebreak=keys,
        lists=lists,
    )
    values = sorted(set(labels.tolist()))
    epsilons = slice_epsilons(values, rule, epsilon, slice_epsilon)
    slice_alpha = alpha / len(values)
    usable = usable_items(matrix, judge, humans)
    kept: list[tuple[str, int, tuple[Monitoring, MonitorState] | None]] = []
    for value in values:
        rows = labels == value
        n_usable = int(np.count_nonzero(rows & usable))
        part = row_order(matrix[rows]) if ranks is None else ranks[rows]
        ties = None if keys is None else keys[rows]
        within = lists_within(lists, np.flatnonzero(rows), matrix.shape[0])
        fit = (
            monitored(matrix[rows], part, ties, epsilons[value], slice_alpha, within)
            if n_usable >= min_slice_items
            else None
        )
        kept.append((value, n_usable, fit))
    n_tested = len(values) * len(humans)
    fits = [fit for _, _, fit in kept if fit is not None]
    decided = iter(jointly_certified(fits, alpha, n_tested) if multiplicity == "e-bh" else [m for m, _ in fits])
    out = [(value, n, None if fit is None else next(decided)) for value, n, fit in kept]
    ordered, failing, headline = monitored_slice_summary(out, overall.decision, _monitored_omega, _monitored_gap)
    return SliceMonitoring(
        overall=overall,
        slices=ordered,
        alpha=float(alpha),
        slice_alpha=float(slice_alpha),
        correction="e-bh-joint" if multiplicity == "e-bh" else "bonferroni-slices",
        n_tested=n_tested,
        failing=failing,
        headline=headline,
    )


def joint_first_certified(times: list[np.ndarray], log_e: list[np.ndarray], n_tested: int, alpha: float) -> np.ndarray:
    """Arrival rank at which one e-BH at ``alpha`` over ``n_tested`` e-processes first certifies each of
    those given (``NEVER``: not yet; docs/method.md §3b): ``log_e[k]`` is process ``k``'s log e-value
    after each of its entries, at arrival ranks ``times[k]``; processes not given count as never
    certified. At each look the certified set is e-BH's, ``k* = max{j : e_(j) >= n_tested / (alpha j)}``."""
    if len(times) > n_tested:
        raise ValueError(f"{len(times)} e-processes given for a family of {n_tested}")
    ranks = [needed_ranks(e, n_tested, alpha, "e-bh") for e in log_e]
    return first_certified(times, ranks, len(times))


def jointly_certified(fits: list[tuple[Monitoring, MonitorState]], alpha: float, n_tested: int) -> list[Monitoring]:
    """Each slice's monitoring with its humans certified by one e-BH at ``alpha`` over ``n_tested``
    e-processes, every slice's (won and lost apart), and its decision read from them (docs/method.md §3b).
    The e-values are each slice's own, tuned at its ``alpha``; a human's first certification stands."""
    times, won, lost = [], [], []
    for monitoring, state in fits:
        null_mean = (1.0 - monitoring.epsilon) / 2.0
        log_inv_a = math.log(len(state.paths) / monitoring.alpha) if state.paths else 0.0
        for path in state.paths:
            e_won, e_lost = log_e_processes((path.xi + 1.0) / 2.0, null_mean, log_inv_a)
            times.append(path.times)
            won.append(e_won)
            lost.append(e_lost)
    first_won = joint_first_certified(times, won, n_tested, alpha)
    first_lost = joint_first_certified(times, lost, n_tested, alpha)
    out, at = [], 0
    for monitoring, state in fits:
        k = len(state.paths)
        won_at, lost_at = first_won[at : at + k], first_lost[at : at + k]
        at += k
        raters = tuple(
            _certified(r, int(w), int(lo)) for r, w, lo in zip(monitoring.raters, won_at, lost_at, strict=True)
        )
        decision, reason, decided_at = monitor_decision(
            won_at, lost_at, monitoring.needed, k, monitoring.looks, [r.n for r in raters], monitoring.budget
        )
        if decision == monitoring.decision:  # the slice's own reason (it may name the labels that wait)
            reason = monitoring.reason
        out.append(replace(monitoring, decision=decision, reason=reason, decided_at=decided_at, raters=raters))
    return out


def _certified(rater: RaterMonitoring, won_at: int, lost_at: int) -> RaterMonitoring:
    """``rater`` with its status read from its first certifications won and lost (the first one stands)."""
    status, at = "open", None
    if min(won_at, lost_at) < NEVER and won_at != lost_at:
        status = "won" if won_at < lost_at else "lost"
        at = min(won_at, lost_at)
    return replace(rater, status=status, certified_at=at)


def _monitored_omega(fit: Monitoring) -> float:
    """Share of a slice's humans certified won."""
    return float(np.mean([r.status == "won" for r in fit.raters])) if fit.raters else float("nan")


def _monitored_gap(fit: Monitoring) -> float:
    """Mean over a slice's humans of the monitored ``d``."""
    d = np.array([r.d for r in fit.raters], dtype=float)
    return float(np.nanmean(d)) if np.isfinite(d).any() else float("nan")
