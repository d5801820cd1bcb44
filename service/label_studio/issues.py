"""The inbox's writes: a Label Studio delivery that could not be recorded, or an annotation an
export holds back, kept with what is needed to replay it (one open issue per task, annotation and reason)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.data.models import LabelStudioIssue, Project
from service.label_studio.reading import Skipped


def issue_keys(payload: dict[str, Any]) -> tuple[str | None, str | None]:
    """The task and annotation a delivery names, as the inbox stores them."""
    raw = payload.get("annotation")
    ann: dict[str, Any] = raw if isinstance(raw, dict) else {}
    task = ann.get("task")
    if task is None and isinstance(payload.get("task"), dict):
        task = payload["task"].get("id")
    return (
        str(task)[:40] if task is not None else None,
        str(ann["id"])[:40] if ann.get("id") is not None else None,
    )


def file_issue(
    session: Session,
    project: Project,
    payload: dict[str, Any],
    reason: str,
    *,
    from_name: str | None,
    criterion: str | None,
) -> LabelStudioIssue:
    """Keep a delivery that could not be recorded, with what is needed to replay it."""
    task, annotation = issue_keys(payload)
    issue = LabelStudioIssue(
        project_id=project.id,
        action=str(payload.get("action"))[:40],
        task=task,
        annotation=annotation,
        reason=reason,
        payload={"body": payload, "from_name": from_name, "criterion": criterion},
        status="open",
    )
    session.add(issue)
    session.flush()
    return issue


def keep_in_inbox(
    session: Session,
    project: Project,
    held: list[tuple[Skipped, dict[str, Any]]],
    *,
    from_name: str | None,
    criterion: str | None,
) -> list[int]:
    """The open issues of the annotations an export holds back: for each, the one already open for
    the same task, annotation and reason (a later sync files no duplicate), else a new one."""
    if not held:
        return []
    open_ones = {
        (task, annotation, reason): issue_id
        for issue_id, task, annotation, reason in session.execute(
            select(
                LabelStudioIssue.id, LabelStudioIssue.task, LabelStudioIssue.annotation, LabelStudioIssue.reason
            ).where(LabelStudioIssue.project_id == project.id, LabelStudioIssue.status == "open")
        )
    }
    out = []
    for skipped, payload in held:
        key = (*issue_keys(payload), skipped.reason)
        if key not in open_ones:
            open_ones[key] = file_issue(
                session, project, payload, skipped.reason, from_name=from_name, criterion=criterion
            ).id
        out.append(open_ones[key])
    return out
