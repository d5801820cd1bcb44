"""Label Studio: its JSON export and annotation webhooks read as items, raters and label rows.

Identities (documented in the endpoints too):

- a task is the item ``data["annoplan_item"]`` when the task came from this service's batch
  export, else the item ``str(task id)``;
- a Label Studio user is the rater ``ls-user-<user id>`` (the email only when Label Studio
  gives no id); webhooks carry only the id, so the id is what ties both paths together;
- a prediction is the judge ``<judge_prefix><model_version>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.auth import Principal
from service.errors import Conflict, Invalid, echo
from service.item_store import ids_by_external, upsert_items
from service.label_store import write_labels
from service.models import Batch, Item, Project, Rater
from service.project_rows import lock_project
from service.schemas import ItemIn, ItemsUpserted, LabelIn, LabelsAccepted, RaterCreate

ITEM_KEY = "annoplan_item"
USER_PREFIX = "ls-user-"
RECORDED_ACTIONS = ("ANNOTATION_CREATED", "ANNOTATION_UPDATED")

TaskId = int | str


class _LabelStudio(BaseModel):
    """Label Studio objects carry many fields this service does not read; they are ignored."""

    model_config = ConfigDict(extra="ignore")


class LSUser(_LabelStudio):
    """An expanded ``completed_by``: the user's id and email."""

    id: int | None = None
    email: str | None = None

    @model_validator(mode="after")
    def _identified(self) -> LSUser:
        if self.id is None and not self.email:
            raise ValueError("completed_by needs an 'id' or an 'email'")
        return self


class LSResult(_LabelStudio):
    """One region of an annotation or prediction; only ``type: choices`` is read."""

    from_name: str = ""
    to_name: str = ""
    type: str
    value: dict[str, Any] = Field(default_factory=dict)


class LSAnnotation(_LabelStudio):
    """A user's annotation of a task; ``was_cancelled`` marks a skipped task."""

    id: TaskId | None = None
    completed_by: int | LSUser = Field(description="The user id, or an object with `id` and `email`.")
    result: list[LSResult] = Field(default_factory=list)
    was_cancelled: bool = False
    task: TaskId | None = Field(None, description="The task's id (webhook payloads).")


class LSPrediction(_LabelStudio):
    """A model's pre-annotation of a task, named by ``model_version``."""

    id: TaskId | None = None
    model_version: str | None = None
    result: list[LSResult] = Field(default_factory=list)


class LSTask(_LabelStudio):
    """A task of a Label Studio JSON export (or the ``task`` of a webhook payload)."""

    id: TaskId
    data: dict[str, Any]
    meta: dict[str, Any] = Field(default_factory=dict)
    annotations: list[LSAnnotation] = Field(default_factory=list)
    predictions: list[LSPrediction] = Field(default_factory=list)


class LSAnnotationEvent(_LabelStudio):
    """An ``ANNOTATION_CREATED`` / ``ANNOTATION_UPDATED`` webhook payload."""

    action: str
    annotation: LSAnnotation
    task: LSTask | None = None


class Unmapped(BaseModel):
    """A choice that matches none of the project's labels; not written."""

    task: TaskId
    annotation: TaskId | None = None
    prediction: TaskId | None = None
    rater: str
    value: str


class Skipped(BaseModel):
    """An annotation or prediction that gives no label, and why."""

    task: TaskId
    annotation: TaskId | None = None
    prediction: TaskId | None = None
    rater: str | None = None
    reason: str


class ImportResult(BaseModel):
    """What an import wrote (item upserts, new raters, label events) and what it left out."""

    items: ItemsUpserted
    raters_created: list[RaterCreate]
    labels: LabelsAccepted
    unmapped: list[Unmapped]
    skipped: list[Skipped]


class WebhookResult(BaseModel):
    """What one webhook call did; absent fields do not apply."""

    ignored: str | None = Field(None, description="The action, when it is not one this endpoint records.")
    action: str | None = None
    task: TaskId | None = None
    item: str | None = None
    rater: str | None = None
    value: str | None = Field(None, description="The project label recorded.")
    skipped: str | None = Field(None, description="Why the annotation gives no label (nothing written).")
    item_created: bool | None = None
    rater_created: bool | None = None
    labels: LabelsAccepted | None = None


