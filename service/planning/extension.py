"""Lists that never run dry while the monitored decision is open (docs/method.md §8.1).

In anytime mode a secondary's planned list of ``m`` items is where the monitor is expected to pass
the judge, not where it must have decided: while the monitored decision is ``continue`` and the
secondary holds fewer items than the plan's monitoring budget, its list is extended by the plan's
own design (``service.planning.lists.ensure_assignments`` with a larger target). At the budget the
monitor says ``inconclusive``, and the list ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.sequential import monitor_judge
from service.data.models import Assignment, Plan, Project, Rater
from service.matrices.arrival import arrival_order, monitored_lists, monitored_ranks, planned_lists, seeded_item_keys
from service.matrices.ratings import load_ratings
from service.matrices.store import current_matrix
from service.planning.lists import ensure_assignments, inclusion_by_item, list_target, monitoring_budget
from service.planning.monitoring_costs import LIST_DESIGNS
from service.planning.score_plans import monitored_scores


@dataclass(frozen=True)
class ListState:
    """Why a secondary's list may or may not grow: the monitored decision now (per the first judge
    still open, else the first judge), the budget and why."""

    decision: str | None
    budget: int | None
    extends: bool
    reason: str


def monitored_decision(session: Session, project: Project, plan: Plan) -> tuple[str | None, str]:
    """The monitored decision of ``/reliability`` on the project's first criterion: ``continue`` when
    any judge's is, else the first judge's; None outside anytime ``p_o`` monitoring. Read in the document's
    arrival order (docs/method.md §8.2: ranks, the opening, planned lists, seeded ties), so a batch's reason and the
    document agree."""
    decision = project.decision_settings
    if project.scale == "numeric" and decision.resolved_monitoring() == "anytime":
        return _monitored_scores(session, project, plan)
    if decision.resolved_monitoring() != "anytime" or decision.coefficient != "po":
        return None, "the decision is read fixed-sample, at the planned overlap"
    matrix = current_matrix(session, project, project.criteria[0])
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    if not judges or len(humans) < 2:
        return "insufficient_data", "no judge or fewer than two humans yet"
    arrival = arrival_order(project, matrix.label_seq, planned_lists(session, project, matrix))
    order, tiebreak = monitored_ranks(matrix, arrival), seeded_item_keys(matrix.raw.shape[0], arrival.seed)
    outcomes = []
    for judge in judges:
        result = monitor_judge(
            matrix.codes,
            judge=judge,
            humans=humans,
            n_labels=matrix.n_labels,
            order=order,
            tiebreak=tiebreak,
            lists=monitored_lists(arrival),
            rule=decision.rule,
            epsilon=decision.resolved_epsilon(),
            alpha=decision.alpha_sig,
            omega_threshold=decision.omega_threshold,
            multiplicity=decision.multiplicity,
            budget=monitoring_budget(plan),
            inclusion=inclusion_by_item(session, plan, matrix),
        )
        outcomes.append((result.decision, result.reason))
    return next((o for o in outcomes if o[0] == "continue"), outcomes[0])


def _monitored_scores(session: Session, project: Project, plan: Plan) -> tuple[str | None, str]:
    """The monitored decision of a numeric project's ``/reliability`` (docs/method.md §8b): ``continue`` when
    any judge's is, else the first judge's."""
    matrix = load_ratings(session, project, project.criteria[0])
    if not matrix.columns("judge") or len(matrix.columns("primary", "human")) < 2:
        return "insufficient_data", "no judge or fewer than two humans yet"
    outcomes = [(m.decision, m.reason) for m in monitored_scores(matrix, project, monitoring_budget(plan))]
    return next((o for o in outcomes if o[0] == "continue"), outcomes[0])


def list_state(session: Session, project: Project, plan: Plan, held: int) -> ListState:
    """Whether a secondary holding ``held`` items, all labeled, gets more (docs/method.md §8.1)."""
    budget = monitoring_budget(plan)
    block = (plan.recipe or {}).get("monitoring") or {}
    if not block.get("budget_extends_lists") or plan.design not in LIST_DESIGNS or budget is None:
        return ListState(None, budget, False, "the plan's lists end at m (fixed mode or a shared panel)")
    decision, reason = monitored_decision(session, project, plan)
    if held >= min(budget, project.item_count):
        if decision == "continue":  # other secondaries' items, or labels the monitor waits for (§8.2 rule 4)
            return ListState(
                decision,
                budget,
                False,
                f"the monitoring budget of {budget} items per secondary is reached here; "
                f"the monitored decision is still open: {reason}",
            )
        return ListState(
            "inconclusive",
            budget,
            False,
            f"the monitoring budget of {budget} items per secondary is reached: an open decision is inconclusive",
        )
    if decision != "continue":
        return ListState(decision, budget, False, f"the monitored decision is {decision}: {reason}")
    return ListState(decision, budget, True, f"the monitored decision is open: the list grows up to {budget} items")


def extend_list(session: Session, plan: Plan, rater: Rater, project: Project, size: int) -> ListState:
    """Extend a secondary's fully labeled list by up to ``size`` items while the monitor is open."""
    held = session.scalar(select(func.count()).where(Assignment.rater_id == rater.id)) or 0
    state = list_state(session, project, plan, held)
    if state.extends and state.budget is not None:
        ensure_assignments(session, plan, rater, target=min(state.budget, max(held, list_target(plan, project)) + size))
    return state
