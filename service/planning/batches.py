"""Batches: leases of a rater's next planned items, safe under concurrent requests."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Exists, delete, exists, func, or_, select, update
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Forbidden, Invalid, NotFound, echo
from service.core.sql import db_value, insert_many
from service.data.keys import Principal
from service.data.models import (
    Assignment,
    Batch,
    CurrentLabel,
    Item,
    Project,
    Rater,
    RaterProgress,
    new_public_id,
    table_of,
    utcnow,
)
from service.matrices.modal_strata import modal_in_hand
from service.planning.extension import extend_list
from service.planning.lists import ensure_assignments
from service.planning.plans import current_plan
from service.schemas.batches import BatchCreate, BatchRead, BatchStatus
from service.schemas.keys import Role

CURSOR_WINDOW = 2_000
"""Item ids a primary's batch walks in the database before it looks where its labels in hand end."""


def _labeled() -> Exists:
    """True for an assignment whose rater has labeled its item (any criterion)."""
    return exists().where(CurrentLabel.item_id == Assignment.item_id, CurrentLabel.rater_id == Assignment.rater_id)


def batch_rater(session: Session, project: Project, principal: Principal, requested: str | None) -> Rater:
    """The rater a batch request is for: the annotator's own, or the one a PM names."""
    if principal.role == Role.ANNOTATOR:
        rater = session.get(Rater, principal.rater_id)
        assert rater is not None
        if requested is not None and requested != rater.external_id:
            raise Forbidden("an annotator key may only request batches for its own rater")
        return rater
    if requested is None:
        raise Invalid("'rater' is required (the external id of the rater the batch is for)")
    rater = session.scalar(select(Rater).where(Rater.project_id == project.id, Rater.external_id == requested))
    if rater is None:
        raise Invalid(f"unknown rater {echo(requested)} in this project")
    return rater


def issue_batch(
    session: Session, project: Project, principal: Principal, body: BatchCreate, *, lease_seconds: int, max_size: int
) -> BatchRead:
    """Lease the rater's next planned items it has not labeled and that no live batch holds.

    The rater's row is locked first (PostgreSQL; SQLite serialises writers anyway), so
    parallel requests for one rater queue, while requests for different raters proceed.
    """
    if body.size > max_size:
        raise Invalid(f"size must be at most {max_size}", code="batch_too_large")
    rater = batch_rater(session, project, principal, body.rater)
    cursor = session.scalar(select(Rater.issued_through).where(Rater.id == rater.id).with_for_update(key_share=True))
    plan = current_plan(session, project.id)
    if plan is None:
        raise Conflict("this project has no plan yet: POST /projects/{pid}/plan first", code="no_plan")
    now = utcnow()
    fresh: list[tuple[int, str, int]] = []
    reason = "every item is labeled"
    if rater.kind == "primary":
        labeled = session.scalar(select(RaterProgress.labeled_items).where(RaterProgress.rater_id == rater.id))
        remaining = project.item_count - (labeled or 0)
        chosen = _returned_items(session, rater, body.size, now) if remaining else []
        if remaining and len(chosen) < body.size:
            fresh, cursor = _corpus_items(session, project, rater, body.size - len(chosen), cursor or 0)
    else:
        ensure_assignments(session, plan, rater)
        remaining = _unlabeled(session, rater)
        if remaining == 0:  # the list is labeled: it grows while the monitored decision is open (§8.1)
            state = extend_list(session, plan, rater, project, body.size)
            reason = state.reason
            remaining = _unlabeled(session, rater) if state.extends else 0
        chosen = _listed_items(session, rater, body.size, now)
    if not chosen and not fresh:
        return BatchRead(
            id=None,
            rater=rater.external_id,
            items=[],
            design=plan.design,
            expires_at=None,
            done=remaining == 0,
            remaining=remaining,
            reason=reason if remaining == 0 else "every unlabeled item of the list is held by a live batch",
        )
    batch = Batch(
        id=new_public_id("b"),
        project_id=project.id,
        rater_id=rater.id,
        plan_id=plan.id,
        design=plan.design,
        items=[ext for _, ext in chosen] + [ext for _, ext, _ in fresh],
        expires_at=now + timedelta(seconds=lease_seconds),
    )
    session.add(batch)
    session.flush()
    if chosen:
        session.execute(
            update(Assignment)
            .where(Assignment.rater_id == rater.id, Assignment.item_id.in_([item for item, _ in chosen]))
            .values(batch_id=batch.id, lease_expires_at=batch.expires_at)
        )
    if fresh:
        stamp = db_value(session, Assignment.__table__.c.lease_expires_at, batch.expires_at)
        insert_many(
            session,
            table_of(Assignment),
            (
                "project_id",
                "rater_id",
                "item_id",
                "plan_id",
                "position",
                "inclusion_probability",
                "batch_id",
                "lease_expires_at",
            ),
            [(project.id, rater.id, item, plan.id, position, 1.0, batch.id, stamp) for item, _, position in fresh],
        )
        session.execute(update(Rater).where(Rater.id == rater.id).values(issued_through=cursor))
    return BatchRead(
        id=batch.id,
        rater=rater.external_id,
        items=batch.items,
        design=plan.design,
        expires_at=batch.expires_at,
        done=False,
        remaining=remaining,
    )


