"""Label Studio: import of any JSON export, the annotation webhook and its inbox, and batches as tasks."""

from __future__ import annotations

from functools import partial
from typing import Annotated, Any, Literal

import orjson
from fastapi import Body, Depends, Header, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from fastapi.routing import APIRouter

from service.core.errors import Invalid, TooLarge, Unauthorized, UnsupportedMediaType, echo, error_responses
from service.core.outbound import checked, label_studio_policy
from service.core.pagination import Page, PageDep, page_of
from service.core.uploads import RawBody
from service.data.idempotency import IdempotencyKey, idempotent_write, request_fingerprint
from service.data.keys import Principal, principal_for
from service.data.models import Project
from service.data.queries import issues_page
from service.deps import (
    PM,
    PrincipalDep,
    ProjectForAnnotator,
    ProjectForPM,
    ProjectForPMWrite,
    ProjectId,
    ReadSession,
    SettingsDep,
    WriterTurn,
    WriteSession,
    scoped_project,
    written,
)
from service.label_studio.annotators import (
    AnnotatorsMapped,
    AnnotatorsRead,
    AnnotatorsRequest,
    AnnotatorUnmapped,
    annotators_read,
    known_emails,
    map_annotators,
    unmap_annotator,
    wanted_annotators,
)
from service.label_studio.batches import ExportedTask, batch_tasks
from service.label_studio.connect import (
    ConnectRequest,
    ConnectResult,
    checked_project,
    connect_finish,
    connect_key,
    connected,
    revoke_keys,
)
from service.label_studio.inbox import (
    IssueRead,
    ReplayResult,
    WebhookResult,
    issue_read,
    receive,
    replay_issues,
)
from service.label_studio.payloads import EXPORT_HINT
from service.label_studio.reconcile import ImportResult, import_rows
from service.label_studio.sync import SyncRequest, SyncResult, fetch_snapshot
from service.planning.batches import visible_batch
from service.schemas.keys import Role

router = APIRouter(prefix="/projects/{pid}", tags=["label-studio"])

FromName = Annotated[
    str | None,
    Query(
        max_length=200,
        description="The choices control (`from_name`) whose choice is the label; needed only "
        "when the labeling config has several single-choice controls and their choices do not tell.",
    ),
]
LabelConfig = Annotated[
    str | None,
    Query(
        max_length=100_000,
        description="The Label Studio project's labeling config (XML): names the control, "
        "the data key of the text and the choices. Remembered by the project; webhooks carry it themselves.",
    ),
]
Criterion = Annotated[
    str | None, Query(description="The criterion the labels are for (needed when the project has several).")
]


def _json_export(content_type: Annotated[str | None, Header(include_in_schema=False)] = None) -> None:
    """415 for a body that is not JSON (Label Studio's CSV and TSV exports), naming the export to send."""
    media = (content_type or "application/json").split(";")[0].strip().lower()
    if media != "application/json":
        raise UnsupportedMediaType(
            f"content type {echo(media)} is not accepted: Label Studio's CSV and TSV exports flatten the "
            "annotations and cannot be read; export JSON instead (Export > JSON, or JSON_MIN) and send it as "
            f"application/json, or {EXPORT_HINT}"
        )


