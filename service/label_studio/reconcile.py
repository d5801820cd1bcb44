"""Label Studio: its exports and annotation webhooks reconciled into items, raters, label events
and retractions.

Identities (documented in the endpoints too):

- a task is the item ``data["annoplan_item"]`` when the task came from this service's batch
  export, else the item ``str(task id)``;
- a Label Studio user is the rater ``ls-user-<user id>`` (the email only when Label Studio
  gives no id); webhooks carry only the id, so the id is what ties both paths together;
- a prediction is the judge ``<judge_prefix><model_version>``;
- each annotation and prediction id is linked to the cell it labels, so a deletion (or an
  annotation gone from a later export) retracts that cell's label.

Annotations that need a person before they can count are written nowhere and kept in the inbox
with the reason, on every path (webhook, import, sync): one created from a prediction (Label
Studio's ``parent_prediction``: a copy of a model's label, not an independent human label), and
one with several choices in the control that holds the criterion's one label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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
    Batch,
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
from service.label_studio.config import (
    ChoiceControl,
    choice_controls,
    control_kinds,
)
from service.label_studio.links import (
    LINK_COLUMNS,
    LINK_KEY,
    Cell,
    LinkRow,
    ls_id_of,
    project_criterion,
    retract_links,
)
from service.label_studio.mapping import (
    ITEM_KEY,
    LABEL_ROW,
    RATER_KEY,
    chosen_value,
    from_prediction,
    human_rater,
    is_user,
    item_from_task,
    project_label,
    resolve_control,
    several_choices,
)
from service.label_studio.payloads import (
    EXPORT_HINT,
    LSAnnotation,
    LSResult,
    LSTask,
    TaskId,
    is_json_min,
    tasks_from_json_min,
)
from service.schemas import ItemIn, ItemsUpserted, LabelIn, LabelsAccepted, RaterCreate


class Unmapped(BaseModel):
    """A choice that matches none of the project's labels; not written."""

    task: TaskId = Field(description="The Label Studio task id.")
    annotation: TaskId | None = Field(None, description="The annotation id; null for a prediction.")
    prediction: TaskId | None = Field(None, description="The prediction id; null for an annotation.")
    rater: str = Field(description="External id of the rater the choice came from.")
    value: str = Field(description="The choice that matched no label (add it to label_map to map it).")


class Skipped(BaseModel):
    """An annotation or prediction that gives no label (it withdraws its rater's label of the task), and why."""

    task: TaskId = Field(description="The Label Studio task id.")
    annotation: TaskId | None = Field(None, description="The annotation id; null for a prediction.")
    prediction: TaskId | None = Field(None, description="The prediction id; null for an annotation.")
    rater: str | None = Field(None, description="External id of the rater; null when none could be told.")
    reason: str = Field(description="Why it gives no label.")


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


class TaskMeta(BaseModel):
    """Where an exported task comes from."""

    annoplan_batch: str = Field(description="The batch the task was exported from.")
    annoplan_rater: str = Field(description="External id of the rater the batch was issued to.")


class ExportedTask(BaseModel):
    """A Label Studio task to import: the item's data under its original keys, and its batch."""

    data: dict[str, Any] = Field(description="The item's text and features under their original keys.")
    meta: TaskMeta = Field(description="Where the task comes from.")


@dataclass
class ExportReading:
    """What an export holds for a project: items, raters (kind, name), label rows, cells to
    withdraw, annotation/prediction links, and what was left out."""

    items: list[ItemIn]
    raters: dict[str, RaterCreate] = field(default_factory=dict)
    cells: dict[Cell, tuple[LabelIn | None, dict[str, Any]]] = field(default_factory=dict)
    links: dict[tuple[str, int], Cell] = field(default_factory=dict)
    link_tasks: dict[tuple[str, int], int | None] = field(default_factory=dict)
    seen: dict[str, set[int]] = field(default_factory=lambda: {"annotation": set(), "prediction": set()})
    unmapped: list[Unmapped] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    held: list[tuple[Skipped, dict[str, Any]]] = field(default_factory=list)
    """Annotations kept for the inbox (reported in ``skipped`` too), each with a webhook body that replays it."""

    def hold(self, skipped: Skipped, task: LSTask, annotation: LSAnnotation) -> None:
        self.skipped.append(skipped)
        body = {
            "action": "ANNOTATION_CREATED",
            "annotation": {**annotation.model_dump(mode="json"), "task": task.id},
            "task": {"id": task.id, "data": task.data},
        }
        self.held.append((skipped, body))

    @property
    def rows(self) -> list[LabelIn]:
        return [row for row, _ in self.cells.values() if row is not None]

    @property
    def withdrawn(self) -> list[Cell]:
        return [cell for cell, (row, _) in self.cells.items() if row is None]


