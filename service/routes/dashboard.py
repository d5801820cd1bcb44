"""The dashboard page and its login (a key in an HttpOnly cookie)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.auth import principal_for
from service.dashboard import dashboard_page, error_page, login_page, overlap_curve, pool_history
from service.deps import KEY_COOKIE, VIEWER, ProjectId, ReadSession, request_authorization, scoped_project
from service.errors import AppError, Unauthorized
from service.planning import current_plan
from service.reliability import document_key, reliability_document
from service.models import Project
from service.security_headers import CSRF_COOKIE, CSRF_FIELD, csrf_matches, new_csrf_token
from service.uploads import RawBody

router = APIRouter(tags=["dashboard"])


def _login_form(message: str = "", status_code: int = 200) -> HTMLResponse:
    """The login form with a fresh CSRF token, also set in a cookie the POST must match."""
    token = new_csrf_token()
    response = HTMLResponse(login_page(token, message), status_code=status_code)
    response.set_cookie(CSRF_COOKIE, token, path="/login", httponly=True, samesite="strict")
    return response


@router.get("/login", response_class=HTMLResponse)
def get_login() -> HTMLResponse:
    """The dashboard login form (with a CSRF token in a hidden field and a cookie)."""
    return _login_form()


@router.post(
    "/login", response_class=HTMLResponse,
    responses={303: {"description": "Logged in"}, 401: {"description": "Unknown key"},
               403: {"description": "Missing or wrong CSRF token: load the form again"}},
)
def post_login(request: Request, body: RawBody, session: ReadSession) -> Response:
    """Check the posted key and keep it in an HttpOnly, SameSite=Strict cookie (reads only).

    The form's CSRF token must match the cookie set with the form (403 otherwise).
    """
    form = parse_qs(body.decode("utf-8", "replace"))
    if not csrf_matches(request.cookies.get(CSRF_COOKIE), (form.get(CSRF_FIELD) or [""])[0]):
        return _login_form("the login form expired or came from another site; log in again", 403)
    key = (form.get("key") or [""])[0].strip()
    try:
        principal = principal_for(session, f"Bearer {key}")
    except Unauthorized:
        return _login_form("unknown or revoked API key", 401)
    target = f"/projects/{principal.project_id}/dashboard" if principal.project_id else "/docs"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(KEY_COOKIE, key, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    response.delete_cookie(CSRF_COOKIE, path="/login")
    return response


def _dashboard_access(pid: ProjectId, request: Request, session: ReadSession) -> Project | Response:
    """The project for a viewer or above, or the page to answer instead: to the login form
    without a valid key, else the error as HTML."""
    try:
        principal = principal_for(session, request_authorization(request))
        return scoped_project(session, principal, pid, VIEWER)
    except Unauthorized:
        return RedirectResponse("/login", status_code=303)
    except AppError as exc:
        return HTMLResponse(error_page(exc.status_code, exc.detail), status_code=exc.status_code)


@router.get("/projects/{pid}/dashboard", response_class=HTMLResponse, responses={401: {"description": "Log in first"}})
def get_dashboard(
    pid: ProjectId, access: Annotated[Project | Response, Depends(_dashboard_access)], request: Request,
    session: ReadSession,
) -> Response:
    """The project's dashboard (viewer role or above; log in at `/login`)."""
    if isinstance(access, Response):
        return access
    project = access
    settings = request.app.state.settings
    criterion = project.criteria[0]
    plan = current_plan(session, pid)
    etag = document_key(session, project, plan, criterion, "reliability")
    cache = request.app.state.documents
    doc = cache.get_or_build(
        etag, lambda: reliability_document(session, project, criterion, n_resamples=settings.bootstrap_resamples)
    )
    curve_key = f"curve|{plan.id if plan else ''}|{sorted(project.decision.items())}|{project.target}"
    curve = cache.get_or_build(curve_key, lambda: overlap_curve(project, plan))
    page = dashboard_page(project, doc, pool_history(session, project, criterion), curve, etag)
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})
