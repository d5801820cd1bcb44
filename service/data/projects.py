"""Projects: creation, settings changes and the project's API keys, and the project row as a
coordination point (the writers' lock and the counters it carries)."""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from planner.codes import CANNOT_ASSESS
from service.core.errors import Conflict, Invalid, echo
from service.data.keys import create_key
from service.data.models import ApiKey, Project, new_public_id, utcnow
from service.data.queries import has_labels, project_key, rater_id
from service.schemas.keys import KeyCreate, Role
from service.schemas.projects import ProjectCreate, decision_label_problem, kind_problem, scale_problem


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


FROZEN_ONCE_LABELLED = frozenset({"labels", "scale", "value_range", "criteria"})


def add_project(session: Session, body: ProjectCreate) -> Project:
    """A new project with no items or labels yet."""
    fields = {**body.model_dump(), "labels": body.labels or []}
    if fields["order_seed"] is None:
        fields["order_seed"] = secrets.randbelow(2**53)
    project = Project(id=new_public_id("p"), label_seq=0, item_count=0, **fields)
    session.add(project)
    session.flush()
    return project


def change_project(session: Session, project: Project, changes: dict[str, Any]) -> Project:
    """The project with ``changes`` applied; 409 when a frozen setting changes once labels exist."""
    frozen = FROZEN_ONCE_LABELLED & {k for k, v in changes.items() if v != getattr(project, k)}
    if frozen and has_labels(session, project.id):
        raise Conflict(f"{', '.join(sorted(frozen))} cannot change once labels exist", code="labels_exist")
    if "scale" in changes and (changes["scale"] == "numeric") != (project.scale == "numeric"):
        raise Invalid("a project cannot change between a label scale and the numeric scale; create a new project")
    for key, value in changes.items():
        if value is None:
            raise Invalid(f"{key} cannot be null")
        setattr(project, key, value)
    problem = (
        kind_problem(project.kind, project.scale, project.labels)
        or scale_problem(project.scale, project.labels, project.value_range)
        or decision_label_problem(project.decision, project.labels)
    )
    if problem:
        raise Invalid(problem)
    allowed = set(project.labels) | ({CANNOT_ASSESS} if project.allow_abstain else set())
    for choice, value in (project.label_map or {}).items():
        if value not in allowed:
            raise Invalid(f"label_map[{echo(choice)}] = {echo(value)} is not one of the labels {project.labels}")
    session.flush()
    return project


def add_project_key(session: Session, project: Project, body: KeyCreate) -> tuple[ApiKey, str]:
    """A new key of the project and its secret (422 for an admin key, an unknown rater or a past expiry)."""
    if body.role == "admin":
        raise Invalid("admin keys are not project keys; set ANNOPLAN_ADMIN_KEY or use the CLI")
    rater = None if body.rater is None else rater_id(session, project.id, body.rater)
    return create_key(
        session, role=Role(body.role), project_id=project.id, rater_id=rater, name=body.name, expires_at=body.expires_at
    )


def revoke_key(session: Session, project: Project, key_id: str) -> None:
    """Revoke the project's key ``key_id`` (404 when it is not the project's); revoking twice is a no-op."""
    row = project_key(session, project.id, key_id)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
