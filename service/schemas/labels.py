"""Labels' bodies: a label and a retraction uploaded (plain dicts, for speed), what a write did, a label
read."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, with_config
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from service.core.identifiers import ExternalId
from service.schemas.base import Text


# A TypedDict, validated into plain dicts: at 100,000 rows a model instance per row took four times the
# validation's CPU. Absent optional fields stay absent (read them with ``get``).
@with_config(ConfigDict(extra="forbid", allow_inf_nan=False))
class LabelIn(TypedDict):
    """One label: the item's and the rater's external ids, the value, and optionally the criterion
    (required when the project has several), the batch it answers and, for a judge, its ``confidence``
    in [0, 1] (selective evaluation, docs/method.md §3c) and, in a pairwise project, the ``order`` it was
    shown the answers (docs/method.md §13)."""

    item: Annotated[ExternalId, Field(description="External id of the item labeled.")]
    rater: Annotated[ExternalId, Field(description="External id of the rater who gave the label.")]
    criterion: NotRequired[
        Annotated[Text | None, Field(description="The criterion labeled; required when the project has several.")]
    ]
    value: Annotated[
        Annotated[Text, Field(min_length=1, max_length=200)] | StrictInt | StrictFloat,
        Field(
            description="One of the project's labels; in a numeric project a number in its value_range "
            "(a JSON number or a numeric string, as CSV cells are); or CANNOT_ASSESS / INVALID."
        ),
    ]
    batch: NotRequired[
        Annotated[Text | None, Field(description="The batch this label answers (its id from POST /batches).")]
    ]
    confidence: NotRequired[
        Annotated[
            Annotated[float, Field(ge=0, le=1)] | None,
            Field(description="A judge's confidence in its label, 0 to 1 (selective evaluation)."),
        ]
    ]
    order: NotRequired[
        Annotated[
            Literal["AB", "BA"] | None,
            Field(
                description="A pairwise project's judge only (and required there): the order it was shown the "
                "item's answers, AB (A first) or BA; the item holds the judge's label in each order."
            ),
        ]
    ]


class RetractionIn(TypedDict):
    """One cell whose current label is withdrawn: the item's and the rater's external ids, and the
    criterion (required when the project has several)."""

    item: Annotated[ExternalId, Field(description="External id of the item.")]
    rater: Annotated[ExternalId, Field(description="External id of the rater whose label is withdrawn.")]
    criterion: NotRequired[
        Annotated[Text | None, Field(description="The criterion; required when the project has several.")]
    ]
    order: NotRequired[
        Annotated[
            Literal["AB", "BA"] | None,
            Field(description="A pairwise judge's label: the order whose label is withdrawn; absent: both orders."),
        ]
    ]


class LabelsAccepted(BaseModel):
    accepted: int = Field(description="New label events written (first labels and corrections).")
    duplicates: int = Field(description="Rows equal to the cell's current label; nothing written.")
    label_seq: int | None = Field(
        description="The project's last label event after this write; null for an annotator key (the project-wide "
        "sequence would show it how much the other raters label)."
    )


class LabelsRetracted(BaseModel):
    retracted: int = Field(description="Retraction events written (cells whose current label was withdrawn).")
    label_seq: int = Field(description="The project's last label event after this write.")


class RetractionsRead(BaseModel):
    """What ``POST /projects/{pid}/labels/retractions`` wrote, as the caller may read it."""

    retracted: int = Field(description="Retraction events written (cells whose current label was withdrawn).")
    label_seq: int | None = Field(
        description="The project's last label event after this write; null for an annotator key (as for labels)."
    )


class LabelRow(BaseModel):
    item: str = Field(description="External id of the item.")
    rater: str = Field(description="External id of the rater.")
    criterion: str = Field(description="The criterion labeled.")
    value: str | None = Field(description="The label; null for a retraction event (`history=true` only).")
    seq: int = Field(description="The label event's label_seq.")
    batch: str | None = Field(description="The batch the label answered; null when it answered none.")
    created_at: datetime | None = Field(None, description="When the label was written (UTC).")
    retracted: bool = Field(False, description="Whether this event withdraws the cell's label (`history=true` only).")
    order: str | None = Field(None, description="A pairwise judge's label: the order it was shown, AB or BA.")
