"""Dialect-neutral SQL helpers (SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
import orjson
from psycopg.types.json import Json
from sqlalchemy import ColumnElement, CursorResult, Result, Table
from sqlalchemy.orm import Session

T = TypeVar("T")

# Stay well under SQLite's and psycopg's bound-parameter limits in IN (...) lists.
CHUNK = 5_000


def chunks(values: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` values."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def db_value(session: Session, column: ColumnElement[Any], value: Any) -> Any:
    """``value`` as the driver stores it in ``column`` (e.g. SQLite's timestamp text)."""
    return db_values(session, column, [value])[0]


def db_values(session: Session, column: ColumnElement[Any], values: list[Any]) -> list[Any]:
    """Each of ``values`` as the driver stores it in ``column``, the column's converter looked up once."""
    dialect = session.get_bind().dialect
    process = column.type.dialect_impl(dialect).bind_processor(dialect)
    return [process(v) for v in values] if process else values


def insert_many(
    session: Session,
    table: Table,
    columns: Sequence[str],
    rows: list[tuple[Any, ...]],
    *,
    on_conflict: Sequence[str] = (),
    accumulate: bool = False,
) -> None:
    """Bulk ``INSERT`` with no per-row ORM work: SQLite's executemany; PostgreSQL's ``COPY``, or with
    ``on_conflict`` one ``INSERT ... SELECT FROM unnest`` of column arrays per 50,000 rows.

    With ``on_conflict`` (the key columns) an existing row gets the other columns' new values
    (``ON CONFLICT ... DO UPDATE``: the same syntax on SQLite and PostgreSQL), or with ``accumulate``
    the new values added to the old. Values must be driver-ready (see :func:`db_value`).
    """
    if not rows:
        return
    conn = session.connection()
    names = ", ".join(columns)
    conflict = ""
    if on_conflict:

        def new(c: str) -> str:
            return f"{table.name}.{c} + excluded.{c}" if accumulate else f"excluded.{c}"

        updates = ", ".join(f"{c} = {new(c)}" for c in columns if c not in on_conflict)
        conflict = f" ON CONFLICT ({', '.join(on_conflict)}) DO UPDATE SET {updates}"
    if conn.dialect.name == "postgresql" and not on_conflict:
        driver = conn.connection.driver_connection
        assert driver is not None
        with driver.cursor() as cursor:  # the session's transaction
            with cursor.copy(f"COPY {table.name} ({names}) FROM STDIN") as copy:
                for part in chunks(rows, 50_000):
                    copy.write(copy_text(part))
        return
    if conn.dialect.name == "postgresql":
        # One statement per chunk with a column array per column: no per-row round trips.
        arrays = ", ".join(f"%s::{table.c[c].type.compile(dialect=conn.dialect)}[]" for c in columns)
        sql = f"INSERT INTO {table.name} ({names}) SELECT * FROM unnest({arrays}){conflict}"
        for part in chunks(rows, 50_000):
            conn.exec_driver_sql(sql, tuple(list(column) for column in zip(*part, strict=True)))
        return
    marks = ", ".join("?" * len(columns))
    sql = f"INSERT INTO {table.name} ({names}) VALUES ({marks}){conflict}"
    for part in chunks(rows, 20_000):
        conn.exec_driver_sql(sql, list(part))


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_field(value: Any) -> str:
    """One value in ``COPY``'s text format: ``\\N`` for null, backslash escapes in text."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, str):
        return value.translate(_COPY_ESCAPES)
    if isinstance(value, int | float | datetime):
        return str(value)
    if isinstance(value, Json):  # a JSON column's driver-ready value
        dumped = (value.dumps or json.dumps)(value.obj)
        return (dumped.decode() if isinstance(dumped, bytes) else dumped).translate(_COPY_ESCAPES)
    raise TypeError(f"no COPY text for a {type(value).__name__}")


def copy_text(rows: Sequence[tuple[Any, ...]]) -> str:
    """``rows`` as the text of a PostgreSQL ``COPY ... FROM STDIN`` (tab-separated lines).

    Formatted a column at a time, each distinct value once (a label's value, criterion and time
    repeat in every row): about a tenth of the CPU of psycopg's ``write_row`` per row.
    """
    columns: list[Iterator[str]] = []
    for column in zip(*rows, strict=True):
        distinct = set(column)
        if all(type(v) is int for v in distinct):
            columns.append(map(str, column))
        elif any(isinstance(v, bool | float) for v in distinct):  # 1, 1.0 and True would share a key
            columns.append(map(_copy_field, column))
        else:
            text = {v: _copy_field(v) for v in distinct}
            columns.append(map(text.__getitem__, column))
    return "\n".join(map("\t".join, zip(*columns, strict=True))) + "\n"


def driver_rows(session: Session, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Plain tuples from the DB driver for a ``?``-placeholder query (no row objects: bulk reads)."""
    conn = session.connection()
    if conn.dialect.paramstyle != "qmark":
        sql = sql.replace("?", "%s")
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def integer_rows(session: Session, columns: Sequence[str], source: str, params: tuple[Any, ...]) -> np.ndarray:
    """``SELECT columns FROM source`` (integer expressions; ``source`` may go on with ``WHERE``) as an
    ``(n_rows, len(columns))`` int64 array.

    The database joins the values into comma-separated text that numpy parses: no Python object
    per value (a third of the CPU of fetching rows for millions of labels). SQLite aggregates each
    column on its own (it steps every aggregate of a query over the same rows in the same order);
    PostgreSQL, whose aggregates may run in parallel parts, one text of whole rows.
    """
    if session.get_bind().dialect.name == "postgresql":
        row = " || ',' || ".join(f"({c})" for c in columns)
        texts = driver_rows(session, f"SELECT string_agg({row}, ',') FROM {source}", params)[0]
    else:
        aggregates = ", ".join(f"group_concat({c}, ',')" for c in columns)
        texts = driver_rows(session, f"SELECT {aggregates} FROM {source}", params)[0]
    if not texts[0]:
        return np.empty((0, len(columns)), dtype=np.int64)
    parsed = [np.fromstring(t, dtype=np.int64, sep=",") for t in texts]
    return parsed[0].reshape(-1, len(columns)) if len(parsed) == 1 else np.column_stack(parsed)


PROBED_VALUES = 20_000
"""Up to this many values, PostgreSQL looks each one up in the index (a join on the array's elements:
8 ms for 1,000 item ids at a million items); beyond, ``= ANY`` reads the project's index range once
(~120 ms for 1,000 ids, cheaper than 100,000 lookups)."""


def in_values(session: Session, column: str, values: Sequence[Any]) -> tuple[str, Any]:
    """``column IN values`` for :func:`driver_rows` with one bound parameter, however many values:
    a PostgreSQL array literal, a SQLite JSON array (no IN list of thousands of markers to render)."""
    if session.get_bind().dialect.name == "postgresql":
        if not values:  # no element type to name
            return f"{column} = ANY(?)", []
        integers = all(isinstance(v, int) for v in values)
        among = f"CAST(? AS {'bigint' if integers else 'text'}[])"
        if len(values) > PROBED_VALUES:
            return f"{column} = ANY({among})", _array_literal(values, integers=integers)
        return f"{column} IN (SELECT unnest({among}))", _array_literal(values, integers=integers)
    return f"{column} IN (SELECT value FROM json_each(?))", orjson.dumps(list(values)).decode()


def _array_literal(values: Sequence[Any], *, integers: bool) -> str:
    """A PostgreSQL array's text form of integers or strings (``{1,2}``, ``{"a","b"}``), to be cast.

    Built by joining strings: psycopg's adaptation of a 100,000-element list cost ~0.1 s of
    server CPU per lookup.
    """
    if integers:
        return "{" + ",".join(map(str, values)) + "}"
    quoted = (str(v).replace("\\", "\\\\").replace('"', '\\"') for v in values)
    return '{"' + '","'.join(quoted) + '"}'


def rowcount(result: Result[Any]) -> int:
    """The rows an ``UPDATE`` or ``DELETE`` matched (SQLAlchemy types ``rowcount`` on ``CursorResult`` only)."""
    assert isinstance(result, CursorResult)
    return result.rowcount
