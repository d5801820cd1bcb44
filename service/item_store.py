"""Corpus writes and reads: bulk upsert of items by external id."""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from service.errors import Conflict, Invalid, echo
from service.identifiers import collision_key
from service.models import Item, Project, Rater
from service.project_rows import lock_project, reserve
from service.schemas import ItemIn, ItemsUpserted
from service.sql import CHUNK, chunks, driver_rows


def ids_by_external(
    session: Session, model: type[Item | Rater], project_id: str, external_ids: list[str]
) -> dict[str, int]:
    """Map external ids of one project to internal ids (unknown ids are absent)."""
    if len(external_ids) > CHUNK:  # a bulk upload: one scan of the project beats many IN lists
        table = model.__table__.name
        rows = driver_rows(session, f"SELECT external_id, id FROM {table} WHERE project_id = ?", (project_id,))
        return dict(rows)
    found: dict[str, int] = {}
    for part in chunks(external_ids):
        rows = session.execute(
            select(model.external_id, model.id).where(
                model.project_id == project_id, model.external_id.in_(part)
            )
        )
        found.update((ext, iid) for ext, iid in rows)
    return found


def refuse_look_alikes(
    session: Session, model: type[Item | Rater], project_id: str, new_ids: list[str]
) -> None:
    """409 when a new id has the collision key (NFKC form) of another id of the project or of ``new_ids``."""
    kind = "item" if model is Item else "rater"
    by_key: dict[str, str] = {}
    for ext in new_ids:
        other = by_key.setdefault(collision_key(ext), ext)
        if other != ext:
            raise Conflict(f"{kind} {echo(ext)} looks the same as {kind} {echo(other)} of this request "
                           "(equal NFKC forms); use one id", code="look_alike_id")
    for part in chunks(list(by_key)):
        for key, existing in session.execute(
            select(model.external_key, model.external_id).where(
                model.project_id == project_id, model.external_key.in_(part)
            )
        ):
            if existing != by_key[key]:
                raise Conflict(f"{kind} {echo(by_key[key])} looks the same as the existing {kind} {echo(existing)} "
                               "(equal NFKC forms); use that id", code="look_alike_id")


def _canonical(features: dict[str, Any]) -> bytes:
    """Features as canonical JSON, so ``true`` and ``1`` (equal in Python) differ."""
    return orjson.dumps(features, option=orjson.OPT_SORT_KEYS)


def upsert_items(session: Session, project: Project, rows: list[ItemIn]) -> ItemsUpserted:
    """Create new items, update changed ones, count the unchanged; positions follow upload order."""
    wanted: dict[str, ItemIn] = {}
    for n, row in enumerate(rows, start=1):
        prior = wanted.get(row.external_id)
        if prior is not None and prior != row:
            raise Invalid(f"row {n}: item {echo(row.external_id)} appears twice with different content")
        wanted[row.external_id] = row
    lock_project(session, project.id)
    existing: dict[str, tuple[int, dict[str, Any], str | None]] = {}
    for part in chunks(list(wanted)):
        for ext, iid, features, text in session.execute(
            select(Item.external_id, Item.id, Item.features, Item.text).where(
                Item.project_id == project.id, Item.external_id.in_(part)
            )
        ):
            existing[ext] = (iid, features, text)
    new = [r for ext, r in wanted.items() if ext not in existing]
    changed = [
        {"id": existing[ext][0], "features": r.features, "text": r.text}
        for ext, r in wanted.items()
        if ext in existing and (_canonical(existing[ext][1]), existing[ext][2]) != (_canonical(r.features), r.text)
    ]
    if new:
        refuse_look_alikes(session, Item, project.id, [r.external_id for r in new])
        start = reserve(session, project.id, "item_count", len(new)) - 1  # positions count from 0
        session.execute(
            insert(Item),
            [
                {"project_id": project.id, "external_id": r.external_id, "position": start + i,
                 "features": r.features, "text": r.text}
                for i, r in enumerate(new)
            ],
        )
    if changed:
        session.execute(update(Item), changed)
    return ItemsUpserted(created=len(new), updated=len(changed), unchanged=len(wanted) - len(new) - len(changed))
