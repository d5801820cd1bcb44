"""Label Studio tasks read for one project: items, raters, the label rows and withdrawals each
annotation and prediction gives, their links, and what is left out.

Identities (documented in the endpoints too):

- a task is the item ``data["annoplan_item"]`` when the task came from this service's batch
  export, else the item ``str(task id)``;
- a Label Studio user is the rater a pm mapped it to (``service.label_studio.annotators``), else
  the rater ``ls-user-<user id>`` (the email only when Label Studio gives no id); webhooks carry
  only the id, so the id is what ties both paths together;
- a prediction is the judge ``<judge_prefix><model_version>``; in a pairwise project its label's shown order
  is its task's (``annoplan_order``, AB when absent), so one task per item and order: a judge's label in the
  other order comes from another task of the item, or from another import;
- each annotation and prediction id is linked to the cell it labels, so a deletion (or an
  annotation gone from a later export) retracts that cell's label.

Annotations that need a person before they can count are written nowhere and held for the inbox
with the reason, on every path (webhook, import, sync): one created from a prediction (Label
Studio's ``parent_prediction``, or results whose ``origin`` marks them copied from a prediction: a copy of a
model's label, not an independent human label), and
one with several choices in the control that holds the criterion's one label.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from service.core.errors import Invalid, echo
from service.data.models import Project
from service.label_studio.config import ChoiceControl
from service.label_studio.links import Cell, ls_id_of
from service.label_studio.mapping import (
    LABEL_ROW,
    UserRaters,
    chosen_value,
    from_prediction,
    human_rater,
    is_user,
    item_from_task,
    project_kinds,
    project_label,
    several_choices,
    task_order,
)
from service.label_studio.payloads import EXPORT_HINT, LSAnnotation, LSResult, LSTask, TaskId
from service.schemas.items import ItemIn
from service.schemas.labels import LabelIn
from service.schemas.raters import RaterCreate


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


@dataclass
class ExportReading:
    """What an export holds for a project: items, raters (kind, name), label rows, cells to
    withdraw, annotation/prediction links, and what was left out."""

    items: list[ItemIn]
    raters: dict[str, RaterCreate] = field(default_factory=dict)
    cells: dict[Cell, tuple[LabelIn | None, dict[str, Any]]] = field(default_factory=dict)
    links: dict[tuple[str, int], Cell] = field(default_factory=dict)
    link_tasks: dict[tuple[str, int], int | None] = field(default_factory=dict)
    link_values: dict[tuple[str, int], str | None] = field(default_factory=dict)
    """The label each linked annotation or prediction gave (``None``: none); absent where not known (unmapped)."""
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
    users: UserRaters | None = None,
) -> ExportReading:
    """Items, raters and label rows of Label Studio tasks; what does not map is reported.

    Annotators become ``human`` raters, or the raters ``users`` maps them to (``primary`` names the one to
    make ``primary``: its Label Studio id or email); predictions become ``judge`` raters. A cancelled annotation,
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
        order: str = "AB",
    ) -> None:
        cell = (item, where["rater"])
        if (number := ls_id_of(ls_id)) is not None:
            reading.seen[source].add(number)
            reading.links[(source, number)] = cell
            reading.link_tasks[(source, number)] = ls_id_of(where["task"])
        choice = None
        if results is not None:
            choice, reason = chosen_value(results, from_name, project_kinds(project), order)
        label = None
        if choice is not None:
            label = project_label(choice, project)
            if label is None:
                reading.unmapped.append(Unmapped(**where, value=choice))
                return
        if number is not None:
            reading.link_values[(source, number)] = label
        prior = reading.cells.get(cell)
        if prior is not None:
            reading.skipped.append(Skipped(**prior[1], reason="superseded by a later label of this rater"))
        if label is None:
            reading.skipped.append(Skipped(**where, reason=str(reason)))
        shown = {"order": order} if source == "prediction" and project.kind == "pairwise" else {}
        row = (
            LABEL_ROW.validate_python(
                {"item": item, "rater": where["rater"], "criterion": criterion, "value": label, **shown}
            )
            if label
            else None
        )
        reading.cells[cell] = (row, where)

    for task, item in zip(tasks, reading.items, strict=True):
        order = task_order(task) if project.kind == "pairwise" else "AB"
        for ann in task.annotations:
            rater, name = human_rater(ann.completed_by, users)
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
            results = None if ann.was_cancelled else ann.result
            read("annotation", ann.id, item.external_id, where, results, "cancelled", order)
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
                order=order,
            )
    if primary is not None and not any(r.kind == "primary" for r in reading.raters.values()):
        raise Invalid(
            f"primary {echo(primary)} is not the id or email of an annotator in this export", code="unknown_primary"
        )
    return reading
