"""The generic long format: one row per label, ``item, rater, kind, value[, criterion, confidence, order]``."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from service.core.csv_safety import restored_cell
from service.core.errors import UnsupportedMediaType
from service.core.identifiers import ExternalId
from service.core.parquet import PARQUET, parquet_records, pyarrow
from service.core.uploads import CSV_TYPES, parse_rows, validated_rows
from service.integrations.scores import GENERIC_COLUMNS, Score, value_text
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


GENERIC_TEXT = ("item", "rater", "kind", "value", "criterion", "order")
"""The generic format's text columns (a Parquet file's numbers and booleans in them read as text)."""
MAX_VALUE_BYTES = 1_000
"""The longest text a Parquet cell may hold (ids and values are at most 200 characters)."""


def generic_scores(body: bytes, content_type: str | None, *, max_rows: int, max_bytes: int) -> list[Score]:
    """The scores of a generic-format body (JSON array, NDJSON, CSV or Parquet); 422 naming the first bad row.

    ``max_bytes`` bounds a Parquet body's columns uncompressed (a CSV body of the same rows is bounded so).
    """
    media = (content_type or "").split(";")[0].strip().lower()
    if media == PARQUET:
        rows = validated_rows(_parquet_records(body, max_rows=max_rows, max_bytes=max_bytes), GenericRow)
    else:
        rows = parse_rows(body, content_type, GenericRow, max_rows=max_rows)
    cell = restored_cell if media in CSV_TYPES else str  # an exported CSV guards formula-like cells with an apostrophe
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


def _parquet_records(body: bytes, *, max_rows: int, max_bytes: int) -> list[dict[str, Any]]:
    """A Parquet body's rows of the generic columns, numbers and booleans in text columns as text
    (``1.0`` -> ``1``, as a tool's numeric score); 415 when the server has no pyarrow."""
    pa = pyarrow()
    if pa is None:
        raise UnsupportedMediaType(
            f"{PARQUET} needs pyarrow on the server (install annoplan[dataframes]); send text/csv, "
            "application/json or application/x-ndjson"
        )
    records = parquet_records(
        pa,
        body,
        columns=GENERIC_COLUMNS,
        required=("item", "rater", "kind", "value"),
        max_rows=max_rows,
        max_bytes=max_bytes,
        max_value_bytes=MAX_VALUE_BYTES,
    )
    for r in records:
        for c in GENERIC_TEXT:
            v = r.get(c)
            if isinstance(v, bool | int | float):
                r[c] = value_text(v)[0]
    return records
