"""The dashboard pages (projects index, one project), their chart downloads, the login (a login token
in a cookie, never the key) and the logout."""

from __future__ import annotations

import secrets
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from service.core.errors import AppError, Invalid, NotFound, Unauthorized, echo, error_responses
from service.core.middleware import (
    CSRF_COOKIE,
    CSRF_FIELD,
    CSRF_MAX_AGE_SECONDS,
    LOGIN_COOKIE,
    cookie_name,
    csrf_matches,
    logout_token,
    new_csrf_token,
    same_origin_post,
)
from service.core.pagination import PageParams, encode_cursor
from service.core.settings import signing_secret
from service.core.uploads import RawBody
from service.dashboard.annotator import annotator_page, annotator_work, own_rater
from service.dashboard.charts import project_charts
from service.dashboard.glossary import GLOSSARY_PATH, glossary_page
from service.dashboard.notes import monitoring_note, plan_verdict, recipe_now_verdict
from service.dashboard.pages import dashboard_page, error_page, index_page, index_rows, login_page
from service.dashboard.scores import score_dashboard, score_dashboard_page
from service.dashboard.svg import Chart, chart_csv, chart_svg
from service.data.keys import Principal, principal_for
from service.data.logins import close_login, open_login
from service.data.models import Project, Rater
from service.data.queries import projects_page
from service.deps import (
    VIEWER,
    ProjectForViewer,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriterTurn,
    WriteSession,
    request_principal,
    scoped_project,
)
from service.documents.slices import cached_slices, score_slices_block
from service.documents.versions import project_drift
from service.planning.plans import current_plan
from service.schemas.documents import Slices
from service.schemas.keys import Role

router = APIRouter(tags=["dashboard"])
INDEX_PAGE_SIZE = 25
ChartId = Annotated[
    str,
    Path(
        max_length=40,
        description="A chart's id, as in the page: `margins-1`, `sequences-1` "
        "(one each per judge), `pool-history`, `progress`, `overlap-curve`; a numeric project's: `bland-altman-1` "
        "(one per judge), `progress`.",
    ),
]


def _login_form(request: Request, message: str = "", status_code: int = 200) -> HTMLResponse:
    """The login form with a fresh signed CSRF token, also set in a cookie the POST must match."""
    token = new_csrf_token(signing_secret(request.app.state.settings))
    response = HTMLResponse(login_page(token, message), status_code=status_code)
    https = request.url.scheme == "https"
    response.set_cookie(
        cookie_name(CSRF_COOKIE, https=https),
        token,
        max_age=CSRF_MAX_AGE_SECONDS,
        path="/" if https else "/login",  # a __Host- cookie must have path /
        httponly=True,
        samesite="strict",
        secure=https,
    )
    return response


@router.get(GLOSSARY_PATH, response_class=HTMLResponse)
def get_glossary() -> HTMLResponse:
    """The user glossary: the words of the dashboard and the API in plain language, one anchor per term. No key
    is needed: it holds no project's data."""
    return HTMLResponse(glossary_page())


@router.get("/login", response_class=HTMLResponse)
def get_login(request: Request) -> HTMLResponse:
    """The dashboard login form (with a CSRF token in a hidden field and a cookie)."""
    return _login_form(request)


