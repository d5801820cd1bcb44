"""Rater writes: adding a rater, with unique external ids and at most one primary per project."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.errors import Conflict, echo
from service.models import Project, Rater
from service.queries import has_primary, rater_kind
from service.schemas import RaterCreate


def add_rater(session: Session, project: Project, body: RaterCreate) -> Rater:
    """The new rater; 409 when its external id is taken or a second primary is asked for."""
    if rater_kind(session, project.id, body.external_id) is not None:
        raise Conflict(f"rater {echo(body.external_id)} already exists in this project", code="rater_exists")
    if body.kind == "primary" and has_primary(session, project.id):
        raise Conflict("this project already has a primary rater", code="primary_exists")
    rater = Rater(project_id=project.id, **body.model_dump())
    try:
        with session.begin_nested():
            session.add(rater)
            session.flush()
    except IntegrityError:  # a concurrent twin won the race
        raise Conflict("a rater with this external_id, or a primary, was just created", code="rater_exists") from None
    return rater
