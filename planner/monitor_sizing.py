"""Overlap for the anytime monitor: sized in the service's own arrival order (docs/method.md §8.1).

A plan that is watched continuously (``monitoring = "anytime"``) needs the overlap at which the
e-process monitor of :func:`planner.sequential.monitor_judge` decides ``pass`` with probability
``>= power``, not the one-look ``m`` of §4. The monitor is simulated in the order the service
produces: the primary's and the judge's labels are in hand, and each secondary works through its
own list in the list's random order, the secondaries interleaved (one item each in turn).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.rules import DEFAULT_EPSILON, RULES
from planner.sequential import MULTIPLICITY

ORDER_DESIGNS = ("disjoint", "random", "panel")
"""How the secondaries' lists relate: disjoint (no item on two lists), random (each an independent
uniform draw from the corpus, so two may share items), panel (one shared list in one order)."""
SIZING_TRIALS = 400
"""Trials of a sizing: the Monte Carlo SE of a power near .8 is .02."""
MAX_SIZING_CELLS = 60_000_000
"""Trial x item x rater cells a sizing may simulate in all (checked before it starts)."""


@dataclass(frozen=True)
class MonitorRuns:
    """Monitored runs to ``horizon`` overlap items per secondary in the service's order.

    ``at`` is each run's overlap per secondary at its decision (``inf``: still open at the
    horizon) and ``decision`` its outcome (``pass``, ``reject`` or ``continue``)."""

    horizon: int
    at: np.ndarray
    decision: np.ndarray

    def rate(self, outcome: str, by: int) -> float:
        """Share of runs decided ``outcome`` by ``by`` items per secondary."""
        return float(np.mean((self.decision == outcome) & (self.at <= by)))

    def decided_by(self, by: int) -> float:
        """Share of runs decided (either way) by ``by`` items per secondary."""
        return float(np.mean(self.at <= by))


def _labels(rng: np.random.Generator, truth: np.ndarray, p: float, n_labels: int) -> np.ndarray:
    """Symmetric noise channel (docs/method.md §6): the true label w.p. ``p``, else another uniformly."""
    shift = rng.integers(1, n_labels, truth.size)
    return np.where(rng.random(truth.size) < p, truth, (truth + shift) % n_labels)


def service_order_panel(
    rng: np.random.Generator,
    *,
    p_h: float,
    p_j: float,
    n_labels: int,
    n_humans: int,
    per_secondary: int,
    design: str,
    n_items: int,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Codes, arrival ranks and first secondary rank of one project followed batch by batch.

    Columns ``0`` (primary), ``1..K-1`` (secondaries), ``K`` (judge). The primary and the judge
    have labeled every item handed out before the first secondary label (ranks below the
    returned base); secondary ``j``'s ``t``-th item arrives at ``base + t (K - 1) + j - 1``.
    """
    n_sec = n_humans - 1
    if design == "disjoint":
        lists = np.arange(n_sec * per_secondary).reshape(n_sec, per_secondary)
    elif design == "random":
        lists = np.stack([rng.choice(n_items, per_secondary, replace=False) for _ in range(n_sec)])
    elif design == "panel":
        lists = np.broadcast_to(rng.choice(n_items, per_secondary, replace=False), (n_sec, per_secondary))
    else:
        raise ValueError(f"design must be one of {ORDER_DESIGNS}, got {design!r}")
    items, slot = np.unique(lists, return_inverse=True)
    slot = slot.reshape(lists.shape)
    u = items.size
    truth = rng.integers(0, n_labels, u)
    codes = np.full((u, n_humans + 1), -1, dtype=np.int64)
    order = np.zeros((u, n_humans + 1), dtype=np.int64)
    codes[:, 0], order[:, 0] = _labels(rng, truth, p_h, n_labels), np.arange(u)
    codes[:, n_humans], order[:, n_humans] = _labels(rng, truth, p_j, n_labels), u + np.arange(u)
    base = 2 * u
    for j in range(n_sec):
        rows = slot[j]
        codes[rows, j + 1] = _labels(rng, truth[rows], p_h, n_labels)
        order[rows, j + 1] = base + np.arange(per_secondary) * n_sec + j
    return codes, order, base