@router.post(
    "/login",
    response_class=HTMLResponse,
    responses={
        303: {"description": "Logged in"},
        401: {"description": "Unknown key"},
        403: {"description": "Missing or wrong CSRF token, or a form of another origin: load the form again"},
    },
)
def post_login(request: Request, body: RawBody, _turn: WriterTurn, session: WriteSession) -> Response:
    """Check the posted key and open a login: an HttpOnly, SameSite=Strict cookie holding a random login
    token (reads only; never the key), for `login_max_age_seconds`; go to the projects index (admin),
    the key's project dashboard, or an annotator's own page.

    The form's CSRF token must match the cookie set with the form and carry this server's
    signature (under an hour old), and a browser's post must come from this origin
    (`Origin`, `Sec-Fetch-Site`); 403 otherwise. Over https the cookies are `__Host-` and `Secure`.
    """
    https = request.url.scheme == "https"
    csrf_cookie = cookie_name(CSRF_COOKIE, https=https)
    form = parse_qs(body.decode("utf-8", "replace"))
    own_origin = f"{request.url.scheme}://{request.url.netloc}"
    if not same_origin_post(request.headers.get("origin"), request.headers.get("sec-fetch-site"), own_origin):
        return _login_form(request, "the login form came from another site; log in again", 403)
    secret = signing_secret(request.app.state.settings)
    if not csrf_matches(request.cookies.get(csrf_cookie), (form.get(CSRF_FIELD) or [""])[0], secret):
        return _login_form(request, "the login form expired or came from another site; log in again", 403)
    key = (form.get("key") or [""])[0].strip()
    try:
        principal = principal_for(session, f"Bearer {key}")
    except Unauthorized:
        return _login_form(request, "unknown or revoked API key", 401)
    max_age = request.app.state.settings.login_max_age_seconds
    token = open_login(session, principal, max_age_seconds=max_age)
    response = RedirectResponse(_landing(principal), status_code=303)
    response.set_cookie(
        cookie_name(LOGIN_COOKIE, https=https),
        token,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=https,
    )
    response.delete_cookie(csrf_cookie, path="/" if https else "/login", secure=https, httponly=True)
    return response


def _landing(principal: Principal) -> str:
    """Where a login goes: an annotator's own page, its project's dashboard, or the projects index (admin)."""
    if principal.project_id is None:
        return "/dashboard"
    page = "annotator" if principal.role == Role.ANNOTATOR else "dashboard"
    return f"/projects/{principal.project_id}/{page}"


@router.post(
    "/logout",
    response_class=HTMLResponse,
    responses={
        303: {"description": "Logged out (the login is revoked and its cookie cleared): to `/login`"},
        403: {"description": "Missing or wrong logout token, or a form of another origin (HTML page)"},
    },
)
def post_logout(request: Request, body: RawBody, _turn: WriterTurn, session: WriteSession) -> Response:
    """End the browser's login: its row is revoked (a copy of the cookie stops working too) and the
    cookie cleared. The form's token is the HMAC of the login under the server's secret (only a page
    served to this login holds it) and the post must come from this origin; without a login, nothing
    to end: to `/login`."""
    https = request.url.scheme == "https"
    name = cookie_name(LOGIN_COOKIE, https=https)
    token = request.cookies.get(name)
    if token:
        form = parse_qs(body.decode("utf-8", "replace"))
        own_origin = f"{request.url.scheme}://{request.url.netloc}"
        submitted = (form.get(CSRF_FIELD) or [""])[0]
        expected = logout_token(signing_secret(request.app.state.settings), token)
        same_origin = same_origin_post(request.headers.get("origin"), request.headers.get("sec-fetch-site"), own_origin)
        if not (same_origin and secrets.compare_digest(submitted.encode(), expected.encode())):
            detail = "the logout form came from another page or site; log out from a dashboard page"
            return HTMLResponse(error_page(403, detail), status_code=403)
        close_login(session, token)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(name, path="/", secure=https, httponly=True, samesite="strict")
    return response


def _logout(request: Request) -> str | None:
    """The logout form's token for a page opened by a login (None: opened with a Bearer key)."""
    token = request.cookies.get(cookie_name(LOGIN_COOKIE, https=request.url.scheme == "https"))
    if token is None or request.headers.get("authorization") is not None:
        return None
    return logout_token(signing_secret(request.app.state.settings), token)


def _dashboard_access(pid: ProjectId, request: Request, session: ReadSession) -> Project | Response:
    """The project for a viewer or above, or the page to answer instead: to the login form
    without a valid key, else the error as HTML."""
    try:
        principal = request_principal(session, request)
        return scoped_project(session, principal, pid, VIEWER)
    except Unauthorized:
        return RedirectResponse("/login", status_code=303)
    except AppError as exc:
        return HTMLResponse(error_page(exc.status_code, exc.detail), status_code=exc.status_code)