class TaskMeta(BaseModel):
    """Where an exported task comes from."""

    annoplan_batch: str
    annoplan_rater: str


class ExportedTask(BaseModel):
    """A Label Studio task to import: the item's text, external id and features, and its batch."""

    data: dict[str, Any]
    meta: TaskMeta


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def item_from_task(task: LSTask) -> ItemIn:
    """The item a task describes: its external id, text and scalar features.

    The text is ``data["text"]``, else (for tasks not exported by this service) the first
    string field; the other scalar fields become features, lists and objects are dropped.

    >>> task = LSTask(id=7, data={"dialogue": "hi", "turns": 2, "tags": ["a"]})
    >>> item_from_task(task).model_dump()
    {'external_id': '7', 'features': {'turns': 2}, 'text': 'hi'}
    >>> item_from_task(LSTask(id=9, data={"annoplan_item": "i3", "topic": "a"})).model_dump()
    {'external_id': 'i3', 'features': {'topic': 'a'}, 'text': None}
    """
    data = task.data
    exported = isinstance(data.get(ITEM_KEY), str)
    if exported or isinstance(data.get("text"), str):
        text_key: str | None = "text"
    else:
        text_key = next((k for k, v in data.items() if isinstance(v, str)), None)
    text = data.get(text_key) if text_key else None
    features = {k: v for k, v in data.items() if k not in (text_key, ITEM_KEY) and _scalar(v)}
    try:
        return ItemIn(
            external_id=data[ITEM_KEY] if exported else str(task.id),
            text=text if isinstance(text, str) else None,
            features=features,
        )
    except ValidationError as exc:
        raise Invalid(f"task {task.id}: {exc.errors()[0]['msg']}", code="validation_error") from None


def human_rater(user: int | LSUser) -> tuple[str, str | None]:
    """The rater external id of a Label Studio user, and its name (the email when known).

    >>> human_rater(7)
    ('ls-user-7', None)
    >>> human_rater(LSUser(id=7, email="ana@example.com"))
    ('ls-user-7', 'ana@example.com')
    """
    if isinstance(user, int):
        return f"{USER_PREFIX}{user}", None
    if user.id is not None:
        return f"{USER_PREFIX}{user.id}", user.email
    return str(user.email), user.email


def _is_user(user: int | LSUser, who: str) -> bool:
    """Whether ``who`` is the user's id or (ignoring case) its email."""
    if isinstance(user, int):
        return who == str(user)
    return who == str(user.id) or (user.email is not None and who.casefold() == user.email.casefold())


def chosen_value(results: list[LSResult], from_name: str | None) -> tuple[str | None, str | None]:
    """The one choice of the choices result read, or ``None`` and why there is none.

    The result read is the one of control ``from_name``, or the first choices result.

    >>> r = [LSResult(type="choices", from_name="tone", value={"choices": ["rude"]}),
    ...      LSResult(type="choices", from_name="verdict", value={"choices": ["Pass"]})]
    >>> chosen_value(r, None), chosen_value(r, "verdict")
    (('rude', None), ('Pass', None))
    >>> chosen_value(r, "topic")
    (None, "no choices result from 'topic'")
    """
    result = next((r for r in results if r.type == "choices" and from_name in (None, r.from_name)), None)
    if result is None:
        return None, "no choices result" + (f" from {echo(from_name)}" if from_name else "")
    choices = result.value.get("choices")
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        return None, "value.choices is not a list of strings"
    if len(choices) != 1:
        return None, f"{len(choices)} choices selected; one is needed" if choices else "no choice selected"
    return choices[0], None


def label_for(choice: str, labels: list[str]) -> str | None:
    """The project label a choice maps to: the exact label, else the one equal ignoring case.

    >>> label_for("PASS", ["pass", "fail"]), label_for("Unsure", ["pass", "fail"])
    ('pass', None)
    >>> label_for("a", ["A", "a"]), label_for("b", ["A", "B", "b "]), label_for("x", ["X", "x "])
    ('a', 'B', 'X')
    >>> label_for("ok", ["OK", "Ok"]) is None
    True
    """
    if choice in labels:
        return choice
    folded = [label for label in labels if label.casefold() == choice.casefold()]
    return folded[0] if len(folded) == 1 else None


