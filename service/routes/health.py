"""Liveness and the database's state."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.data.database_health import RETRY_AFTER_SECONDS, health
from service.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(request: Request) -> JSONResponse:
    """Liveness, and whether the database answers and accepts writes (503 when not). No key needed.

    `database` is `unreachable`, `read_only`, `full` or `busy` when the database cannot be
    reached or the last write failed for that reason and none has succeeded since.
    """
    status, body = health(request.app.state.sessions, request.app.state.database)
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
    return JSONResponse(body, status, headers=headers)