def _index_access(request: Request, session: ReadSession) -> Principal | Response:
    """The principal of an admin, or of a PM or viewer of a project, or the page to answer instead: to the
    login form without a valid key, else the error as HTML."""
    try:
        principal = request_principal(session, request)
        if principal.role != Role.ADMIN:
            scoped_project(session, principal, principal.project_id or "", VIEWER)
        return principal
    except Unauthorized:
        return RedirectResponse("/login", status_code=303)
    except AppError as exc:
        return HTMLResponse(error_page(exc.status_code, exc.detail), status_code=exc.status_code)


@router.get(
    "/dashboard",
    response_class=HTMLResponse,
    responses={
        303: {"description": "Log in first (to `/login`)"},
        403: {"description": "An annotator key: the dashboard is for admin, PM and viewer keys (HTML page)"},
        **error_responses(422),
    },
)
def get_index(
    access: Annotated[Principal | Response, Depends(_index_access)],
    request: Request,
    session: ReadSession,
    settings: SettingsDep,
    cursor: Annotated[str | None, Query(description="The `more projects` link's cursor.")] = None,
) -> Response:
    """The projects the key can see (all for admin): name, decision per judge, omega, progress, last label.

    A read is a look, as `/reliability` is (docs/method.md §8.3): a label project's newly computed document
    records its opening and the pass or reject decisions it shows."""
    if isinstance(access, Response):
        return access
    page = PageParams(limit=INDEX_PAGE_SIZE, cursor=cursor)
    projects = projects_page(session, None if access.role == Role.ADMIN else access.project_id, page)
    rows = index_rows(
        session,
        projects[:INDEX_PAGE_SIZE],
        request.app.state.documents,
        n_resamples=settings.bootstrap_resamples,
        wait=settings.dashboard_wait_seconds,
    )
    more = len(projects) > INDEX_PAGE_SIZE
    next_page = f"/dashboard?cursor={encode_cursor((page.after or 0) + INDEX_PAGE_SIZE)}" if more else None
    return HTMLResponse(index_page(rows, next_page, logout=_logout(request)), headers={"Cache-Control": "no-store"})


@router.get(
    "/projects/{pid}/dashboard",
    response_class=HTMLResponse,
    responses={
        303: {"description": "Log in first (to `/login`)"},
        403: {"description": "An annotator key (HTML page)"},
        404: {"description": "No such project, or outside the key's scope (HTML page)"},
    },
)
def get_dashboard(
    pid: ProjectId,
    access: Annotated[Project | Response, Depends(_dashboard_access)],
    request: Request,
    session: ReadSession,
    settings: SettingsDep,
) -> Response:
    """The project's dashboard (viewer role or above; log in at `/login`).

    When the fresh document is not ready within `dashboard_wait_seconds`, the page shows the newest
    document computed for the same settings and plan, marked with the label events since, while it is
    computed in the background (`/reliability` itself is always fresh).

    A read is a look, as `/reliability` is (docs/method.md §8.3): a newly computed document records the
    project's opening and the pass or reject decisions it shows. The pool-score history is drawn from the
    points the job queue stores (with the shown document's own); what precedes the first stored point is
    replayed once by the job queue (its history turn queues the replay), and a view only reads how far the
    replay has come: a view queues nothing.
    """
    if isinstance(access, Response):
        return access
    if access.scale == "numeric":
        score_doc, score_charts = score_dashboard(session, access)
        by = access.decision_settings.slices
        score_slices: Slices | str | None = None
        if by is not None:
            try:
                score_slices = score_slices_block(session, access, score_doc.criterion, by)
            except Invalid as exc:  # a feature no item has yet: the page says so instead of failing
                score_slices = exc.detail
        page = score_dashboard_page(access, score_doc, score_charts, slices=score_slices, logout=_logout(request))
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})
    doc, etag, charts, replay = project_charts(
        session,
        access,
        request.app.state.documents,
        n_resamples=settings.bootstrap_resamples,
        wait=settings.dashboard_wait_seconds,
    )
    decision = access.decision_settings
    notes = {
        "plan": plan_verdict(current_plan(session, pid), decision),
        "recipe_now": recipe_now_verdict(doc.recipe_now, doc.n_items, decision),
        "monitoring": monitoring_note(doc),
    }
    slices: Slices | str | None = None
    if decision.slices is not None:
        try:
            slices = cached_slices(
                session,
                access,
                request.app.state.documents,
                doc.criterion,
                decision.slices,
                n_resamples=settings.bootstrap_resamples,
            )
        except Invalid as exc:  # a feature no item has yet: the page says so instead of failing
            slices = exc.detail
    behind = access.label_seq - doc.label_seq
    drift = project_drift(session, access)
    page = dashboard_page(
        access,
        doc,
        charts,
        notes,
        etag,
        behind=behind,
        replay=replay,
        slices=slices,
        logout=_logout(request),
        drift=drift,
    )
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