_BATCH_CELLS = 2_000_000
"""Trial x row x human cells (and trial x rank x human) of a batch of runs held at once."""
_FAR = np.int64(2**62)  # arrival rank of a label that is not there
NEVER = np.iinfo(np.int64).max  # arrival rank of a certification that did not happen
_BET_CAP = 0.5  # c of docs/method.md §8, as planner.sequential bets (tested run by run against it)


def needed_ranks(log_e: np.ndarray, n_humans: int, alpha: float, multiplicity: str) -> np.ndarray:
    """Smallest e-BH rank ``j`` with ``e >= K / (alpha j)`` per cell (``K + 1``: none; Bonferroni: rank 1
    only), docs/method.md §8: the rule ``monitor_judge`` reads, on arrays of any shape."""
    ratio = n_humans / alpha * np.exp(-np.minimum(log_e, 700.0))
    ranks: np.ndarray = np.minimum(np.ceil(ratio * (1.0 - 1e-12)), n_humans + 1).astype(np.int64)
    return np.where(ranks == 1, 1, n_humans + 1) if multiplicity == "bonferroni" else ranks


def _batch_decisions(
    panels: list[tuple[np.ndarray, np.ndarray, int]],
    *,
    n_humans: int,
    rule: str,
    epsilon: float,
    alpha: float,
    omega_threshold: float,
    multiplicity: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Per run of ``panels`` (``service_order_panel``'s), the arrival rank of the monitor's decision
    (``-1``: none) and whether it passes (else rejects): :func:`planner.sequential.monitor_judge`'s
    decision and ``decided_at`` computed for a batch of runs at once (docs/method.md §8, §8.1).

    The runs are padded to one shape (missing cells at rank ``_FAR``) and every step of the monitor is
    the same operation along the padded axis: each human's usable rows (judge and two humans) in entry
    order, its xi against the pool present at entry, the plug-in empirical-Bernstein e-processes as
    running sums along the path (sequential sums, as over one path), its needed e-BH rank, and e-BH over
    the humans at every arrival rank (the certified set only changes at a look)."""
    n_cols = n_humans + 1
    rows = max(c.shape[0] for c, _, _ in panels)
    codes = np.full((len(panels), rows, n_cols), -1, dtype=np.int64)
    times = np.full((len(panels), rows, n_cols), _FAR, dtype=np.int64)
    for r, (c, o, _) in enumerate(panels):
        codes[r, : c.shape[0]] = c
        times[r, : c.shape[0]] = np.where(c >= 0, o, _FAR)
    humans, judge = codes[:, :, :n_humans], codes[:, :, n_humans]
    h_times, j_times = times[:, :, :n_humans], times[:, :, n_humans]
    present = humans >= 0
    usable = (judge >= 0) & (present.sum(axis=2) >= 2)
    low = np.minimum(h_times[:, :, 0], h_times[:, :, 1])
    second = np.maximum(h_times[:, :, 0], h_times[:, :, 1])
    for b in range(2, n_humans):
        second = np.minimum(second, np.maximum(low, h_times[:, :, b]))
        low = np.minimum(low, h_times[:, :, b])
    entry = np.maximum(np.maximum(j_times, second)[:, :, None], h_times)
    with_judge = humans == judge[:, :, None]
    size = np.full(entry.shape, -1, dtype=np.int16)
    judge_agree = -with_judge.astype(np.int16)
    human_agree = np.full(entry.shape, -1, dtype=np.int16)
    for b in range(n_humans):
        there = h_times[:, :, b : b + 1] <= entry
        size += there
        judge_agree += there & with_judge[:, :, b : b + 1]
        human_agree += there & (humans[:, :, b : b + 1] == humans)
    diff = judge_agree - human_agree
    valid = usable[:, :, None] & present
    with np.errstate(divide="ignore", invalid="ignore"):
        xi = diff / size if rule == "margin" else np.sign(diff).astype(float)
    key = np.where(valid, entry, _FAR)
    path = np.argsort(key, axis=1, kind="stable")  # each human's usable rows in entry order, the rest last
    at = np.take_along_axis(key, path, axis=1)  # (runs, position, human)
    on = at < _FAR
    y = np.where(on, (np.take_along_axis(xi, path, axis=1) + 1.0) / 2.0, 0.5)
    null_mean = (1.0 - epsilon) / 2.0
    log_inv_a = math.log(n_humans / alpha)
    t = np.arange(1, rows + 1, dtype=float)[None, :, None]
    mu = (0.5 + np.cumsum(y, axis=1)) / (t + 1.0)
    sigma2 = (0.25 + np.cumsum((y - mu) ** 2, axis=1)) / (t + 1.0)
    previous = np.concatenate([np.full_like(sigma2[:, :1], 0.25), sigma2[:, :-1]], axis=1)
    bets = np.sqrt(2.0 * log_inv_a / (previous * t * np.log1p(t)))
    excess = y - null_mean
    won = np.cumsum(np.log1p(np.minimum(bets, _BET_CAP / null_mean) * excess), axis=1)
    lost = np.cumsum(np.log1p(-np.minimum(bets, _BET_CAP / (1.0 - null_mean)) * excess), axis=1)
    firsts = [_first_certified_runs(needed_ranks(e, n_humans, alpha, multiplicity), at, on) for e in (won, lost)]
    first_won, first_lost = firsts
    needed = math.ceil(omega_threshold * n_humans - 1e-9)
    won_at = np.sort(np.where(first_won < first_lost, first_won, NEVER), axis=1)
    lost_at = np.sort(np.where(first_lost < first_won, first_lost, NEVER), axis=1)
    pass_at = won_at[:, needed - 1]
    reject_at = lost_at[:, n_humans - needed]
    decided = np.where(pass_at < reject_at, pass_at, np.where(reject_at < pass_at, reject_at, -1))
    return decided, pass_at < reject_at


def _first_certified_runs(needed_rank: np.ndarray, at: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Per run and human, the arrival rank at which e-BH first certifies it (``NEVER``: not by the
    end); ``needed_rank``, ``at`` and ``on``: (run, position, human) needed e-BH ranks, arrival ranks
    and whether the position is on the path. As in :func:`planner.sequential.first_certified`, e-BH
    is evaluated only at the looks where some human's needed rank changes (the certified set changes
    only there): ``k* = max{j : #{k : rank_k <= j} >= j}``, certified ``rank_k <= k*``."""
    n_runs, _, n_humans = needed_rank.shape
    before = np.concatenate([np.full_like(needed_rank[:, :1], n_humans + 1), needed_rank[:, :-1]], axis=1)
    run, pos, human = np.nonzero(on & (needed_rank != before))
    first = np.full((n_runs, n_humans), NEVER, dtype=np.int64)
    if run.size == 0:
        return first
    span = int(at[run, pos, human].max()) + 1
    looks, look_of = np.unique(run * span + at[run, pos, human], return_inverse=True)
    look_run = looks // span
    index = np.arange(looks.size) - np.searchsorted(look_run, look_run)  # the look's index in its run
    n_looks = int(index.max()) + 1
    at_look = np.full((n_runs, n_looks), NEVER, dtype=np.int64)
    at_look[look_run, index] = looks % span
    where = index[look_of.reshape(-1)]
    last = np.full((n_runs, n_looks, n_humans), -1, dtype=np.int64)
    last[run, where, human] = where
    value = np.full((n_runs, n_looks, n_humans), n_humans + 1, dtype=np.int64)
    value[run, where, human] = needed_rank[run, pos, human]
    last = np.maximum.accumulate(last, axis=1)  # each human's latest change at or before each look
    state = np.where(last >= 0, np.take_along_axis(value, np.maximum(last, 0), axis=1), n_humans + 1)
    k_star = np.zeros((n_runs, n_looks), dtype=np.int64)
    for j in range(1, n_humans + 1):
        k_star = np.where(np.count_nonzero(state <= j, axis=2) >= j, j, k_star)
    certified = state <= k_star[:, :, None]
    hit = certified.any(axis=1)
    first[hit] = np.take_along_axis(at_look, np.argmax(certified, axis=1), axis=1)[hit]
    return first


def monitor_runs(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    n_humans: int,
    horizon: int,
    design: str = "disjoint",
    n_items: int | None = None,
    rule: str = "margin",
    epsilon: float | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    n_trials: int = SIZING_TRIALS,
    rng: int | np.random.Generator | None = None,
) -> MonitorRuns:
    """``n_trials`` projects followed to ``horizon`` items per secondary in the service's order
    (:func:`service_order_panel`), each monitored by :func:`planner.sequential.monitor_judge`.

    A run's decision at ``m < horizon`` items per secondary is the one its prefix gives (the monitor
    reads no later label), so one run to the horizon answers every ``m`` at once."""
    n_items = n_items if n_items is not None else (n_humans - 1) * horizon
    epsilon = DEFAULT_EPSILON.get(rule, math.nan) if epsilon is None else epsilon
    if rule not in RULES or multiplicity not in MULTIPLICITY:
        raise ValueError(f"rule must be one of {RULES} and multiplicity one of {MULTIPLICITY}")
    if not (math.isfinite(epsilon) and 0.0 <= epsilon < 1.0 and 0.0 < omega_threshold <= 1.0):
        raise ValueError(
            f"epsilon must be in [0, 1) and omega_threshold in (0, 1], got {epsilon!r}, {omega_threshold!r}"
        )
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    gen = np.random.default_rng(rng)
    n_sec = n_humans - 1
    at = np.full(n_trials, np.inf)
    decision = np.full(n_trials, "continue", dtype=object)
    per_run = n_humans * 3 * n_sec * horizon  # rows and arrival ranks of a run, per human
    batch = max(1, _BATCH_CELLS // max(1, per_run))
    for first in range(0, n_trials, batch):
        panels = [
            service_order_panel(
                gen,
                p_h=p_h,
                p_j=p_j,
                n_labels=n_labels,
                n_humans=n_humans,
                per_secondary=horizon,
                design=design,
                n_items=n_items,
            )
            for _ in range(first, min(first + batch, n_trials))
        ]
        decided_at, passed = _batch_decisions(
            panels,
            n_humans=n_humans,
            rule=rule,
            epsilon=epsilon,
            alpha=alpha,
            omega_threshold=omega_threshold,
            multiplicity=multiplicity,
        )
        for r, ((_, _, base), when, won) in enumerate(zip(panels, decided_at, passed, strict=True)):
            if when >= 0:
                at[first + r] = (when - base) // n_sec + 1 if when >= base else 1
                decision[first + r] = "pass" if won else "reject"
    return MonitorRuns(horizon, at, decision.astype(str))


@dataclass(frozen=True)
class AnytimeSizing:
    """The overlap per secondary the monitor needs (docs/method.md §8.1).

    ``m``: the smallest overlap by which the good judge is passed in at least ``power`` of the
    runs (None when not by ``max_m``); ``budget``: the smallest by which ``budget_level`` of the
    runs are decided (at least ``m``; ``max_m`` when not reached); ``fr``: the good judge's
    rejections by the budget; ``fa``: the mirror judge's passes by the budget (NaN: no mirror).
    ``curve``: ``(m, pass rate)`` at a few overlaps. Rates carry their binomial Monte Carlo SE.
    """

    m: int | None
    power: float
    power_at_m: float
    budget: int
    budget_level: float
    decided_by_budget: float
    fr: float
    fa: float
    expected_stop: float
    n_trials: int
    horizon: int
    max_m: int
    curve: tuple[tuple[int, float], ...]
    runs: MonitorRuns

    def pass_rate(self, m: int) -> float | None:
        """Share of the good judge's runs passed by ``m`` items per secondary (None beyond the horizon)."""
        return self.runs.rate("pass", m) if m <= self.horizon else None

    @property
    def mc_se(self) -> float:
        """Largest binomial Monte Carlo SE of a rate over ``n_trials`` runs."""
        return 0.5 / math.sqrt(self.n_trials)


def _smallest(at: np.ndarray, level: float) -> int | None:
    """Smallest ``m`` with ``mean(at <= m) >= level``, or None."""
    need = math.ceil(level * at.size - 1e-9)
    finite = np.sort(at[np.isfinite(at)])
    return int(finite[need - 1]) if 1 <= need <= finite.size else None


def size_for_monitor(
    p_h: float,
    p_j: float,
    *,
    n_labels: int,
    n_humans: int,
    n_items: int,
    start: int,
    design: str = "disjoint",
    rule: str = "margin",
    epsilon: float | None = None,
    alpha: float = 0.05,
    omega_threshold: float = 0.5,
    multiplicity: str = "e-bh",
    power: float = 0.8,
    p_j_bad: float = math.nan,
    n_trials: int = SIZING_TRIALS,
    max_cells: int = MAX_SIZING_CELLS,
    rng: int | None = 0,
) -> AnytimeSizing:
    """Smallest overlap per secondary at which the monitor passes the ``p_j`` judge w.p. ``>= power``.

    Bracket: runs to a horizon of ``2 start`` (``start``: the one-look ``m``), doubled until
    ``(1 + power)/2`` of the runs are decided or the horizon reaches ``max_m`` (the corpus's
    items per secondary, and what ``max_cells`` allows). Within it, every ``m`` is read off the same
    runs (common random numbers, a monotone step function: no bisection is needed); ``m`` is the first
    whose simulated pass rate clears ``power`` by one binomial SE, for the first crossing of a noisy
    curve overstates the power there (docs/method.md §8.1). FR and FA are
    the runs of the good and the mirror judge at the budget. Raises ``ValueError`` for bad input.
    """
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    if not (n_humans >= 2 and n_items >= 1 and start >= 1 and n_trials >= 1):
        raise ValueError("n_humans >= 2, n_items, start and n_trials >= 1 are required")
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else epsilon
    n_sec = n_humans - 1
    by_corpus = n_items // n_sec if design == "disjoint" else n_items
    by_work = max_cells // (2 * n_trials * n_sec * (n_humans + 1))  # two judges, items up to K-1 lists
    max_m = max(1, min(by_corpus, by_work))
    level = (1.0 + power) / 2.0
    horizon = min(max(2 * start, 40), max_m)

    def runs(p: float, to: int, stream: int) -> MonitorRuns:
        return monitor_runs(
            p_h,
            p,
            n_labels=n_labels,
            n_humans=n_humans,
            horizon=to,
            design=design,
            n_items=n_items,
            rule=rule,
            epsilon=epsilon,
            alpha=alpha,
            omega_threshold=omega_threshold,
            multiplicity=multiplicity,
            n_trials=n_trials,
            rng=np.random.default_rng([rng or 0, stream]),
        )

    while True:
        good = runs(p_j, horizon, 0)
        if _smallest(good.at, level) is not None or horizon >= max_m:
            break
        horizon = min(2 * horizon, max_m)
    passed = np.where(good.decision == "pass", good.at, np.inf)
    m = _smallest(passed, min(power + math.sqrt(power * (1.0 - power) / n_trials), 1.0))  # one SE above: see docs
    budget = _smallest(good.at, level) or horizon
    budget = max(budget, m or 0)
    fa = math.nan
    if math.isfinite(p_j_bad):
        bad = runs(p_j_bad, budget, 1)
        fa = bad.rate("pass", budget)
    done = np.isfinite(good.at)
    points = sorted({max(1, round(horizon * f)) for f in (0.25, 0.5, 0.75, 1.0)} | ({m} if m else set()))
    return AnytimeSizing(
        m=m,
        power=power,
        power_at_m=good.rate("pass", m) if m else good.rate("pass", horizon),
        budget=int(budget),
        budget_level=level,
        decided_by_budget=good.decided_by(budget),
        fr=good.rate("reject", budget),
        fa=fa,
        expected_stop=float(good.at[done].mean()) if done.any() else math.nan,
        n_trials=n_trials,
        horizon=horizon,
        max_m=max_m,
        curve=tuple((int(p), good.rate("pass", int(p))) for p in points),
        runs=good,
    )
