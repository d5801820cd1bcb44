"""Read queries behind the routes: listings, lookups by external id, and the label export."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, select, text
from sqlalchemy.orm import Session

from service.core.errors import Invalid, NotFound, echo
from service.core.pagination import PageParams
from service.data.models import (
    ApiKey,
    CurrentLabel,
    Item,
    LabelEvent,
    LabelStudioIssue,
    Plan,
    Project,
    Rater,
    Simulation,
)

LABEL_COLUMNS = ("item", "rater", "criterion", "value", "seq", "batch", "created_at", "retracted", "order")
"""The columns of :func:`label_rows`, in order."""


def database_answers(session: Session) -> None:
    """Raise the driver's error unless the database answers a trivial query."""
    session.execute(text("SELECT 1"))


def projects_page(session: Session, project_id: str | None, page: PageParams) -> list[Project]:
    """Projects by creation, ``page.after`` rows skipped (one more than the page for ``next``);
    only ``project_id`` when it is given."""
    stmt = select(Project).order_by(Project.created_at, Project.id)
    if project_id is not None:
        stmt = stmt.where(Project.id == project_id)
    return list(session.scalars(stmt.offset(page.after or 0).limit(page.limit + 1)))


def last_label_times(session: Session, project_ids: list[str]) -> dict[str, datetime]:
    """When each of the projects last received a label (projects without one are absent)."""
    return dict(
        session.execute(
            select(LabelEvent.project_id, func.max(LabelEvent.created_at))
            .where(LabelEvent.project_id.in_(project_ids))
            .group_by(LabelEvent.project_id)
        ).all()
    )


def has_labels(session: Session, project_id: str) -> bool:
    """Whether the project has any label event."""
    return bool(session.scalar(select(exists().where(LabelEvent.project_id == project_id))))


def items_page(session: Session, project_id: str, page: PageParams) -> list[Item]:
    """Items in corpus order after the cursor (one more than the page, for ``next``)."""
    stmt = select(Item).where(Item.project_id == project_id).order_by(Item.id).limit(page.limit + 1)
    if page.after is not None:
        stmt = stmt.where(Item.id > page.after)
    return list(session.scalars(stmt))


def external_ids(session: Session, table: type[Item] | type[Rater], ids: Iterable[int]) -> dict[int, str]:
    """The external id of each of ``ids`` (rows of ``table``: items or raters), by row id."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = session.execute(select(table.id, table.external_id).where(table.id.in_(wanted)))
    return {row_id: external for row_id, external in rows}


def rater_id(session: Session, project_id: str, external_id: str) -> int:
    """The id of the project's rater ``external_id``; 422 when there is none."""
    found = session.scalar(select(Rater.id).where(Rater.project_id == project_id, Rater.external_id == external_id))
    if found is None:
        raise Invalid(f"unknown rater {echo(external_id)} in this project")
    return found


def rater_kind(session: Session, project_id: str, external_id: str) -> str | None:
    """The kind of the project's rater ``external_id``, or None when there is none."""
    return session.scalar(select(Rater.kind).where(Rater.project_id == project_id, Rater.external_id == external_id))


def has_primary(session: Session, project_id: str) -> bool:
    """Whether the project has a primary rater."""
    return session.scalar(select(Rater.id).where(Rater.project_id == project_id, Rater.kind == "primary")) is not None


def has_plan(session: Session, project_id: str) -> bool:
    """Whether the project has any plan."""
    return bool(session.scalar(select(exists().where(Plan.project_id == project_id))))


def has_invalid_labels(session: Session, rater_id: int) -> bool:
    """Whether the rater's current labels include ``INVALID``."""
    invalid = exists().where(CurrentLabel.rater_id == rater_id, CurrentLabel.value == "INVALID")
    return bool(session.scalar(select(invalid)))


def project_rater(session: Session, project_id: str, rid: str) -> Rater:
    """The project's rater by id, else by external id, locked for an update; 404 when there is none."""
    by_id = Rater.id == int(rid) if rid.isdecimal() and len(rid) < 19 else None
    for where in (by_id, Rater.external_id == rid):
        if where is not None:
            found = session.scalar(select(Rater).where(Rater.project_id == project_id, where).with_for_update())
            if found is not None:
                return found
    raise NotFound(f"no rater {echo(rid)} in this project")


def rater_label_count(session: Session, rater_id: int) -> int:
    """How many current labels the rater has."""
    return session.scalar(select(func.count()).select_from(CurrentLabel).where(CurrentLabel.rater_id == rater_id)) or 0


