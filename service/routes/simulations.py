"""Simulations of a plan (docs/method.md §6): small runs answered at once, large ones as polled jobs.

A run over ``simulation_max_work`` is refused (413), up to ``simulation_sync_limit`` it runs
in the request (in a child process killed if the client leaves, never on the event loop), otherwise it
becomes a job on the job queue, run by a job worker (:mod:`service.simulations.jobs`).
Defaults and sizing: :mod:`service.simulations.requests`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, Response

from service.core.errors import Conflict, Invalid, echo, error_responses
from service.core.limits import bounded_work
from service.core.offload import ClientGone, run_while_connected
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.models import Simulation, new_public_id
from service.data.queries import project_simulation
from service.deps import (
    PrincipalDep,
    ProjectForPM,
    ProjectForPMWrite,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
    written,
)
from service.schemas.simulations import (
    SimulateBody,
    SimulationJob,
    SimulationQueued,
    SimulationRun,
)
from service.simulations.jobs import cancel_job, enqueue_simulation, run_simulation
from service.simulations.requests import JOBS_PER_WORKER, queue_job, resolve

router = APIRouter(prefix="/projects", tags=["simulations"])
SimulationId = Annotated[str, Path(description="The simulation job's id.")]


@router.post(
    "/{pid}/simulate",
    response_model=SimulationRun,
    responses={
        202: {"model": SimulationQueued, "description": "Too large to answer at once: a job to poll."},
        **error_responses(401, 403, 404, 409, 413, 422, 429),
    },
)
async def post_simulation(
    pid: ProjectId,
    project: ProjectForPM,
    body: SimulateBody,
    request: Request,
    session: ReadSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    idem: IdempotencyKey = None,
) -> Response:
    """Simulate the plan in force, or the given settings, before paying for labels (docs/method.md §6).

    Each grid cell (human accuracy x `rho` x design x coefficient) reports bias, std and
    reliability of the human-pool score and the false-rejection, false-approval and
    wrong-decision rates of the judge decision; `min_rho` is the smallest `rho` of each
    curve whose reliability reaches `1 - alpha_sig`. `replay: true` subsamples the
    project's own dense labels instead of synthetic ones. Runs up to the sync limit answer
    200 with the result; larger ones answer 202 with a job to poll at `poll`; over the
    work limit 413; with too many jobs in flight 429 (service-wide, this project's or this key's
    share; docs/operations.md, "Fair sharing"). A run answered at once computes in a child process that
    is killed when the client disconnects.
    """
    spec, resolved = await run_in_threadpool(resolve, session, project, body)
    bounded_work(
        {"units (trials x grid cells x items x raters)": spec.work},
        settings.simulation_max_work,
        setting="simulation_max_work",
        code="simulation_too_large",
        advice="lower trials, the grid or n_items",
    )
    fingerprint = request_fingerprint(request, body.model_dump_json().encode())
    if spec.work <= settings.simulation_sync_limit:
        try:  # 429 when this project, or this key, has its share of synchronous simulations in flight
            with request.app.state.simulation_slots.slot(project.id, principal.key_id):
                # in a child process, killed if the client leaves
                result = await run_while_connected(request, run_simulation, spec)
        except ClientGone:
            return Response(status_code=499)  # nobody reads it: the client closed the connection
        except ValueError as exc:  # a setting the checks above let through
            raise Invalid(str(exc)) from exc
        run = SimulationRun(settings=resolved, result=result)
        if idem is None:
            return JSONResponse(jsonable_encoder(run))
        return await written(
            request, lambda writer: idempotent_write(writer, principal, idem, fingerprint, lambda: (200, run))
        )

    job = Simulation(
        id=new_public_id("sim"),
        project_id=pid,
        key_id=principal.key_id,
        status="queued",
        done=0,
        total=spec.cells,
        params={"settings": resolved.model_dump(mode="json")},
    )
    queued = SimulationQueued(
        id=job.id, status="queued", poll=request.app.url_path_for("get_simulation", pid=pid, sim_id=job.id)
    )

    inserted = []  # empty when the Idempotency-Key replays an earlier response

    def write(writer: WriteSession) -> tuple[int, SimulationQueued]:
        queue_job(
            writer,
            job,
            limit=settings.simulation_workers * JOBS_PER_WORKER,
            per_project=settings.simulations_per_project,
            per_key=settings.simulations_per_key,
        )
        enqueue_simulation(writer, job.id, spec, attempts=settings.simulation_attempts)
        inserted.append(job.id)
        return 202, queued

    response = await written(
        request, lambda writer: idempotent_write(writer, principal, idem, fingerprint, lambda: write(writer))
    )
    runner = getattr(request.app.state, "simulations", None)
    if inserted and runner is not None:  # committed: this process's runner claims it at once
        runner.poke()
    return response


@router.get("/{pid}/simulations/{sim_id}", response_model=SimulationJob, responses=error_responses(401, 403, 404))
def get_simulation(pid: ProjectId, project: ProjectForPM, sim_id: SimulationId, session: ReadSession) -> SimulationJob:
    """A simulation job: its status, progress in grid cells (`done` of `total`), then its result or error.

    A job whose worker stopped before finishing it is taken over by another worker (it runs
    again from the start, to the same result); one whose workers stopped on it too often is
    reported `failed`.
    """
    return _job(project_simulation(session, project.id, sim_id))


def _job(job: Simulation) -> SimulationJob:
    return SimulationJob(
        id=job.id,
        status=job.status,
        done=job.done,
        total=job.total,
        settings=job.params["settings"],
        result=job.result,
        error=job.error,
        created_at=job.created_at,
        finished_at=job.finished_at,
    )


@router.delete(
    "/{pid}/simulations/{sim_id}", response_model=SimulationJob, responses=error_responses(401, 403, 404, 409)
)
def cancel_simulation(
    pid: ProjectId, project: ProjectForPMWrite, sim_id: SimulationId, session: WriteSession
) -> SimulationJob:
    """Cancel a queued or running simulation job (admin, pm): it is `failed` with a cancellation error.

    A queued job never starts; a running one stops computing at its next progress write
    (about a second), whichever server runs it; its place in the jobs in flight is freed at
    once. 409 `simulation_finished` when the job is already done or failed.
    """
    job = project_simulation(session, project.id, sim_id)
    if not cancel_job(session, job.id):
        raise Conflict(f"simulation {echo(sim_id)} is already {job.status}", code="simulation_finished")
    session.flush()
    session.refresh(job)
    return _job(job)
