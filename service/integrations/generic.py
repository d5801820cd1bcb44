"""The generic long format: one row per label, ``item, rater, kind, value[, criterion, confidence, order]``."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from service.core.csv_safety import restored_cell
from service.core.identifiers import ExternalId
from service.core.uploads import CSV_TYPES, parse_rows
from service.integrations.scores import Score
from service.schemas.base import Text
from service.schemas.raters import RaterKind


class GenericRow(TypedDict):
    """One label of the generic format; ``confidence`` (0 to 1, judges only) is the judge's."""

    item: Annotated[ExternalId, Field(description="External id of the item; created when new.")]
    rater: Annotated[ExternalId, Field(description="External id of the rater; created when new.")]
    kind: Annotated[RaterKind, Field(description="The rater's kind: judge, primary or human.")]
    value: Annotated[
        Annotated[Text, Field(min_length=1, max_length=200)],
        Field(description="The label: one of the project's labels (or a number in a numeric project)."),
    ]
    criterion: NotRequired[
        Annotated[Text | None, Field(description="The criterion; required when the project has several.")]
    ]
    confidence: NotRequired[
        Annotated[
            Annotated[float, Field(ge=0, le=1)] | None, Field(description="A judge's confidence in its label, 0 to 1.")
        ]
    ]
    order: NotRequired[
        Annotated[
            Literal["AB", "BA"] | None,
            Field(description="A pairwise project's judge: the order it was shown the answers, AB or BA."),
        ]
    ]


def generic_scores(body: bytes, content_type: str | None, *, max_rows: int) -> list[Score]:
    """The scores of a generic-format body (JSON array, NDJSON or CSV); 422 naming the first bad row."""
    rows = parse_rows(body, content_type, GenericRow, max_rows=max_rows)
    is_csv = content_type is not None and content_type.split(";")[0].strip().lower() in CSV_TYPES
    cell = restored_cell if is_csv else str  # an exported CSV guards formula-like cells with an apostrophe
    return [
        Score(
            item=cell(r["item"]),
            rater=cell(r["rater"]),
            kind=r["kind"],
            value=cell(r["value"]),
            name=None if r.get("criterion") is None else cell(r["criterion"]),  # type: ignore[arg-type]
            scale=None,
            where=f"row {n}",
            confidence=r.get("confidence"),
            order=r.get("order"),
        )
        for n, r in enumerate(rows, start=1)
    ]
