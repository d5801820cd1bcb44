"""Database outages as the API reports them: 503 with Retry-After, and the state /healthz shows.

A failure of the database itself (unreachable, read-only, disk full, locked too long) is not
the client's fault nor a bug: the request is answered ``503`` with ``Retry-After`` and the
error body, its transaction rolled back (nothing of it is written, nothing acknowledged is
lost). The last such failure of a write is remembered until a write commits again, so
``/healthz`` can say the database refuses writes even while it still answers reads. That
memory is per worker process: under ``--workers N`` each worker reports the failures it saw.
While a failure is remembered, ``/healthz`` itself tries a one-row write (at most every
:data:`PROBE_SECONDS`), so a worker that gets no writes (a readiness probe routes none to a
503 instance) still sees the database come back.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from service.core.db import WRITE_OPTION, session_scope
from service.core.errors import error_body
from service.data.queries import database_answers

RETRY_AFTER_SECONDS = 5
PROBE_SECONDS = 2.0
"""Least time between a remembered write failure (or the last probe) and a probe of /healthz."""
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

    def __init__(self, probe_seconds: float = PROBE_SECONDS) -> None:
        self._lock = threading.Lock()
        self._probing = threading.Lock()
        self._fault: tuple[DatabaseFault, float] | None = None
        self.probe_seconds = probe_seconds

    def record(self, fault: DatabaseFault) -> None:
        """Remember a failure (a write that the database refused)."""
        with self._lock:
            self._fault = (fault, time.monotonic())

    def clear(self) -> None:
        """Forget the failure: a write committed."""
        with self._lock:
            self._fault = None

    def last_fault(self) -> DatabaseFault | None:
        """The failure still in force, if any."""
        with self._lock:
            return self._fault[0] if self._fault else None

    def probe_due(self) -> bool:
        """Whether a failure is remembered and was recorded (or last probed) ``probe_seconds`` ago or more."""
        with self._lock:
            return self._fault is not None and time.monotonic() - self._fault[1] >= self.probe_seconds

    def probe(self, sessions: sessionmaker[Session]) -> None:
        """Try a one-row write when one is due: it clears the failure when it commits, renews it when it fails.

        One probe at a time; a health check that finds one running reports the state as it is.
        """
        if not self.probe_due() or not self._probing.acquire(blocking=False):
            return
        try:
            with session_scope(sessions, write=True) as session:
                write_probe(session)
        except (OperationalError, InterfaceError) as exc:
            self.record(database_fault(exc))
        except SQLAlchemyError:
            log.exception("the health probe's write failed")
            with self._lock:
                if self._fault is not None:
                    self._fault = (self._fault[0], time.monotonic())
        finally:
            self._probing.release()

    def watch(self, engine: Engine) -> None:
        """Clear the failure whenever a write unit of ``engine`` commits."""

        @event.listens_for(engine, "commit")
        def _committed(conn) -> None:  # type: ignore[no-untyped-def]
            if conn.get_execution_options().get(WRITE_OPTION):
                self.clear()


def write_probe(session: Session) -> None:
    """The smallest real write: the schema's version row rewritten unchanged (every migrated database has it)."""
    session.execute(text("UPDATE alembic_version SET version_num = version_num"))


def liveness() -> dict[str, str]:
    """``/livez``: the process runs and answers; the database is not asked."""
    return {"status": "alive"}


def health(sessions: sessionmaker[Session], state: DatabaseState) -> tuple[int, dict[str, str]]:
    """``/healthz``, ``/readyz``: 200 when the database answers and no write failure is in force, else 503.

    A remembered write failure is probed first (:meth:`DatabaseState.probe`), so it clears by itself.
    """
    try:
        with sessions() as session:
            database_answers(session)
    except SQLAlchemyError as exc:
        failed = database_fault(exc)
        return 503, {"status": "degraded", "database": failed.state, "detail": failed.detail}
    state.probe(sessions)
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
