"""Simulation requests: defaults from the project and its plan, the run's size, and the job queue.

Defaults come from the project: its decision settings and target, the plan in force
(design, K, overlap rate, priors), its item and label counts, and the primary's labels in
hand for the prevalence. The size of a run is ``trials x grid cells x n_items x raters``.
"""

from __future__ import annotations

import secrets
from typing import Any

import numpy as np
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from planner.codes import code_type
from planner.rules import DEFAULT_EPSILON
from service.core.errors import AppError, Invalid, echo
from service.data.models import CurrentLabel, Plan, Project, Rater, Simulation
from service.matrices.store import current_matrix
from service.planning.plans import current_plan
from service.schemas.simulations import SimulateBody, SimulationSettings
from service.simulations.jobs import ACTIVE, SimulationSpec

DEFAULT_RHOS = [0.05, 0.1, 0.15, 0.25, 0.5]
GENERATOR_FIELDS = ("n_items", "n_humans", "n_labels", "p_h", "p_j", "prevalence", "clusters", "cluster_difficulty")
JOBS_PER_WORKER = 4
SUBMIT_LOCK = 0x616E6E6F  # PostgreSQL advisory lock serialising job submissions ("anno")


class TooManyRequests(AppError):
    status_code = 429
    code = "too_many_simulations"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _primary_shares(session: Session, project: Project, criterion: str) -> list[float] | None:
    """Label shares among the primary's labels in hand (special values left out); None without any."""
    rows = session.execute(
        select(CurrentLabel.value, func.count())
        .join(Rater, Rater.id == CurrentLabel.rater_id)
        .where(Rater.project_id == project.id, Rater.kind == "primary", CurrentLabel.criterion == criterion)
        .group_by(CurrentLabel.value)
    ).all()
    counts = dict(rows)
    per_label = np.array([counts.get(label, 0) for label in project.labels], dtype=float)
    total = per_label.sum()
    return (per_label / total).tolist() if total > 0 else None


def _plan_value(plan: Plan | None, key: str) -> Any:
    return plan.params.get(key) if plan is not None else None


def _decision_settings(body: SimulateBody, project: Project, plan: Plan | None) -> dict[str, Any]:
    """Rule, coefficients, margins, thresholds and designs, defaults from the project and plan."""
    decision = project.decision_settings
    rule = _or(body.rule, decision.rule)
    if body.coefficient is not None:
        coefficient = _as_list(body.coefficient)
    elif decision.coefficient in ("po", "kappa", "alpha"):
        coefficient = [decision.coefficient]
    else:
        raise Invalid(
            f"the simulator computes po, kappa and alpha; the project's coefficient is {decision.coefficient}: "
            "pass coefficient"
        )
    if rule == "alt-test" and set(coefficient) != {"po"}:
        raise Invalid("rule 'alt-test' compares per-item agreement: use coefficient 'po'")
    # the project's margin is for the project's rule; another rule gets its own default
    epsilon = body.epsilon if body.epsilon is not None else decision.epsilon if rule == decision.rule else None
    if body.design is not None:
        design = _as_list(body.design)
    else:
        design = [plan.design] if plan is not None and plan.design != "auto" else ["strat"]
    omega_threshold = float(_or(body.omega_threshold, decision.omega_threshold))
    if omega_threshold <= 0:
        raise Invalid("the project's omega_threshold is 0 (every judge passes): pass omega_threshold > 0")
    return {
        "rule": rule,
        "coefficient": coefficient,
        "design": design,
        "epsilon": float(_or(epsilon, DEFAULT_EPSILON[rule])),
        "delta": float(_or(body.delta, project.target["delta"])),
        "omega_threshold": omega_threshold,
        "q": float(_or(body.q, decision.q)),
        "alpha_sig": float(_or(body.alpha_sig, decision.alpha_sig)),
    }


