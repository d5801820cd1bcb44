"""What a Label Studio task, user, annotation and prediction are in annoplan: an item, a rater and a label.

A task is the item ``data["annoplan_item"]`` (a batch export) or ``str(task id)``; a user is the rater
it is mapped to, else ``ls-user-<id>``; a prediction is the judge ``<judge_prefix><model_version>``; a
label is the value of the project's choices, rating or number control, mapped onto the project's labels, or
the answer a pairwise control picks: the left object shows answer A unless the task's ``annoplan_order`` is
``BA`` (then it shows B), and a prediction's shown order is its task's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from service.core.errors import Invalid, echo
from service.data.labels import label_for, numeric_label
from service.data.models import (
    Project,
)
from service.label_studio.config import (
    NUMERIC_KINDS,
    PAIRWISE_KIND,
    ChoiceControl,
    choice_controls,
    control_kinds,
    label_controls,
    pick_control,
)
from service.label_studio.payloads import (
    LSAnnotation,
    LSResult,
    LSTask,
    LSUser,
)
from service.schemas.items import ItemIn
from service.schemas.labels import LabelIn

ITEM_KEY = "annoplan_item"
RATER_KEY = "annoplan_rater"
"""The task data field naming the annotator a batch was issued to: Data Manager tabs filter on it
(:mod:`service.label_studio.connect`); not a feature of the item."""
LABEL_ROW = TypeAdapter(LabelIn)
"""Validates (and normalises the ids of) a label row read from an export, as an upload's rows are."""
USER_PREFIX = "ls-user-"
ORDER_KEY = "annoplan_order"
"""The task data field of a pairwise task saying which answer its left object shows: ``AB`` (A, the default)
or ``BA``; not a feature of the item."""
ORDERS = ("AB", "BA")


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
    features = {k: v for k, v in data.items() if k not in (text_key, ITEM_KEY, RATER_KEY, ORDER_KEY) and _scalar(v)}
    try:
        return ItemIn(
            external_id=data[ITEM_KEY] if exported else str(task.id),
            text=text if isinstance(text, str) else None,
            features=features,
        )
    except ValidationError as exc:
        raise Invalid(f"task {task.id}: {exc.errors()[0]['msg']}", code="validation_error") from None


def task_order(task: LSTask | None) -> str:
    """The order a pairwise task shows the answers in, left first: its data's ``annoplan_order``, else ``AB``;
    422 for any other value.

    >>> task_order(LSTask(id=1, data={"annoplan_order": "BA"})), task_order(LSTask(id=2, data={})), task_order(None)
    ('BA', 'AB', 'AB')
    """
    order = task.data.get(ORDER_KEY, "AB") if task is not None else "AB"
    if order not in ORDERS:
        raise Invalid(
            f"task {task.id if task else None}: {ORDER_KEY} is {echo(str(order))}; it is AB (the left object shows "
            "answer A) or BA",
            code="validation_error",
        )
    return str(order)


def project_kinds(project: Project) -> tuple[str, ...]:
    """The control kinds whose results are this project's labels (``control_kinds``)."""
    return control_kinds(project.scale == "numeric", project.kind == "pairwise")


@dataclass(frozen=True)
class UserRaters:
    """The raters a pm mapped Label Studio users to (:mod:`service.label_studio.annotators`): by user id, and
    by email (casefolded) for exports that name a user by its email alone."""

    by_id: Mapping[int, str] = field(default_factory=dict)
    by_email: Mapping[str, str] = field(default_factory=dict)


def human_rater(user: int | LSUser, mapped: UserRaters | None = None) -> tuple[str, str | None]:
    """The rater external id of a Label Studio user (the rater it is mapped to, else ``ls-user-<id>``), and
    its name (the email when known).

    >>> human_rater(7)
    ('ls-user-7', None)
    >>> human_rater(LSUser(id=7, email="ana@example.com"))
    ('ls-user-7', 'ana@example.com')
    >>> mapped = UserRaters(by_id={7: "ann-1"}, by_email={"ana@example.com": "ann-1"})
    >>> human_rater(7, mapped), human_rater(LSUser(email="Ana@example.com"), mapped), human_rater(8, mapped)
    (('ann-1', None), ('ann-1', 'Ana@example.com'), ('ls-user-8', None))
    """
    mapped = mapped or UserRaters()
    if isinstance(user, int):
        return mapped.by_id.get(user, f"{USER_PREFIX}{user}"), None
    if user.id is not None:
        return mapped.by_id.get(user.id, f"{USER_PREFIX}{user.id}"), user.email
    email = str(user.email)
    return mapped.by_email.get(email.casefold(), email), user.email


