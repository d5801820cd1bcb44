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

from planner.rules import DEFAULT_EPSILON
from planner.sequential import monitor_judge

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
    gen = np.random.default_rng(rng)
    n_sec = n_humans - 1
    at = np.full(n_trials, np.inf)
    decision = np.full(n_trials, "continue", dtype=object)
    for trial in range(n_trials):
        codes, order, base = service_order_panel(
            gen,
            p_h=p_h,
            p_j=p_j,
            n_labels=n_labels,
            n_humans=n_humans,
            per_secondary=horizon,
            design=design,
            n_items=n_items,
        )
        result = monitor_judge(
            codes,
            judge=n_humans,
            humans=list(range(n_humans)),
            n_labels=n_labels,
            order=order,
            rule=rule,
            epsilon=epsilon,
            alpha=alpha,
            omega_threshold=omega_threshold,
            multiplicity=multiplicity,
        )
        if result.decided_at is not None and result.decision in ("pass", "reject"):
            at[trial] = (result.decided_at - base) // n_sec + 1 if result.decided_at >= base else 1
            decision[trial] = result.decision
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