def _annotator_access(pid: ProjectId, request: Request, session: ReadSession) -> tuple[Project, Rater] | Response:
    """The project and rater of an annotator key of it, or the page to answer instead: to the login
    form without a valid key, else the error as HTML (other roles: 403, their pages are the dashboards)."""
    try:
        principal = request_principal(session, request)
        project = scoped_project(session, principal, pid, (Role.ANNOTATOR,))
    except Unauthorized:
        return RedirectResponse("/login", status_code=303)
    except AppError as exc:
        return HTMLResponse(error_page(exc.status_code, exc.detail), status_code=exc.status_code)
    return project, own_rater(session, principal)


@router.get(
    "/projects/{pid}/annotator",
    response_class=HTMLResponse,
    responses={
        303: {"description": "Log in first (to `/login`)"},
        403: {"description": "Not an annotator key: the dashboards are for admin, PM and viewer keys (HTML page)"},
        404: {"description": "No such project, or outside the key's scope (HTML page)"},
    },
)
def get_annotator_page(
    pid: ProjectId,
    access: Annotated[tuple[Project, Rater] | Response, Depends(_annotator_access)],
    request: Request,
    session: ReadSession,
) -> Response:
    """An annotator's own page (annotator keys; a login lands here): its next batch, how many items it has
    labeled, how many remain. Blind: nothing of other raters' labels or the judge's."""
    if isinstance(access, Response):
        return access
    project, rater = access
    page = annotator_page(project, annotator_work(session, project, rater), logout=_logout(request))
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


def _chart(project: Project, chart_id: str, request: Request, session: ReadSession, settings: SettingsDep) -> Chart:
    if project.scale == "numeric":
        charts = score_dashboard(session, project)[1]
    else:
        charts = project_charts(
            session,
            project,
            request.app.state.documents,
            n_resamples=settings.bootstrap_resamples,
            wait=settings.dashboard_wait_seconds,
        )[2]
    chart = next((c for c in charts if c.id == chart_id), None)
    if chart is None:
        raise NotFound(f"no chart {echo(chart_id)}; the dashboard has {', '.join(c.id for c in charts)}")
    return chart


@router.get(
    "/projects/{pid}/dashboard/charts/{chart_id}.csv",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/csv": {}}}, **error_responses(401, 403, 404, 422)},
)
def get_chart_csv(
    project: ProjectForViewer, chart_id: ChartId, request: Request, session: ReadSession, settings: SettingsDep
) -> Response:
    """One dashboard chart's data as CSV (the rows it plots, intervals and reasons included); a look, as the
    page is."""
    chart = _chart(project, chart_id, request, session, settings)
    return Response(
        chart_csv(chart),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{chart.id}.csv"'},
    )


@router.get(
    "/projects/{pid}/dashboard/charts/{chart_id}.svg",
    response_class=Response,
    responses={200: {"content": {"image/svg+xml": {}}}, **error_responses(401, 403, 404, 422)},
)
def get_chart_svg(
    project: ProjectForViewer, chart_id: ChartId, request: Request, session: ReadSession, settings: SettingsDep
) -> Response:
    """One dashboard chart as a standalone SVG image, as drawn on the page; a look, as the page is."""
    chart = _chart(project, chart_id, request, session, settings)
    return Response(
        '<?xml version="1.0" encoding="UTF-8"?>\n' + chart_svg(chart),
        media_type="image/svg+xml",
        headers={"Content-Disposition": f'attachment; filename="{chart.id}.svg"'},
    )
