"""Database outages as the API reports them: 503 with Retry-After, and the state /healthz shows.

A failure of the database itself (unreachable, read-only, disk full, locked too long) is not
the client's fault nor a bug: the request is answered ``503`` with ``Retry-After`` and the
error body, its transaction rolled back (nothing of it is written, nothing acknowledged is
lost). The last such failure of a write is remembered until a write commits again, so
``/healthz`` can say the database refuses writes even while it still answers reads. That
memory is per worker process: under ``--workers N`` each worker reports the failures it saw.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, event
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from service.core.db import WRITE_OPTION
from service.core.errors import error_body
from service.data.queries import database_answers

RETRY_AFTER_SECONDS = 5
log = logging.getLogger("annoplan")

_STATES = (  # (substring of the driver's message, state, sentence)
    ("readonly", "read_only", "the database is read-only"),
    ("read-only", "read_only", "the database is read-only"),
    ("disk is full", "full", "the database's disk is full"),
    ("disk full", "full", "the database's disk is full"),
    ("no space left", "full", "the database's disk is full"),
    ("database is locked", "busy", "the database stayed locked by other writers"),
)


@dataclass(frozen=True)
class DatabaseFault:
    """What is wrong with the database: a state for /healthz and a sentence for the error body."""

    state: str
    detail: str


def database_fault(exc: SQLAlchemyError) -> DatabaseFault:
    """Classify a driver error raised by the database (not by a bad value) into a fault."""
    message = str(getattr(exc, "orig", exc)).lower()
    for needle, state, sentence in _STATES:
        if needle in message:
            return DatabaseFault(state, sentence)
    return DatabaseFault("unreachable", "the database cannot be reached")


class DatabaseState:
    """The last write failure of this process, cleared by the next committed write."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fault: tuple[DatabaseFault, float] | None = None

    def record(self, fault: DatabaseFault) -> None:
        """Remember a failure (a write that the database refused)."""
        with self._lock:
            self._fault = (fault, time.time())

    def clear(self) -> None:
        """Forget the failure: a write committed."""
        with self._lock:
            self._fault = None

    def last_fault(self) -> DatabaseFault | None:
        """The failure still in force, if any."""
        with self._lock:
            return self._fault[0] if self._fault else None

    def watch(self, engine: Engine) -> None:
        """Clear the failure whenever a write unit of ``engine`` commits."""

        @event.listens_for(engine, "commit")
        def _committed(conn) -> None:  # type: ignore[no-untyped-def]
            if conn.get_execution_options().get(WRITE_OPTION):
                self.clear()


def health(sessions: sessionmaker[Session], state: DatabaseState) -> tuple[int, dict[str, str]]:
    """``/healthz``: 200 when the database answers and no write failure is in force, else 503."""
    try:
        with sessions() as session:
            database_answers(session)
    except SQLAlchemyError as exc:
        failed = database_fault(exc)
        return 503, {"status": "degraded", "database": failed.state, "detail": failed.detail}
    fault = state.last_fault()
    if fault is not None:
        return 503, {
            "status": "degraded",
            "database": fault.state,
            "detail": f"{fault.detail}: the last write failed and none has succeeded since",
        }
    return 200, {"status": "ok", "database": "ok"}


def install_outage_handlers(app: FastAPI) -> None:
    """Answer database failures (``OperationalError``, ``InterfaceError``) with 503 and Retry-After."""

    @app.exception_handler(OperationalError)
    @app.exception_handler(InterfaceError)
    async def _outage(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        fault = database_fault(exc)
        log.warning("database unavailable (%s): %s", fault.state, getattr(exc, "orig", exc))
        if request.method not in ("GET", "HEAD"):
            request.app.state.database.record(fault)
        return JSONResponse(
            error_body("database_unavailable", f"{fault.detail}; the request was not carried out, retry later"),
            503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