def _unlabeled(session: Session, rater: Rater) -> int:
    """Items of a secondary's list it has not labeled, held by a batch or not."""
    open_items = select(Assignment).where(Assignment.rater_id == rater.id, ~_labeled())
    return session.scalar(select(func.count()).select_from(open_items.subquery())) or 0


def _free(now: datetime) -> ColumnElement[bool]:
    """True for an assignment no live batch holds."""
    return or_(Assignment.lease_expires_at.is_(None), Assignment.lease_expires_at < now)


def _listed_items(session: Session, rater: Rater, size: int, now: datetime) -> list[tuple[int, str]]:
    """(item id, external id) of the first ``size`` free, unlabeled items of a secondary's list, locked."""
    return [
        (item, ext)
        for item, ext in session.execute(
            select(Assignment.item_id, Item.external_id)
            .join(Item, Item.id == Assignment.item_id)
            .where(Assignment.rater_id == rater.id, ~_labeled(), _free(now))
            .order_by(Assignment.position)
            .limit(size)
            .with_for_update(of=Assignment, skip_locked=True)
        )
    ]


def _returned_items(session: Session, rater: Rater, size: int, now: datetime) -> list[tuple[int, str]]:
    """The primary's issued items that came back (lease expired or released, still unlabeled), locked.

    Its rows for items it has labeled since are dropped first, so the rows stay as few as the
    items out for labeling.
    """
    session.execute(delete(Assignment).where(Assignment.rater_id == rater.id, _labeled()))
    return _listed_items(session, rater, size, now)


def _corpus_items(
    session: Session, project: Project, rater: Rater, size: int, cursor: int
) -> tuple[list[tuple[int, str, int]], int]:
    """The primary's next ``size`` items after ``cursor`` in corpus (item id) order that it has not
    labeled and holds no row for, as (item id, external id, position), and the cursor after them.

    Walks of the (project_id, id) index in the database over windows of ``CURSOR_WINDOW`` ids,
    stopping at the ``size``-th item, so a request costs the items it passes, and the cursor moves
    past labeled ones for good (a retraction moves it back, see label_store). A window without
    enough items sends the cursor past the primary's labels in hand that follow it in one jump
    (``service.matrices.modal_strata``: labels written outside batches, e.g. 900,000 imported ones, are
    passed without a walk over them). Short of ``size``, every later item is labeled or held: the
    cursor moves to the project's last item.
    """
    last = session.scalar(select(func.max(Item.id)).where(Item.project_id == project.id)) or 0
    taken: list[tuple[int, str, int]] = []
    while cursor < last:
        bound = cursor + CURSOR_WINDOW
        taken += [
            (item, ext, position)
            for item, ext, position in session.execute(
                select(Item.id, Item.external_id, Item.position)
                .where(
                    Item.project_id == project.id,
                    Item.id > cursor,
                    Item.id <= bound,
                    ~exists().where(CurrentLabel.item_id == Item.id, CurrentLabel.rater_id == rater.id),
                    ~exists().where(Assignment.item_id == Item.id, Assignment.rater_id == rater.id),
                )
                .order_by(Item.id)
                .limit(size - len(taken))
            )
        ]
        if len(taken) == size:
            return taken, taken[-1][0]
        cursor = min(bound, last)
        if cursor < last:
            fresh = session.get(Project, project.id, populate_existing=True)  # labels in hand under the rater lock
            assert fresh is not None
            in_hand = modal_in_hand(session, fresh, fresh.criteria[0])
            if in_hand.primary == rater.id:
                cursor = max(cursor, in_hand.labeled_through(cursor))
    return taken, max(cursor, last)


def visible_batch(session: Session, project: Project, principal: Principal, bid: str) -> Batch:
    """The batch if it is in this project and the caller is a PM/admin or its annotator; else 404."""
    batch = session.get(Batch, bid)
    if (
        batch is None
        or batch.project_id != project.id
        or (principal.role == Role.ANNOTATOR and batch.rater_id != principal.rater_id)
    ):
        raise NotFound(f"batch {echo(bid)} not found")
    return batch


def batch_status(session: Session, batch: Batch) -> BatchStatus:
    """Where a batch stands: which of its items are labeled, and whether its lease still holds."""
    rater = session.get(Rater, batch.rater_id)
    assert rater is not None
    labeled = {
        ext
        for (ext,) in session.execute(
            select(Item.external_id)
            .join(CurrentLabel, CurrentLabel.item_id == Item.id)
            .where(
                CurrentLabel.rater_id == batch.rater_id,
                Item.project_id == batch.project_id,
                Item.external_id.in_(batch.items),
            )
        )
    }
    return BatchStatus(
        id=batch.id,
        rater=rater.external_id,
        items=batch.items,
        design=batch.design,
        created_at=batch.created_at,
        expires_at=batch.expires_at,
        released=batch.released_at is not None,
        expired=batch.expires_at <= utcnow(),
        labeled=len(labeled),
        unlabeled=[i for i in batch.items if i not in labeled],
    )


def release_batch(session: Session, batch: Batch) -> BatchStatus:
    """End the lease now: the batch's unlabeled items go back to the rater's queue."""
    if batch.released_at is None:
        batch.released_at = utcnow()
        session.execute(
            update(Assignment)
            .where(Assignment.batch_id == batch.id, ~_labeled())
            .values(batch_id=None, lease_expires_at=None)
        )
        session.flush()
    return batch_status(session, batch)
