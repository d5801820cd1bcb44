"""Liveness, readiness and the database's state."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.core.db import session_scope
from service.data.database_health import RETRY_AFTER_SECONDS, health, liveness
from service.data.jobs import queue_state
from service.schemas.health import Health, QueueHealth

router = APIRouter(tags=["health"])


@router.get("/livez")
def livez() -> dict[str, str]:
    """Liveness: 200 `{"status": "alive"}` while the process runs and answers, whatever the database does.
    No key needed. A restart does not mend a database outage: point liveness probes here."""
    return liveness()


def _ready(request: Request) -> JSONResponse:
    status, body = health(request.app.state.sessions, request.app.state.database)
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
    return JSONResponse(body, status, headers=headers)


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
def readyz(request: Request) -> JSONResponse:
    """Readiness: as `/healthz`. Point readiness probes (traffic routing) here. No key needed."""
    return _ready(request)


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(request: Request) -> JSONResponse:
    """Whether the database answers and accepts writes (503 when not). No key needed.

    `database` is `unreachable`, `read_only`, `full` or `busy` when the database cannot be
    reached or the last write failed for that reason and none has succeeded since. While a
    write failure is remembered, this check itself tries a one-row write at most every 2 s,
    so it turns 200 again by itself once the database accepts writes.
    """
    return _ready(request)


@router.get("/healthz/queue", response_model=QueueHealth, responses={503: {"model": Health}})
def healthz_queue(request: Request) -> QueueHealth:
    """Whether the job queue has a live worker, and how long the oldest waiting work has waited. No key needed.

    `status` is `no_worker` when no job worker (an `annoplan worker`, or an api process that runs
    the queue) has shown itself live within its lease: simulations and webhook deliveries then
    wait. Always 200 while the database answers (the api itself serves); 503 when it does not.
    Point an alert at `no_worker`, or at `oldest_waiting_seconds` growing.
    """
    with session_scope(request.app.state.sessions) as session:
        state = queue_state(session)
    return QueueHealth(
        status="ok" if state.workers else "no_worker",
        workers=state.workers,
        oldest_waiting_seconds=state.oldest_waiting_seconds,
    )
