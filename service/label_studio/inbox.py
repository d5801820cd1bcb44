"""Label Studio webhook deliveries: recorded, or kept in an inbox with the reason and replayed later.

Label Studio drops a delivery answered with anything but 2xx and never retries, so a delivery
that cannot be recorded (an annotation made from a prediction, several choices in the
control, a choice outside the labels, an ambiguous control, a rater kind clash) is stored with
its body and answered 200 with the issue; fix the cause (e.g.
``PATCH /projects/{pid}`` a ``label_map``) and replay the inbox.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.core.errors import AppError, Invalid
from service.data.keys import Principal
from service.data.models import LabelStudioIssue, Project, utcnow
from service.label_studio.annotators import user_raters
from service.label_studio.issues import file_issue
from service.label_studio.links import retract_deleted, retract_tasks, withdraw
from service.label_studio.mapping import (
    chosen_value,
    from_prediction,
    human_rater,
    item_from_task,
    project_kinds,
    project_label,
    resolve_control,
    several_choices,
    task_order,
)
from service.label_studio.payloads import LSAnnotationEvent, LSAnnotationsDeleted, LSTasksDeleted, TaskId
from service.label_studio.reconcile import reconcile, tasks_for_annotation
from service.schemas.labels import LabelsAccepted

RECORDED_ACTIONS = ("ANNOTATION_CREATED", "ANNOTATION_UPDATED")
DELETED_ACTION = "ANNOTATIONS_DELETED"
TASKS_DELETED_ACTION = "TASKS_DELETED"


class WebhookResult(BaseModel):
    """What one webhook delivery did; absent fields do not apply."""

    ignored: str | None = Field(None, description="The action, when it is not one this endpoint records.")
    action: str | None = Field(None, description="The Label Studio action recorded, such as ANNOTATION_CREATED.")
    task: TaskId | None = Field(None, description="The Label Studio task id.")
    item: str | None = Field(None, description="External id of the item labeled.")
    rater: str | None = Field(None, description="External id of the rater who labeled.")
    value: str | None = Field(None, description="The project label recorded.")
    skipped: str | None = Field(
        None, description="Why the annotation gives no label (its rater's label of the task is withdrawn)."
    )
    retracted: int | None = Field(
        None, description="Current labels withdrawn by a skip, an emptied annotation or a deletion."
    )
    restored: int | None = Field(
        None,
        description="Cells whose label went back to what the rater's newest remaining annotation of the task "
        "gave (a deletion of the newer of two annotations).",
    )
    unknown_annotations: list[int] | None = Field(
        None, description="Deleted annotation ids this project never recorded."
    )
    unknown_tasks: list[int] | None = Field(None, description="Deleted task ids no recorded label came from.")
    item_created: bool | None = Field(None, description="Whether the item was new.")
    rater_created: bool | None = Field(None, description="Whether the rater was new.")
    labels: LabelsAccepted | None = Field(None, description="Label events written.")
    label_seq: int | None = Field(None, description="The project's last label event after this delivery.")
    issue: int | None = Field(
        None, description="The inbox issue that keeps this delivery, when it could not be recorded."
    )
    reason: str | None = Field(None, description="Why the delivery could not be recorded.")


class IssueRead(BaseModel):
    """A delivery kept in the inbox."""

    id: int = Field(description="The issue's id.")
    action: str = Field(description="The Label Studio action of the delivery.")
    task: str | None = Field(description="The Label Studio task id; null when the delivery has none.")
    annotation: str | None = Field(description="The annotation id; null when the delivery has none.")
    reason: str = Field(description="Why the delivery could not be recorded.")
    status: str = Field(
        description="`open`, `resolved` (replayed and recorded) or `superseded` (a later delivery, "
        "import or sync recorded the same annotation, or it or its task was deleted)."
    )
    created_at: Any = Field(description="When the delivery arrived (UTC).")
    resolved_at: Any = Field(None, description="When the issue was resolved or superseded; null while open.")


class ReplayResult(BaseModel):
    """What a replay did to the issues that were open."""

    resolved: list[int] = Field(description="Ids of the issues replayed and recorded.")
    superseded: list[int] = Field(description="Ids of the issues a later delivery, import or sync had recorded.")
    still_open: list[IssueRead] = Field(description="The issues that still cannot be recorded.")


def _validated_event(model: type[BaseModel], payload: dict[str, Any]) -> Any:
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        raise Invalid(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}", code="malformed_body") from None


def _supersede(
    session: Session, project: Project, annotations: list[str], *, before: int | None = None, tasks: bool = False
) -> None:
    """Open issues of these annotations (or, with ``tasks``, of these tasks) are out of date: a
    later state was recorded."""
    stmt = update(LabelStudioIssue).where(
        LabelStudioIssue.project_id == project.id,
        LabelStudioIssue.status == "open",
        (LabelStudioIssue.task if tasks else LabelStudioIssue.annotation).in_(annotations),
    )
    if before is not None:
        stmt = stmt.where(LabelStudioIssue.id < before)
    session.execute(stmt.values(status="superseded", resolved_at=utcnow()))


def record_delivery(
    session: Session,
    project: Project,
    principal: Principal,
    payload: dict[str, Any],
    *,
    from_name: str | None,
    criterion: str | None,
    issue: int | None = None,
) -> WebhookResult:
    """Record one webhook body: a created or updated annotation's label (or its withdrawal when
    skipped or emptied), or the retraction of the labels of deleted annotations or tasks; raises
    what it cannot record (an annotation made from a prediction, several choices, a choice no
    label maps to, ...).

    ``issue`` is the inbox issue being replayed (older open issues of the annotation are superseded).
    """
    action = payload["action"]
    if action == DELETED_ACTION:
        deleted = _validated_event(LSAnnotationsDeleted, payload)
        ids = [a.id for a in deleted.annotations]
        forgotten, unknown = retract_deleted(session, project, principal, ids)
        _supersede(session, project, [str(i) for i in ids], before=issue)
        return WebhookResult(
            action=action,
            retracted=forgotten.retracted,
            restored=forgotten.restored or None,
            unknown_annotations=unknown,
            label_seq=forgotten.label_seq,
        )
    if action == TASKS_DELETED_ACTION:
        gone = _validated_event(LSTasksDeleted, payload)
        task_ids = [t.id for t in gone.tasks]
        forgotten, unknown = retract_tasks(
            session, project, principal, task_ids, gone.project.id if gone.project is not None else None
        )
        _supersede(session, project, [str(i) for i in task_ids], before=issue, tasks=True)
        return WebhookResult(
            action=action, retracted=forgotten.retracted, unknown_tasks=unknown, label_seq=forgotten.label_seq
        )
    if action not in RECORDED_ACTIONS:
        return WebhookResult(ignored=action)
    event: LSAnnotationEvent = _validated_event(LSAnnotationEvent, payload)
    ann = event.annotation
    task_id = ann.task if ann.task is not None else event.task.id if event.task is not None else None
    if task_id is None:
        raise Invalid("the payload names no task (neither annotation.task nor task.id)", code="malformed_body")
    if (why := from_prediction(ann)) is not None:
        raise Invalid(why, code="not_independent")
    ls_project = event.project.id if event.project is not None else event.task.project if event.task else None
    control = resolve_control(
        project,
        label_config=event.project.label_config if event.project else None,
        from_name=from_name,
        results=ann.result,
    )
    tasks = tasks_for_annotation(task_id, event.task, ann)
    item = item_from_task(tasks[0], control.data_key if control else None).external_id
    rater = human_rater(ann.completed_by, user_raters(session, project.id))[0]
    done = WebhookResult(action=action, task=task_id, item=item, rater=rater)
    if not ann.was_cancelled and (why := several_choices(ann.result, control.name if control else None)) is not None:
        raise Invalid(why, code="several_choices")
    choice, reason = (
        (None, "cancelled")
        if ann.was_cancelled
        else chosen_value(
            ann.result,
            control.name if control else None,
            project_kinds(project),
            task_order(tasks[0]) if project.kind == "pairwise" else "AB",
        )
    )
    if choice is None:
        withdrawn = withdraw(session, project, item, rater, criterion, ann.id, task=task_id, ls_project=ls_project)
        result = done.model_copy(
            update={
                "skipped": reason,
                "retracted": withdrawn.retracted or None,
                "label_seq": withdrawn.label_seq if withdrawn.retracted else None,
            }
        )
    else:
        written = reconcile(
            session,
            project,
            principal,
            tasks,
            control,
            fmt="webhook",
            criterion=criterion,
            strict=True,
            deletions=False,
            ls_project=ls_project,
        )
        result = done.model_copy(
            update={
                "value": project_label(choice, project),
                "labels": written.labels,
                "item_created": written.items.created == 1,
                "rater_created": bool(written.raters_created),
            }
        )
    if ann.id is not None:
        _supersede(session, project, [str(ann.id)], before=issue)
    return result


def receive(
    session: Session,
    project: Project,
    principal: Principal,
    payload: dict[str, Any],
    *,
    from_name: str | None,
    criterion: str | None,
) -> WebhookResult:
    """Record a delivery, or keep it in the inbox and say why (nothing else written)."""
    try:
        with session.begin_nested():
            return record_delivery(session, project, principal, payload, from_name=from_name, criterion=criterion)
    except AppError as exc:
        issue = file_issue(session, project, payload, exc.detail, from_name=from_name, criterion=criterion)
        return WebhookResult(action=payload["action"], issue=issue.id, reason=exc.detail)


def issue_read(issue: LabelStudioIssue) -> IssueRead:
    return IssueRead(
        id=issue.id,
        action=issue.action,
        task=issue.task,
        annotation=issue.annotation,
        reason=issue.reason,
        status=issue.status,
        created_at=issue.created_at,
        resolved_at=issue.resolved_at,
    )


def replay_issues(session: Session, project: Project, principal: Principal) -> ReplayResult:
    """Replay the open issues in the order they came; those recorded now are resolved."""
    resolved: list[int] = []
    issues = session.scalars(
        select(LabelStudioIssue)
        .where(LabelStudioIssue.project_id == project.id, LabelStudioIssue.status == "open")
        .order_by(LabelStudioIssue.id)
    ).all()
    for issue in issues:
        session.refresh(issue)
        if issue.status != "open":
            continue
        saved = issue.payload
        try:
            with session.begin_nested():
                record_delivery(
                    session,
                    project,
                    principal,
                    saved["body"],
                    from_name=saved["from_name"],
                    criterion=saved["criterion"],
                    issue=issue.id,
                )
        except AppError as exc:
            issue.reason = exc.detail
            continue
        issue.status, issue.resolved_at = "resolved", utcnow()
        resolved.append(issue.id)
    session.flush()
    for issue in issues:
        session.refresh(issue)
    return ReplayResult(
        resolved=resolved,
        superseded=[i.id for i in issues if i.status == "superseded"],
        still_open=[issue_read(i) for i in issues if i.status == "open"],
    )
