"""Liveness and database reachability."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from service.queries import database_answers
from service.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
def healthz(request: Request) -> JSONResponse:
    """Liveness, and whether the database answers (503 when it does not). No key needed."""
    try:
        with request.app.state.sessions() as session:
            database_answers(session)
    except SQLAlchemyError:
        return JSONResponse({"status": "degraded", "database": "unreachable"}, 503)
    return JSONResponse({"status": "ok", "database": "ok"})
