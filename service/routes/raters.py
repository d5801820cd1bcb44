"""Raters: judges, the primary annotator, and secondary humans."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from service.core.errors import error_responses
from service.core.pagination import Page, PageDep, page_of
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.queries import project_rater, rater_label_count, raters_page
from service.data.raters import add_rater, change_rater
from service.deps import (
    PrincipalDep,
    ProjectForPMWrite,
    ProjectForViewer,
    ProjectId,
    ReadSession,
    WriteSession,
)
from service.schemas.keys import Role
from service.schemas.raters import RaterCreate, RaterPatch, RaterRead

router = APIRouter(prefix="/projects/{pid}/raters", tags=["raters"])


@router.post("", status_code=201, response_model=RaterRead, responses=error_responses(401, 403, 404, 409, 422))
def create_rater(
    pid: ProjectId,
    project: ProjectForPMWrite,
    body: RaterCreate,
    request: Request,
    session: WriteSession,
    principal: PrincipalDep,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Add a rater; `external_id` is unique in the project and there is at most one `primary`."""

    def write() -> tuple[int, RaterRead]:
        rater = add_rater(session, project, body)
        return 201, RaterRead(
            id=str(rater.id), external_id=rater.external_id, kind=rater.kind, name=rater.name, n_labels=0
        )

    return idempotent_write(
        session, principal, idem, request_fingerprint(request, body.model_dump_json().encode()), write
    )


@router.get("", response_model=Page[RaterRead], responses=error_responses(401, 403, 404, 422))
def list_raters(
    pid: ProjectId, project: ProjectForViewer, session: ReadSession, principal: PrincipalDep, page: PageDep
) -> Page[RaterRead]:
    """Raters with their label counts (viewers see ids, kinds and counts only)."""
    viewer = principal.role == Role.VIEWER
    return page_of(
        raters_page(session, project.id, page),
        page,
        key=lambda row: row[0].id,
        read=lambda row: RaterRead(
            id=str(row[0].id),
            external_id=row[0].external_id,
            kind=row[0].kind,
            name=None if viewer else row[0].name,
            n_labels=row[1],
        ),
    )


@router.patch("/{rid}", response_model=RaterRead, responses=error_responses(401, 403, 404, 409, 422))
def patch_rater(
    pid: ProjectId,
    project: ProjectForPMWrite,
    rid: Annotated[str, Path(description="The rater's id (or its external id).")],
    body: RaterPatch,
    request: Request,
    session: WriteSession,
    principal: PrincipalDep,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Rename a rater or change its kind (admin, pm), e.g. make a webhook-made `human` the `primary`.

    The kind is fixed once the project has a plan (409 `plan_depends_on_rater`: plans are
    built on the kinds); a second primary is a 409; a judge with `INVALID` labels stays a judge (422).
    """

    def write() -> tuple[int, RaterRead]:
        rater = change_rater(session, project_rater(session, project.id, rid), body.model_dump(exclude_unset=True))
        return 200, RaterRead(
            id=str(rater.id),
            external_id=rater.external_id,
            kind=rater.kind,
            name=rater.name,
            n_labels=rater_label_count(session, rater.id),
        )

    fingerprint = request_fingerprint(request, body.model_dump_json(exclude_unset=True).encode())
    return idempotent_write(session, principal, idem, fingerprint, write)
