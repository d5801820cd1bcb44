"""Label Studio's objects as this service reads them (export tasks, annotations, webhook events)
and the bodies it answers with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.schemas import ItemsUpserted, LabelsAccepted, RaterCreate

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
