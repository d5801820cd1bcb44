"""Label Studio: its exports and annotation webhooks reconciled into items, raters, label events
and retractions, in the caller's transaction (``service.label_studio.reading`` says how tasks are
read: identities, links, and what is held for the inbox).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session

from service.core.errors import Invalid, echo
from service.core.sql import insert_many
from service.data.items import ids_by_external, upsert_items
from service.data.keys import Principal
from service.data.labels import retract_labels, write_labels
from service.data.models import (
    CurrentLabel,
    Item,
    LabelStudioIssue,
    LabelStudioLink,
    Project,
    Rater,
    table_of,
    utcnow,
)
from service.data.projects import lock_project
from service.data.raters import ensure_raters
from service.label_studio.annotators import user_raters
from service.label_studio.config import ChoiceControl, choice_controls
from service.label_studio.issues import keep_in_inbox
from service.label_studio.links import (
    LINK_COLUMNS,
    LINK_KEY,
    Cell,
    LinkRow,
    project_criterion,
    retract_links,
)
from service.label_studio.mapping import resolve_control
from service.label_studio.payloads import (
    EXPORT_HINT,
    LSAnnotation,
    LSTask,
    TaskId,
    is_json_min,
    tasks_from_json_min,
)
from service.label_studio.reading import ExportReading, Skipped, Unmapped, read_export
from service.schemas.items import ItemsUpserted
from service.schemas.labels import LabelsAccepted
from service.schemas.raters import RaterCreate


class LabelChanges(BaseModel):
    """What the labels read did to the project's current labels."""

    added: int = Field(description="Cells that had no current label.")
    updated: int = Field(description="Cells whose current label changed (a correction event).")
    unchanged: int = Field(description="Cells whose current label already had this value.")
    retracted: int = Field(
        description="Current labels withdrawn: skipped, emptied or deleted annotations or predictions."
    )


class ImportResult(BaseModel):
    """What an import (or sync) wrote and what it left out."""

    format: str = Field(description="The export read: `snapshot`, `json` (predictions as ids) or `json_min`.")
    from_name: str | None = Field(description="The choices control whose choice is the label.")
    items: ItemsUpserted = Field(description="Items created, updated and unchanged.")
    raters_created: list[RaterCreate] = Field(description="Raters the export named that the project did not have.")
    raters_updated: list[str] = Field(description="Existing raters that got a missing name, or were made primary.")
    labels: LabelsAccepted = Field(description="Label events written.")
    changes: LabelChanges = Field(description="What the labels read did to the current labels.")
    unmapped: list[Unmapped] = Field(description="Choices that match no project label; not written.")
    skipped: list[Skipped] = Field(description="Annotations and predictions that give no label.")
    issues: list[int] = Field(
        default_factory=list,
        description="Open inbox issues of the annotations kept out of the labels until a person acts: "
        "made from a prediction, or several choices in one criterion (also listed in `skipped`).",
    )


def _validated(make: Callable[[], Any]) -> Any:
    """``make()``, with a pydantic error (e.g. an id over 200 characters) as a 422."""
    try:
        return make()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Invalid(f"{where}: {first['msg']}", code="validation_error") from None


def _current_values(session: Session, project: Project, criterion: str, raters: list[str]) -> dict[Cell, str]:
    """The current labels of these raters, by (item, rater) external ids."""
    return {
        (i, r): v
        for i, r, v in session.execute(
            select(Item.external_id, Rater.external_id, CurrentLabel.value)
            .join(Item, Item.id == CurrentLabel.item_id)
            .join(Rater, Rater.id == CurrentLabel.rater_id)
            .where(Rater.project_id == project.id, Rater.external_id.in_(raters), CurrentLabel.criterion == criterion)
        )
    }


