"""Projects and their API keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse
from sqlalchemy import exists, select

from service.auth import create_key
from service.deps import (
    PrincipalDep,
    ReadSession,
    WriteSession,
    project_for,
    require_role,
)
from service.errors import Conflict, Invalid, NotFound, echo, error_responses
from service.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.models import ApiKey, LabelEvent, Project, Rater, new_public_id, utcnow
from service.pagination import PageDep, encode_cursor
from service.schemas import (
    KeyCreate,
    KeyCreated,
    Page,
    ProjectCreate,
    ProjectPatch,
    ProjectRead,
)

router = APIRouter(prefix="/projects", tags=["projects"])
ProjectId = Annotated[str, Path(description="The project's id.")]


def project_read(p: Project) -> ProjectRead:
    """The public view of a project."""
    return ProjectRead(
        id=p.id, name=p.name, labels=p.labels, scale=p.scale, criteria=p.criteria,
        allow_abstain=p.allow_abstain, decision=p.decision, target=p.target,
        label_seq=p.label_seq, n_items=p.item_count, created_at=p.created_at,
    )


@router.post("", status_code=201, response_model=ProjectRead, responses=error_responses(401, 403, 409, 422))
def create_project(
    body: ProjectCreate, request: Request, session: WriteSession, principal: PrincipalDep, idem: IdempotencyKey = None
) -> JSONResponse:
    """Create a project: ordered labels, scale, criteria and decision settings (admin)."""
    require_role(principal, "admin")

    def write() -> tuple[int, ProjectRead]:
        project = Project(id=new_public_id("p"), label_seq=0, item_count=0, **body.model_dump())
        session.add(project)
        session.flush()
        return 201, project_read(project)

    fingerprint = request_fingerprint(request, body.model_dump_json().encode())
    return idempotent_write(session, principal, idem, fingerprint, write)


@router.get("", response_model=Page[ProjectRead], responses=error_responses(401, 403, 422))
def list_projects(session: ReadSession, principal: PrincipalDep, page: PageDep) -> Page[ProjectRead]:
    """Projects the key may see: all for admin, its own project for a PM."""
    require_role(principal, "admin", "pm")
    stmt = select(Project).order_by(Project.created_at, Project.id)
    if principal.role != "admin":
        stmt = stmt.where(Project.id == principal.project_id)
    rows = list(session.scalars(stmt.offset(page.after or 0).limit(page.limit + 1)))
    more = len(rows) > page.limit
    offset = (page.after or 0) + page.limit
    return Page(items=[project_read(p) for p in rows[: page.limit]], next_cursor=encode_cursor(offset) if more else None)


@router.get("/{pid}", response_model=ProjectRead, responses=error_responses(401, 403, 404))
def get_project(pid: ProjectId, session: ReadSession, principal: PrincipalDep) -> ProjectRead:
    """A project's settings (admin, pm)."""
    return project_read(project_for(session, principal, pid, "admin", "pm"))


@router.patch("/{pid}", response_model=ProjectRead, responses=error_responses(401, 403, 404, 409, 422))
def patch_project(
    pid: ProjectId, body: ProjectPatch, request: Request, session: WriteSession, principal: PrincipalDep,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Change settings; labels, scale and criteria are frozen once labels exist (409)."""
    project = project_for(session, principal, pid, "admin", "pm")

    def write() -> tuple[int, ProjectRead]:
        changes = body.model_dump(exclude_unset=True)
        frozen = {"labels", "scale", "criteria"} & {
            k for k, v in changes.items() if v != getattr(project, k)
        }
        if frozen and session.scalar(select(exists().where(LabelEvent.project_id == pid))):
            raise Conflict(
                f"{', '.join(sorted(frozen))} cannot change once labels exist", code="labels_exist"
            )
        for key, value in changes.items():
            if value is None:
                raise Invalid(f"{key} cannot be null")
            setattr(project, key, value)
        for field in ("recode_to", "positive_label"):
            value = project.decision.get(field)
            if value is not None and value not in project.labels:
                raise Invalid(f"decision.{field} must be one of the labels {project.labels}")
        session.flush()
        return 200, project_read(project)

    fingerprint = request_fingerprint(request, body.model_dump_json(exclude_unset=True).encode())
    return idempotent_write(session, principal, idem, fingerprint, write)


@router.post("/{pid}/keys", status_code=201, response_model=KeyCreated, responses=error_responses(401, 403, 404, 422))
def create_project_key(pid: ProjectId, body: KeyCreate, session: WriteSession, principal: PrincipalDep) -> KeyCreated:
    """Create a key for this project (admin). The secret is in this response only."""
    project_for(session, principal, pid, "admin")
    if body.role == "admin":
        raise Invalid("admin keys are not project keys; set ANNOPLAN_ADMIN_KEY or use the CLI")
    rater_id = None
    if body.rater is not None:
        rater_id = session.scalar(select(Rater.id).where(Rater.project_id == pid, Rater.external_id == body.rater))
        if rater_id is None:
            raise Invalid(f"unknown rater {echo(body.rater)} in this project")
    row, secret = create_key(session, role=body.role, project_id=pid, rater_id=rater_id, name=body.name)
    return KeyCreated(id=row.id, role=body.role, project=pid, rater=body.rater, key=secret)


@router.delete("/{pid}/keys/{kid}", status_code=204, responses=error_responses(401, 403, 404))
def revoke_project_key(pid: ProjectId, kid: str, session: WriteSession, principal: PrincipalDep) -> None:
    """Revoke a key of this project (admin); it stops working at once."""
    project_for(session, principal, pid, "admin")
    row = session.get(ApiKey, kid)
    if row is None or row.project_id != pid:
        raise NotFound(f"key {echo(kid)} not found")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