@dataclass(frozen=True)
class ExportReading:
    """What an export holds for a project: items, raters (kind, name), rows, and what was left out."""

    items: list[ItemIn]
    raters: list[RaterCreate]
    rows: list[LabelIn]
    unmapped: list[Unmapped]
    skipped: list[Skipped]


def read_export(
    tasks: list[LSTask],
    labels: list[str],
    *,
    from_name: str | None = None,
    primary: str | None = None,
    judge_prefix: str = "",
    criterion: str | None = None,
) -> ExportReading:
    """Items, raters and label rows of a Label Studio export; what does not map is reported.

    Annotators become ``human`` raters (``primary`` names the one to make ``primary``: its
    Label Studio id or email); predictions become ``judge`` raters. Cancelled annotations
    and results without exactly one choice are skipped; when one rater labels an item
    twice, the later annotation wins and the earlier one is reported as superseded.
    """
    raters: dict[str, RaterCreate] = {}
    cells: dict[tuple[str, str], tuple[LabelIn, dict[str, Any]]] = {}
    unmapped: list[Unmapped] = []
    skipped: list[Skipped] = []

    def read(item: str, where: dict[str, Any], results: list[LSResult]) -> None:
        choice, reason = chosen_value(results, from_name)
        if choice is None:
            skipped.append(Skipped(**where, reason=str(reason)))
            return
        label = label_for(choice, labels)
        if label is None:
            unmapped.append(Unmapped(**where, value=choice))
            return
        prior = cells.get((item, where["rater"]))
        if prior is not None:
            skipped.append(Skipped(**prior[1], reason="superseded by a later label of this rater"))
        row = LabelIn(item=item, rater=where["rater"], criterion=criterion, value=label)
        cells[(item, where["rater"])] = (row, where)

    items = [item_from_task(task) for task in tasks]
    for task, item in zip(tasks, items, strict=True):
        for ann in task.annotations:
            rater, name = human_rater(ann.completed_by)
            prior = raters.get(rater)
            is_primary = primary is not None and _is_user(ann.completed_by, primary)
            raters[rater] = RaterCreate(
                external_id=rater,
                kind="primary" if is_primary or (prior is not None and prior.kind == "primary") else "human",
                name=name or (prior.name if prior is not None else None),
            )
            where = {"task": task.id, "annotation": ann.id, "rater": rater}
            if ann.was_cancelled:
                skipped.append(Skipped(**where, reason="cancelled"))
            else:
                read(item.external_id, where, ann.result)
        for pred in task.predictions:
            if not pred.model_version:
                skipped.append(Skipped(task=task.id, prediction=pred.id, reason="prediction without model_version"))
                continue
            rater = judge_prefix + pred.model_version
            raters[rater] = RaterCreate(external_id=rater, kind="judge", name=pred.model_version)
            read(item.external_id, {"task": task.id, "prediction": pred.id, "rater": rater}, pred.result)
    if primary is not None and not any(r.kind == "primary" for r in raters.values()):
        raise Invalid(
            f"primary {echo(primary)} is not the id or email of an annotator in this export", code="unknown_primary"
        )
    return ExportReading(items, list(raters.values()), [row for row, _ in cells.values()], unmapped, skipped)


def _compatible(wanted: str, existing: str) -> bool:
    """An existing rater can take labels meant for ``wanted``: same kind, or a primary for a human."""
    return wanted == existing or (wanted, existing) == ("human", "primary")


def ensure_raters(session: Session, project: Project, wanted: list[RaterCreate]) -> list[RaterCreate]:
    """Create the raters ``wanted`` that the project lacks and return them; 409 on a kind clash."""
    kinds = {r.external_id: r.kind for r in wanted}
    existing = {
        ext: kind
        for ext, kind in session.execute(
            select(Rater.external_id, Rater.kind).where(
                Rater.project_id == project.id, Rater.external_id.in_(list(kinds))
            )
        )
    }
    for ext, kind in existing.items():
        if not _compatible(kinds[ext], kind):
            raise Conflict(f"rater {echo(ext)} exists as a {kind} rater, not as {kinds[ext]}", code="rater_kind_clash")
    new = [r for r in wanted if r.external_id not in existing]
    if any(r.kind == "primary" for r in new) and session.scalar(
        select(Rater.id).where(Rater.project_id == project.id, Rater.kind == "primary")
    ):
        raise Conflict("this project already has a primary rater", code="primary_exists")
    try:
        with session.begin_nested():
            session.add_all(Rater(project_id=project.id, **r.model_dump()) for r in new)
            session.flush()
    except IntegrityError:  # a concurrent request created one of them first
        raise Conflict("a rater of this request, or a primary, was just created; retry", code="rater_exists") from None
    return new