def is_user(user: int | LSUser, who: str) -> bool:
    """Whether ``who`` is the user's id or (ignoring case) its email."""
    if isinstance(user, int):
        return who == str(user)
    return who == str(user.id) or (user.email is not None and who.casefold() == user.email.casefold())


def chosen_value(
    results: list[LSResult], from_name: str | None, kinds: tuple[str, ...] = ("choices",), order: str = "AB"
) -> tuple[str | None, str | None]:
    """The one value of the result read, or ``None`` and why there is none.

    The result read is the one of control ``from_name``, or the first result of one of ``kinds``
    (``control_kinds``): a choices result's one choice, a rating or number result's number as text, a
    pairwise result's answer picked, ``A`` or ``B``, the left object showing ``order[0]``.

    >>> r = [LSResult(type="choices", from_name="tone", value={"choices": ["rude"]}),
    ...      LSResult(type="choices", from_name="verdict", value={"choices": ["Pass"]})]
    >>> chosen_value(r, None), chosen_value(r, "verdict")
    (('rude', None), ('Pass', None))
    >>> chosen_value(r, "topic")
    (None, "no choices result from 'topic'")
    >>> stars = [LSResult(type="rating", from_name="stars", value={"rating": 4})]
    >>> chosen_value(stars, None, ("rating", "number")), chosen_value(stars, None)
    (('4', None), (None, 'no choices result'))
    >>> left = [LSResult(type="pairwise", from_name="pw", value={"selected": "left"})]
    >>> chosen_value(left, None, ("pairwise",)), chosen_value(left, None, ("pairwise",), "BA")
    (('A', None), ('B', None))
    """
    result = next((r for r in results if r.type in kinds and from_name in (None, r.from_name)), None)
    if result is None:
        return None, f"no {' or '.join(kinds)} result" + (f" from {echo(from_name)}" if from_name else "")
    if result.type == PAIRWISE_KIND:
        side = result.value.get("selected")
        if side not in ("left", "right"):
            return None, "value.selected is neither left nor right"
        return order[side == "right"], None
    if result.type in NUMERIC_KINDS:
        number = result.value.get(result.type)
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return None, f"value.{result.type} is not a number"
        return str(number), None
    choices = result.value.get("choices")
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        return None, "value.choices is not a list of strings"
    if len(choices) != 1:
        return None, f"{len(choices)} choices selected; one is needed" if choices else "no choice selected"
    return choices[0], None


def _choices_result(results: list[LSResult], from_name: str | None) -> LSResult | None:
    return next((r for r in results if r.type == "choices" and from_name in (None, r.from_name)), None)


def project_label(value: str, project: Project) -> str | None:
    """The project label a control's value maps to: a numeric project's canonical number when it is one
    of the project's range (else None), a label project's through ``label_for``.

    A number from Label Studio outside the range is reported unmapped, not refused: the rest of the export
    still counts."""
    if project.scale != "numeric":
        return label_for(value, project.labels, project.label_map)
    try:
        return numeric_label(project.value_range or {}, value, 0)
    except Invalid:
        return None


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


COPIED_ORIGINS = ("prediction", "prediction-changed")
"""The ``origin`` Label Studio's editor gives a region copied from a prediction (then edited, for the second)."""


