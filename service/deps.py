"""Request dependencies: database sessions, the calling principal, and scoped project access."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Request
from sqlalchemy.orm import Session

from service.auth import Principal, principal_for
from service.db import session_scope
from service.errors import Forbidden, NotFound, echo
from service.models import Project
from service.settings import Settings


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
    return request.app.state.settings


SettingsDep = Annotated[Settings, Depends(_settings)]


KEY_COOKIE = "annoplan_key"


def request_authorization(request: Request) -> str | None:
    """The ``Authorization`` header, or on reads the dashboard's login cookie in its place.

    The cookie counts for GET and HEAD only, so a page of another site cannot make a
    logged-in browser write (no CSRF surface).
    """
    header = request.headers.get("authorization")
    cookie = request.cookies.get(KEY_COOKIE)
    if header is None and cookie and request.method in ("GET", "HEAD"):
        return f"Bearer {cookie}"
    return header


def _principal(
    request: Request,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Principal:
    with request.app.state.sessions() as session:
        return principal_for(session, request_authorization(request))


PrincipalDep = Annotated[Principal, Depends(_principal)]


def require_role(principal: Principal, *roles: str) -> None:
    """403 unless the principal's role is one of ``roles``."""
    if principal.role not in roles:
        allowed = ", ".join(roles)
        raise Forbidden(f"this action needs one of the roles: {allowed}; your key is {principal.role}")


def visible_project(session: Session, principal: Principal, pid: str) -> Project:
    """The project if it exists and the key may see it; otherwise 404 (its existence stays hidden)."""
    project = session.get(Project, pid)
    if project is None or (principal.role != "admin" and principal.project_id != pid):
        raise NotFound(f"project {echo(pid)} not found")
    return project


def project_for(
    session: Session, principal: Principal, pid: str, *roles: str
) -> Project:
    """The visible project, after checking the principal holds one of ``roles``."""
    project = visible_project(session, principal, pid)
    require_role(principal, *roles)
    return project
