"""Label Studio: import of a JSON export, the annotation webhook, and batches as tasks."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import Body, Depends, Header, Path, Query, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRouter
from pydantic import ValidationError

from service.assignment import visible_batch
from service.auth import Principal, Role, principal_for
from service.deps import (
    PM,
    PrincipalDep,
    ProjectForAnnotator,
    ProjectForPMWrite,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriteSession,
    scoped_project,
)
from service.errors import Invalid, TooLarge, Unauthorized, error_responses
from service.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.label_studio import (
    RECORDED_ACTIONS,
    ExportedTask,
    ImportResult,
    LSAnnotationEvent,
    LSTask,
    WebhookResult,
    batch_tasks,
    import_export,
    record_annotation,
)
from service.models import Project
from service.uploads import RawBody

router = APIRouter(prefix="/projects/{pid}", tags=["label-studio"])

FromName = Annotated[
    str | None,
    Query(description="The choices control (`from_name`) to read; default: each annotation's first choices result."),
]
Criterion = Annotated[
    str | None, Query(description="The criterion the labels are for (needed when the project has several).")
]


@router.post(
    "/import/label-studio",
    response_model=ImportResult,
    responses=error_responses(401, 403, 404, 409, 413, 415, 422),
)
def import_label_studio(
    pid: ProjectId,
    project: ProjectForPMWrite,
    tasks: Annotated[list[LSTask], Body(description="A Label Studio JSON export: a list of tasks.")],
    request: Request,
    raw: RawBody,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    from_name: FromName = None,
    primary: Annotated[
        str | None, Query(description="Label Studio user id or email of the annotator to make the `primary` rater.")
    ] = None,
    judge_prefix: Annotated[
        str, Query(max_length=100, description="Prefix of the judge raters' external ids (`<prefix><model_version>`).")
    ] = "",
    criterion: Criterion = None,
    strict: Annotated[bool, Query(description="422, writing nothing, if any choice matches no project label.")] = False,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Import a Label Studio JSON export (admin, pm) as items, raters and labels, in one transaction.

    - Each task is an item: external id `str(task id)` (or `data.annoplan_item` for tasks
      exported by `GET .../batches/{bid}/label-studio`), text `data.text` or the first string
      field, the other scalar `data` fields as features. Existing items are updated.
    - Each annotator is a `human` rater with external id `ls-user-<Label Studio user id>`
      (name: the email when `completed_by` carries one); `primary` makes one of them the
      `primary`. Each prediction's `model_version` is a `judge` rater `<judge_prefix><model_version>`.
    - A choice maps to the project label equal to it, else to the one equal ignoring case.
      Choices that map to none are listed in `unmapped` (`strict=true`: 422, nothing written);
      cancelled annotations, results without exactly one choice, and a rater's earlier label
      of an item it labeled again are listed in `skipped`.
    """
    n_rows = sum(len(t.annotations) + len(t.predictions) for t in tasks)
    if max(len(tasks), n_rows) > settings.max_rows:
        raise TooLarge(
            f"{max(len(tasks), n_rows)} rows in one request; the limit is {settings.max_rows}", code="too_many_rows"
        )
    return idempotent_write(
        session, principal, idem, request_fingerprint(request, raw),
        lambda: (200, import_export(
            session, project, principal, tasks, from_name=from_name, primary=primary,
            judge_prefix=judge_prefix, criterion=criterion, strict=strict,
        )),
    )


def _webhook_principal(
    pid: ProjectId,
    session: WriteSession,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    x_annoplan_secret: Annotated[
        str | None,
        Header(alias="X-Annoplan-Secret", description="The shared secret (an admin or pm key of the project), "
               "when it is not sent as `Authorization: Bearer <key>`."),
    ] = None,
) -> Principal:
    """The key sent as the webhook's shared secret, if it is an admin key or a pm key of this project."""
    header = f"Bearer {x_annoplan_secret}" if x_annoplan_secret else authorization
    if not header:
        raise Unauthorized("missing secret: send 'Authorization: Bearer <key>' or 'X-Annoplan-Secret: <key>'")
    principal = principal_for(session, header)
    if principal.role != Role.ADMIN and (principal.role != Role.PM or principal.project_id != pid):
        raise Unauthorized("the secret must be an admin key or a pm key of this project")
    return principal