def read_export(
    tasks: list[LSTask],
    project: Project,
    control: ChoiceControl | None,
    *,
    primary: str | None = None,
    judge_prefix: str = "",
    criterion: str | None = None,
) -> ExportReading:
    """Items, raters and label rows of Label Studio tasks; what does not map is reported.

    Annotators become ``human`` raters (``primary`` names the one to make ``primary``: its
    Label Studio id or email); predictions become ``judge`` raters. A cancelled annotation,
    or one without a choice of the control, withdraws its rater's label of the task;
    when one rater labels a task twice, the later annotation wins and the earlier one is
    reported as superseded. An annotation made from a prediction, or with several choices, is
    held for the inbox and changes nothing (one with several choices still counts as present,
    so the label it had stands).
    """
    from_name = control.name if control is not None else None
    reading = ExportReading(items=[item_from_task(task, control.data_key if control else None) for task in tasks])

    def read(
        source: str,
        ls_id: TaskId | None,
        item: str,
        where: dict[str, Any],
        results: list[LSResult] | None,
        reason: str | None = None,
    ) -> None:
        cell = (item, where["rater"])
        if (number := ls_id_of(ls_id)) is not None:
            reading.seen[source].add(number)
            reading.links[(source, number)] = cell
            reading.link_tasks[(source, number)] = ls_id_of(where["task"])
        choice = None
        if results is not None:
            choice, reason = chosen_value(results, from_name, control_kinds(project.scale == "numeric"))
        label = None
        if choice is not None:
            label = project_label(choice, project)
            if label is None:
                reading.unmapped.append(Unmapped(**where, value=choice))
                return
        prior = reading.cells.get(cell)
        if prior is not None:
            reading.skipped.append(Skipped(**prior[1], reason="superseded by a later label of this rater"))
        if label is None:
            reading.skipped.append(Skipped(**where, reason=str(reason)))
        row = (
            LABEL_ROW.validate_python({"item": item, "rater": where["rater"], "criterion": criterion, "value": label})
            if label
            else None
        )
        reading.cells[cell] = (row, where)

    for task, item in zip(tasks, reading.items, strict=True):
        for ann in task.annotations:
            rater, name = human_rater(ann.completed_by)
            where = {"task": task.id, "annotation": ann.id, "rater": rater}
            if (why := from_prediction(ann)) is not None:
                reading.hold(Skipped(**where, reason=why), task, ann)
                continue
            prior = reading.raters.get(rater)
            is_primary = primary is not None and is_user(ann.completed_by, primary)
            reading.raters[rater] = RaterCreate(
                external_id=rater,
                kind="primary" if is_primary or (prior is not None and prior.kind == "primary") else "human",
                name=name or (prior.name if prior is not None else None),
            )
            if not ann.was_cancelled and (why := several_choices(ann.result, from_name)) is not None:
                if (number := ls_id_of(ann.id)) is not None:
                    reading.seen["annotation"].add(number)
                reading.hold(Skipped(**where, reason=why), task, ann)
                continue
            read("annotation", ann.id, item.external_id, where, None if ann.was_cancelled else ann.result, "cancelled")
        for pred in task.predictions:
            if isinstance(pred, int):
                reading.seen["prediction"].add(pred)
                reading.skipped.append(
                    Skipped(
                        task=task.id,
                        prediction=pred,
                        reason=f"only the prediction's id is in this export (the Export button's JSON): {EXPORT_HINT}",
                    )
                )
                continue
            if not pred.model_version:
                reading.skipped.append(
                    Skipped(task=task.id, prediction=pred.id, reason="prediction without model_version")
                )
                continue
            rater = judge_prefix + pred.model_version
            reading.raters[rater] = RaterCreate(external_id=rater, kind="judge", name=pred.model_version)
            read(
                "prediction",
                pred.id,
                item.external_id,
                {"task": task.id, "prediction": pred.id, "rater": rater},
                pred.result,
            )
    if primary is not None and not any(r.kind == "primary" for r in reading.raters.values()):
        raise Invalid(
            f"primary {echo(primary)} is not the id or email of an annotator in this export", code="unknown_primary"
        )
    return reading


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
        lambda: read_export(tasks, project, control, primary=primary, judge_prefix=judge_prefix, criterion=criterion)
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
    retracted_links = retract_links(session, project, gone, keep=linked)
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
            updated=sum(old is not None and old != new for old, new in values),
            unchanged=sum(old == new for old, new in values),
            retracted=retracted.retracted + retracted_links.retracted,
        ),
        unmapped=reading.unmapped,
        skipped=reading.skipped,
        issues=issues,
    )


def _issue_keys(payload: dict[str, Any]) -> tuple[str | None, str | None]:
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
    task, annotation = _issue_keys(payload)
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
        key = (*_issue_keys(payload), skipped.reason)
        if key not in open_ones:
            open_ones[key] = file_issue(
                session, project, payload, skipped.reason, from_name=from_name, criterion=criterion
            ).id
        out.append(open_ones[key])
    return out


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


def batch_tasks(session: Session, project: Project, batch: Batch) -> list[ExportedTask]:
    """A batch's items as Label Studio tasks, in batch order; no labels of anyone.

    The text goes under the data key the project's labeling config reads (``text`` until
    one is known), so the tasks import into the project they came from; ``annoplan_rater`` names
    the batch's annotator, for the Data Manager tab that shows it its tasks.
    """
    text_key = (project.label_studio or {}).get("data_key") or "text"
    rater = session.scalar(select(Rater.external_id).where(Rater.id == batch.rater_id))
    found = {
        ext: (text, features)
        for ext, text, features in session.execute(
            select(Item.external_id, Item.text, Item.features).where(
                Item.project_id == batch.project_id, Item.external_id.in_(batch.items)
            )
        )
    }
    meta = TaskMeta(annoplan_batch=batch.id, annoplan_rater=str(rater))
    return [
        ExportedTask(
            data={
                **found[ext][1],
                **({text_key: found[ext][0]} if found[ext][0] is not None else {}),
                ITEM_KEY: ext,
                RATER_KEY: str(rater),
            },
            meta=meta,
        )
        for ext in batch.items
    ]
