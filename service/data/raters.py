"""Rater writes: adding a rater (unique external ids, at most one primary per project), the
raters an import needs, and a change of name or kind while no plan depends on the kinds."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Invalid, echo
from service.data.items import refuse_look_alikes
from service.data.models import Project, Rater
from service.data.queries import has_invalid_labels, has_plan, has_primary, rater_kind
from service.schemas.raters import RaterCreate


def add_rater(session: Session, project: Project, body: RaterCreate) -> Rater:
    """The new rater; 409 when its external id (or a look-alike) is taken or a second primary is asked for."""
    if rater_kind(session, project.id, body.external_id) is not None:
        raise Conflict(f"rater {echo(body.external_id)} already exists in this project", code="rater_exists")
    refuse_look_alikes(session, Rater, project.id, [body.external_id])
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


def set_kind(session: Session, rater: Rater, kind: str) -> None:
    """Change a rater's kind: 409 once the project has a plan (plans are built on the kinds) or
    for a second primary; 422 when a judge with ``INVALID`` labels would stop being a judge."""
    if kind == rater.kind:
        return
    if has_plan(session, rater.project_id):
        raise Conflict(
            f"rater {echo(rater.external_id)} cannot change kind: the project has a plan built on the raters' kinds",
            code="plan_depends_on_rater",
        )
    if kind == "primary" and has_primary(session, rater.project_id):
        raise Conflict("this project already has a primary rater", code="primary_exists")
    if rater.kind == "judge" and has_invalid_labels(session, rater.id):
        raise Invalid(f"rater {echo(rater.external_id)} has INVALID labels, which only judges may give")
    rater.kind = kind


def change_rater(session: Session, rater: Rater, changes: dict[str, Any]) -> Rater:
    """The rater with a new ``name`` and/or ``kind`` (see :func:`set_kind`)."""
    if any(v is None for v in changes.values()):
        raise Invalid(f"{next(k for k, v in changes.items() if v is None)} cannot be null")
    if "kind" in changes:
        set_kind(session, rater, changes["kind"])
    if "name" in changes:
        rater.name = changes["name"]
    try:
        with session.begin_nested():
            session.flush()
    except IntegrityError:  # a concurrent request made another primary first
        raise Conflict("this project already has a primary rater", code="primary_exists") from None
    return rater


def ensure_raters(session: Session, project: Project, wanted: list[RaterCreate]) -> tuple[list[RaterCreate], list[str]]:
    """Create the raters ``wanted`` that the project lacks; existing ones get a missing name, and a
    ``human`` wanted as ``primary`` is promoted (see :func:`set_kind`). 409 on another kind clash.

    Returns the raters created and the external ids of existing raters changed.
    """
    by_ext = {r.external_id: r for r in wanted}
    existing = list(
        session.scalars(select(Rater).where(Rater.project_id == project.id, Rater.external_id.in_(list(by_ext))))
    )
    changed: list[str] = []
    for rater in existing:
        want = by_ext[rater.external_id]
        before = (rater.kind, rater.name)
        if (want.kind, rater.kind) == ("primary", "human"):
            set_kind(session, rater, "primary")
        elif want.kind != rater.kind and (want.kind, rater.kind) != ("human", "primary"):
            raise Conflict(
                f"rater {echo(rater.external_id)} exists as a {rater.kind} rater, not as {want.kind}",
                code="rater_kind_clash",
            )
        if rater.name is None and want.name:
            rater.name = want.name
        if (rater.kind, rater.name) != before:
            changed.append(rater.external_id)
    known = {r.external_id for r in existing}
    new = [r for r in wanted if r.external_id not in known]
    if any(r.kind == "primary" for r in new) and has_primary(session, project.id):
        raise Conflict("this project already has a primary rater", code="primary_exists")
    refuse_look_alikes(session, Rater, project.id, [r.external_id for r in new])
    try:
        with session.begin_nested():
            session.add_all(Rater(project_id=project.id, **r.model_dump()) for r in new)
            session.flush()
    except IntegrityError:  # a concurrent request created one of them first
        raise Conflict("a rater of this request, or a primary, was just created; retry", code="rater_exists") from None
    return new, changed
