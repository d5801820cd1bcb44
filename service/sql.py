"""Dialect-neutral SQL helpers (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session
from sqlalchemy.sql.dml import Insert

T = TypeVar("T")

# Stay well under SQLite's and psycopg's bound-parameter limits in IN (...) lists.
CHUNK = 5_000


def chunks(values: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most ``size`` values."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def upsert(session: Session, table: Table, keys: Iterable[str]) -> Insert:
    """``INSERT ... ON CONFLICT (keys) DO UPDATE`` of every other column, for this dialect."""
    dialect = session.get_bind().dialect.name
    stmt: Any = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)
    keys = list(keys)
    updates = {c.name: stmt.excluded[c.name] for c in table.columns if c.name not in keys}
    return stmt.on_conflict_do_update(index_elements=keys, set_=updates)