@router.post(
    "/import/label-studio",
    response_model=ImportResult,
    responses=error_responses(401, 403, 404, 409, 413, 415, 422),
    dependencies=[Depends(_json_export)],
)
def import_label_studio(
    pid: ProjectId,
    project: ProjectForPMWrite,
    rows: Annotated[
        list[Any], Body(description="A Label Studio JSON export: a snapshot, the Export button's JSON, or JSON_MIN.")
    ],
    request: Request,
    raw: RawBody,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
    label_config: LabelConfig = None,
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

    - Every JSON export is read: a snapshot (with full predictions), the Export button's JSON
      (its predictions are only ids: listed in `skipped` with where to get their labels), and
      JSON_MIN (one row per annotation; needs `from_name` or `label_config` unless the project
      remembers its control from a webhook or an earlier import; with `download_all_tasks=true`
      its rows without annotator are tasks without annotations: items without labels).
      CSV and TSV exports are a 415 that names the JSON export to send instead.
    - An annotation created from a prediction (Label Studio's `parent_prediction`) is not an
      independent human label, and one with several choices gives no one label: neither is
      written; both are listed in `skipped` and kept as open inbox issues (`issues`).
    - The label is the choice of one choices control: `from_name`, else the config's one
      single-choice control, else the one whose every choice maps to a project label.
    - Each task is an item: external id `str(task id)` (or `data.annoplan_item` for tasks
      exported by `GET .../batches/{bid}/label-studio`), text the data key the control reads
      (else `data.text`, else the first string field), the other scalar `data` fields as features.
    - Each annotator is a `human` rater `ls-user-<Label Studio user id>` (name: the email when
      `completed_by` carries one; a nameless existing rater gets it); `primary` makes one of
      them the `primary` (promoting a `human` made by a webhook). Each prediction's
      `model_version` is a `judge` rater `<judge_prefix><model_version>`.
    - A choice maps through the project's `label_map`, else to the equal label, else to the one
      equal ignoring case. Choices that map to none are listed in `unmapped` (`strict=true`: 422).
    - The export is the state of its tasks: a cancelled annotation, or one without a choice,
      withdraws its rater's label of the task; an annotation or prediction recorded earlier for
      these tasks and absent now was deleted. Both become retraction events (`changes.retracted`).
    """
    n_rows = sum(
        1 + len(r.get("annotations") or []) + len(r.get("predictions") or []) for r in rows if isinstance(r, dict)
    )
    if max(len(rows), n_rows) > settings.max_rows:
        raise TooLarge(
            f"{max(len(rows), n_rows)} rows in one request; the limit is {settings.max_rows}", code="too_many_rows"
        )
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, raw),
        lambda: (
            200,
            import_rows(
                session,
                project,
                principal,
                rows,
                label_config=label_config,
                from_name=from_name,
                primary=primary,
                judge_prefix=judge_prefix,
                criterion=criterion,
                strict=strict,
            ),
        ),
    )


def _webhook_principal(
    pid: ProjectId,
    _turn: WriterTurn,
    session: WriteSession,
    authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    x_annoplan_secret: Annotated[
        str | None,
        Header(
            alias="X-Annoplan-Secret",
            description="The shared secret (an admin or pm key of the project), "
            "when it is not sent as `Authorization: Bearer <key>`.",
        ),
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
                        "annotation": {
                            "type": "object",
                            "description": "The annotation: `id`, `completed_by`, `result`, `was_cancelled`, `task`.",
                        },
                        "annotations": {
                            "type": "array",
                            "items": {"type": "object"},
                            "description": "`ANNOTATIONS_DELETED`: the deleted annotations' `id`s.",
                        },
                        "tasks": {
                            "type": "array",
                            "items": {"type": "object"},
                            "description": "`TASKS_DELETED`: the deleted tasks' `id`s.",
                        },
                        "task": {"type": "object", "description": "The task: `id` and `data`."},
                        "project": {"type": "object", "description": "The Label Studio project: `label_config`."},
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
    """Receive Label Studio webhooks: annotations created, updated and deleted, and tasks deleted.

    The actions recorded are `ANNOTATION_CREATED`, `ANNOTATION_UPDATED`, `ANNOTATIONS_DELETED`
    and `TASKS_DELETED`.

    Configure the webhook in Label Studio with this URL and a header `Authorization: Bearer
    <key>` or `X-Annoplan-Secret: <key>`, the key being an admin key or a pm key of this
    project; any other secret is a 401 and nothing is written. The control and the text's
    data key are read from the payload's `project.label_config`. The annotator is the rater
    `ls-user-<user id>` (created as `human` when new); an unknown task becomes an item. An
    update that changes the choice appends a correction; a skipped (cancelled) or emptied
    annotation, and a deleted one, append a retraction of that rater's label of the task (under
    every criterion it was recorded for); a deleted task, a retraction of every label its
    annotations and predictions gave. Other actions answer `{"ignored": "<action>"}`.

    A delivery that cannot be recorded (an annotation created from a prediction, whose
    `parent_prediction` makes it no independent human label; several choices in the control;
    a choice no label maps to; an ambiguous control; a rater kind clash) is kept in the inbox
    (`GET .../integrations/label-studio/issues`) and answered 200 with `issue` and `reason`,
    since Label Studio drops a refused delivery; only a body that is not a JSON object with an
    `action` is a 422.
    """
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Invalid(f"body is not valid JSON: {exc}", code="malformed_body") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
        raise Invalid("body must be a JSON object with a string 'action'", code="malformed_body")
    return idempotent_write(
        session,
        principal,
        idem,
        request_fingerprint(request, raw),
        lambda: (
            200,
            receive(session, project, principal, payload, from_name=from_name, criterion=criterion).model_dump(
                exclude_none=True
            ),
        ),
    )


@router.get(
    "/integrations/label-studio/issues",
    response_model=Page[IssueRead],
    responses=error_responses(401, 403, 404, 422),
)
def list_issues(
    pid: ProjectId,
    project: ProjectForPM,
    session: ReadSession,
    principal: PrincipalDep,
    page: PageDep,
    status: Annotated[
        Literal["open", "resolved", "superseded", "all"], Query(description="Which issues (default: open).")
    ] = "open",
) -> Page[IssueRead]:
    """Webhook deliveries that could not be recorded (admin, pm), oldest first, with the reason."""
    rows = issues_page(session, project.id, None if status == "all" else status, page)
    return page_of(rows, page, key=lambda i: i.id, read=issue_read)


@router.post(
    "/integrations/label-studio/issues/replay",
    response_model=ReplayResult,
    responses=error_responses(401, 403, 404),
)
def replay_label_studio_issues(
    pid: ProjectId, project: ProjectForPMWrite, session: WriteSession, principal: PrincipalDep
) -> ReplayResult:
    """Replay the open issues (admin, pm) in the order they came, e.g. after a `label_map` fix.

    An issue recorded now is `resolved`; one whose annotation a later delivery recorded (or
    deleted) is `superseded` and not replayed; the rest stay open with the current reason.
    """
    return replay_issues(session, project, principal)


@router.post(
    "/integrations/label-studio/sync",
    response_model=SyncResult,
    responses=error_responses(401, 403, 404, 409, 422, 429, 502),
)
async def sync_label_studio(
    pid: ProjectId,
    project: ProjectForPM,
    body: SyncRequest,
    request: Request,
    principal: PrincipalDep,
    settings: SettingsDep,
) -> SyncResult:
    """Pull a full snapshot of a Label Studio project and reconcile the project with it (admin, pm).

    Fetches the project's labeling config and a snapshot export (full predictions and
    annotators) through Label Studio's API with `token` (used for this call only, never
    stored), then reconciles as `POST .../import/label-studio` does: new and changed labels,
    retractions of skipped, emptied and deleted annotations and predictions, judges from
    predictions by `model_version`, retractions of the labels of tasks deleted in Label Studio.
    Only links of this Label Studio project are compared, so several Label Studio projects can
    feed one project. Idempotent: a second sync with nothing changed in Label
    Studio reports no change. This recovers any webhook delivery that was missed. 502 when
    Label Studio cannot be reached, refuses the token, or fails the export; nothing is written.
    A `url` outside `ANNOPLAN_LABEL_STUDIO_URLS` (when set), or at a loopback, private or
    reserved address (unless listed there), is a 422 and is not called (docs/operations.md). 429
    with `Retry-After` while this project's sync or connect, or this key's share of them, is in
    flight.
    """
    policy = label_studio_policy(settings)
    checked(body.url, policy, code_not_allowed="label_studio_not_allowed")
    # no write transaction open while Label Studio works, and the writer's turn waited for in the event loop
    # 429 when this project's sync, or this key's share of syncs, is already running
    with request.app.state.sync_slots.slot(project.id, principal.key_id):
        label_config, rows = await run_in_threadpool(
            fetch_snapshot,
            body,
            policy,
            ready_within=settings.label_studio_ready_seconds,
            max_calls=settings.label_studio_max_calls,
        )
    done = await written(
        request,
        lambda writer: import_rows(
            writer,
            scoped_project(writer, principal, project.id, PM),
            principal,
            rows,
            label_config=label_config,
            from_name=body.from_name,
            primary=body.primary,
            judge_prefix=body.judge_prefix,
            criterion=body.criterion,
            ls_project=body.project,
            whole_project=True,
        ),
    )
    return SyncResult(**done.model_dump(), tasks=len(rows))


@router.post(
    "/integrations/label-studio/connect",
    response_model=ConnectResult,
    responses=error_responses(401, 403, 404, 409, 422, 429, 502),
)
async def connect_label_studio(
    pid: ProjectId,
    project: ProjectForPM,
    body: ConnectRequest,
    request: Request,
    principal: PrincipalDep,
    settings: SettingsDep,
) -> ConnectResult:
    """Set a Label Studio project up for this project and say what changed (admin, pm).

    Through Label Studio's API with `token` (used for this call only, never stored): refuses a
    labeling config without a choices control (a Rating or Number control for a numeric project; 422)
    before changing anything; hides
    collaborators' predictions from annotators (`show_collab_predictions: false`; with
    `hide_predictions: false` it changes nothing and answers 409 while they are shown); raises
    `maximum_annotations` to the plan's panel (the primary and every secondary with a planned
    list); creates the webhook to `<webhook_url>/projects/<pid>/webhooks/label-studio` with a new
    pm key of this project as its `X-Annoplan-Secret` (a re-run rotates it: the earlier key is
    revoked once Label Studio holds the new one); and one Data Manager tab per secondary,
    `annoplan: <rater>`, showing the tasks of that annotator's batches (imported from
    `GET .../batches/{bid}/label-studio`, whose tasks carry `annoplan_rater`). `annotators` maps
    Label Studio users (by id or email: Label Studio's user list is read) to raters as `POST
    .../integrations/label-studio/annotators` does, checked before anything changes (422, 409) and
    made once Label Studio is set up; each mapped rater (the primary too) gets its tab. Idempotent: run
    it again after planning to add tabs for new secondaries. 502 when Label Studio cannot be
    reached or refuses; the same outbound rules, and the same 429 while a sync or connect of this
    project or this key's share is in flight, apply as to the sync.
    """
    policy = label_studio_policy(settings)
    checked(body.url, policy, code_not_allowed="label_studio_not_allowed")
    with request.app.state.sync_slots.slot(project.id, principal.key_id):
        found, ls_emails = await run_in_threadpool(
            partial(checked_project, numeric=project.scale == "numeric", pairwise=project.kind == "pairwise"),
            body,
            policy,
        )

        key, wanted, tabs = await written(
            request, lambda writer: connect_key(writer, project, body, ls_emails, max_rows=settings.max_rows)
        )
        hook_url = f"{body.webhook_url.rstrip('/')}/projects/{project.id}/webhooks/label-studio"
        try:
            changed, hook_id, maximum, views = await run_in_threadpool(
                lambda: connected(
                    body, policy, found, hook_url=hook_url, secret=key.secret, panel=key.panel, tab_for=tabs
                )
            )
        except Exception:
            await written(request, lambda writer: revoke_keys(writer, [key.key_id]))
            raise

    mapped = await written(
        request,
        lambda writer: connect_finish(
            writer,
            scoped_project(writer, principal, project.id, PM),
            principal,
            key,
            wanted,
            max_rows=settings.max_rows,
        ),
    )
    return ConnectResult(
        changed=[*changed, *mapped.changed],
        webhook_id=hook_id,
        maximum_annotations=maximum,
        views=views,
        key_id=key.key_id,
        annotators=mapped.annotators,
        moved=mapped.moved,
    )


@router.get(
    "/integrations/label-studio/annotators",
    response_model=AnnotatorsRead,
    responses=error_responses(401, 403, 404),
)
def list_annotators(pid: ProjectId, project: ProjectForPM, session: ReadSession) -> AnnotatorsRead:
    """The Label Studio users mapped to raters (admin, pm); an unmapped user is the rater `ls-user-<id>`."""
    return annotators_read(session, project.id)


@router.post(
    "/integrations/label-studio/annotators",
    response_model=AnnotatorsMapped,
    responses=error_responses(401, 403, 404, 409, 413, 422),
)
def map_label_studio_annotators(
    pid: ProjectId,
    project: ProjectForPMWrite,
    body: AnnotatorsRequest,
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
) -> AnnotatorsMapped:
    """Map Label Studio users to the project's raters (admin, pm): user 7's annotations become labels of
    the rater named (e.g. `ann-1`, the rater its batches are issued to) on every path: webhook, import,
    sync and inbox replay.

    A user is named by its Label Studio id, or by an email an import or sync has shown (a snapshot's
    `completed_by`; `connect` asks Label Studio itself). The rater must exist and be `human` or `primary`
    (an unknown rater or a judge is a 422); a rater is one person (mapped to one user; 409 for a second), and a
    user that took labels through a rater stays mapped to it (409). Labels the user gave before the mapping, as
    the rater `ls-user-<id>`, are moved at once: each current label retracted there and written for the mapped
    rater (the history keeps both; `moved` counts them), and the Label Studio links follow, so later deletions
    and syncs reach them; a cell the two raters label differently is a 409 (`labels_conflict`, naming the
    cells) and nothing is written. Mapping again what is already mapped changes nothing.
    """
    wanted = wanted_annotators(body.annotators, known_emails(session, project.id))
    return map_annotators(session, project, principal, wanted, max_rows=settings.max_rows)


@router.delete(
    "/integrations/label-studio/annotators/{ls_user}",
    response_model=AnnotatorUnmapped,
    responses=error_responses(401, 403, 404, 409, 413, 422),
)
def unmap_label_studio_annotator(
    pid: ProjectId,
    project: ProjectForPMWrite,
    ls_user: Annotated[int, Path(gt=0, le=2**53, description="The Label Studio user id.")],
    session: WriteSession,
    principal: PrincipalDep,
    settings: SettingsDep,
) -> AnnotatorUnmapped:
    """Undo a Label Studio user's mapping (admin, pm; 404 when it is not mapped): its annotations are the
    rater `ls-user-<id>`'s again, on every path.

    Nothing is lost: the labels the mapped rater holds through Label Studio annotations are moved back onto
    `ls-user-<id>` (retracted on the rater and written for `ls-user-<id>`, the history keeps both; `moved`
    counts them) and their Label Studio links follow, so later deletions and syncs reach them; the rater keeps
    every label it has from anywhere else. A cell `ls-user-<id>` already labels differently is a 409
    (`labels_conflict`) and nothing changes. The user can then be mapped to another rater.
    """
    return unmap_annotator(session, project, principal, ls_user, max_rows=settings.max_rows)


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

    Each task's `data` holds the item's features, its text (when it has one) under the data
    key the project's labeling config reads (`text` until one is known), and
    `annoplan_item` (its external id, which the import and webhook map back to the item) and
    `annoplan_rater` (the batch's annotator: the tab `connect` made filters on it);
    `meta` names the batch and its rater. No labels are included: not the judge's, not
    other raters'.
    """
    return batch_tasks(session, project, visible_batch(session, project, principal, bid))
