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

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from sqlalchemy import ColumnElement, delete, or_, select, update
from sqlalchemy.orm import Session

from service.core.errors import Invalid, echo
from service.core.sql import insert_many
from service.data.items import ids_by_external, upsert_items
from service.data.keys import Principal
from service.data.labels import label_for, retract_labels, write_labels
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
from service.label_studio.config import ChoiceControl, choice_controls, pick_control
from service.label_studio.payloads import (
    EXPORT_HINT,
    LSAnnotation,
    LSResult,
    LSTask,
    LSUser,
    TaskId,
    is_json_min,
    tasks_from_json_min,
)
from service.schemas import ItemIn, ItemsUpserted, LabelIn, LabelsAccepted, LabelsRetracted, RaterCreate

ITEM_KEY = "annoplan_item"
RATER_KEY = "annoplan_rater"
"""The task data field naming the annotator a batch was issued to: Data Manager tabs filter on it
(:mod:`service.label_studio.connect`); not a feature of the item."""
LABEL_ROW = TypeAdapter(LabelIn)
"""Validates (and normalises the ids of) a label row read from an export, as an upload's rows are."""
USER_PREFIX = "ls-user-"


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


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def item_from_task(task: LSTask, data_key: str | None = None) -> ItemIn:
    """The item a task describes: its external id, text and scalar features.

    The text is ``data[data_key]`` (the key the labeling config shows), else ``data["text"]``,
    else the first string field; the other scalar fields become features, lists and objects
    are dropped.

    >>> task = LSTask(id=7, data={"dialogue": "hi", "turns": 2, "tags": ["a"]})
    >>> item_from_task(task).model_dump()
    {'external_id': '7', 'features': {'turns': 2}, 'text': 'hi'}
    >>> item_from_task(LSTask(id=9, data={"annoplan_item": "i3", "topic": "a"})).model_dump()
    {'external_id': 'i3', 'features': {'topic': 'a'}, 'text': None}
    >>> item_from_task(LSTask(id=4, data={"title": "Order 17", "review": "late"}), "review").model_dump()
    {'external_id': '4', 'features': {'title': 'Order 17'}, 'text': 'late'}
    """
    data = task.data
    exported = isinstance(data.get(ITEM_KEY), str)
    if data_key is not None and data_key in data:
        text_key: str | None = data_key
    elif exported or isinstance(data.get("text"), str):
        text_key = "text"
    else:
        text_key = next((k for k, v in data.items() if isinstance(v, str)), None)
    text = data.get(text_key) if text_key else None
    features = {k: v for k, v in data.items() if k not in (text_key, ITEM_KEY, RATER_KEY) and _scalar(v)}
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
    result = _choices_result(results, from_name)
    if result is None:
        return None, "no choices result" + (f" from {echo(from_name)}" if from_name else "")
    choices = result.value.get("choices")
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        return None, "value.choices is not a list of strings"
    if len(choices) != 1:
        return None, f"{len(choices)} choices selected; one is needed" if choices else "no choice selected"
    return choices[0], None


def _choices_result(results: list[LSResult], from_name: str | None) -> LSResult | None:
    return next((r for r in results if r.type == "choices" and from_name in (None, r.from_name)), None)


def several_choices(results: list[LSResult], from_name: str | None) -> str | None:
    """Why an annotation cannot give a criterion its one label: several choices picked in the
    control read; ``None`` when it has at most one.

    >>> r = [LSResult(type="choices", from_name="sentiment", value={"choices": ["Positive", "Mixed"]})]
    >>> several_choices(r, "sentiment")  # doctest: +ELLIPSIS
    "2 choices ['Positive', 'Mixed'] selected in 'sentiment', whose choice is the criterion's one label: ..."
    >>> several_choices(r, "flags") is None
    True
    """
    result = _choices_result(results, from_name)
    if result is None:
        return None
    choices = result.value.get("choices")
    if not isinstance(choices, list) or len(choices) < 2:
        return None
    return (
        f"{len(choices)} choices {[str(c)[:100] for c in choices[:10]]} selected in {echo(result.from_name)}, "
        "whose choice is the criterion's one label: no label is written; correct the annotation in Label Studio "
        "to one choice, or name a single-choice control with ?from_name="
    )


def from_prediction(annotation: LSAnnotation) -> str | None:
    """Why an annotation is not an independent human label (it was created from a prediction:
    Label Studio's ``parent_prediction``); ``None`` when it is one.

    >>> from_prediction(LSAnnotation(completed_by=2, parent_prediction=40))  # doctest: +ELLIPSIS
    "created from prediction 40 (Label Studio's parent_prediction): a copy of a model's label, ..."
    >>> from_prediction(LSAnnotation(completed_by=2)) is None
    True
    """
    if annotation.parent_prediction is None:
        return None
    return (
        f"created from prediction {annotation.parent_prediction} (Label Studio's parent_prediction): a copy of a "
        "model's label, not an independent human label, so it is kept out of the labels; hide predictions from "
        "annotators (Label Studio project setting show_collab_predictions: false) and have the task annotated afresh"
    )


