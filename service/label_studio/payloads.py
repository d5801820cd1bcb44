"""What Label Studio sends: tasks of its JSON exports, and webhook bodies, read into models.

Every JSON export Label Studio offers reads as a list of :class:`LSTask`:

- the snapshot export (``predictions.only_id=false``): tasks with full annotations and predictions;
- the Export button's JSON: the same, but predictions are only ids (kept as ints here, to be
  reported: their labels need a snapshot or a sync);
- JSON_MIN: one flat row per annotation (the task's data keys, ``id``, the control's value
  under its name, ``annotator``, ``annotation_id``), regrouped into tasks; a row whose
  ``annotator`` and ``annotation_id`` are null is a task without annotations (what
  ``download_all_tasks=true`` adds). JSON_MIN carries neither ``parent_prediction`` nor the results'
  ``origin``: an annotation made from a prediction cannot be told apart there (the snapshot and sync can).

CSV and TSV exports are not read: the import refuses them (415) and names the JSON export.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.core.errors import Invalid

TaskId = int | str

# Where to get an export this service reads in full (said by every error that needs one).
EXPORT_HINT = (
    "import a snapshot export with full predictions (Label Studio API: POST /api/projects/<id>/exports with "
    'serialization_options {"predictions": {"only_id": false}}) or run '
    "POST /projects/{pid}/integrations/label-studio/sync, which fetches one"
)
# JSON_MIN keys that are not task data.
MIN_META_KEYS = frozenset({"id", "annotator", "annotation_id", "created_at", "updated_at", "lead_time"})


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
    """One region of an annotation or prediction; only ``type`` ``choices``, ``rating`` and ``number`` are read."""

    from_name: str = ""
    to_name: str = ""
    type: str
    value: dict[str, Any] = Field(default_factory=dict)
    origin: str | None = Field(
        None,
        description="Where Label Studio's editor says the region came from: `manual`, `prediction` (copied from a "
        "prediction and unchanged) or `prediction-changed` (copied, then edited).",
    )


class LSAnnotation(_LabelStudio):
    """A user's annotation of a task; ``was_cancelled`` marks a skipped task."""

    id: TaskId | None = None
    completed_by: int | LSUser = Field(description="The user id, or an object with `id` and `email`.")
    result: list[LSResult] = Field(default_factory=list)
    was_cancelled: bool = False
    task: TaskId | None = Field(None, description="The task's id (webhook payloads).")
    parent_prediction: int | None = Field(
        None, description="The prediction this annotation was created from (Label Studio's copy of a pre-annotation)."
    )


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
    predictions: list[LSPrediction | int] = Field(
        default_factory=list, description="Full predictions, or only their ids (the Export button's JSON)."
    )
    project: int | None = Field(None, description="The Label Studio project's id (JSON exports, webhooks).")


class LSProject(_LabelStudio):
    """The ``project`` of a webhook payload: its labeling config."""

    id: int | None = None
    label_config: str | None = None


class LSAnnotationEvent(_LabelStudio):
    """An ``ANNOTATION_CREATED`` / ``ANNOTATION_UPDATED`` webhook payload."""

    action: str
    annotation: LSAnnotation
    task: LSTask | None = None
    project: LSProject | None = None


class LSAnnotationRef(_LabelStudio):
    """An object named by its id alone (what Label Studio's deletion webhooks carry)."""

    id: int


class LSAnnotationsDeleted(_LabelStudio):
    """An ``ANNOTATIONS_DELETED`` webhook payload: only the deleted annotations' ids."""

    action: str
    annotations: list[LSAnnotationRef]
    project: LSProject | None = None


class LSTasksDeleted(_LabelStudio):
    """A ``TASKS_DELETED`` webhook payload: only the deleted tasks' ids."""

    action: str
    tasks: list[LSAnnotationRef]
    project: LSProject | None = None


def is_json_min(rows: list[Any]) -> bool:
    """Whether an export is JSON_MIN: flat rows with an ``id`` and no ``data`` object."""
    return bool(rows) and all(isinstance(r, dict) and "data" not in r and "id" in r for r in rows)


def tasks_from_json_min(rows: list[dict[str, Any]], from_name: str, controls: frozenset[str]) -> list[dict[str, Any]]:
    """JSON_MIN rows regrouped as export tasks (one annotation per row), in first-seen order.

    ``from_name`` is the control whose value is the label (a string, or ``{"choices": [...]}``
    when several were picked; a number for a Rating or Number control; ``[{"selected": "left"}]`` for a
    Pairwise control); the keys of ``controls`` and of JSON_MIN itself are not data.

    >>> rows = [{"id": 1, "text": "a", "s": "Pos", "f": "x", "annotator": 2, "annotation_id": 5},
    ...         {"id": 1, "text": "a", "s": {"choices": ["Pos", "Neg"]}, "annotator": 3, "annotation_id": 6},
    ...         {"id": 2, "text": "b"}, {"id": 3, "text": "c", "annotator": None, "annotation_id": None}]
    >>> tasks = tasks_from_json_min(rows, "s", frozenset({"s", "f"}))
    >>> [(t["id"], t["data"], [(a["id"], a["completed_by"], a["result"][0]["value"]) for a in t["annotations"]])
    ...  for t in tasks]
    [(1, {'text': 'a'}, [(5, 2, {'choices': ['Pos']}), (6, 3, {'choices': ['Pos', 'Neg']})]), (2, {'text': 'b'}, []), \
(3, {'text': 'c'}, [])]
    """
    skip = MIN_META_KEYS | controls | {from_name}
    tasks: dict[Any, dict[str, Any]] = {}
    for n, row in enumerate(rows):
        task = tasks.setdefault(
            row["id"],
            {
                "id": row["id"],
                "annotations": [],
                "data": {k: v for k, v in row.items() if k not in skip and not _is_choices(v)},
            },
        )
        if row.get("annotation_id") is None and row.get("annotator") in (None, "", {}):
            continue  # a task without annotations (LS writes such rows with download_all_tasks=true)
        if "annotator" not in row:
            raise Invalid(f"body.{n}: a JSON_MIN row with an annotation needs 'annotator'", code="validation_error")
        annotator = row["annotator"]
        value = row.get(from_name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):  # a Rating's or Number's value
            result = [{"from_name": from_name, "type": "number", "value": {"number": value}}]
        elif _is_pairwise(value):
            result = [{"from_name": from_name, "type": "pairwise", "value": value[0]}]
        else:
            choices = value["choices"] if _is_choices(value) else [] if value is None else [value]
            result = [{"from_name": from_name, "type": "choices", "value": {"choices": choices}}] if choices else []
        task["annotations"].append(
            {
                "id": row.get("annotation_id"),
                "completed_by": {"email": annotator} if isinstance(annotator, str) else annotator,
                "result": result,
            }
        )
    return list(tasks.values())


def _is_pairwise(value: Any) -> TypeGuard[list[dict[str, Any]]]:
    """Whether a JSON_MIN value is a Pairwise control's (``[{"selected": "left"}]``)."""
    return isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict) and "selected" in value[0]


def _is_choices(value: Any) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict) and isinstance(value.get("choices"), list)