def raters_page(session: Session, project_id: str, page: PageParams) -> list[tuple[Rater, int]]:
    """``(rater, current label count)`` by rater id after the cursor (one more than the page)."""
    counts = (
        select(CurrentLabel.rater_id, func.count().label("n"))
        .join(Rater, Rater.id == CurrentLabel.rater_id)  # the raters' key ranges
        .where(Rater.project_id == project_id)
        .group_by(CurrentLabel.rater_id)
        .subquery()
    )
    stmt = (
        select(Rater, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.rater_id == Rater.id)
        .where(Rater.project_id == project_id)
        .order_by(Rater.id)
        .limit(page.limit + 1)
    )
    if page.after is not None:
        stmt = stmt.where(Rater.id > page.after)
    return [(rater, n) for rater, n in session.execute(stmt)]


def issues_page(session: Session, project_id: str, status: str | None, page: PageParams) -> list[LabelStudioIssue]:
    """The project's Label Studio inbox (of one ``status``, or all) oldest first, after the cursor
    (one more than the page, for ``next``)."""
    stmt = select(LabelStudioIssue).where(LabelStudioIssue.project_id == project_id).order_by(LabelStudioIssue.id)
    if status is not None:
        stmt = stmt.where(LabelStudioIssue.status == status)
    if page.after is not None:
        stmt = stmt.where(LabelStudioIssue.id > page.after)
    return list(session.scalars(stmt.limit(page.limit + 1)))


def project_key(session: Session, project_id: str, key_id: str) -> ApiKey:
    """The project's API key ``key_id``; 404 when it is not one of the project's."""
    row = session.get(ApiKey, key_id)
    if row is None or row.project_id != project_id:
        raise NotFound(f"key {echo(key_id)} not found")
    return row


def project_simulation(session: Session, project_id: str, sim_id: str) -> Simulation:
    """The project's simulation job ``sim_id``; 404 when it is not one of the project's."""
    job = session.get(Simulation, sim_id)
    if job is None or job.project_id != project_id:
        raise NotFound(f"simulation {echo(sim_id)} not found")
    return job


def label_rows(
    session: Session,
    project_id: str,
    *,
    history: bool,
    rater_id: int | None,
    criterion: str | None,
    since_seq: int,
    limit: int | None = None,
) -> list[Any]:
    """Rows of :data:`LABEL_COLUMNS` by ``seq`` after ``since_seq`` (at most ``limit``): current labels,
    or every event with ``history`` (a retraction: ``retracted`` true, value ``None``).

    Either way the events are read in ``seq`` order; a current label is the event its cell's
    ``current_labels`` row names (each event's cell looked up by key, until the page is full).
    """
    stmt = (
        select(
            Item.external_id.label("item"),
            Rater.external_id.label("rater"),
            LabelEvent.criterion,
            LabelEvent.value,
            LabelEvent.seq,
            LabelEvent.batch_id.label("batch"),
            LabelEvent.created_at.label("created_at"),
            (LabelEvent.kind == "retraction").label("retracted"),
            func.nullif(LabelEvent.shown_order, "").label("order"),
        )
        .join(Item, Item.id == LabelEvent.item_id)
        .join(Rater, Rater.id == LabelEvent.rater_id)
        .where(LabelEvent.project_id == project_id, LabelEvent.seq > since_seq)
        .order_by(LabelEvent.seq)
    )
    if not history:
        cell = (
            (CurrentLabel.rater_id == LabelEvent.rater_id)
            & (CurrentLabel.item_id == LabelEvent.item_id)
            & (CurrentLabel.criterion == LabelEvent.criterion)
            & (CurrentLabel.shown_order == LabelEvent.shown_order)
        )
        stmt = stmt.where(LabelEvent.seq == select(CurrentLabel.seq).where(cell).scalar_subquery())
        if session.get_bind().dialect.name == "postgresql":
            # PostgreSQL costs the lookups as if a page read every event after since_seq and would
            # compile the query (JIT: ~1 s at a million labels for a page read in ~30 ms).
            session.execute(text("SET LOCAL jit = off"))
    if rater_id is not None:
        stmt = stmt.where(LabelEvent.rater_id == rater_id)
    if criterion is not None:
        stmt = stmt.where(LabelEvent.criterion == criterion)
    return list(session.execute(stmt.limit(limit)))
