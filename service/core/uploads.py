"""Bulk request bodies: a JSON array, NDJSON or CSV, parsed and validated row by row."""

from __future__ import annotations

import csv
import io
from functools import lru_cache
from typing import Annotated, Any, TypeVar, cast

import orjson
from fastapi import Depends, Header, Request
from pydantic import BaseModel, TypeAdapter, ValidationError

from service.core.errors import Invalid, TooLarge, UnsupportedMediaType, echo

M = TypeVar("M")
"""A row type: a pydantic model, or a TypedDict (validated into plain dicts, no instance per row)."""

JSON_TYPES = ("application/json",)
NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl")
CSV_TYPES = ("text/csv",)
VALIDATE_ROWS = 2_000
"""Rows validated per call (the GIL is held for one call, a few milliseconds at this size)."""


async def _raw_body(request: Request) -> bytes:
    return await request.body()


RawBody = Annotated[bytes, Depends(_raw_body)]
ContentType = Annotated[str | None, Header(include_in_schema=False)]


def _records(body: bytes, content_type: str | None) -> list[Any]:
    media = (content_type or "application/json").split(";")[0].strip().lower()
    if media in JSON_TYPES:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise Invalid(f"body is not valid JSON: {exc}", code="malformed_body") from None
        if not isinstance(data, list):
            raise Invalid("body must be a JSON array of objects", code="malformed_body")
        return data
    if media in NDJSON_TYPES:
        rows = []
        for lineno, line in enumerate(body.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(orjson.loads(line))
                except orjson.JSONDecodeError as exc:
                    raise Invalid(f"line {lineno}: not valid JSON: {exc}", code="malformed_body") from None
        return rows
    if media in CSV_TYPES:
        return _csv_records(body)
    raise UnsupportedMediaType(
        f"content type {echo(media)} is not accepted; send application/json (an array), "
        "application/x-ndjson or text/csv"
    )


def _csv_records(body: bytes) -> list[dict[str, str]]:
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise Invalid("CSV body must be UTF-8 text", code="malformed_body") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if not header:
            return []
        names = [h.strip() for h in header]
        if len(set(names)) != len(names) or not all(names):
            raise Invalid("CSV line 1: header names must be non-empty and distinct", code="malformed_body")
        rows = []
        for fields in reader:
            if not fields or fields == [""]:
                continue
            if len(fields) != len(names):
                raise Invalid(
                    f"CSV line {reader.line_num}: expected {len(names)} fields, got {len(fields)}",
                    code="malformed_body",
                )
            rows.append({k: v for k, v in zip(names, fields, strict=True) if v != ""})
        return rows
    except csv.Error as exc:
        raise Invalid(f"CSV line {reader.line_num}: {exc}", code="malformed_body") from None


@lru_cache
def _rows_adapter(model: type) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]


def parse_rows(
    body: bytes, content_type: str | None, model: type[M], *, max_rows: int, csv_extra: str | None = None
) -> list[M]:
    """Validated rows of ``model`` from a bulk body; 413 past ``max_rows``, 422 naming the bad row.

    ``csv_extra`` names the field that collects CSV columns the model does not know
    (items put them in ``features``).
    """
    records = _records(body, content_type)
    if len(records) > max_rows:
        raise TooLarge(f"{len(records)} rows in one request; the limit is {max_rows}", code="too_many_rows")
    is_csv = content_type is not None and content_type.split(";")[0].strip().lower() in CSV_TYPES
    if csv_extra and is_csv and issubclass(model, BaseModel):
        known = set(model.model_fields) - {csv_extra}
        records = [
            {**{k: v for k, v in r.items() if k in known}, csv_extra: {k: v for k, v in r.items() if k not in known}}
            for r in records
        ]
    return validated_rows(records, model)


def validated_rows(records: list[Any], model: type[M]) -> list[M]:
    """``records`` validated as rows of ``model``; 422 naming the first bad row (counted from 1)."""
    adapter = _rows_adapter(cast(type, model))  # mypy cannot see that a TypeVar's class is hashable
    rows: list[M] = []
    # Validated a slice at a time: one call holds the GIL throughout, and a whole 100k-row
    # upload in one call kept the worker's event loop (and its health check) waiting for seconds.
    for start in range(0, len(records), VALIDATE_ROWS):
        try:
            rows.extend(adapter.validate_python(records[start : start + VALIDATE_ROWS]))
        except ValidationError as exc:
            raise _invalid_rows(exc, start) from None
    return rows


def _invalid_rows(exc: ValidationError, offset: int) -> Invalid:
    """The 422 naming the first bad row of a slice that starts at row ``offset``."""
    errors = exc.errors(include_url=False, include_input=False)
    fields = [
        {
            "loc": [offset + loc[0], *loc[1:]] if loc and isinstance(loc[0], int) else list(loc),
            "msg": e["msg"],
            "type": e["type"],
        }
        for e in errors[:50]
        for loc in [e["loc"]]
    ]
    loc = fields[0]["loc"]
    where = f"row {loc[0] + 1}" if loc and isinstance(loc[0], int) else "body"
    field = ".".join(str(p) for p in loc[1:])
    detail = f"{where}: {field + ': ' if field else ''}{errors[0]['msg']}"
    return Invalid(detail, code="validation_error", fields=fields)


def bulk_body_doc(model: type) -> dict[str, Any]:
    """OpenAPI ``requestBody`` for a bulk endpoint accepting JSON, NDJSON and CSV.

    The app registers ``model`` under ``components/schemas`` (see ``service.app``).
    """
    item_schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"type": "array", "items": item_schema}},
                "application/x-ndjson": {"schema": {"type": "string", "description": "one JSON object per line"}},
                "text/csv": {"schema": {"type": "string", "description": "header row, then one row per record"}},
            },
        },
    }
