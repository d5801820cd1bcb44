"""Dialect-neutral SQL helpers (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import Column, Table
from sqlalchemy.orm import Session

T = TypeVar("T")

# Stay well under SQLite's and psycopg's bound-parameter limits in IN (...) lists.
CHUNK = 5_000


def chunks(values: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` values."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def db_value(session: Session, column: Column[Any], value: Any) -> Any:
    """``value`` as the driver stores it in ``column`` (e.g. SQLite's timestamp text)."""
    dialect = session.get_bind().dialect
    process = column.type.dialect_impl(dialect).bind_processor(dialect)
    return process(value) if process else value


def insert_many(
    session: Session,
    table: Table,
    columns: Sequence[str],
    rows: list[tuple[Any, ...]],
    *,
    on_conflict: Sequence[str] = (),
) -> None:
    """Bulk ``INSERT`` through the driver's executemany, with no per-row ORM work.

    With ``on_conflict`` (the key columns) an existing row gets the other columns' new values
    (``ON CONFLICT ... DO UPDATE``: the same syntax on SQLite and PostgreSQL). Values must be
    driver-ready (see :func:`db_value`).
    """
    if not rows:
        return
    conn = session.connection()
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    sql = f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
    if on_conflict:
        updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in on_conflict)
        sql += f" ON CONFLICT ({', '.join(on_conflict)}) DO UPDATE SET {updates}"
    for part in chunks(rows, 20_000):
        conn.exec_driver_sql(sql, list(part))