def from_prediction(annotation: LSAnnotation) -> str | None:
    """Why an annotation is not an independent human label, or ``None`` when it is one: it was created from a
    prediction, as Label Studio's ``parent_prediction`` says, or as its results say when that is gone (Label
    Studio empties it when the prediction is deleted, e.g. replaced by a new model run): its editor marks each
    region copied from a prediction with ``origin: "prediction"`` (``"prediction-changed"`` once edited).

    >>> from_prediction(LSAnnotation(completed_by=2, parent_prediction=40))  # doctest: +ELLIPSIS
    "created from prediction 40 (Label Studio's parent_prediction): a copy of a model's label, ..."
    >>> copied = LSResult(type="choices", value={"choices": ["Pass"]}, origin="prediction")
    >>> from_prediction(LSAnnotation(completed_by=2, result=[copied]))  # doctest: +ELLIPSIS
    "created from a prediction (its result's origin is 'prediction', Label Studio's mark of a copy): ..."
    >>> mine = LSResult(type="choices", value={"choices": ["Pass"]}, origin="manual")
    >>> from_prediction(LSAnnotation(completed_by=2)), from_prediction(LSAnnotation(completed_by=2, result=[mine]))
    (None, None)
    """
    advice = (
        "a copy of a model's label, not an independent human label, so it is kept out of the labels; hide "
        "predictions from annotators (Label Studio project setting show_collab_predictions: false) and have the "
        "task annotated afresh"
    )
    if annotation.parent_prediction is not None:
        return f"created from prediction {annotation.parent_prediction} (Label Studio's parent_prediction): {advice}"
    origin = next((r.origin for r in annotation.result if r.origin in COPIED_ORIGINS), None)
    if origin is None:
        return None
    return f"created from a prediction (its result's origin is {echo(origin)}, Label Studio's mark of a copy): {advice}"


def _maps(project: Project) -> Callable[[str], bool]:
    return lambda choice: project_label(choice, project) is not None


def likeliest_control(
    results: Iterable[LSResult], maps: Callable[[str], bool], kinds: tuple[str, ...] = ("choices",)
) -> ChoiceControl | None:
    """The control the results show to hold the label when no labeling config is at hand: the
    only one of ``kinds``, else the one with most single values that map to a project label (422 on a tie).

    Its data key is taken to be its ``to_name`` (Label Studio's templates name the object tag
    after the data key).
    """
    mapped: dict[str, int] = {}
    to_name: dict[str, str] = {}
    kind: dict[str, str] = {}
    for r in results:
        if r.type not in kinds:
            continue
        one = chosen_value([r], r.from_name, kinds)[0]
        mapped[r.from_name] = mapped.get(r.from_name, 0) + (one is not None and maps(one))
        to_name.setdefault(r.from_name, r.to_name)
        kind.setdefault(r.from_name, r.type)
    ranked = sorted(mapped.items(), key=lambda kv: -kv[1])
    if not ranked:
        return None
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        raise Invalid(
            f"the results hold several {' or '.join(kinds)} controls {sorted(mapped)} and none is plainly the "
            "label: pass ?from_name= or ?label_config=",
            code="ambiguous_from_name",
        )
    name = ranked[0][0]
    return ChoiceControl(name, to_name[name], to_name[name] or None, (), True, kind[name])


def resolve_control(
    project: Project, *, label_config: str | None, from_name: str | None, results: Iterable[LSResult]
) -> ChoiceControl | None:
    """The choices control that holds the label, from the first of: the labeling config given
    (remembered on the project), ``from_name``, the control the project remembers, the results.

    ``None`` only when there is nothing to read (no config, no name, no choices result).
    """
    numeric = project.scale == "numeric"
    if label_config:
        controls = label_controls(choice_controls(label_config), numeric=numeric, pairwise=project.kind == "pairwise")
        control = pick_control(controls, from_name, _maps(project))
        if project.label_studio != control.as_dict():
            project.label_studio = control.as_dict()
        return control
    stored = project.label_studio
    if stored and from_name in (None, stored["from_name"]):
        return ChoiceControl(
            stored["from_name"],
            stored["to_name"],
            stored["data_key"],
            tuple(stored["choices"]),
            stored["single"],
            stored.get("kind", "choices"),
        )
    if from_name is not None:
        return ChoiceControl(from_name, "", None, (), True, "number" if numeric else "choices")
    return likeliest_control(results, _maps(project), project_kinds(project))
