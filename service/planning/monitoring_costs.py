"""What the anytime monitor needs under a plan, simulated in the service's order (docs/method.md §8.1)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from planner import optional_float
from planner.monitor_sizing import MAX_SIZING_CELLS, SIZING_TRIALS, AnytimeSizing, monitor_runs, size_for_monitor
from planner.plan_check import mirror_accuracy
from planner.trial_decisions import DecisionRule
from planner.xi_moments import advantage_moments, xi_lattice
from service.core.errors import Invalid
from service.schemas.projects import DecisionSettings

ORDER_OF_DESIGN = {
    "disjoint": "disjoint",
    "seq-coverage": "disjoint",
    "random": "random",
    "seq-refined": "random",
    "strat": "panel",
    "neyman": "panel",
    "depth-first": "panel",
}
"""How a design's secondary lists relate, as the sizing simulates them (``planner.monitor_sizing``)."""
LIST_DESIGNS = ("random", "disjoint", "depth-first", "seq-refined", "seq-coverage")
"""Designs whose lists are extended past ``m`` while the monitor is open; a shared panel's fixed
allocation (strat, neyman) is not, so its budget is its ``m``."""


SIZING_CACHE = 128
"""Sizings kept by their full parameter tuple (a few KB each): a re-plan of unchanged settings and seed
reads its sizing back instead of simulating it again."""


@lru_cache(maxsize=SIZING_CACHE)
def _sizing(p_h: float, p_j: float, p_bad: float, settings: tuple[tuple[str, Any], ...]) -> AnytimeSizing:
    """``size_for_monitor`` memoised: a pure function of its arguments (its stream is seeded by ``rng``),
    so equal arguments give the same sizing (docs/method.md §8.1). The result is frozen and only read."""
    return size_for_monitor(p_h, p_j, p_j_bad=p_bad, **dict(settings))


def _unsimulated(mode: str, reason: str) -> dict[str, Any]:
    return {"mode": mode, "simulated": False, "reason": reason}


