"""The project row as a coordination point: the writers' lock and the counters it carries."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.models import Project


def lock_project(session: Session, project_id: str) -> None:
    """Serialise writers of one project (row lock on PostgreSQL; SQLite has one writer anyway).

    Taken before any read that decides what to write, so concurrent twins see each other.
    ``FOR NO KEY UPDATE`` leaves foreign-key checks (``KEY SHARE``) of other writers free,
    so it cannot deadlock with batch requests that lock a rater row.
    """
    session.execute(select(Project.id).where(Project.id == project_id).with_for_update(key_share=True))


def reserve(session: Session, project_id: str, counter: str, n: int) -> int:
    """Advance the project's ``counter`` (``label_seq`` or ``item_count``) by ``n``; its first reserved value.

    The values ``first .. first + n - 1`` belong to the caller's transaction alone.
    """
    column = getattr(Project, counter)
    last = session.execute(
        update(Project).where(Project.id == project_id).values({column: column + n}).returning(column)
    ).scalar_one()
    return int(last) - n + 1
