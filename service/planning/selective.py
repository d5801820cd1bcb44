"""Selective evaluation of a project: calibrate the judges' confidence thresholds on the human-labelled
items and send what no judge keeps to the humans' lists (docs/method.md §3c)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner import optional_float
from planner.selective import calibrate_selective, majority_labels, selective_assignment
from service.core.errors import Conflict, Invalid, echo
from service.core.sql import driver_rows, insert_many
from service.data.labels import ONE_ORDER
from service.data.models import Assignment, Item, Project, Rater, table_of
from service.data.projects import lock_project
from service.data.queries import external_ids
from service.matrices.matrix import LabelMatrix
from service.matrices.store import current_matrix
from service.planning.lists import PANELS
from service.planning.plans import current_plan
from service.schemas.selective import SHOWN_ESCALATED, CurveRead, SelectiveCreate, SelectiveRead, StageRead

CURVE_STEP = 10
"""The curve shows every tenth candidate threshold."""


def judge_confidences(session: Session, matrix: LabelMatrix, columns: list[int]) -> np.ndarray:
    """``(n_items, len(columns))`` (matrix order): each judge's current confidence, NaN where none."""
    out = np.full((matrix.item_ids.size, len(columns)), np.nan)
    sorter = np.argsort(matrix.item_ids)
    for j, column in enumerate(columns):
        rows = driver_rows(
            session,
            "SELECT item_id, confidence FROM current_labels "
            f"WHERE rater_id = ? AND criterion = ? AND confidence IS NOT NULL AND {ONE_ORDER}",
            (matrix.raters[column].id, matrix.criterion),
        )
        if not rows:
            continue
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        at = sorter[np.searchsorted(matrix.item_ids, ids, sorter=sorter)]
        out[at, j] = np.array([r[1] for r in rows], dtype=float)
    return out


def _cascade(matrix: LabelMatrix, named: list[str] | None) -> list[int]:
    judges = matrix.columns("judge")
    if not judges:
        raise Invalid("the project has no judge rater")
    if named is None:
        return judges
    by_name = {matrix.raters[k].external_id: k for k in judges}
    unknown = [n for n in named if n not in by_name]
    if unknown:
        raise Invalid(f"judges must name judge raters of this project; not one: {', '.join(echo(n) for n in unknown)}")
    if len(set(named)) != len(named):
        raise Invalid("judges must not repeat a rater")
    return [by_name[n] for n in named]


def _escalation_targets(session: Session, project: Project, named: list[str] | None) -> list[Rater]:
    if not named:
        return []
    raters = {r.external_id: r for r in session.scalars(select(Rater).where(Rater.project_id == project.id))}
    wrong = [n for n in named if n not in raters or raters[n].kind != "human"]
    if wrong:
        raise Invalid(f"escalate_to must name secondary human raters; not one: {', '.join(echo(n) for n in wrong)}")
    return [raters[n] for n in dict.fromkeys(named)]


def selective_evaluation(session: Session, project: Project, body: SelectiveCreate) -> SelectiveRead:
    """Calibrate, apply to the corpus, and append the escalated items to ``escalate_to``'s lists (§3c).

    Every check (criterion, judges, raters, plan) runs before anything is written.
    """
    criterion = body.criterion or project.criteria[0]
    if criterion not in project.criteria:
        raise Invalid(f"unknown criterion {echo(criterion)}; the project has {project.criteria}")
    matrix = current_matrix(session, project, criterion)
    cascade = _cascade(matrix, body.judges)
    targets = _escalation_targets(session, project, body.escalate_to)
    plan = current_plan(session, project.id) if targets else None
    if targets and plan is None:
        raise Conflict("escalate_to appends to planned lists: create a plan first", code="no_plan")
    if plan is not None and plan.design in PANELS:
        raise Conflict(
            f"a {plan.design} panel's lists carry inclusion probabilities; escalated items would bias its weights",
            code="panel_plan",
        )
    humans = matrix.columns("primary", "human")
    if not humans:
        raise Invalid("the project has no human rater: nothing to calibrate against")
    codes = matrix.codes
    majority = majority_labels(codes, humans)
    conf = judge_confidences(session, matrix, cascade)
    labelled = codes[:, cascade] >= 0
    usable = (majority >= 0) & np.all(labelled & np.isfinite(conf), axis=1)
    disagree = codes[:, cascade] != majority[:, None]
    grid = np.linspace(0.0, 1.0, body.grid_size)
    c = calibrate_selective(
        conf[usable], disagree[usable], alpha=body.alpha, delta=body.delta, grid=grid, split_delta=body.split_delta
    )
    names = [matrix.raters[k].external_id for k in cascade]
    thresholds = [s.threshold for s in c.stages]
    in_corpus = np.any(labelled, axis=1)
    taken = selective_assignment(np.where(labelled, conf, np.nan), thresholds)
    escalated_rows = np.flatnonzero(in_corpus & (taken < 0))
    escalated_ids = matrix.item_ids[escalated_rows]
    added = (
        {r.external_id: _append_to_list(session, project, plan.id, r, escalated_ids) for r in targets} if plan else {}
    )
    shown = _external_ids(session, escalated_ids[:SHOWN_ESCALATED])
    curve = c.curve
    pick = slice(None, None, CURVE_STEP)
    return SelectiveRead(
        criterion=criterion,
        alpha=c.alpha,
        delta=c.delta,
        split_delta=c.split_delta,
        n_calibration=int(usable.sum()),
        stages=[
            StageRead(
                judge=names[s.judge],
                threshold=optional_float(s.threshold),
                n_reached=s.n_reached,
                n_kept=s.n_kept,
                disagreements=s.disagreements,
                risk=optional_float(s.risk),
                upper_bound=optional_float(s.upper_bound),
                delta=s.delta,
                defined=s.defined,
                reason=s.reason,
            )
            for s in c.stages
        ],
        coverage=optional_float(c.coverage),
        risk=optional_float(c.risk),
        guarantee=c.guarantee,
        curve=CurveRead(
            thresholds=curve.thresholds[pick].tolist(),
            coverage=curve.coverage[pick].tolist(),
            risk=[optional_float(x) for x in curve.risk[pick].tolist()],
            upper_bound=[optional_float(x) for x in curve.upper_bound[pick].tolist()],
        ),
        n_items=int(in_corpus.sum()),
        kept_by={name: int((taken == j).sum()) for j, name in enumerate(names)},
        n_escalated=int(escalated_rows.size),
        escalated=shown,
        escalated_to=added,
    )


def _external_ids(session: Session, item_ids: np.ndarray) -> list[str]:
    """The items' external ids, in the order given."""
    wanted = [int(i) for i in item_ids]
    found = external_ids(session, Item, wanted)
    return [found[i] for i in wanted]


def _append_to_list(session: Session, project: Project, plan_id: str, rater: Rater, item_ids: np.ndarray) -> int:
    """Append the items not on ``rater``'s list yet to its end (the next batches); how many were added."""
    lock_project(session, project.id)
    held = set(session.scalars(select(Assignment.item_id).where(Assignment.rater_id == rater.id)))
    new = [int(i) for i in item_ids if int(i) not in held]
    start = (session.scalar(select(func.max(Assignment.position)).where(Assignment.rater_id == rater.id)) or -1) + 1
    insert_many(
        session,
        table_of(Assignment),
        ("project_id", "rater_id", "item_id", "plan_id", "position", "inclusion_probability"),
        [(project.id, rater.id, item, plan_id, start + k, None) for k, item in enumerate(new)],
    )
    return len(new)
