"""Plans: the overlap recipe from priors or the pilot in hand, the design, and per-rater lists."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.codes import code_type
from planner.designs import design_pool_size, neyman, strat
from planner.neyman import prior_cells
from planner.recipes import rank_recipe
from service.core.errors import Conflict
from service.core.offload import off_worker
from service.data.models import Assignment, CurrentLabel, Plan, Project, Rater, new_public_id
from service.data.projects import lock_project
from service.matrices.matrix import LabelMatrix
from service.matrices.store import current_matrix
from service.planning.design_checks import (
    _candidate_checks,
    _design,
    _entropy_design,
    _plan_check,
    _sized_for_monitoring,
)
from service.planning.lists import SEQUENTIAL, ListCorpus, ensure_assignments, monitoring_budget, primary_strata
from service.planning.score_plans import score_plan
from service.planning.sizing import (
    _m_by_estimator,
    _moments,
    _slice_recipe,
    _variances,
    certification,
    feasible_with,
    judge_agreement,
    promise_iv,
    ranking_variance,
    recipe_dict,
)
from service.planning.slice_plans import slice_strata, sliced_panel
from service.planning.strata import feature_name, feature_strata, feature_stratum_sds
from service.planning.verdict_strata import verdict_strata
from service.schemas.plans import PlanCreate
from service.schemas.projects import DecisionSettings

CHECK_THREADS = 2
"""Threads that simulate a plan's checks at once (numpy releases the GIL in their array work)."""
T = TypeVar("T")
UNKNOWN_SD = 0.5  # S_h of a stratum with no judge-primary pair yet: the largest a share can have


def current_plan(session: Session, project_id: str) -> Plan | None:
    """The plan in force: the project's newest."""
    return session.scalar(
        select(Plan).where(Plan.project_id == project_id).order_by(Plan.created_at.desc(), Plan.id.desc()).limit(1)
    )


def plan_progress(session: Session, project: Project, plan: Plan | None) -> dict[str, Any] | None:
    """How far the secondaries are through the plan's lists: the least advanced, and labels still owed."""
    if plan is None:
        return None
    done = {
        rid: n
        for rid, n in session.execute(
            select(Assignment.rater_id, func.count())
            .join(
                CurrentLabel,
                (CurrentLabel.item_id == Assignment.item_id) & (CurrentLabel.rater_id == Assignment.rater_id),
            )
            .where(Assignment.project_id == project.id)
            .group_by(Assignment.rater_id)
        )
    }
    humans = session.execute(
        select(Rater.id, Rater.external_id)
        .where(Rater.project_id == project.id, Rater.kind == "human")
        .order_by(Rater.id)
    ).all()
    listed = dict(
        session.execute(
            select(Assignment.rater_id, func.count())
            .where(Assignment.project_id == project.id)
            .group_by(Assignment.rater_id)
        ).all()
    )
    target = plan.m or 0
    per = [done.get(rid, 0) for rid, _ in humans]
    held = [max(target, listed.get(rid, 0)) for rid, _ in humans]  # a list extended past m (§8.1) owes its extension
    return {
        "plan": plan.id,
        "m_target": plan.m,
        "m_budget": monitoring_budget(plan),
        "design": plan.design,
        "m_done_min": min(per) if per else 0,
        "remaining_labels": sum(max(0, h - n) for h, n in zip(held, per, strict=True)),
        "raters": [{"rater": name, "done": n, "listed": h} for (_, name), n, h in zip(humans, per, held, strict=True)],
    }