def reconcile(
    session: Session,
    project: Project,
    principal: Principal,
    tasks: list[LSTask],
    control: ChoiceControl | None,
    *,
    fmt: str,
    primary: str | None = None,
    judge_prefix: str = "",
    criterion: str | None = None,
    strict: bool = False,
    deletions: bool = True,
    ls_project: int | None = None,
    whole_project: bool = False,
) -> ImportResult:
    """Bring the project in line with these tasks, in the caller's transaction: upsert items,
    create raters, write changed labels, retract withdrawn ones, remember the links.

    With ``deletions``, an annotation (or, when the export carries predictions, a prediction)
    linked to one of these tasks earlier under this criterion but absent now was deleted: its
    cell is retracted unless something still labels it. Only links of Label Studio project
    ``ls_project`` (and links whose project is unknown) are compared, when it is known; with
    ``whole_project`` (a sync: every task of that project is here) its links to tasks absent
    from the export are of deleted tasks, and are retracted too. In strict mode a choice that
    maps to no label is a 422 before anything is written.
    """
    crit = project_criterion(project, criterion)
    reading: ExportReading = _validated(
        lambda: read_export(
            tasks,
            project,
            control,
            primary=primary,
            judge_prefix=judge_prefix,
            criterion=criterion,
            users=user_raters(session, project.id),
        )
    )
    if strict and reading.unmapped:
        raise Invalid(
            f"choice(s) {sorted({u.value[:100] for u in reading.unmapped})[:10]} match none of the project's "
            f"labels {project.labels} nor its label_map (set one with PATCH /projects/{{pid}}); nothing was written",
            code="unmapped_values",
            fields=[u.model_dump(exclude_none=True) for u in reading.unmapped[:100]],
        )
    lock_project(session, project.id)
    # A task without data (a webhook that names only its id) refers to an item that must exist.
    refs = {i.external_id for t, i in zip(tasks, reading.items, strict=True) if not t.data}
    if missing := refs - set(ids_by_external(session, Item, project.id, sorted(refs))):
        raise Invalid(
            f"unknown task: no item {echo(sorted(missing)[0])} in this project and no task data", code="unknown_task"
        )
    items = upsert_items(session, project, [i for t, i in zip(tasks, reading.items, strict=True) if t.data])
    created, changed = ensure_raters(session, project, list(reading.raters.values()))
    rows = reading.rows
    before = _current_values(session, project, crit, sorted({r["rater"] for r in rows}))
    labels = write_labels(session, project, principal, rows)
    item_ids = ids_by_external(session, Item, project.id, sorted({i.external_id for i in reading.items}))
    rater_ids = ids_by_external(session, Rater, project.id, sorted(reading.raters))
    linked = {(item_ids[i], rater_ids[r]) for i, r in reading.links.values()}
    gone: list[LinkRow] = []
    retract = {(item_ids[i], rater_ids[r]) for i, r in reading.withdrawn}
    if deletions and (item_ids or (whole_project and ls_project is not None)):
        sources = ["annotation", "prediction"] if fmt != "json_min" else ["annotation"]
        scope: ColumnElement[bool] = LabelStudioLink.item_id.in_(list(item_ids.values()))
        if ls_project is not None and whole_project:
            scope = or_(scope, LabelStudioLink.ls_project == ls_project)
        query = select(
            LabelStudioLink.source, LabelStudioLink.ls_id, LabelStudioLink.item_id, LabelStudioLink.rater_id
        ).where(
            LabelStudioLink.project_id == project.id,
            LabelStudioLink.source.in_(sources),
            LabelStudioLink.criterion == crit,
            scope,
        )
        if ls_project is not None:
            query = query.where(or_(LabelStudioLink.ls_project == ls_project, LabelStudioLink.ls_project.is_(None)))
        for source, ls_id, item_id, rater_id in session.execute(query):
            if ls_id not in reading.seen[source]:
                gone.append((source, ls_id, crit, item_id, rater_id))
    retracted_links = retract_links(session, project, principal, gone, keep=linked)
    retracted = retract_labels(session, project, [(i, r, crit) for i, r in sorted(retract)])
    insert_many(
        session,
        table_of(LabelStudioLink),
        LINK_COLUMNS,
        [
            (
                project.id,
                source,
                ls_id,
                item_ids[i],
                rater_ids[r],
                crit,
                reading.link_tasks[(source, ls_id)],
                ls_project,
                reading.link_values.get((source, ls_id)),
                (source, ls_id) in reading.link_values,
            )
            for (source, ls_id), (i, r) in reading.links.items()
        ],
        on_conflict=LINK_KEY,
    )
    values = [(before.get((r["item"], r["rater"])), r["value"]) for r in rows]
    issues = keep_in_inbox(
        session, project, reading.held, from_name=control.name if control else None, criterion=criterion
    )
    # an export's open issues of annotations recorded now (a label or its withdrawal) or deleted are out of
    # date (a webhook supersedes its own, in the inbox)
    recorded = {str(where["annotation"]) for _, where in reading.cells.values() if where.get("annotation") is not None}
    recorded |= {str(ls_id) for source, ls_id, *_ in gone if source == "annotation"}
    if recorded and fmt != "webhook":
        open_ones = session.execute(
            select(LabelStudioIssue.id, LabelStudioIssue.annotation).where(
                LabelStudioIssue.project_id == project.id, LabelStudioIssue.status == "open"
            )
        ).all()  # the open issues are few; the annotations read may be many
        if stale := sorted(i for i, ann in open_ones if ann in recorded and i not in issues):
            session.execute(
                update(LabelStudioIssue)
                .where(LabelStudioIssue.id.in_(stale))
                .values(status="superseded", resolved_at=utcnow())
                .execution_options(synchronize_session=False)
            )
    return ImportResult(
        format=fmt,
        from_name=control.name if control is not None else None,
        items=items,
        raters_created=created,
        raters_updated=changed,
        labels=labels.model_copy(
            # written with a pm's principal: its label_seq is set (null only as an annotator reads it)
            update={"label_seq": max(labels.label_seq or 0, retracted.label_seq, retracted_links.label_seq)}
        ),
        changes=LabelChanges(
            added=sum(old is None for old, _ in values),
            updated=sum(old is not None and old != new for old, new in values) + retracted_links.restored,
            unchanged=sum(old == new for old, new in values),
            retracted=retracted.retracted + retracted_links.retracted,
        ),
        unmapped=reading.unmapped,
        skipped=reading.skipped,
        issues=issues,
    )