def plan_monitoring(
    decision: DecisionSettings,
    channel: tuple[float, float] | None,
    *,
    n_labels: int,
    n_humans: int,
    n_items: int,
    design: str,
    m_fixed: int,
    m_request: int | None = None,
    budget_request: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The monitoring block of a certification plan (docs/method.md §8.1).

    ``m_fixed`` is the one-look recipe's overlap (§4, after the plan check). Under ``p_o`` with a
    noise ``channel`` (the prior's ``(p_h, p_j)`` or the one fitted to a pilot) the monitor is
    simulated in the service's arrival order for ``design``: ``m_anytime`` is the smallest overlap
    per secondary by which it passes the judge with probability ``>= decision.power``. The block's
    ``m`` is the plan's overlap: ``m_anytime`` in anytime mode (the request's ``m`` when given),
    ``m_fixed`` in fixed mode; ``budget`` is where an open decision becomes ``inconclusive`` (the
    request's, else the overlap by which ``(1 + power)/2`` of the runs decide; ``m`` in fixed mode
    and for a shared panel). A ``budget_request`` below ``m`` raises ``Invalid`` (a 422).
    """
    mode = decision.resolved_monitoring()
    if decision.coefficient != "po":
        return _unsimulated(mode, f"{decision.coefficient} is monitored fixed-sample only (docs/method.md §8)")
    if channel is None:
        return _unsimulated(mode, "no noise channel to simulate the monitor from (see check.reason)")
    p_h, p_j = channel
    order = ORDER_OF_DESIGN.get(design, "random")
    pool = n_humans - 1 if order == "panel" else 1
    rule = DecisionRule(decision.rule, decision.resolved_epsilon(), decision.omega_threshold, decision.q)
    p_bad = mirror_accuracy(p_h, p_j, n_labels=n_labels, rule=rule, pool_size=pool)
    lattice = xi_lattice(p_h, p_j, n_labels=n_labels, pool_size=pool)
    mu = lattice.mu_d if decision.rule == "margin" else advantage_moments(*lattice.advantage)[0]
    if mu + decision.resolved_epsilon() <= 0:
        return _worse_than_margin(
            decision, (p_h, p_j), mode, order, n_labels, n_humans, n_items, m_request or m_fixed, seed
        )
    sizing = _sizing(
        float(p_h),
        float(p_j),
        float(p_bad),
        (
            ("n_labels", n_labels),
            ("n_humans", n_humans),
            ("n_items", n_items),
            ("start", max(m_fixed, m_request or 0)),
            ("design", order),
            ("rule", decision.rule),
            ("epsilon", decision.resolved_epsilon()),
            ("alpha", decision.alpha_sig),
            ("omega_threshold", decision.omega_threshold),
            ("multiplicity", decision.multiplicity),
            ("power", decision.power),
            ("rng", seed),
        ),
    )
    return _block(decision, sizing, mode, order, design, m_fixed, m_request, budget_request, p_bad)


def _worse_than_margin(
    decision: DecisionSettings,
    channel: tuple[float, float],
    mode: str,
    order: str,
    n_labels: int,
    n_humans: int,
    n_items: int,
    m: int,
    seed: int,
) -> dict[str, Any]:
    """The block for a judge worse than the margin in population: no overlap passes it; the share of runs
    some look up to ``m`` passes it anyway (its false acceptance), in the service's order."""
    n_trials = max(20, min(SIZING_TRIALS, MAX_SIZING_CELLS // max(1, m * (n_humans - 1) * (n_humans + 1))))
    runs = monitor_runs(
        *channel,
        n_labels=n_labels,
        n_humans=n_humans,
        horizon=m,
        design=order,
        n_items=n_items,
        rule=decision.rule,
        epsilon=decision.resolved_epsilon(),
        alpha=decision.alpha_sig,
        omega_threshold=decision.omega_threshold,
        multiplicity=decision.multiplicity,
        n_trials=n_trials,
        rng=seed,
    )
    return {
        "mode": mode,
        "simulated": True,
        "sized_for": mode,
        "judge_within_margin": False,
        "m_fixed": m,
        "m_anytime": None,
        "m_cert": m,
        "m": m,
        "sentence": f"read once: {m}; watch continuously: no overlap passes a judge worse than the margin",
        "power": decision.power,
        "power_at_m": runs.rate("pass", m),
        "budget": m,
        "budget_extends_lists": False,
        "fr": None,
        "fa": runs.rate("pass", m),
        "reject_by_m": runs.rate("reject", m),
        "rates_at": "m: the share of runs some look passes (fa) or rejects (reject_by_m) this judge",
        "n_trials": n_trials,
        "mc_se_max": 0.5 / n_trials**0.5,
        "warnings": ["the plan's judge is worse than the margin: the monitor is expected to reject it, not to pass"],
    }


def _block(
    decision: DecisionSettings,
    sizing: AnytimeSizing,
    mode: str,
    order: str,
    design: str,
    m_fixed: int,
    m_request: int | None,
    budget_request: int | None,
    p_bad: float,
) -> dict[str, Any]:
    warnings = []
    m_anytime = sizing.m
    if mode == "fixed":
        m = m_request or m_fixed
    elif m_request is not None:
        m = m_request
    elif m_anytime is not None:
        m = m_anytime
    else:
        m = sizing.max_m
        warnings.append(
            f"the monitor does not pass this judge with probability {decision.power:g} by {sizing.max_m} items per "
            f"secondary (the corpus, or the simulation's work bound): m = {m}, where it passes in "
            f"{sizing.power_at_m:.2f} of the runs"
        )
    extends = mode == "anytime" and design in LIST_DESIGNS
    budget = max(sizing.budget, m) if extends else m
    if budget_request is not None:
        if budget_request < m:
            raise Invalid(
                f"budget {budget_request} is below the plan's overlap m = {m} per secondary: the monitoring budget "
                "is where an open decision becomes inconclusive, at or after m",
                code="budget_below_m",
            )
        budget = budget_request if extends else m
        if not extends and budget_request != m:
            warnings.append(
                f"design {design} is a shared panel (or fixed mode): its lists end at m, so the budget is m"
            )
    once = f"read once: {m_fixed}"
    watched = f"watch continuously: {m_anytime}" if m_anytime is not None else "watch continuously: beyond the corpus"
    return {
        "mode": mode,
        "simulated": True,
        "sized_for": mode,
        "judge_within_margin": True,
        "order": f"the service's: primary and judge in hand, each secondary through its own list in random order, "
        f"the secondaries interleaved ({order} lists for design {design}); docs/method.md §8.1",
        "m_fixed": m_fixed,
        "m_anytime": m_anytime,
        "m_cert": m_fixed,
        "m": m,
        "sentence": f"{once}; {watched}",
        "power": decision.power,
        "power_at_m": sizing.pass_rate(m),
        "budget": int(budget),
        "budget_extends_lists": extends,
        "budget_level": sizing.budget_level,
        "decided_by_budget": sizing.decided_by_budget,
        "fr": sizing.fr,
        "fa": optional_float(sizing.fa),
        "p_j_bad": optional_float(p_bad),
        "rates_at": "budget: the good judge's rejections (fr) and the mirror judge's passes (fa) at any look up to it",
        "expected_stop": optional_float(sizing.expected_stop),
        "stop_ratio": optional_float(sizing.expected_stop / m_fixed),
        "horizon": sizing.horizon,
        "n_trials": sizing.n_trials,
        "mc_se_max": sizing.mc_se,
        "curve": [{"m": k, "pass": r} for k, r in sizing.curve],
        "warnings": warnings,
    }
