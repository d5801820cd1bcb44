"""Scores read from a file, written as items, raters and labels in the caller's transaction.

Every importer reads its file into :class:`Score` rows and hands them to :func:`write_scores`,
which checks all of them (ids, kinds, scales, values, criteria) before anything is written and
then goes through the label upload's own path (:func:`service.data.labels.write_labels`), so an
import is all-or-nothing and a resubmitted file writes nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.core.errors import Invalid, echo
from service.core.identifiers import ExternalId
from service.data.items import ids_by_external, upsert_items
from service.data.keys import Principal
from service.data.labels import CANNOT_ASSESS, INVALID, label_for, write_labels
from service.data.models import CurrentLabel, Item, Project, Rater
from service.data.projects import lock_project
from service.data.raters import ensure_raters
from service.schemas.items import ItemIn
from service.schemas.labels import LabelIn, LabelsAccepted
from service.schemas.raters import RaterCreate, RaterKind

Scale = Literal["boolean", "numeric", "categorical"]

_IDS = TypeAdapter(list[ExternalId])


@dataclass(frozen=True, slots=True)
class Score:
    """One score of a file: the item and rater (external ids), the rater's kind, the value as text,
    the name it was given (a criterion, or the tool's score name), its scale, where it was read, and
    (a judge's) confidence and shown order."""

    item: str
    rater: str
    kind: RaterKind
    value: str
    name: str | None
    scale: Scale | None
    where: str
    confidence: float | None = None
    order: Literal["AB", "BA"] | None = None  # a pairwise judge's shown order (docs/method.md §13)


class Skipped(BaseModel):
    scorer: str = Field(description="The scorer (score name) left out.")
    scores: int = Field(description="Scores of this scorer left out.")
    reason: str = Field(description="Why it was left out.")


class ImportSummary(BaseModel):
    items_created: int = Field(description="Items the file named that the project did not have.")
    raters_created: list[str] = Field(description="External ids of the raters created.")
    raters_changed: list[str] = Field(description="Existing raters given a name or promoted to primary.")
    labels: LabelsAccepted = Field(description="Label events written.")
    skipped: list[Skipped] = Field(default_factory=list, description="Scorers not imported, and why.")


def value_text(value: Any) -> tuple[str, Scale]:
    """A score's value as label text and its scale: booleans ``true``/``false``, whole numbers without
    a fraction (``1.0`` -> ``1``), other numbers as Python prints them, text as it is.

    >>> value_text(True), value_text(1.0), value_text(0.25), value_text("Good")
    (('true', 'boolean'), ('1', 'numeric'), ('0.25', 'numeric'), ('Good', 'categorical'))
    """
    if isinstance(value, bool):
        return ("true" if value else "false"), "boolean"
    if isinstance(value, int | float):
        return (str(int(value)) if float(value).is_integer() else repr(float(value))), "numeric"
    return str(value), "categorical"


def _checked_ids(scores: list[Score]) -> dict[str, str]:
    """Each distinct item and rater id of ``scores`` -> its normalised form, checked in one call;
    422 naming the first score with a bad id."""
    distinct = list(dict.fromkeys([s.item for s in scores] + [s.rater for s in scores]))
    try:
        return dict(zip(distinct, _IDS.validate_python(distinct), strict=True))
    except ValidationError as exc:
        error = exc.errors()[0]
        bad = distinct[int(error["loc"][0])]
        s = next(s for s in scores if bad in (s.item, s.rater))
        what = "item" if s.item == bad else "rater"
        raise Invalid(f"{s.where}: {what} id {echo(bad)}: {error['msg']}", code="validation_error") from None


def _criteria(project: Project, scores: list[Score], criterion: str | None, *, strict_names: bool) -> list[str]:
    """The project criterion of each score: its name when that is one of the project's criteria; with
    ``strict_names`` (the generic format, whose names are criteria) any other name is a 422, else
    (a tool's score names) the scores of one other name go to ``criterion`` or the only criterion."""
    criteria = set(project.criteria)
    if criterion is not None and criterion not in criteria:
        raise Invalid(f"unknown criterion {echo(criterion)}; the project has {project.criteria}")
    fallback = criterion or (project.criteria[0] if len(criteria) == 1 else None)
    others = sorted({s.name or "" for s in scores if s.name not in criteria})
    if strict_names:
        bad = next((s for s in scores if s.name is not None and s.name not in criteria), None)
        if bad is not None:
            raise Invalid(f"{bad.where}: unknown criterion {echo(bad.name)}; the project has {project.criteria}")
    elif len(others) > 1:
        raise Invalid(
            f"the file has scores named {[echo(o) for o in others[:10]]}, none of them a criterion of the project "
            f"({project.criteria}); import one name at a time (score=...) or name the criteria after the scores",
            code="several_score_names",
        )
    if others and fallback is None:
        first = next(s for s in scores if s.name not in criteria)
        raise Invalid(
            f"{first.where}: 'criterion' is required; this project has criteria {project.criteria}",
            code="criterion_required",
        )
    return [s.name if s.name in criteria else fallback for s in scores]  # type: ignore[misc]


def _labels(project: Project, scores: list[Score], criteria: list[str]) -> list[LabelIn]:
    """The label rows of ``scores``; 422 naming the first score with a bad id, a kind or scale that
    differs from the rater's other scores, a value that maps to no label, or a cell given two values."""
    kinds: dict[str, tuple[str, str]] = {}
    scales: dict[tuple[str, str], tuple[Scale, str]] = {}
    cells: dict[tuple[str, str, str, str], tuple[str, str]] = {}
    rows: list[LabelIn] = []
    # ids and values repeat across a file's rows: each distinct one is checked and mapped once
    ids = _checked_ids(scores)
    mapped: dict[str, str | None] = {}
    for s, crit in zip(scores, criteria, strict=True):
        item, rater = ids[s.item], ids[s.rater]
        kind, first = kinds.setdefault(rater, (s.kind, s.where))
        if kind != s.kind:
            raise Invalid(
                f"{s.where}: rater {echo(rater)} is a {s.kind} rater here and a {kind} rater at {first}",
                code="rater_kind_clash",
            )
        if s.scale is not None:
            scale, first = scales.setdefault((rater, crit), (s.scale, s.where))
            if scale != s.scale:
                raise Invalid(
                    f"{s.where}: mixed scales for {echo(rater)} on {echo(crit)}: a {s.scale} score here, "
                    f"a {scale} one at {first}",
                    code="mixed_scales",
                )
        if s.value not in mapped:
            special = s.value in (CANNOT_ASSESS, INVALID)
            mapped[s.value] = s.value if special else label_for(s.value, project.labels, project.label_map)
        value = mapped[s.value]
        if value is None:
            raise Invalid(
                f"{s.where}: value {echo(s.value)} maps to none of the project's labels {project.labels} "
                "(nor its label_map; set one with PATCH /projects/{pid}); nothing was written",
                code="unmapped_values",
            )
        prior, first = cells.setdefault((item, rater, crit, s.order or ""), (value, s.where))
        if prior != value:
            raise Invalid(
                f"{s.where}: item {echo(item)}, rater {echo(rater)} has {echo(value)} here and {echo(prior)} at {first}"
            )
        row: LabelIn = {"item": item, "rater": rater, "criterion": crit, "value": value}
        if s.confidence is not None:
            row["confidence"] = s.confidence
        if s.order is not None:
            row["order"] = s.order
        rows.append(row)
    return rows


def write_scores(
    session: Session,
    project: Project,
    principal: Principal,
    scores: list[Score],
    *,
    criterion: str | None = None,
    primary: str | None = None,
    strict_names: bool = False,
    skipped: list[Skipped] | None = None,
) -> ImportSummary:
    """Create the items and raters the scores name and append their labels; nothing is written
    unless every score is good. ``primary`` names the human rater to make the project's primary."""
    criteria = _criteria(project, scores, criterion, strict_names=strict_names)
    rows = _labels(project, scores, criteria)
    kinds = {s.rater: s.kind for s in scores}
    if primary is not None:
        if kinds.get(primary) not in ("human", "primary"):
            raise Invalid(
                f"primary {echo(primary)} is not a human rater of this file; its raters: {sorted(kinds)[:20]}"
            )
        kinds[primary] = "primary"
    lock_project(session, project.id)
    items = list(dict.fromkeys(r["item"] for r in rows))
    known = ids_by_external(session, Item, project.id, sorted(items))
    # the ids are checked (_checked_ids): built without validating each again
    created = upsert_items(
        session,
        project,
        [ItemIn.model_construct(external_id=i, features={}, text=None) for i in items if i not in known],
    )
    new, changed = ensure_raters(session, project, [RaterCreate(external_id=r, kind=k) for r, k in kinds.items()])
    labels = write_labels(session, project, principal, rows)
    return ImportSummary(
        items_created=created.created,
        raters_created=[r.external_id for r in new],
        raters_changed=changed,
        labels=labels,
        skipped=skipped or [],
    )


GENERIC_COLUMNS = ("item", "rater", "kind", "value", "criterion", "confidence", "order")


def generic_rows(session: Session, project: Project) -> list[tuple[str, str, str, str, str, float | None, str | None]]:
    """The project's current labels in the generic long format (:data:`GENERIC_COLUMNS`), by rater (in the
    order they were added) and then ``seq``: an import adds raters in the order the file names them, and
    the reliability's resamples read the raters in the order they were added."""
    stmt = (
        select(
            Item.external_id,
            Rater.external_id,
            Rater.kind,
            CurrentLabel.value,
            CurrentLabel.criterion,
            CurrentLabel.confidence,
            func.nullif(CurrentLabel.shown_order, ""),
        )
        .join(Item, Item.id == CurrentLabel.item_id)
        .join(Rater, Rater.id == CurrentLabel.rater_id)
        .where(CurrentLabel.project_id == project.id)
        .order_by(Rater.id, CurrentLabel.seq)
    )
    return [tuple(r) for r in session.execute(stmt)]
