"""Corpus writes and reads: bulk upsert of items by external id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import Row, text, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from service.core.errors import Conflict, Invalid, echo
from service.core.identifiers import collision_key
from service.core.sql import CHUNK, db_value, db_values, driver_rows, in_values, insert_many
from service.data.models import Item, Project, Rater, table_of, utcnow
from service.data.projects import lock_project, reserve
from service.schemas.items import ItemIn, ItemsUpserted


def ids_by_external(
    session: Session, model: type[Item | Rater], project_id: str, external_ids: list[str]
) -> dict[str, int]:
    """Map external ids of one project to internal ids (unknown ids are absent)."""
    table = table_of(model).name
    found: dict[str, int] = {}
    if len(external_ids) > CHUNK:
        if not (model is Item and few_of(session, project_id, len(external_ids))):
            # a bulk upload of a good part of the corpus: one scan of the project beats looking each id up
            sql = f"SELECT external_id, id FROM {table} WHERE project_id = ?"
            return dict(driver_rows(session, sql, (project_id,)))
        found = _ids_in_range(session, project_id, external_ids)
        external_ids = [e for e in external_ids if e not in found]
        if not external_ids:
            return found
    among, values = in_values(session, "external_id", external_ids)
    return found | dict(
        driver_rows(
            session, f"SELECT external_id, id FROM {table} WHERE project_id = ? AND {among}", (project_id, values)
        )
    )


RUN = 2
"""A bulk's item ids are read as one range of the project's id index when it holds at most this many
times their number."""


def _ids_in_range(session: Session, project_id: str, external_ids: list[str]) -> dict[str, int]:
    """The items of ``external_ids`` found in one range of the project's external-id index, from their
    least to their greatest: all of them when the ids are a run of the corpus (``it200000`` ..
    ``it299999``), nothing when the range holds more than RUN times their number (random ids).

    At a million items, 100,000 ids: 0.16 s instead of 0.3-0.5 s for the lookup per id (PostgreSQL).
    An id the range misses (the database orders text its own way) is looked up after.
    """
    limit = RUN * len(external_ids)
    rows = driver_rows(
        session,
        "SELECT external_id, id FROM items WHERE project_id = ? AND external_id BETWEEN ? AND ? LIMIT ?",
        (project_id, min(external_ids), max(external_ids), limit + 1),
    )
    if len(rows) > limit:
        return {}
    wanted = set(external_ids)
    return {e: i for e, i in rows if e in wanted}


def few_of(session: Session, project_id: str, n: int) -> bool:
    """Whether ``n`` items are a small part (under a quarter) of the project's corpus, so looking them up
    by id beats scanning the project (at a million items, a 100,000-row upload reads a tenth)."""
    project = session.get(Project, project_id)
    return project is not None and 4 * n < project.item_count


def _rows_with_keys(
    session: Session, columns: tuple[InstrumentedAttribute[Any], ...], project_id: str, keys: list[str]
) -> Sequence[Row[*tuple[Any, ...]]]:
    """``columns`` of the project's rows whose first column is one of ``keys``.

    Looked up through the project's unique index on that column with the keys as one bound array, so the
    cost follows the keys, not the corpus (a scan of the project per upload made item uploads at a
    million items a third as fast as at ten thousand).
    """
    table = columns[0].class_.__table__
    among, values = in_values(session, columns[0].key, keys)
    names = ", ".join(c.key for c in columns)
    sql = text(f"SELECT {names} FROM {table.name} WHERE project_id = :project AND {among.replace('?', ':keys')}")
    typed = sql.columns(*(table.c[c.key] for c in columns))
    return session.execute(typed, {"project": project_id, "keys": values}).all()


def refuse_look_alikes(session: Session, model: type[Item | Rater], project_id: str, new_ids: list[str]) -> None:
    """409 when a new id has the collision key (NFKC form) of another id of the project or of ``new_ids``."""
    kind = "item" if model is Item else "rater"
    by_key: dict[str, str] = {}
    for ext in new_ids:
        other = by_key.setdefault(collision_key(ext), ext)
        if other != ext:
            raise Conflict(
                f"{kind} {echo(ext)} looks the same as {kind} {echo(other)} of this request "
                "(equal NFKC forms); use one id",
                code="look_alike_id",
            )
    taken = _rows_with_keys(session, (model.external_key, model.external_id), project_id, list(by_key))
    for row in taken:
        key, existing = row[0], row[1]
        if existing != by_key[key]:
            raise Conflict(
                f"{kind} {echo(by_key[key])} looks the same as the existing {kind} {echo(existing)} "
                "(equal NFKC forms); use that id",
                code="look_alike_id",
            )


def _canonical(features: dict[str, Any]) -> bytes:
    """Features as canonical JSON, so ``true`` and ``1`` (equal in Python) differ."""
    return orjson.dumps(features, option=orjson.OPT_SORT_KEYS)


def _check_systems(row: ItemIn, n: int) -> None:
    """A pairwise item names the systems behind its answers in features ``system_a`` and ``system_b``, both
    or neither, two different strings (docs/method.md §13); 422 naming row ``n``."""
    a, b = row.features.get("system_a"), row.features.get("system_b")
    if a is None and b is None:
        return
    if not (isinstance(a, str) and isinstance(b, str)):
        raise Invalid(f"row {n}: a pairwise item names both systems, system_a and system_b, as strings, or neither")
    if a == b:
        raise Invalid(f"row {n}: item {echo(row.external_id)} compares system {echo(a)} with itself")


def upsert_items(session: Session, project: Project, rows: list[ItemIn]) -> ItemsUpserted:
    """Create new items, update changed ones, count the unchanged; positions follow upload order."""
    wanted: dict[str, ItemIn] = {}
    for n, row in enumerate(rows, start=1):
        if project.kind == "pairwise":
            _check_systems(row, n)
        prior = wanted.get(row.external_id)
        if prior is not None and prior != row:
            raise Invalid(f"row {n}: item {echo(row.external_id)} appears twice with different content")
        wanted[row.external_id] = row
    lock_project(session, project.id)
    found = _rows_with_keys(session, (Item.external_id, Item.id, Item.features, Item.text), project.id, list(wanted))
    existing = {row[0]: (row[1], row[2], row[3]) for row in found}
    new = [r for ext, r in wanted.items() if ext not in existing]
    changed = [
        {"id": existing[ext][0], "features": r.features, "text": r.text}
        for ext, r in wanted.items()
        if ext in existing and (_canonical(existing[ext][1]), existing[ext][2]) != (_canonical(r.features), r.text)
    ]
    if new:
        refuse_look_alikes(session, Item, project.id, [r.external_id for r in new])
        start = reserve(session, project.id, "item_count", len(new)) - 1  # positions count from 0
        stamp = db_value(session, Item.__table__.c.created_at, utcnow())
        features = db_values(session, Item.__table__.c.features, [r.features for r in new])
        # Driver-ready rows, no per-row ORM work: the ORM's bulk insert of 100k items spent ~10 s
        # of pure Python in the web worker (GIL contention that stalled /healthz on PostgreSQL).
        insert_many(
            session,
            table_of(Item),
            ("project_id", "external_id", "external_key", "position", "features", "text", "created_at"),
            [
                (project.id, r.external_id, collision_key(r.external_id), start + i, f, r.text, stamp)
                for i, (r, f) in enumerate(zip(new, features, strict=True))
            ],
        )
    if changed:
        session.execute(update(Item), changed)
    return ItemsUpserted(created=len(new), updated=len(changed), unchanged=len(wanted) - len(new) - len(changed))
