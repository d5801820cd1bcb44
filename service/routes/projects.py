"""Projects and their API keys."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.core.errors import error_responses
from service.core.pagination import Page, PageDep, page_of
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.models import Project
from service.data.projects import (
    add_project,
    add_project_key,
    change_project,
    revoke_key,
)
from service.data.queries import projects_page
from service.deps import (
    AdminPrincipal,
    PMPrincipal,
    PrincipalDep,
    ProjectForAdminWrite,
    ProjectForPM,
    ProjectForPMWrite,
    ProjectId,
    ReadSession,
    WriterTurn,
    WriteSession,
)
from service.schemas.keys import KeyCreate, KeyCreated, Role
from service.schemas.projects import ProjectCreate, ProjectPatch, ProjectRead

router = APIRouter(prefix="/projects", tags=["projects"])


def project_read(p: Project) -> ProjectRead:
    """The public view of a project."""
    return ProjectRead(
        id=p.id,
        name=p.name,
        kind=p.kind,
        labels=p.labels,
        scale=p.scale,
        value_range=p.value_range,
        criteria=p.criteria,
        allow_abstain=p.allow_abstain,
        decision=p.decision,
        target=p.target,
        label_seq=p.label_seq,
        n_items=p.item_count,
        created_at=p.created_at,
        order_seed=p.order_seed,
        opening_seq=p.opening_seq,
        label_map=p.label_map or {},
        label_studio=p.label_studio,
    )


@router.post("", status_code=201, response_model=ProjectRead, responses=error_responses(401, 403, 409, 422))
def create_project(
    body: ProjectCreate,
    request: Request,
    _turn: WriterTurn,
    session: WriteSession,
    principal: AdminPrincipal,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Create a project: ordered labels, scale, criteria and decision settings (admin)."""
    fingerprint = request_fingerprint(request, body.model_dump_json().encode())
    return idempotent_write(
        session, principal, idem, fingerprint, lambda: (201, project_read(add_project(session, body)))
    )


@router.get("", response_model=Page[ProjectRead], responses=error_responses(401, 403, 422))
def list_projects(session: ReadSession, principal: PMPrincipal, page: PageDep) -> Page[ProjectRead]:
    """Projects the key may see: all for admin, its own project for a PM."""
    only = None if principal.role == Role.ADMIN else principal.project_id
    offset = (page.after or 0) + page.limit
    return page_of(projects_page(session, only, page), page, key=lambda _: offset, read=project_read)


@router.get("/{pid}", response_model=ProjectRead, responses=error_responses(401, 403, 404))
def get_project(pid: ProjectId, project: ProjectForPM) -> ProjectRead:
    """A project's settings (admin, pm)."""
    return project_read(project)


@router.patch("/{pid}", response_model=ProjectRead, responses=error_responses(401, 403, 404, 409, 422))
def patch_project(
    pid: ProjectId,
    project: ProjectForPMWrite,
    body: ProjectPatch,
    request: Request,
    session: WriteSession,
    principal: PrincipalDep,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Change settings; labels, scale and criteria are frozen once labels exist (409). A ``decision`` or
    ``target`` object replaces the stored one whole: its omitted fields take their defaults."""
    changes = body.changes()
    fingerprint = request_fingerprint(request, body.model_dump_json(exclude_unset=True).encode())
    return idempotent_write(
        session, principal, idem, fingerprint, lambda: (200, project_read(change_project(session, project, changes)))
    )


@router.post("/{pid}/keys", status_code=201, response_model=KeyCreated, responses=error_responses(401, 403, 404, 422))
def create_project_key(
    pid: ProjectId, project: ProjectForAdminWrite, body: KeyCreate, session: WriteSession
) -> KeyCreated:
    """Create a key for this project (admin), optionally expiring at `expires_at` (then 401 `key_expired`).
    The secret is in this response only."""
    row, secret = add_project_key(session, project, body)
    return KeyCreated(id=row.id, role=body.role, project=pid, rater=body.rater, expires_at=row.expires_at, key=secret)


@router.delete("/{pid}/keys/{kid}", status_code=204, responses=error_responses(401, 403, 404))
def revoke_project_key(pid: ProjectId, project: ProjectForAdminWrite, kid: str, session: WriteSession) -> None:
    """Revoke a key of this project (admin); it stops working at once."""
    revoke_key(session, project, kid)
