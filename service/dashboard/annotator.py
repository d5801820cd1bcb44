"""An annotator's own page: its next batch, what it has labeled, how many items remain.

Blind annotation: the page reads only the key's own rater (its batches, assignments and which items
it has labeled, never a label value), so nothing of other raters or the judge can appear on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from html import escape

from sqlalchemy import exists, func, select
from sqlalchemy.orm import Session

from service.dashboard.pages import STYLE, logout_form
from service.data.keys import Principal
from service.data.models import Assignment, Batch, CurrentLabel, Item, Project, Rater, RaterProgress, utcnow
from service.planning.batches import batch_status
from service.planning.plans import current_plan
from service.schemas.batches import BatchStatus

RECENT = 10
"""Items of the rater's newest labels the page lists."""
LIVE_BATCHES = 5
"""Live batches looked at for the next one (the newest with an item still to do)."""


@dataclass(frozen=True)
class AnnotatorWork:
    """Where one rater stands: its next batch (the newest live one with items to do), its labeled items, what
    is left."""

    rater: str
    kind: str
    batch: BatchStatus | None
    labeled: int
    recent: tuple[str, ...]
    remaining: int | None
    remaining_note: str


def own_rater(session: Session, principal: Principal) -> Rater:
    """The rater an annotator key is bound to (a key of its project: ``service.deps.scoped_project``)."""
    rater = session.get(Rater, principal.rater_id)
    assert rater is not None, "an annotator key is always bound to a rater"
    return rater


def annotator_work(session: Session, project: Project, rater: Rater) -> AnnotatorWork:
    """The rater's newest live batch, how many items it has labeled (its newest few), and how many remain:
    of the corpus for the primary, of its planned list for a secondary (None before its list is drawn)."""
    now = utcnow()
    live = session.scalars(
        select(Batch)
        .where(Batch.rater_id == rater.id, Batch.released_at.is_(None), Batch.expires_at > now)
        .order_by(Batch.created_at.desc(), Batch.id.desc())
        .limit(LIVE_BATCHES)
    )
    batch = next((status for status in map(partial(batch_status, session), live) if status.unlabeled), None)
    labeled = session.scalar(select(RaterProgress.labeled_items).where(RaterProgress.rater_id == rater.id)) or 0
    recent = tuple(
        session.scalars(
            select(Item.external_id)
            .join(CurrentLabel, CurrentLabel.item_id == Item.id)
            .where(CurrentLabel.rater_id == rater.id)
            .group_by(Item.id, Item.external_id)
            .order_by(func.max(CurrentLabel.seq).desc())
            .limit(RECENT)
        )
    )
    plan = current_plan(session, project.id)
    remaining: int | None
    if plan is None:
        remaining, note = None, "the project has no plan yet: your items are given once it has one"
    elif rater.kind == "primary":
        remaining = max(project.item_count - labeled, 0)
        note = f"you label every item of the corpus ({project.item_count:,} items)"
    else:
        listed = session.scalar(select(func.count()).where(Assignment.rater_id == rater.id)) or 0
        if listed == 0:
            remaining = None
            note = f"your list of about {plan.m} items is drawn when you ask for your first batch"
        else:
            labeled_on_list = exists().where(
                CurrentLabel.item_id == Assignment.item_id, CurrentLabel.rater_id == Assignment.rater_id
            )
            remaining = (
                session.scalar(select(func.count()).where(Assignment.rater_id == rater.id, ~labeled_on_list)) or 0
            )
            note = (
                f"of your list of {listed:,} items; while the decision is open it may grow, "
                "and your next batch says when it is complete"
            )
    return AnnotatorWork(
        rater=rater.external_id,
        kind=rater.kind,
        batch=batch,
        labeled=labeled,
        recent=recent,
        remaining=remaining,
        remaining_note=note,
    )


def annotator_page(project: Project, work: AnnotatorWork, *, logout: str | None = None) -> str:
    """The annotator's page: its next batch (items to do and done), its labeled count and newest items,
    and the items that remain; nothing of any other rater."""
    if work.batch is None:
        batch = (
            '<p id="batch">No batch with items to do is out for you now. Ask for your next one in your '
            f"annotation tool, or with <code>POST /projects/{escape(project.id)}/batches</code> and your key.</p>"
        )
    else:
        b = work.batch
        rows = "".join(f"<tr><td>{escape(item)}</td><td>to do</td></tr>" for item in b.unlabeled)
        batch = (
            f'<p id="batch">Batch {escape(b.id)}: {len(b.unlabeled)} of {len(b.items)} items to do '
            f"({b.labeled} done), held for you until {b.expires_at:%Y-%m-%d %H:%M} UTC.</p>"
            f'<table id="batch-items"><tr><th>item</th><th>status</th></tr>{rows}</table>'
        )
    recent = (
        '<ul id="recent">' + "".join(f"<li>{escape(item)}</li>" for item in work.recent) + "</ul>"
        if work.recent
        else '<p id="recent">No label yet.</p>'
    )
    remaining = "Not known yet" if work.remaining is None else f"{work.remaining:,} items remain"
    role = "primary annotator" if work.kind == "primary" else f"{work.kind} annotator"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>annoplan: your work on {escape(project.name)}</title>
<style>{STYLE}</style></head><body>
<div class="note">{escape(work.rater)} ({escape(role)}){logout_form(logout)}</div>
<h1>{escape(project.name)}: your work</h1>
<h2>Your next batch</h2>
{batch}
<h2>Done</h2>
<p id="done">You have labeled <b>{work.labeled:,}</b> items. Your newest:</p>
{recent}
<h2>Remaining</h2>
<p id="remaining"><b>{remaining}</b>: {escape(work.remaining_note)}.</p>
<p class="note">You see only your own work: other annotators' labels and the judge's are never shown to you.</p>
</body></html>"""