WebhookPrincipal = Annotated[Principal, Depends(_webhook_principal)]


def _webhook_project(pid: ProjectId, session: WriteSession, principal: WebhookPrincipal) -> Project:
    """The project the webhook writes to (404 when an admin's secret names no project)."""
    return scoped_project(session, principal, pid, PM)


WEBHOOK_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["action"],
                    "properties": {
                        "action": {"type": "string", "example": "ANNOTATION_CREATED"},
                        "annotation": {"$ref": "#/components/schemas/LSAnnotation"},
                        "task": {"$ref": "#/components/schemas/LSTask"},
                    },
                    "description": "A Label Studio webhook payload; fields not listed are ignored.",
                }
            }
        },
    }
}


@router.post(
    "/webhooks/label-studio",
    response_model=WebhookResult,
    response_model_exclude_none=True,
    openapi_extra=WEBHOOK_BODY,
    responses=error_responses(401, 404, 409, 422),
)
def label_studio_webhook(
    pid: ProjectId,
    request: Request,
    project: Annotated[Project, Depends(_webhook_project)],
    principal: WebhookPrincipal,
    raw: RawBody,
    session: WriteSession,
    from_name: FromName = None,
    criterion: Criterion = None,
    idem: IdempotencyKey = None,
) -> JSONResponse:
    """Receive Label Studio `ANNOTATION_CREATED` / `ANNOTATION_UPDATED` webhooks and record the label.

    Configure the webhook in Label Studio with this URL and a header `Authorization: Bearer
    <key>` or `X-Annoplan-Secret: <key>`, the key being an admin key or a pm key of this
    project; any other secret is a 401 and nothing is written. The annotator is the rater
    `ls-user-<user id>` (created as `human` when new); an unknown task becomes an item from
    the payload's `task`. An update that changes the choice appends a correction. Other
    actions answer `{"ignored": "<action>"}`; a cancelled annotation, or one without exactly
    one choice, answers with `skipped` and writes nothing; a choice that matches no project
    label, or a malformed payload, is a 422.
    """
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"body is not valid JSON: {exc}", code="malformed_body") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
        raise Invalid("body must be a JSON object with a string 'action'", code="malformed_body")
    if payload["action"] not in RECORDED_ACTIONS:
        return JSONResponse({"ignored": payload["action"]})
    try:
        event = LSAnnotationEvent.model_validate(payload)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        where = ".".join(str(p) for p in errors[0]["loc"])
        fields = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in errors[:50]]
        raise Invalid(f"{where}: {errors[0]['msg']}", code="malformed_body", fields=fields) from None
    return idempotent_write(
        session, principal, idem, request_fingerprint(request, raw),
        lambda: (200, record_annotation(
            session, project, principal, event, from_name=from_name, criterion=criterion
        ).model_dump(exclude_none=True)),
    )


@router.get(
    "/batches/{bid}/label-studio",
    response_model=list[ExportedTask],
    responses=error_responses(401, 403, 404),
)
def batch_as_tasks(
    pid: ProjectId,
    bid: Annotated[str, Path(description="The batch's id.")],
    project: ProjectForAnnotator,
    session: ReadSession,
    principal: PrincipalDep,
) -> list[ExportedTask]:
    """A batch's items as Label Studio tasks to import (pm, or the batch's annotator).

    Each task's `data` holds the item's features, its `text` (when it has one) and
    `annoplan_item` (its external id, which the import and webhook map back to the item);
    `meta` names the batch and its rater. No labels are included: not the judge's, not
    other raters'.
    """
    return batch_tasks(session, visible_batch(session, project, principal, bid))