def _maps(project: Project) -> Callable[[str], bool]:
    return lambda choice: label_for(choice, project.labels, project.label_map) is not None


def likeliest_control(results: Iterable[LSResult], maps: Callable[[str], bool]) -> ChoiceControl | None:
    """The control the results show to hold the label when no labeling config is at hand: the
    only one, else the one with most single choices that map to a project label (422 on a tie).

    Its data key is taken to be its ``to_name`` (Label Studio's templates name the object tag
    after the data key).
    """
    mapped: dict[str, int] = {}
    to_name: dict[str, str] = {}
    for r in results:
        if r.type != "choices":
            continue
        choices = r.value.get("choices")
        one = choices[0] if isinstance(choices, list) and len(choices) == 1 and isinstance(choices[0], str) else None
        mapped[r.from_name] = mapped.get(r.from_name, 0) + (one is not None and maps(one))
        to_name.setdefault(r.from_name, r.to_name)
    ranked = sorted(mapped.items(), key=lambda kv: -kv[1])
    if not ranked:
        return None
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        raise Invalid(
            f"the results hold several choices controls {sorted(mapped)} and none is plainly the label: "
            "pass ?from_name= or ?label_config=",
            code="ambiguous_from_name",
        )
    name = ranked[0][0]
    return ChoiceControl(name, to_name[name], to_name[name] or None, (), True)


def resolve_control(
    project: Project, *, label_config: str | None, from_name: str | None, results: Iterable[LSResult]
) -> ChoiceControl | None:
    """The choices control that holds the label, from the first of: the labeling config given
    (remembered on the project), ``from_name``, the control the project remembers, the results.

    ``None`` only when there is nothing to read (no config, no name, no choices result).
    """
    if label_config:
        control = pick_control(choice_controls(label_config), from_name, _maps(project))
        if project.label_studio != control.as_dict():
            project.label_studio = control.as_dict()
        return control
    stored = project.label_studio
    if stored and from_name in (None, stored["from_name"]):
        return ChoiceControl(
            stored["from_name"], stored["to_name"], stored["data_key"], tuple(stored["choices"]), stored["single"]
        )
    if from_name is not None:
        return ChoiceControl(from_name, "", None, (), True)
    return likeliest_control(results, _maps(project))


Cell = tuple[str, str]  # (item external id, rater external id)
LinkRow = tuple[str, int, str, int, int]  # (source, ls_id, criterion, item id, rater id)
LINK_COLUMNS = ("project_id", "source", "ls_id", "item_id", "rater_id", "criterion", "ls_task", "ls_project")
LINK_KEY = ("project_id", "source", "ls_id", "criterion")


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


