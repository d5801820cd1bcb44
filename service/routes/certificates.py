"""Certificates: freeze the decision with its labels and settings; re-derive one from a label export."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from planner.certificate import certificate_statement, verify_certificate
from service.core.errors import Invalid, error_responses
from service.core.limits import bounded_work
from service.core.offload import ClientGone, computed
from service.core.pagination import Page, PageDep, encode_cursor
from service.data.models import Certificate, new_public_id, utcnow
from service.deps import (
    PrincipalDep,
    ProjectForPM,
    ProjectForViewer,
    ProjectId,
    ReadSession,
    SettingsDep,
    written,
)
from service.documents.certificates import (
    certificate_settings,
    certificate_work,
    certificates_page,
    decision_count,
    existing_certificate,
    project_certificate,
    snapshot_at,
    stored_certificate,
)
from service.schemas.certificates import (
    CertificateCreate,
    CertificateSummary,
    MismatchRead,
    Statement,
    VerifyRequest,
    VerifyResult,
)

router = APIRouter(tags=["certificates"])
CertificateId = Annotated[str, Path(description="The certificate's id.")]


def _statement_response(row: Certificate, status: int) -> JSONResponse:
    location = f"/projects/{row.project_id}/certificates/{row.id}"
    return JSONResponse(row.statement, status, headers={"Location": location})


@router.post(
    "/projects/{pid}/certificates",
    status_code=201,
    response_model=Statement,
    responses={
        **error_responses(401, 403, 404, 409, 413, 422, 429),
        200: {"model": Statement, "description": "Already issued for these labels and settings"},
    },
)
async def post_certificate(
    pid: ProjectId,
    project: ProjectForPM,
    body: CertificateCreate,
    request: Request,
    principal: PrincipalDep,
    session: ReadSession,
    settings: SettingsDep,
) -> Response:
    """Freeze the decision at the current (or a given) `label_seq` as an in-toto Statement v1.

    Subjects: `labels-snapshot` (SHA-256 of the RFC 8785 canonical label rows up to
    `label_seq`) and `report` (SHA-256 of the canonical predicate without its issue
    metadata). The predicate holds the protocol, decision settings, plan, seeds, software
    versions and result. Idempotent: the same `label_seq` and settings return the first
    certificate (200). 409 `no_judge` when the project has no judge. The work, label rows x
    `n_resamples` x judges, is bounded by `ANNOPLAN_CERTIFICATE_MAX_WORK` (413 past it, checked before it
    starts); a large one runs in a child process, outside the turn to write, and stops (nothing stored) if
    the client disconnects; a key may have `ANNOPLAN_COMPUTATIONS_PER_KEY` such at once (429 past it).
    """
    frozen = await run_in_threadpool(
        certificate_settings, session, project, body, n_resamples=settings.bootstrap_resamples
    )
    twin = await run_in_threadpool(existing_certificate, session, project.id, frozen)
    if twin is not None:
        return _statement_response(twin, 200)
    snapshot = await run_in_threadpool(snapshot_at, session, project.id, frozen["label_seq"])
    work = bounded_work(
        {"label rows": len(snapshot), "resamples": frozen["seeds"]["n_resamples"], "decisions": decision_count(frozen)},
        settings.certificate_max_work,
        setting="certificate_max_work",
        code="certificate_too_large",
        advice="ask for fewer n_resamples",
    )
    await run_in_threadpool(session.close)  # everything is read: the computation holds no connection
    issued_at = utcnow()
    metadata = {"id": new_public_id("cert"), "issued_at": issued_at.isoformat()}
    try:  # off the writer's turn, which only the insert below takes
        statement = await computed(
            request, principal.key_id, work, partial(certificate_statement, certificate=metadata), snapshot, frozen
        )
    except ClientGone:
        return Response(status_code=499)  # nobody reads it, and nothing is stored
    row, created = await written(
        request,
        lambda writer: stored_certificate(
            writer, frozen, statement, issued_at=issued_at, retry_window_seconds=settings.webhook_retry_window_seconds
        ),
    )
    return _statement_response(row, 201 if created else 200)


@router.get(
    "/projects/{pid}/certificates",
    response_model=Page[CertificateSummary],
    responses=error_responses(401, 403, 404, 422),
)
def list_certificates(
    pid: ProjectId, project: ProjectForViewer, session: ReadSession, page: PageDep
) -> Page[CertificateSummary]:
    """The project's certificates, oldest first (viewers and up)."""
    offset = page.after or 0
    rows = certificates_page(session, project.id, offset=offset, limit=page.limit + 1)
    items = [
        CertificateSummary(
            id=c.id,
            label_seq=c.label_seq,
            criterion=c.criterion,
            decision=c.decision,
            report_sha256=c.statement["subject"][1]["digest"]["sha256"],
            created_at=c.created_at,
        )
        for c in rows[: page.limit]
    ]
    more = len(rows) > page.limit
    return Page(items=items, next_cursor=encode_cursor(offset + page.limit) if more else None)


@router.get("/projects/{pid}/certificates/{cid}", response_model=Statement, responses=error_responses(401, 403, 404))
def get_certificate(
    pid: ProjectId, cid: CertificateId, project: ProjectForViewer, session: ReadSession
) -> JSONResponse:
    """One certificate: the in-toto statement (viewers and up)."""
    return _statement_response(project_certificate(session, project.id, cid), 200)


@router.post("/certificates/verify", response_model=VerifyResult, responses=error_responses(401, 413, 422, 429))
async def post_verify(
    body: VerifyRequest, request: Request, principal: PrincipalDep, settings: SettingsDep
) -> VerifyResult | Response:
    """Re-derive a certificate from a label export (any key; nothing is read from the database).

    Recomputes the snapshot digest and the decision under the predicate's settings:
    `match` is false when a label was changed, removed or added, a setting such as
    `decision.epsilon` or `seeds.seed` was edited, or the result does not recompute —
    each mismatch names its field. The work, label rows x `seeds.n_resamples` x judges, is
    bounded by `ANNOPLAN_CERTIFICATE_MAX_WORK` (413 past it, checked before it starts); a
    large one runs in a child process and stops if the client disconnects, and a key may have
    `ANNOPLAN_COMPUTATIONS_PER_KEY` such at once (429 with `Retry-After` past it).
    """
    work = bounded_work(
        certificate_work(body.certificate, len(body.labels)),
        settings.certificate_max_work,
        setting="certificate_max_work",
        code="certificate_too_large",
        advice="verify against fewer label rows, or a certificate with fewer resamples",
    )
    try:
        check = await computed(request, principal.key_id, work, verify_certificate, body.certificate, body.labels)
    except ClientGone:
        return Response(status_code=499)  # nobody reads it: the client closed the connection
    except ValueError as error:
        raise Invalid(str(error)[:300], code="invalid_certificate") from None
    return VerifyResult(
        match=check.match,
        notes=list(check.notes),
        mismatches=[
            MismatchRead(field=m.field, reason=m.reason, certified=m.certified, found=m.found) for m in check.mismatches
        ],
    )
