"""The dashboard page and its login (a key in an HttpOnly cookie)."""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.auth import principal_for
from service.dashboard import dashboard_page, login_page, overlap_curve, pool_history
from service.deps import KEY_COOKIE, ReadSession, project_for, request_authorization
from service.errors import AppError, Unauthorized
from service.planning import current_plan
from service.reliability import document_key, reliability_document
from service.routes.projects import ProjectId
from service.uploads import RawBody

router = APIRouter(tags=["dashboard"])


@router.get("/login", response_class=HTMLResponse)
def get_login() -> HTMLResponse:
    """The dashboard login form."""
    return HTMLResponse(login_page())


@router.post("/login", response_class=HTMLResponse, responses={303: {"description": "Logged in"}})
def post_login(request: Request, body: RawBody, session: ReadSession) -> Response:
    """Check the posted key and keep it in an HttpOnly, SameSite=Strict cookie (reads only)."""
    form = parse_qs(body.decode("utf-8", "replace"))
    key = (form.get("key") or [""])[0].strip()
    try:
        principal = principal_for(session, f"Bearer {key}")
    except Unauthorized:
        return HTMLResponse(login_page("unknown or revoked API key"), status_code=401)
    target = f"/projects/{principal.project_id}/dashboard" if principal.project_id else "/docs"
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(KEY_COOKIE, key, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


@router.get("/projects/{pid}/dashboard", response_class=HTMLResponse, responses={401: {"description": "Log in first"}})
def get_dashboard(pid: ProjectId, request: Request, session: ReadSession) -> Response:
    """The project's dashboard (viewer role or above; log in at `/login`)."""
    try:
        principal = principal_for(session, request_authorization(request))
        project = project_for(session, principal, pid, "admin", "pm", "viewer")
    except Unauthorized:
        return RedirectResponse("/login", status_code=303)
    except AppError as exc:
        return HTMLResponse(f"<h1>{exc.status_code}</h1><p>{exc.detail}</p>", status_code=exc.status_code)
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