def import_rows(
    session: Session,
    project: Project,
    principal: Principal,
    rows: list[Any],
    *,
    label_config: str | None = None,
    from_name: str | None = None,
    primary: str | None = None,
    judge_prefix: str = "",
    criterion: str | None = None,
    strict: bool = False,
    ls_project: int | None = None,
    whole_project: bool = False,
) -> ImportResult:
    """Reconcile any JSON export of Label Studio (snapshot, Export-button JSON, JSON_MIN) into the project.

    ``ls_project`` is the Label Studio project the export is of (else the one its tasks name,
    when they all name one); ``whole_project`` says the export holds every task of it (a sync).
    """
    if is_json_min(rows):
        control = resolve_control(project, label_config=label_config, from_name=from_name, results=())
        if control is None and any(r.get("annotator") not in (None, "", {}) for r in rows):
            raise Invalid(
                "a JSON_MIN export holds each control's value under its name: pass ?from_name=<the choices control> "
                f"or ?label_config=<the project's labeling config>, or {EXPORT_HINT}",
                code="needs_from_name",
            )
        name = control.name if control is not None else ""
        names = frozenset(c.name for c in choice_controls(label_config)) if label_config else frozenset()
        tasks = _tasks(tasks_from_json_min(rows, name, names | {name}))
        return reconcile(
            session,
            project,
            principal,
            tasks,
            control,
            fmt="json_min",
            primary=primary,
            judge_prefix=judge_prefix,
            criterion=criterion,
            strict=strict,
            ls_project=ls_project,
            whole_project=whole_project,
        )
    for n, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("data"), dict):
            raise Invalid(
                f"body.{n} is neither a task with a 'data' object (JSON export) nor a JSON_MIN row (all rows with "
                f"'id' and no 'data'); {EXPORT_HINT}",
                code="validation_error",
            )
    tasks = _tasks(rows)
    results = [r for t in tasks for a in [*t.annotations, *t.predictions] if not isinstance(a, int) for r in a.result]
    control = resolve_control(project, label_config=label_config, from_name=from_name, results=results)
    fmt = "json" if any(isinstance(p, int) for t in tasks for p in t.predictions) else "snapshot"
    return reconcile(
        session,
        project,
        principal,
        tasks,
        control,
        fmt=fmt,
        primary=primary,
        judge_prefix=judge_prefix,
        criterion=criterion,
        strict=strict,
        ls_project=ls_project if ls_project is not None else _one_project(tasks),
        whole_project=whole_project,
    )


def _one_project(tasks: list[LSTask]) -> int | None:
    """The Label Studio project every task names (``project`` of a JSON export's task), if one."""
    named = {t.project for t in tasks}
    return named.pop() if len(named) == 1 else None


def _tasks(rows: list[Any]) -> list[LSTask]:
    """Export tasks validated, an error naming the first bad field as ``body.<n>.<field>``."""
    tasks: list[LSTask] = []
    for n, row in enumerate(rows):
        try:
            tasks.append(LSTask.model_validate(row))
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(p) for p in ("body", n, *first["loc"]))
            raise Invalid(f"{where}: {first['msg']}", code="validation_error") from None
    return tasks


def tasks_for_annotation(task_id: TaskId, task: LSTask | None, annotation: LSAnnotation) -> list[LSTask]:
    """The one task a webhook's annotation labels, with that annotation alone (no data: the
    payload named only the task's id, whose item must exist)."""
    if task is None:
        return [LSTask(id=task_id, data={}, annotations=[annotation])]
    return [task.model_copy(update={"annotations": [annotation], "predictions": []})]
