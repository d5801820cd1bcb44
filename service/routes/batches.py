"""Batches: leases of the next planned items for one rater."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from service.core.errors import error_responses
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.deps import (
    PrincipalDep,
    ProjectForAnnotator,
    ProjectForAnnotatorWrite,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
)
from service.planning.batches import batch_status, issue_batch, release_batch, visible_batch
from service.schemas.batches import BatchCreate, BatchRead, BatchStatus

router = APIRouter(prefix="/projects/{pid}/batches", tags=["batches"])
BatchId = Annotated[str, Path(description="The batch's id.")]


@router.post("", response_model=BatchRead, responses=error_responses(401, 403, 404, 409, 422))
def post_batch(
    pid: ProjectId,
    project: ProjectForAnnotatorWrite,
    body: BatchCreate,
    request: Request,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """The rater's next `size` planned items that it has not labeled and does not hold, as a lease.

    Annotator keys get their own rater's batch; PMs name `rater`. Empty `items` with
    `done: true` when the rater's list is complete (empty with `done: false`: the rest is
    leased to live batches). 409 when the project has no plan.
    """
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, body.model_dump_json().encode()),
        lambda: (
            200,
            issue_batch(
                session,
                project,
                principal,
                body,
                lease_seconds=settings.lease_seconds,
                max_size=settings.max_batch_size,
            ),
        ),
    )


@router.get("/{bid}", response_model=BatchStatus, responses=error_responses(401, 403, 404))
def get_batch(
    pid: ProjectId, bid: BatchId, project: ProjectForAnnotator, session: ReadSession, principal: PrincipalDep
) -> BatchStatus:
    """A batch's status: labeled and unlabeled items, lease expiry (PMs, or the batch's annotator)."""
    return batch_status(session, visible_batch(session, project, principal, bid))


@router.post("/{bid}/release", response_model=BatchStatus, responses=error_responses(401, 403, 404))
def post_release(
    pid: ProjectId, bid: BatchId, project: ProjectForAnnotatorWrite, session: WriteSession, principal: PrincipalDep
) -> BatchStatus:
    """Give the batch's unlabeled items back now instead of at lease expiry."""
    return release_batch(session, visible_batch(session, project, principal, bid))