def _check_rhos(rho: list[float], n_items: int) -> None:
    for value in rho:
        if round(value * n_items) < 1:
            raise Invalid(f"rho={value} gives no item per secondary human with n_items={n_items}")


def _synthetic(
    session: Session, project: Project, body: SimulateBody, plan: Plan | None, common: dict[str, Any], criterion: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Planner options and settings of a simulation on synthetic matrices."""
    n_items = _or(body.n_items, project.item_count)
    if n_items < 1:
        raise Invalid("the project has no items yet: pass n_items")
    n_labels = _or(body.n_labels, len(project.labels))
    humans = session.scalar(
        select(func.count())
        .select_from(Rater)
        .where(Rater.project_id == project.id, Rater.kind.in_(("primary", "human")))
    )
    n_humans = body.n_humans or (plan.recipe.get("n_humans") if plan is not None else None) or max(humans or 0, 2)
    p_h, p_j = _or(body.p_h, _plan_value(plan, "p_h")), _or(body.p_j, _plan_value(plan, "p_j"))
    missing = [name for name, value in (("p_h", p_h), ("p_j", p_j)) if value is None]
    if missing:
        raise Invalid(f"pass {' and '.join(missing)}: the project has no plan from priors to take accuracies from")
    for accuracy in _as_list(p_h):
        if isinstance(accuracy, list) and len(accuracy) != n_humans:
            raise Invalid(f"a per-rater p_h list needs n_humans={n_humans} accuracies, got {len(accuracy)}")
    prevalence = body.prevalence
    if prevalence is None and n_labels == len(project.labels):
        prevalence = _primary_shares(session, project, criterion)
    if prevalence is not None and (len(prevalence) != n_labels or not np.isclose(sum(prevalence), 1.0)):
        raise Invalid(f"prevalence must be {n_labels} shares summing to 1 (one per label)")
    if body.rho is not None:
        rho = _as_list(body.rho)
    elif plan is not None and plan.m and project.item_count:
        rho = [min(plan.m / project.item_count, 1.0)]
    else:
        rho = DEFAULT_RHOS
    _check_rhos(rho, n_items)
    if body.clusters is not None and body.clusters > n_items:
        raise Invalid(f"clusters must be at most n_items={n_items}, got {body.clusters}")
    options = {
        "n_items": n_items,
        "n_humans": n_humans,
        "n_labels": n_labels,
        "p_h": p_h,
        "p_j": _as_list(p_j),
        "prevalence": prevalence,
        "rho": rho,
        "design": common["design"],
        "coefficient": common["coefficient"],
        "rule": common["rule"],
        "epsilon": common["epsilon"],
        "delta": common["delta"],
        "omega_threshold": common["omega_threshold"],
        "q": common["q"],
        "trials": body.trials,
        "clusters": body.clusters,
        "cluster_difficulty": body.cluster_difficulty,
    }
    settings = {
        **common,
        "replay": False,
        "criterion": criterion,
        "n_items": n_items,
        "n_humans": n_humans,
        "n_judges": len(options["p_j"]),
        "n_labels": n_labels,
        "p_h": p_h,
        "p_j": options["p_j"],
        "prevalence": prevalence,
        "rho": rho,
        "trials": body.trials,
        "clusters": body.clusters,
        "cluster_difficulty": body.cluster_difficulty,
    }
    return options, settings


def _replay(
    session: Session, project: Project, body: SimulateBody, common: dict[str, Any], criterion: str
) -> tuple[dict[str, Any], dict[str, Any], np.ndarray, np.ndarray]:
    """Planner options, settings and dense codes of a replay of the project's labels (docs/method.md §6)."""
    given = sorted(set(GENERATOR_FIELDS) & body.model_fields_set)
    if given:
        raise Invalid(f"a replay uses the project's own labels; remove {', '.join(given)}")
    matrix = current_matrix(session, project, criterion)
    codes = matrix.codes
    n_items = codes.shape[0]
    complete = np.asarray((codes >= 0).all(axis=0)) if n_items else np.zeros(codes.shape[1], dtype=bool)
    humans = [k for k in matrix.columns("primary") + matrix.columns("human") if complete[k]]
    judges = [k for k in matrix.columns("judge") if complete[k]]
    if len(humans) < 2 or not judges:
        raise Invalid(
            f"a replay needs at least two humans and one judge with a label on every item for criterion "
            f"{echo(criterion)}; the project has {len(humans)} such humans and {len(judges)} such judges "
            f"over {n_items} items"
        )
    rho = _as_list(body.rho) if body.rho is not None else DEFAULT_RHOS
    _check_rhos(rho, n_items)
    small = code_type(matrix.n_labels)
    options = {
        "n_labels": matrix.n_labels,
        "rho": rho,
        "design": common["design"],
        "coefficient": common["coefficient"],
        "primary": 0,
        "rule": common["rule"],
        "epsilon": common["epsilon"],
        "delta": common["delta"],
        "omega_threshold": common["omega_threshold"],
        "q": common["q"],
        "trials": body.trials,
    }
    settings = {
        **common,
        "replay": True,
        "criterion": criterion,
        "n_items": n_items,
        "n_humans": len(humans),
        "n_judges": len(judges),
        "n_labels": matrix.n_labels,
        "rho": rho,
        "trials": body.trials,
        "humans": [matrix.raters[k].external_id for k in humans],
        "judges": [matrix.raters[k].external_id for k in judges],
        "label_seq": matrix.label_seq,
    }
    return options, settings, codes[:, humans].astype(small), codes[:, judges].astype(small)


def resolve(session: Session, project: Project, body: SimulateBody) -> tuple[SimulationSpec, SimulationSettings]:
    """The simulation ``body`` asks for, defaults filled from the project; 422 on invalid settings."""
    criterion = _or(body.criterion, project.criteria[0])
    if criterion not in project.criteria:
        raise Invalid(f"unknown criterion {echo(criterion)}; the project's are {', '.join(project.criteria)}")
    plan = current_plan(session, project.id)
    common = _decision_settings(body, project, plan)
    seed = body.seed if body.seed is not None else secrets.randbelow(2**63)
    if body.replay:
        options, settings, humans, judges = _replay(session, project, body, common, criterion)
        spec = SimulationSpec({**options, "seed": seed}, common["alpha_sig"], humans, judges)
    else:
        options, settings = _synthetic(session, project, body, plan, common, criterion)
        spec = SimulationSpec({**options, "seed": seed}, common["alpha_sig"])
    return spec, SimulationSettings(**settings, seed=seed, work=spec.work)


def queue_job(session: Session, job: Simulation, *, limit: int, per_project: int, per_key: int) -> None:
    """Insert a queued job unless ``limit`` jobs are already queued or running service-wide, ``per_project``
    of the job's project, or ``per_key`` of the key that asks for it (``job.key_id``) in any project (429)."""
    if session.get_bind().dialect.name == "postgresql":  # SQLite: the write transaction already serialises
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SUBMIT_LOCK})
    in_flight = select(func.count()).select_from(Simulation).where(Simulation.status.in_(ACTIVE))
    active = session.scalar(in_flight) or 0
    if active >= limit:
        raise TooManyRequests(
            f"{active} simulations are already queued or running (the limit is {limit}); retry when one finishes"
        )
    mine = session.scalar(in_flight.where(Simulation.project_id == job.project_id)) or 0
    if mine >= per_project:
        raise TooManyRequests(
            f"this project has {mine} simulations queued or running (at most {per_project} at once); "
            "retry when one finishes, or cancel one (DELETE)"
        )
    keys = session.scalar(in_flight.where(Simulation.key_id == job.key_id)) or 0
    if keys >= per_key:
        raise TooManyRequests(
            f"this key has {keys} simulations queued or running in its projects (at most {per_key} at once); "
            "retry when one finishes, or cancel one (DELETE)"
        )
    session.add(job)
    session.flush()
