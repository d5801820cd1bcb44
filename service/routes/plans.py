"""Plans: the overlap recipe and design in force for a project."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from service.core.errors import NotFound, error_responses
from service.core.offload import ClientGone, ensure_connected, on_thread_while_connected
from service.data.idempotency import IdempotencyKey, idempotent_write, replayed, request_fingerprint
from service.data.models import Plan
from service.data.outbox import emit
from service.deps import (
    PrincipalDep,
    ProjectForPM,
    ProjectForViewer,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
    in_writer_turn,
)
from service.planning.plans import create_plan, current_plan, plan_progress
from service.schemas.plans import PlanCreate, PlanRead

router = APIRouter(prefix="/projects/{pid}/plan", tags=["plans"])


def plan_read(plan: Plan, progress: dict[str, Any] | None = None) -> PlanRead:
    """The public view of a plan."""
    return PlanRead(
        id=plan.id,
        purpose=plan.purpose,
        source=plan.source,
        design=plan.design,
        seed=plan.seed,
        m=plan.m,
        label_seq=plan.label_seq,
        created_at=plan.created_at,
        recipe={key: value for key, value in plan.recipe.items() if key != "check"},
        check=plan.recipe.get("check"),
        progress=progress,
    )


@router.post("", status_code=201, response_model=PlanRead, responses=error_responses(401, 403, 404, 409, 422, 429))
async def post_plan(
    pid: ProjectId,
    project: ProjectForPM,
    body: PlanCreate,
    request: Request,
    read: ReadSession,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    idem: IdempotencyKey = None,
) -> Response:
    """Compute and store the plan in force (docs/method.md §4–5): recipe, design and per-rater lists.

    `source=prior` plans from `p_h`, `p_j`; `source=pilot` from the overlap in hand. The
    design `auto` picks, among random, strat, disjoint and seq-coverage, the one with the lowest
    simulated wrong-decision rate (`check`: each candidate's FR, FA, wrong-decision and
    inconclusive rates with Monte Carlo SE); when the simulated FR of the plan breaks the
    recipe's promise, `m` is raised until it holds (`check.raised_from`). Lists of
    secondaries are drawn now (sequential designs: at each rater's first batch), seeded and
    stored; re-planning keeps labels and items already assigned. The plan is computed before
    the project's write lock is taken and stored only if the labels, items, raters and settings
    it read are still those of the project (else computed again): `label_seq` is the labels' it
    was computed from. 429 with `Retry-After` when this project, or this key in all its projects,
    already has its share of plan computations in flight (docs/operations.md, "Fair sharing"). When the
    client disconnects, the plan's computation stops (a large one's child process is killed) and nothing is
    stored (docs/operations.md, "Work limits").

    A numeric project (`scale: "numeric"`) is planned from its pilot only (`source=pilot`, design `auto` or
    `disjoint`, no `budget`; else 409 `numeric_scale`): the recipe from the moments of the per-item alignment
    difference, the check by resampling the pilot's items, disjoint lists stratified on the primary's score
    bin; `purpose=rank` sizes m to order the judges `delta_min` apart in their ranking score, from the
    pilot's variance of a judge pair's margin under the disjoint design (docs/method.md §4b).
    """

    fingerprint = request_fingerprint(request, body.model_dump_json().encode())
    replay = await run_in_threadpool(replayed, read, principal, idem, fingerprint)  # before the computation
    if replay is not None:
        return replay

    def commit(store: Callable[[], Plan]) -> JSONResponse:
        ensure_connected()  # a client that left stores nothing

        def write() -> tuple[int, PlanRead]:
            plan = store()
            announced = {
                "plan": plan.id,
                "purpose": plan.purpose,
                "design": plan.design,
                "m": plan.m,
                "label_seq": plan.label_seq,
            }
            emit(session, pid, "plan.created", announced, retry_window_seconds=settings.webhook_retry_window_seconds)
            return 201, plan_read(plan, plan_progress(session, project, plan))

        # the draft is done: the store waits for the writer's turn in the event loop, holding no pool thread
        return anyio.from_thread.run(
            in_writer_turn, request, lambda: idempotent_write(session, principal, idem, fingerprint, write)
        )

    n_resamples = min(settings.bootstrap_resamples, 500)
    # 429 when this project, or this key, has its share in flight
    with request.app.state.plan_slots.slot(project.id, principal.key_id):
        try:
            response = await on_thread_while_connected(
                request,
                partial(create_plan, read, session, project.id, body, n_resamples=n_resamples, commit=commit),
                limiter=request.app.state.plan_drafts,
            )
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the client closed the connection
    request.app.state.strata_warmer.poke()  # the batches' modal strata, computed before the first batch asks
    return response


@router.get("", response_model=PlanRead, responses=error_responses(401, 403, 404))
def get_plan(pid: ProjectId, project: ProjectForViewer, session: ReadSession) -> PlanRead:
    """The plan in force and its progress (404 when there is none yet)."""
    plan = current_plan(session, project.id)
    if plan is None:
        raise NotFound("this project has no plan yet", code="no_plan")
    return plan_read(plan, plan_progress(session, project, plan))
