"""Project writes: creation, settings changes, and the project's API keys."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from service.auth import Role, create_key
from service.errors import Conflict, Invalid, echo
from service.label_store import CANNOT_ASSESS
from service.models import ApiKey, Project, new_public_id, utcnow
from service.queries import has_labels, project_key, rater_id
from service.schemas import KeyCreate, ProjectCreate, decision_label_problem

FROZEN_ONCE_LABELLED = frozenset({"labels", "scale", "criteria"})


def add_project(session: Session, body: ProjectCreate) -> Project:
    """A new project with no items or labels yet."""
    project = Project(id=new_public_id("p"), label_seq=0, item_count=0, **body.model_dump())
    session.add(project)
    session.flush()
    return project


def change_project(session: Session, project: Project, changes: dict[str, Any]) -> Project:
    """The project with ``changes`` applied; 409 when a frozen setting changes once labels exist."""
    frozen = FROZEN_ONCE_LABELLED & {k for k, v in changes.items() if v != getattr(project, k)}
    if frozen and has_labels(session, project.id):
        raise Conflict(f"{', '.join(sorted(frozen))} cannot change once labels exist", code="labels_exist")
    for key, value in changes.items():
        if value is None:
            raise Invalid(f"{key} cannot be null")
        setattr(project, key, value)
    problem = decision_label_problem(project.decision, project.labels)
    if problem:
        raise Invalid(problem)
    allowed = set(project.labels) | ({CANNOT_ASSESS} if project.allow_abstain else set())
    for choice, value in (project.label_map or {}).items():
        if value not in allowed:
            raise Invalid(f"label_map[{echo(choice)}] = {echo(value)} is not one of the labels {project.labels}")
    session.flush()
    return project


def add_project_key(session: Session, project: Project, body: KeyCreate) -> tuple[ApiKey, str]:
    """A new key of the project and its secret (422 for an admin key or an unknown rater)."""
    if body.role == "admin":
        raise Invalid("admin keys are not project keys; set ANNOPLAN_ADMIN_KEY or use the CLI")
    rater = None if body.rater is None else rater_id(session, project.id, body.rater)
    return create_key(session, role=Role(body.role), project_id=project.id, rater_id=rater, name=body.name)


def revoke_key(session: Session, project: Project, key_id: str) -> None:
    """Revoke the project's key ``key_id`` (404 when it is not the project's); revoking twice is a no-op."""
    row = project_key(session, project.id, key_id)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