def _validated(make: Any) -> Any:
    """``make()``, with a pydantic error (e.g. an id over 200 characters) as a 422."""
    try:
        return make()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Invalid(f"{where}: {first['msg']}", code="validation_error") from None


def import_export(
    session: Session,
    project: Project,
    principal: Principal,
    tasks: list[LSTask],
    *,
    from_name: str | None,
    primary: str | None,
    judge_prefix: str,
    criterion: str | None,
    strict: bool,
) -> ImportResult:
    """Write an export's items, raters and labels in the caller's transaction.

    In strict mode a choice that maps to no label is a 422 before anything is written.
    """
    reading = _validated(
        lambda: read_export(
            tasks, project.labels, from_name=from_name, primary=primary, judge_prefix=judge_prefix, criterion=criterion
        )
    )
    if strict and reading.unmapped:
        raise Invalid(
            f"{len(reading.unmapped)} choice(s) match none of the project's labels {project.labels} "
            "(strict mode); nothing was written",
            code="unmapped_values",
            fields=[u.model_dump(exclude_none=True) for u in reading.unmapped[:100]],
        )
    items = upsert_items(session, project, reading.items)
    created = ensure_raters(session, project, reading.raters)
    labels = write_labels(session, project, principal, reading.rows)
    return ImportResult(
        items=items, raters_created=created, labels=labels, unmapped=reading.unmapped, skipped=reading.skipped
    )


def record_annotation(
    session: Session,
    project: Project,
    principal: Principal,
    event: LSAnnotationEvent,
    *,
    from_name: str | None,
    criterion: str | None,
) -> WebhookResult:
    """Record the label of one created or updated annotation (an update is a correction).

    An unknown task becomes an item from the payload's ``task``; an unknown user becomes a
    ``human`` rater. A choice that maps to no label is a 422; a cancelled annotation or one
    without exactly one choice writes nothing and says why.
    """
    ann = event.annotation
    task_id = ann.task if ann.task is not None else event.task.id if event.task is not None else None
    if task_id is None:
        raise Invalid("the payload names no task (neither annotation.task nor task.id)", code="malformed_body")
    item = item_from_task(event.task) if event.task is not None else None
    item_ext = item.external_id if item is not None else str(task_id)
    rater, name = human_rater(ann.completed_by)
    done = WebhookResult(action=event.action, task=task_id, item=item_ext, rater=rater)
    choice, reason = (None, "cancelled") if ann.was_cancelled else chosen_value(ann.result, from_name)
    if choice is None:
        return done.model_copy(update={"skipped": reason})
    value = label_for(choice, project.labels)
    if value is None:
        raise Invalid(
            f"task {task_id}: choice {echo(choice)} matches none of the project's labels {project.labels}",
            code="unmapped_value",
        )
    row, wanted = _validated(
        lambda: (
            LabelIn(item=item_ext, rater=rater, criterion=criterion, value=value),
            RaterCreate(external_id=rater, kind="human", name=name),
        )
    )
    lock_project(session, project.id)
    item_created = not ids_by_external(session, Item, project.id, [item_ext])
    if item_created:
        if item is None:
            raise Invalid(
                f"unknown task {task_id}: no item {echo(item_ext)} in this project and no task data in the payload",
                code="unknown_task",
            )
        upsert_items(session, project, [item])
    created = ensure_raters(session, project, [wanted])
    labels = write_labels(session, project, principal, [row])
    return done.model_copy(
        update={"value": value, "item_created": item_created, "rater_created": bool(created), "labels": labels}
    )


def batch_tasks(session: Session, batch: Batch) -> list[ExportedTask]:
    """A batch's items as Label Studio tasks, in batch order; no labels of anyone."""
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
            data={**found[ext][1], **({"text": found[ext][0]} if found[ext][0] is not None else {}), ITEM_KEY: ext},
            meta=meta,
        )
        for ext in batch.items
    ]
