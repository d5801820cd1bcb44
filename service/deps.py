"""Request dependencies: database sessions, the calling principal, and role-scoped project access.

A route states who may call it by the type of its project (or principal) parameter, e.g.
``project: ProjectForPM``; no route checks a role by hand. Every project dependency answers
404 when the project does not exist or lies outside the key's scope (its existence stays
hidden), then 403 when the key's role is not allowed. The ``...Write`` forms load the project
in the request's write session, so a route that writes uses the same unit of work.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Path, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from service.core.db import session_scope
from service.core.errors import Forbidden, NotFound, echo
from service.core.middleware import LOGIN_COOKIE, cookie_name
from service.core.settings import Settings
from service.data.keys import Principal, principal_for
from service.data.logins import principal_for_login
from service.data.models import Project
from service.schemas.keys import Role

T = TypeVar("T")


def _read_session(request: Request) -> Iterator[Session]:
    with session_scope(request.app.state.sessions) as session:
        yield session


def _write_session(request: Request) -> Iterator[Session]:
    with session_scope(request.app.state.sessions, write=True) as session:
        yield session


# scope="function": the unit of work commits before the response is sent, so a client that
# got a 2xx can rely on its write (and read it back at once).
ReadSession = Annotated[Session, Depends(_read_session, scope="function")]
WriteSession = Annotated[Session, Depends(_write_session, scope="function")]


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(_settings)]


def request_principal(session: Session, request: Request) -> Principal:
    """The principal of the ``Authorization`` header, or on reads of the dashboard's login cookie.

    The cookie holds a login token (``service.data.logins``), not a key, and counts for GET and
    HEAD only, so a page of another site cannot make a logged-in browser write (no CSRF surface).
    """
    header = request.headers.get("authorization")
    token = request.cookies.get(cookie_name(LOGIN_COOKIE, https=request.url.scheme == "https"))
    if header is None and token and request.method in ("GET", "HEAD"):
        return principal_for_login(session, token)
    return principal_for(session, header)


def _principal(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    with request.app.state.sessions() as session:
        return request_principal(session, request)


PrincipalDep = Annotated[Principal, Depends(_principal)]

ProjectId = Annotated[str, Path(description="The project's id.")]

ADMIN = (Role.ADMIN,)
PM = (Role.ADMIN, Role.PM)
ANNOTATOR = (*PM, Role.ANNOTATOR)
VIEWER = (*PM, Role.VIEWER)


def require_role(principal: Principal, roles: tuple[Role, ...]) -> None:
    """403 unless the principal's role is one of ``roles``."""
    if principal.role not in roles:
        allowed = ", ".join(roles)
        raise Forbidden(f"this action needs one of the roles: {allowed}; your key is {principal.role}")


def scoped_project(session: Session, principal: Principal, pid: str, roles: tuple[Role, ...]) -> Project:
    """The project if it exists and the key may see it (else 404), after checking the role (403)."""
    project = session.get(Project, pid)
    if project is None or (principal.role != Role.ADMIN and principal.project_id != pid):
        raise NotFound(f"project {echo(pid)} not found")
    require_role(principal, roles)
    return project


def _principal_with(roles: tuple[Role, ...]) -> Callable[[Principal], Principal]:
    def dependency(principal: PrincipalDep) -> Principal:
        require_role(principal, roles)
        return principal

    return dependency


def _reading(roles: tuple[Role, ...]) -> Callable[[str, Session, Principal], Project]:
    def dependency(pid: ProjectId, session: ReadSession, principal: PrincipalDep) -> Project:
        return scoped_project(session, principal, pid, roles)

    return dependency


async def _writer_turn(request: Request) -> AsyncIterator[None]:
    """This process's turn to write, held while the route runs. The request waits for it in the
    event loop, before it takes a pool thread: waiting writers then hold no thread, so however many
    queue, the holder finds the thread its route needs (see service.core.db.writer_turn)."""
    async with request.app.state.writer_turn:
        yield


WriterTurn = Annotated[None, Depends(_writer_turn, scope="function")]
"""For a route that writes without a ``...Write`` project: its turn to write (SQLite's single writer)."""


async def in_writer_turn(request: Request, write: Callable[[], T]) -> T:
    """``write()`` run in a pool thread within this process's turn to write, waited for in the event
    loop: for a route that takes its turn part way through (after a long computation, say)."""
    async with request.app.state.writer_turn:
        return await run_in_threadpool(write)


async def written(request: Request, write: Callable[[Session], T]) -> T:
    """``write(session)`` in a write session of its own, committed, within this process's turn to write
    (:func:`in_writer_turn`)."""

    def run() -> T:
        with session_scope(request.app.state.sessions, write=True) as session:
            return write(session)

    return await in_writer_turn(request, run)


def _writing(roles: tuple[Role, ...]) -> Callable[[str, Session, Principal, None], AsyncIterator[Project]]:
    async def dependency(
        pid: ProjectId, session: WriteSession, principal: PrincipalDep, _turn: WriterTurn
    ) -> AsyncIterator[Project]:
        # Loading the project begins the write (on SQLite: takes the writer), in the writer's turn.
        yield await run_in_threadpool(scoped_project, session, principal, pid, roles)

    return dependency


AdminPrincipal = Annotated[Principal, Depends(_principal_with(ADMIN))]
PMPrincipal = Annotated[Principal, Depends(_principal_with(PM))]

ProjectForPM = Annotated[Project, Depends(_reading(PM))]
"""The project, for an admin or its PM (read session)."""
ProjectForAnnotator = Annotated[Project, Depends(_reading(ANNOTATOR))]
"""The project, for an admin, its PM or one of its annotators (read session)."""
ProjectForViewer = Annotated[Project, Depends(_reading(VIEWER))]
"""The project, for an admin, its PM or one of its viewers: aggregates only (read session)."""
ProjectForAdminWrite = Annotated[Project, Depends(_writing(ADMIN), scope="function")]
"""The project, for an admin (write session)."""
ProjectForPMWrite = Annotated[Project, Depends(_writing(PM), scope="function")]
"""The project, for an admin or its PM (write session)."""
ProjectForAnnotatorWrite = Annotated[Project, Depends(_writing(ANNOTATOR), scope="function")]
"""The project, for an admin, its PM or one of its annotators (write session)."""