def _neyman_panel(
    body: PlanCreate,
    moments: dict[str, Any],
    matrix: LabelMatrix,
    m: int,
    seed: int,
    features: tuple[np.ndarray, list[str]] | None,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The Neyman panel over the request's strata, its inclusion probabilities and a summary."""
    agree = judge_agreement(matrix)
    feature = feature_name(body.strata)
    extra: dict[str, Any] = {}
    if feature is not None:
        assert features is not None  # read by the request (feature_strata)
        strata, names = features
        sds, source = feature_stratum_sds(body, matrix, strata, agree)
        extra = {"feature": feature, "sd_source": source}
    elif agree is None or not (agree >= 0).any():
        raise Conflict(
            "the neyman design stratifies on judge-primary agreement: load the judge's and the primary's labels first",
            code="no_strata",
        )
    elif (variances := _variances(body, moments, matrix)) is None:
        raise Conflict("the pilot moments give no stratum spread; plan the neyman design from priors", code="no_strata")
    elif body.strata == "labels":
        assert body.p_h is not None and body.p_j is not None
        n_labels = matrix.n_labels
        judge, primary = matrix.codes[:, matrix.columns("judge")[0]], matrix.codes[:, matrix.columns("primary")[0]]
        strata = np.where(agree < 0, n_labels * n_labels, primary * n_labels + judge)
        b_rate = prior_cells(body.p_h, body.p_j, n_labels=n_labels)[1].ravel()
        sds = [*np.sqrt(b_rate * (1 - b_rate)).tolist(), UNKNOWN_SD]
        names = [f"primary label {a}, judge label {b}" for a in range(n_labels) for b in range(n_labels)]
        names.append("judge or primary label missing")
    else:
        strata = np.where(agree < 0, 2, agree)
        sds = [*variances.stratum_sd, UNKNOWN_SD]
        names = ["judge and primary disagree", "judge and primary agree", "judge or primary label missing"]
    sizes = np.bincount(strata, minlength=len(sds))
    if m < int(np.minimum(sizes, 2).sum()):
        raise Conflict(f"m={m} is too small for a Neyman panel: every stratum needs 2 items", code="m_too_small")
    lists, inclusion = neyman(strata, m, sds=sds, raters=["panel"], rng=seed)
    panel = lists["panel"]
    taken = np.bincount(strata[panel], minlength=len(sds))
    summary = {
        "strata": names,
        "stratum_sizes": sizes.tolist(),
        "stratum_sd": sds,
        "allocation": taken.tolist(),
        "weighting": "ht",
        **extra,
    }
    return panel, inclusion[panel], summary


@dataclass(frozen=True)
class PlanDraft:
    """What a plan computes from the labels in hand, before it is stored."""

    design: str
    m: int | None
    document: dict[str, Any]
    panel: list[int]
    panel_inclusion: list[float]


PLAN_ATTEMPTS = 2
"""Drafts computed outside the project lock; when the project moved on under each, the next is computed
under it (``create_plan``)."""


class StaleDraft(Exception):
    """The project's labels, corpus, raters or settings changed while its plan was drafted."""


@dataclass(frozen=True)
class DraftedPlan:
    """A plan's draft, the matrix it was computed from and what the project was then (``plan_inputs``)."""

    inputs: tuple[Any, ...]
    matrix: LabelMatrix
    draft: PlanDraft


def plan_inputs(session: Session, project: Project) -> tuple[Any, ...]:
    """What a plan is computed from: the labels in hand (``label_seq``), the corpus, the raters and the
    settings. Equal inputs give the same plan for the same seed."""
    raters = session.execute(
        select(Rater.id, Rater.kind).where(Rater.project_id == project.id).order_by(Rater.id)
    ).all()
    return (
        project.label_seq,
        project.item_count,
        tuple(project.labels),
        tuple(project.criteria),
        sorted(project.decision.items()),
        tuple(map(tuple, raters)),
    )


def drafted_plan(session: Session, project: Project, body: PlanCreate, seed: int, *, n_resamples: int) -> DraftedPlan:
    """The plan computed from the project's labels as ``session`` sees them; writes nothing, takes no lock.

    The computation runs off the web worker for a large project (``service.core.offload.off_worker``),
    which receives the codes alone (``_drafting``).
    """
    promise_iv(body, project.decision_settings)
    inputs = plan_inputs(session, project)
    if project.scale == "numeric":
        matrix, design, m, document = score_plan(session, project, body, seed, n_resamples=n_resamples)
        return DraftedPlan(inputs, matrix, PlanDraft(design, m, document, [], []))
    matrix = current_matrix(session, project, project.criteria[0])
    if matrix.raw.shape[0] == 0:
        raise Conflict("the project has no items to plan for; upload items first", code="no_items")
    feature = feature_name(body.strata)
    features = None if feature is None else feature_strata(session, matrix, feature)
    if body.slices is not None:  # a per-slice plan's strata are its slices (it is a strat plan: no neyman strata)
        features = slice_strata(session, matrix, body.slices)
    decision = project.decision_settings
    draft = off_worker(
        matrix.raw.size,
        plan_draft,
        body,
        decision,
        _drafting(matrix),
        seed,
        features,
        n_resamples=n_resamples,
        panel_strata=verdict_strata(session, project, matrix),
    )
    return DraftedPlan(inputs, matrix, draft)


def _drafting(matrix: LabelMatrix) -> LabelMatrix:
    """What ``plan_draft`` reads of ``matrix``: the codes in their compact type, without the arrival order;
    a tenth of the bytes to send to a child process."""
    return replace(matrix, raw=matrix.codes.astype(code_type(matrix.n_labels)), order=np.empty((0, 0), dtype=np.int64))


def create_plan(
    read: Session,
    write: Session,
    project_id: str,
    body: PlanCreate,
    *,
    n_resamples: int,
    commit: Callable[[Callable[[], Plan]], T],
) -> T:
    """Compute the plan from the labels in hand, then store it; ``commit(store)`` runs the write unit
    (e.g. an idempotent write) around ``store``, which returns the stored plan.

    The draft (recipe, simulated check, design, panel) is computed from ``read`` before any lock,
    so writers of the project are not held up by it. ``store`` takes the project lock, re-reads
    the project and stores the draft only if nothing it was computed from changed (``plan_inputs``);
    else the write unit is rolled back and the plan drafted again from the newer labels, and after
    ``PLAN_ATTEMPTS`` drafts overtaken that way, computed under the lock. A stored plan is always
    the plan of the labels in hand when it was stored (its ``label_seq``).
    """
    seed = body.seed if body.seed is not None else secrets.randbelow(2**62)
    for attempt in range(PLAN_ATTEMPTS + 1):
        drafted: DraftedPlan | None = None
        if attempt < PLAN_ATTEMPTS:
            project = read.get(Project, project_id, populate_existing=True)
            assert project is not None
            drafted = drafted_plan(read, project, body, seed, n_resamples=n_resamples)
            read.commit()  # end the read snapshot: the next draft sees the labels written meanwhile

        def store(drafted: DraftedPlan | None = drafted) -> Plan:
            lock_project(write, project_id)
            project = write.get(Project, project_id, populate_existing=True)
            assert project is not None
            if drafted is None:
                drafted = drafted_plan(write, project, body, seed, n_resamples=n_resamples)
            elif drafted.inputs != plan_inputs(write, project):
                raise StaleDraft
            return _stored_plan(write, project, body, seed, drafted)

        try:
            return commit(store)
        except StaleDraft:
            write.rollback()  # releases the lock; the project moved on: draft again
    raise AssertionError("the last attempt computes under the lock")  # pragma: no cover


def _stored_plan(session: Session, project: Project, body: PlanCreate, seed: int, drafted: DraftedPlan) -> Plan:
    """Store ``drafted`` as the plan in force (the caller holds the project lock); lists of existing
    secondaries are drawn now (non-sequential designs)."""
    draft = drafted.draft
    plan = Plan(
        id=new_public_id("plan"),
        project_id=project.id,
        purpose=body.purpose,
        source=body.source,
        design=draft.design,
        seed=seed,
        m=draft.m,
        recipe=draft.document,
        label_seq=project.label_seq,
        params={**body.model_dump(), "panel": draft.panel, "panel_inclusion": draft.panel_inclusion},
    )
    session.add(plan)
    session.flush()
    if draft.m is not None and draft.design not in SEQUENTIAL:
        corpus = ListCorpus(drafted.matrix)
        for rater in session.scalars(select(Rater).where(Rater.project_id == project.id, Rater.kind == "human")):
            ensure_assignments(session, plan, rater, corpus)
    return plan


def plan_draft(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    seed: int,
    features: tuple[np.ndarray, list[str]] | None,
    *,
    n_resamples: int,
    panel_strata: tuple[np.ndarray, list[str]] | None = None,
) -> PlanDraft:
    """The plan's recipe, design, document and panel from the labels in hand (docs/method.md §4–5); pure.

    ``features`` are the strata of the feature the request stratifies on, if any (``feature_strata``).
    ``panel_strata`` are the strata a Strat panel is drawn over with their names (a pairwise project's
    ``verdict_strata``); by default the primary's label.
    The simulated checks run on ``CHECK_THREADS`` threads; the document is the same for a seed.
    """
    threads = ThreadPoolExecutor(CHECK_THREADS)
    try:
        return _draft(
            body, decision, matrix, seed, features, n_resamples=n_resamples, threads=threads, panel_strata=panel_strata
        )
    finally:
        threads.shutdown(cancel_futures=True)


def _draft(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    seed: int,
    features: tuple[np.ndarray, list[str]] | None,
    *,
    n_resamples: int,
    threads: Executor,
    panel_strata: tuple[np.ndarray, list[str]] | None = None,
) -> PlanDraft:
    """``plan_draft`` with its simulations on ``threads``: a prior plan's estimator check runs beside
    the design checks (it does not depend on the design)."""
    n_items = matrix.raw.shape[0]
    humans = matrix.columns("primary", "human")
    n_humans = body.n_raters or max(len(humans), 2)
    by_estimator = None
    if body.source == "prior":
        by_estimator = threads.submit(_m_by_estimator, body, decision, None, matrix, n_humans)
    by_entropy = _entropy_design(body, matrix)
    candidates = _candidate_checks(body, decision, matrix, n_humans, n_resamples, seed, threads)
    design, entropy, why, warnings = _design(body, by_entropy, candidates.checks)
    # A design chosen by its simulated rate at the compared overlap is served at that overlap: re-planned at
    # its own (a shared panel's smaller) m it would be served where it was never compared (issue 29).
    chosen_at_compared = body.design == "auto" and bool(candidates.checks) and candidates.recipe is not None
    pool_size = 1 if chosen_at_compared else design_pool_size(design, n_humans)
    moments = _moments(body, matrix, decision, n_resamples, pool_size)
    lattice = moments.pop("lattice", None)
    if body.purpose == "certify" and pool_size == 1 and candidates.recipe is not None:
        recipe = candidates.recipe  # the design-free recipe: this design's, or the one it was compared at
    elif body.purpose == "certify":
        recipe = certification(
            decision,
            moments["mu_d"],
            moments["sigma0_sq"],
            n_items=n_items,
            n_humans=n_humans,
            pool_size=pool_size,
            lattice=lattice,
            coefficient=moments.get("coefficient", "po"),
        )
    else:
        n_judges = body.n_judges or max(len(matrix.columns("judge")), 2)
        assert body.delta_min is not None
        variance = ranking_variance(
            moments, body.delta_min, n_labels=matrix.n_labels, n_humans=n_humans, n_judges=n_judges
        )
        moments["ranking_variance"] = variance
        recipe = rank_recipe(
            variance,
            body.delta_min,
            n_items=n_items,
            n_humans=n_humans,
            n_judges=n_judges,
            alpha_sig=decision.alpha_sig,
        )
    m = body.m if body.m is not None else recipe.m
    notes = []
    if m is not None and m > n_items:
        notes.append(f"the recipe asks for {m} overlap items but the corpus has {n_items}: every item is planned")
        m = n_items
    check, m, raised = _plan_check(body, decision, matrix, n_humans, design, m, candidates, seed)
    notes += raised
    document = {
        **recipe_dict(recipe),
        "m_planned": m,
        "n_items": n_items,
        "n_humans": n_humans,
        "moments": moments,
        "design": design,
        "design_reason": why,
        "stratum_entropy": entropy,
        "warnings": warnings + notes,
        "purpose": body.purpose,
        "by_estimator": by_estimator.result()
        if by_estimator is not None
        else _m_by_estimator(body, decision, moments, matrix, n_humans),
        "check": check,
    }
    if body.purpose == "certify":
        document["promise"] = body.promise
    if body.promise == "judge":  # both promises' m shown (docs/method.md §4, item 6)
        document["m_per_rater"] = certification(
            decision, moments["mu_d"], moments["sigma0_sq"], n_items=n_items, n_humans=n_humans, lattice=lattice
        ).m
    if body.purpose == "certify" and not recipe.feasible:
        document["feasible_with"] = feasible_with(
            decision,
            moments["mu_d"],
            moments["sigma0_sq"],
            n_items=n_items,
            n_humans=n_humans,
            m=recipe.m,
            pool_size=pool_size,
            coefficient=moments.get("coefficient", "po"),
        )
    if body.purpose == "certify" and m is not None:
        m = _sized_for_monitoring(body, decision, matrix, n_humans, design, m, candidates, seed, document)
    panel: list[int] = []
    panel_inclusion: list[float] = []
    if m is not None and body.slices is not None:
        assert features is not None  # slice_strata, read by the request
        slice_recipe = partial(
            _slice_recipe, decision, moments, n_humans=n_humans, pool_size=pool_size, lattice=lattice
        )
        agree = judge_agreement(matrix)
        m, panel, panel_inclusion, document["slices"] = sliced_panel(
            body, decision, matrix, seed, features, slice_recipe, agree
        )
        document["m_planned"] = m
    elif m is not None and design == "strat":
        strata = primary_strata(matrix) if panel_strata is None else panel_strata[0]
        if panel_strata is not None:
            document["strat_strata"] = panel_strata[1]
        index = strat(strata, m, raters=["panel"], rng=seed)["panel"]
        drawn = np.bincount(strata[index], minlength=strata.max() + 1)
        share = drawn[strata[index]] / np.bincount(strata)[strata[index]]  # strata the panel drew from only
        panel, panel_inclusion = matrix.item_ids[index].tolist(), share.tolist()
    elif m is not None and design == "neyman":
        index, probability, document["neyman"] = _neyman_panel(body, moments, matrix, m, seed, features)
        panel, panel_inclusion = matrix.item_ids[index].tolist(), probability.tolist()
    return PlanDraft(design, m, document, panel, panel_inclusion)
