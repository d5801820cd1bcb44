"""The monitored decision of /reliability: anytime-valid, or fixed-sample and provisional.

Arrival order is each current label's arrival rank (docs/method.md §8.2): the ``label_seq`` of the
write that gave its cell a first label (a correction keeps it), every label of the opening (in hand at
the first look) at one rank, a secondary's listed labels in its list's order, ties read in the project's
seeded item order. The label that completes an
item for a held-out human dates that item.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from planner import optional_float
from planner.sequential import Monitoring, MonitorState, kept_monitoring, monitor_judge
from service.core.caches import RecentlyUsed
from service.data.models import Plan
from service.matrices.arrival import ArrivalOrder, monitored_lists, monitored_ranks, seeded_item_keys
from service.matrices.matrix import LabelMatrix
from service.planning.lists import monitoring_budget
from service.schemas.projects import DecisionSettings

BAND_POINTS = 60  # confidence-sequence points per rater sent to the dashboard
MONITOR_KEY = "annoplan_monitor_states"
"""``Session.info`` key of the worker's kept monitorings (:data:`MonitorStates`)."""
KEPT_MONITORINGS = 4
"""Monitorings a worker keeps to bring up to date (about 57 MiB each at a million items x 11 raters: their paths; their
codes are the matrix's)."""
MonitorStates = RecentlyUsed[tuple[str, int], MonitorState]
"""A worker's kept monitorings by (document lineage, judge column)."""


def planned_budget(plan: Plan | None) -> int | None:
    """Usable overlap per human by which the plan expects the monitored decision (None: no plan)."""
    return monitoring_budget(plan)