def _ls_id(value: TaskId | None) -> int | None:
    """A Label Studio object id as an int (ids of hand-made exports may be other strings)."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


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
        if (number := _ls_id(ls_id)) is not None:
            reading.seen[source].add(number)
            reading.links[(source, number)] = cell
            reading.link_tasks[(source, number)] = _ls_id(where["task"])
        choice = None
        if results is not None:
            choice, reason = chosen_value(results, from_name)
        label = None
        if choice is not None:
            label = label_for(choice, project.labels, project.label_map)
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
            is_primary = primary is not None and _is_user(ann.completed_by, primary)
            reading.raters[rater] = RaterCreate(
                external_id=rater,
                kind="primary" if is_primary or (prior is not None and prior.kind == "primary") else "human",
                name=name or (prior.name if prior is not None else None),
            )
            if not ann.was_cancelled and (why := several_choices(ann.result, from_name)) is not None:
                if (number := _ls_id(ann.id)) is not None:
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


def _criterion(project: Project, criterion: str | None) -> str:
    if criterion is None and len(project.criteria) == 1:
        return project.criteria[0]
    if criterion not in project.criteria:
        raise Invalid(
            f"criterion {echo(criterion)} is not one of the project's criteria {project.criteria}; pass ?criterion=",
            code="validation_error",
        )
    return str(criterion)


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
    crit = _criterion(project, criterion)
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
    retracted_links = _retract_links(session, project, gone, keep=linked)
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


def _retract_links(
    session: Session, project: Project, links: list[LinkRow], *, keep: Collection[tuple[int, int]] = ()
) -> LabelsRetracted:
    """Forget these links and retract the cells they labelled, unless another link (or a cell in
    ``keep``: (item id, rater id) labelled by the export being read) still labels the cell."""
    for source, ls_id, criterion, _, _ in links:
        session.execute(
            delete(LabelStudioLink).where(
                LabelStudioLink.project_id == project.id,
                LabelStudioLink.source == source,
                LabelStudioLink.ls_id == ls_id,
                LabelStudioLink.criterion == criterion,
            )
        )
    cells = {(item_id, rater_id, criterion) for _, _, criterion, item_id, rater_id in links}
    cells = {c for c in cells if (c[0], c[1]) not in keep}
    if cells:
        still = {
            (item_id, rater_id, criterion)
            for item_id, rater_id, criterion in session.execute(
                select(LabelStudioLink.item_id, LabelStudioLink.rater_id, LabelStudioLink.criterion).where(
                    LabelStudioLink.project_id == project.id,
                    LabelStudioLink.item_id.in_(sorted({c[0] for c in cells})),
                )
            )
        }
        cells -= still
    return retract_labels(session, project, sorted(cells))


def _link_rows(session: Session, *where: Any) -> list[LinkRow]:
    return [
        (source, ls_id, criterion, item_id, rater_id)
        for source, ls_id, criterion, item_id, rater_id in session.execute(
            select(
                LabelStudioLink.source,
                LabelStudioLink.ls_id,
                LabelStudioLink.criterion,
                LabelStudioLink.item_id,
                LabelStudioLink.rater_id,
            ).where(*where)
        )
    ]


def retract_deleted(session: Session, project: Project, annotation_ids: list[int]) -> tuple[int, list[int], int]:
    """Retract the labels of deleted annotations, under every criterion they labelled (unless
    another annotation still labels the cell).

    Returns the retractions written, the ids this project never linked, and the last label seq.
    """
    lock_project(session, project.id)
    links = _link_rows(
        session,
        LabelStudioLink.project_id == project.id,
        LabelStudioLink.source == "annotation",
        LabelStudioLink.ls_id.in_(annotation_ids),
    )
    done = _retract_links(session, project, links)
    found = {ls_id for _, ls_id, _, _, _ in links}
    return done.retracted, [i for i in annotation_ids if i not in found], done.label_seq


def retract_tasks(
    session: Session, project: Project, task_ids: list[int], ls_project: int | None
) -> tuple[int, list[int], int]:
    """Retract every label that annotations and predictions of deleted tasks gave (``TASKS_DELETED``).

    A link knows its task (and Label Studio project, when known: a link of another Label Studio
    project is left alone); a link made before links knew their task is found by the item whose
    external id is the task id. Returns the retractions written, the task ids no link names,
    and the last label seq.
    """
    lock_project(session, project.id)
    scoped = [LabelStudioLink.project_id == project.id]
    if ls_project is not None:
        scoped.append(or_(LabelStudioLink.ls_project == ls_project, LabelStudioLink.ls_project.is_(None)))
    by_task = _link_rows(session, *scoped, LabelStudioLink.ls_task.in_(task_ids))
    old_items = ids_by_external(session, Item, project.id, [str(t) for t in task_ids])
    legacy = (
        _link_rows(
            session, *scoped, LabelStudioLink.ls_task.is_(None), LabelStudioLink.item_id.in_(list(old_items.values()))
        )
        if old_items
        else []
    )
    found = {
        task
        for (task,) in session.execute(
            select(LabelStudioLink.ls_task).where(*scoped, LabelStudioLink.ls_task.in_(task_ids)).distinct()
        )
    }
    legacy_items = {item_id for _, _, _, item_id, _ in legacy}
    found |= {int(ext) for ext, item_id in old_items.items() if item_id in legacy_items}
    done = _retract_links(session, project, by_task + legacy)
    return done.retracted, [t for t in task_ids if t not in found], done.label_seq


def withdraw(
    session: Session,
    project: Project,
    item: str,
    rater: str,
    criterion: str | None,
    annotation: TaskId | None,
    *,
    task: TaskId | None = None,
    ls_project: int | None = None,
) -> LabelsRetracted:
    """Retract ``rater``'s label of ``item`` (a skipped or emptied annotation); nothing when either is unknown.

    The annotation stays linked to the cell, so its later deletion or relabeling is tied back.
    """
    crit = _criterion(project, criterion)
    lock_project(session, project.id)
    item_id = ids_by_external(session, Item, project.id, [item]).get(item)
    rater_id = ids_by_external(session, Rater, project.id, [rater]).get(rater)
    if item_id is None or rater_id is None:
        return LabelsRetracted(retracted=0, label_seq=project.label_seq)
    if (ls_id := _ls_id(annotation)) is not None:
        insert_many(
            session,
            table_of(LabelStudioLink),
            LINK_COLUMNS,
            [(project.id, "annotation", ls_id, item_id, rater_id, crit, _ls_id(task), ls_project)],
            on_conflict=LINK_KEY,
        )
    return retract_labels(session, project, [(item_id, rater_id, crit)])


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
