"""Raters: judges, the primary annotator, and secondary humans."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from service.deps import PrincipalDep, ReadSession, WriteSession, project_for
from service.errors import Conflict, echo, error_responses
from service.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.models import CurrentLabel, Rater
from service.pagination import PageDep, encode_cursor
from service.routes.projects import ProjectId
from service.schemas import Page, RaterCreate, RaterRead

router = APIRouter(prefix="/projects/{pid}/raters", tags=["raters"])


@router.post("", status_code=201, response_model=RaterRead, responses=error_responses(401, 403, 404, 409, 422))
def create_rater(
    pid: ProjectId, body: RaterCreate, request: Request, session: WriteSession, principal: PrincipalDep,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Add a rater; `external_id` is unique in the project and there is at most one `primary`."""
    project_for(session, principal, pid, "admin", "pm")

    def write() -> tuple[int, RaterRead]:
        taken = session.scalar(select(Rater.kind).where(Rater.project_id == pid, Rater.external_id == body.external_id))
        if taken is not None:
            raise Conflict(f"rater {echo(body.external_id)} already exists in this project", code="rater_exists")
        if body.kind == "primary" and session.scalar(select(Rater.id).where(Rater.project_id == pid, Rater.kind == "primary")):
            raise Conflict("this project already has a primary rater", code="primary_exists")
        rater = Rater(project_id=pid, **body.model_dump())
        try:
            with session.begin_nested():
                session.add(rater)
                session.flush()
        except IntegrityError:  # a concurrent twin won the race
            raise Conflict("a rater with this external_id, or a primary, was just created", code="rater_exists") from None
        return 201, RaterRead(id=str(rater.id), external_id=rater.external_id, kind=rater.kind, name=rater.name, n_labels=0)

    return idempotent_write(session, principal, idem, request_fingerprint(request, body.model_dump_json().encode()), write)


@router.get("", response_model=Page[RaterRead], responses=error_responses(401, 403, 404, 422))
def list_raters(pid: ProjectId, session: ReadSession, principal: PrincipalDep, page: PageDep) -> Page[RaterRead]:
    """Raters with their label counts (viewers see ids, kinds and counts only)."""
    project_for(session, principal, pid, "admin", "pm", "viewer")
    counts = (
        select(CurrentLabel.rater_id, func.count().label("n"))
        .where(CurrentLabel.project_id == pid)
        .group_by(CurrentLabel.rater_id)
        .subquery()
    )
    stmt = (
        select(Rater, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.rater_id == Rater.id)
        .where(Rater.project_id == pid)
        .order_by(Rater.id)
        .limit(page.limit + 1)
    )
    if page.after is not None:
        stmt = stmt.where(Rater.id > page.after)
    rows = list(session.execute(stmt))
    more = len(rows) > page.limit
    rows = rows[: page.limit]
    viewer = principal.role == "viewer"
    return Page(
        items=[
            RaterRead(id=str(r.id), external_id=r.external_id, kind=r.kind, name=None if viewer else r.name, n_labels=n)
            for r, n in rows
        ],
        next_cursor=encode_cursor(rows[-1][0].id) if more else None,
    )
