"""Parquet bodies and exports, through pyarrow (the optional ``dataframes`` extra).

A Parquet file is compressed, and its strings may be dictionary-encoded: a small body can stand
for far more data than it holds. A body is read only after its footer's counts pass the bounds
(rows, uncompressed bytes), and its strings are decoded once per distinct value, after the
longest of them has passed the bound of a value's length.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Collection, Sequence
from typing import Any, Literal

from service.core.errors import Invalid, TooLarge, echo

PARQUET = "application/vnd.apache.parquet"
"""The media type of a Parquet file, sent or answered."""

ColumnType = Literal["string", "int64", "double", "bool", "timestamp"]
"""A column's type in an exported file (a timestamp is microseconds, UTC)."""


def pyarrow() -> Any | None:
    """The pyarrow module, or ``None`` when the server was installed without it."""
    try:
        return importlib.import_module("pyarrow")
    except ImportError:
        return None


def parquet_file(pa: Any, columns: Sequence[tuple[str, ColumnType]], rows: Sequence[Sequence[Any]]) -> bytes:
    """The rows as one Parquet file whose ``columns`` are (name, type), in order."""
    arrow_types = {
        "string": pa.string(),
        "int64": pa.int64(),
        "double": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
    table = pa.table(
        [pa.array(list(v), type=arrow_types[t]) for v, (_, t) in zip(values, columns, strict=True)],
        names=[name for name, _ in columns],
    )
    out = pa.BufferOutputStream()
    importlib.import_module("pyarrow.parquet").write_table(table, out)
    return bytes(out.getvalue().to_pybytes())


def parquet_records(
    pa: Any,
    body: bytes,
    *,
    columns: Sequence[str],
    required: Collection[str],
    max_rows: int,
    max_bytes: int,
    max_value_bytes: int,
) -> list[dict[str, Any]]:
    """The rows of a Parquet body as dicts of ``columns`` (the file's other columns are not read);
    413 past ``max_rows`` rows or ``max_bytes`` uncompressed, 422 for a file that is not Parquet, a
    ``required`` column missing, a column that is not scalar, or a string longer than ``max_value_bytes``."""
    pq = importlib.import_module("pyarrow.parquet")
    try:
        return _records(pa, pq, body, columns, required, max_rows, max_bytes, max_value_bytes)
    except (pa.ArrowException, OSError, ValueError, OverflowError) as exc:  # UnicodeDecodeError is a ValueError
        raise Invalid(f"body is not a readable Parquet file: {exc}", code="malformed_body") from None


def _records(
    pa: Any,
    pq: Any,
    body: bytes,
    columns: Sequence[str],
    required: Collection[str],
    max_rows: int,
    max_bytes: int,
    max_value_bytes: int,
) -> list[dict[str, Any]]:
    file = pq.ParquetFile(io.BytesIO(body))
    meta = file.metadata
    if meta.num_rows > max_rows:
        raise TooLarge(f"{meta.num_rows} rows in one request; the limit is {max_rows}", code="too_many_rows")
    schema = file.schema_arrow
    names = list(schema.names)
    if len(set(names)) != len(names):
        raise Invalid(
            f"Parquet columns must have distinct names; the file has {', '.join(echo(n) for n in names[:20])}",
            code="malformed_body",
        )
    missing = [c for c in required if c not in names]
    if missing:
        raise Invalid(
            f"Parquet file: no column {echo(missing[0])}; its columns are {', '.join(echo(n) for n in names[:20])}",
            code="validation_error",
        )
    read = [c for c in columns if c in names]
    for c in read:
        kind = schema.field(c).type
        if pa.types.is_nested(kind) or pa.types.is_dictionary(kind) and pa.types.is_nested(kind.value_type):
            raise Invalid(
                f"Parquet column {echo(c)} is {kind}; it must hold one value per row", code="validation_error"
            )
    # The row groups' own totals: pyarrow 26's per-column metadata aborts the process on some corrupt footers.
    unpacked = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
    if unpacked > max_bytes:
        raise TooLarge(f"the Parquet file holds {unpacked} bytes uncompressed; the limit is {max_bytes}")
    texts = [c for c in read if _is_text(pa, schema.field(c).type)]
    # strings kept dictionary-encoded: each distinct value is held (and decoded) once
    table = pq.read_table(io.BytesIO(body), columns=read, read_dictionary=texts, use_threads=False)
    table.validate(
        full=True
    )  # a corrupt page can decode to indices past its dictionary, or to bytes that are not UTF-8
    values = {c: _values(pa, c, table.column(c), max_value_bytes) for c in read}
    return [dict(zip(read, row, strict=True)) for row in zip(*(values[c] for c in read), strict=True)]


def _is_text(pa: Any, kind: Any) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return bool(
        pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or getattr(pa.types, "is_string_view", lambda _: False)(kind)
    )


def _values(pa: Any, name: str, column: Any, max_value_bytes: int) -> list[Any]:
    """A column's values as Python objects; a dictionary column's decoded once per distinct value."""
    if not pa.types.is_dictionary(column.type):
        return list(column.to_pylist())
    compute = importlib.import_module("pyarrow.compute")
    out: list[Any] = []
    for chunk in column.chunks:
        words = chunk.dictionary
        longest = compute.max(compute.binary_length(words)).as_py() if len(words) else 0
        if longest is not None and longest > max_value_bytes:
            raise Invalid(
                f"Parquet column {echo(name)} holds a value of {longest} bytes; the limit is {max_value_bytes}",
                code="validation_error",
            )
        try:
            decoded = [w.decode() if isinstance(w, bytes) else w for w in words.to_pylist()]
        except UnicodeDecodeError:
            raise Invalid(
                f"Parquet column {echo(name)} holds bytes that are not UTF-8 text", code="validation_error"
            ) from None
        out += [None if i is None else decoded[i] for i in chunk.indices.to_pylist()]
    return out