def _band(times: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> list[dict[str, Any]]:
    """At most ``BAND_POINTS`` points of a rater's confidence sequence, always the last one."""
    if times.size == 0:
        return []
    keep = np.unique(np.linspace(0, times.size - 1, min(BAND_POINTS, times.size)).round().astype(int))
    return [
        {
            "label_seq": int(times[i]),
            "n": int(i + 1),
            "lower": float(lower[i]),
            "upper": float(upper[i]),
        }
        for i in keep
    ]


def band_agrees(status: str, low: float, high: float, epsilon: float) -> bool:
    """Whether a human's band now tells its status: won with the band above ``-epsilon``, lost with it
    below, open with it across (docs/method.md §8: the status is the e-values', the band its own)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return status == "open"
    above, below = low > -epsilon, high < -epsilon
    return (status == "won") == above and (status == "lost") == below


def monitoring_block(m: Monitoring, matrix: LabelMatrix, mode: str) -> dict[str, Any]:
    """The monitoring block: decision, looks, and per human status, e-values and band."""
    return {
        "mode": mode,
        "decision": m.decision,
        "reason": m.reason,
        "looks": m.looks,
        "decided_at_label_seq": m.decided_at,
        "needed_won": m.needed,
        "budget": m.budget,
        "settle": _settle(m),
        "alpha": m.alpha,
        "epsilon": m.epsilon,
        "multiplicity": m.multiplicity,
        "weighting": m.weighting,
        "raters": [
            {
                "rater": matrix.raters[r.rater].external_id,
                "status": r.status,
                "certified_at_label_seq": r.certified_at,
                "e_value": optional_float(r.e_value),
                "e_value_lost": optional_float(r.e_value_lost),
                "threshold": r.threshold,
                "n": r.n,
                "d": optional_float(r.d),
                "cs": r.cs.as_list(),
                "band_agrees": band_agrees(r.status, r.cs.low, r.cs.high, m.epsilon),
                "band": _band(r.arrival, r.lower, r.upper),
            }
            for r in m.raters
        ],
    }


def _settle(m: Monitoring) -> str | None:
    """What would settle an inconclusive monitored decision (docs/method.md §8.1); None otherwise."""
    if m.decision != "inconclusive":
        return None
    return (
        f"every human reached the monitoring budget of {m.budget} items with the judge neither certified within "
        f"epsilon = {m.epsilon:g} nor worse: the judge sits near the margin. More overlap settles it (plan again "
        "with a larger budget; the lists grow while the decision is open), as would a wider epsilon, a better "
        "judge, or more humans"
    )


def judge_monitorings(
    matrix: LabelMatrix,
    judges: list[int],
    humans: list[int],
    decision: DecisionSettings,
    plan: Plan | None,
    inclusion: np.ndarray | None,
    arrival: ArrivalOrder,
    *,
    kept: tuple[MonitorStates, str] | None = None,
) -> list[dict[str, Any] | None]:
    """Per judge, the monitoring block (None: ``p_o`` only is monitored; docs/method.md §8); pure
    without ``kept``.

    ``inclusion`` (a Neyman panel's per-item probabilities) weights the monitor (docs §9); ``arrival``
    orders the labels (:func:`monitored_ranks`, :func:`monitored_lists`, ties by :func:`seeded_item_keys`;
    docs §8.2). The document computes this in a child process of its own, beside its other statistics,
    or, with ``kept`` (a worker's kept monitorings and the document's lineage), in the worker: each
    brought up to date from the kept one when only labels were added since
    (``planner.sequential.kept_monitoring``: the same block, its cost growing with the rows labeled
    since), computed afresh and kept otherwise.
    """
    if len(humans) < 2:  # no validation either
        return []
    if decision.coefficient != "po":
        return [None] * len(judges)
    options: dict[str, Any] = {
        "humans": humans,
        "n_labels": matrix.n_labels,
        "order": monitored_ranks(matrix, arrival),
        "lists": monitored_lists(arrival),
        "tiebreak": seeded_item_keys(matrix.raw.shape[0], arrival.seed),
        "rule": decision.rule,
        "epsilon": decision.resolved_epsilon(),
        "alpha": decision.alpha_sig,
        "omega_threshold": decision.omega_threshold,
        "multiplicity": decision.multiplicity,
        "budget": planned_budget(plan),
        "inclusion": inclusion,
    }
    mode = decision.resolved_monitoring()
    blocks: list[dict[str, Any] | None] = []
    for judge in judges:
        if kept is None:
            monitoring = monitor_judge(matrix.codes, judge=judge, **options)
        else:
            states, lineage = kept
            monitoring, state = kept_monitoring(
                matrix.codes, previous=states.get((lineage, judge)), judge=judge, **options
            )
            states.put((lineage, judge), state)
        blocks.append(monitoring_block(monitoring, matrix, mode))
    return blocks


def decision_in_force(
    block: dict[str, Any] | None,
    matrix: LabelMatrix,
    decision: DecisionSettings,
    fixed: dict[str, Any],
    plan: Plan | None,
) -> dict[str, Any]:
    """The decision in force for one judge, with its monitoring ``block`` (:func:`judge_monitorings`).

    ``fixed`` is the fixed-sample validation of that judge (its ``decision`` and per-rater
    ``m``). Anytime mode: the monitored decision, valid at every look. Fixed mode: the
    fixed-sample decision, ``provisional`` until every secondary has the plan's ``m``.
    """
    mode = decision.resolved_monitoring()
    if mode == "anytime" and block is not None:
        settle = block.get("settle")
        return {
            "decision": block["decision"],
            "reason": monitored_reason(block) + (f"; {settle}" if settle else ""),
            "omega": monitored_omega(block),
            "fixed_omega": fixed["omega"],
            "provisional": False,
            "fixed_decision": fixed["decision"],
            "monitoring": block,
        }
    secondaries = {matrix.raters[k].external_id for k in matrix.columns("human")}
    m_secondary = [r["m"] for r in fixed["raters"] if r["rater"] in secondaries]
    planned = plan.m if plan is not None else None
    reached = planned is not None and bool(m_secondary) and min(m_secondary) >= planned
    reason = fixed["reason"]
    if not reached:
        short = (
            "no plan with a planned overlap"
            if planned is None
            else f"the secondaries have {min(m_secondary, default=0)} of the planned {planned}"
        )
        reason = f"provisional: a fixed-sample decision holds at the planned overlap only ({short})" + (
            f"; {reason}" if reason else ""
        )
    return {
        "decision": fixed["decision"],
        "reason": reason,
        "fixed_omega": fixed["omega"],
        "provisional": not reached,
        "fixed_decision": fixed["decision"],
        "monitoring": block,
    }


def monitored_omega(block: dict[str, Any]) -> float | None:
    """Omega in anytime mode: the share of humans certified won so far (None without a human)."""
    raters = block["raters"]
    return sum(r["status"] == "won" for r in raters) / len(raters) if raters else None


def monitored_reason(block: dict[str, Any]) -> str:
    """The monitored decision's reason with the counts the statuses show now, so the banner, omega and the
    per-human statuses tell one story (docs/method.md §11)."""
    raters = block["raters"]
    if not raters or block["decision"] == "insufficient_data":
        return str(block["reason"])
    won = sum(r["status"] == "won" for r in raters)
    lost = sum(r["status"] == "lost" for r in raters)
    counts = f"{won} of {len(raters)} humans certified won, {lost} lost, {len(raters) - won - lost} open"
    needed = f"{block['needed_won']} won needed to pass"
    if block["decision"] in ("pass", "reject"):
        return f"{block['decision']} since label_seq {block['decided_at_label_seq']}; now {counts} ({needed})"
    return f"{block['reason']}: {counts} ({needed})"
