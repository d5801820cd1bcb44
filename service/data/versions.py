"""Judge versions: adding one (a judge rater of its own linked to the judge), finding and listing them,
and the current labels a comparison or a drift watch reads."""

from __future__ import annotations

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Invalid, NotFound, echo
from service.core.pagination import PageParams
from service.data.models import CurrentLabel, DriftWatch, JudgeVersion, Project, Rater
from service.data.raters import add_rater
from service.schemas.raters import RaterCreate
from service.schemas.versions import DriftWatchSettings, JudgeVersionCreate


def find_rater(session: Session, project_id: str, rid: str) -> Rater:
    """The project's rater by id, else by external id (not locked: for reads); 404 when there is none."""
    by_id = Rater.id == int(rid) if rid.isdecimal() and len(rid) < 19 else None
    for where in (by_id, Rater.external_id == rid):
        if where is not None:
            found = session.scalar(select(Rater).where(Rater.project_id == project_id, where))
            if found is not None:
                return found
    raise NotFound(f"no rater {echo(rid)} in this project")


def version_of(session: Session, rater_id: int) -> JudgeVersion | None:
    """The version row of the rater ``rater_id``, or ``None`` when it is no judge's version."""
    return session.get(JudgeVersion, rater_id)


def versioned_judge(session: Session, judge: Rater) -> Rater:
    """``judge`` when it can have versions: 422 for a rater that is not a judge or is itself a version."""
    if judge.kind != "judge":
        raise Invalid(f"rater {echo(judge.external_id)} is a {judge.kind}, not a judge: only judges have versions")
    if version_of(session, judge.id) is not None:
        raise Invalid(f"rater {echo(judge.external_id)} is a version; add versions to the judge it belongs to")
    return judge


def add_version(
    session: Session, project: Project, judge: Rater, body: JudgeVersionCreate
) -> tuple[JudgeVersion, Rater]:
    """The new version and the judge rater ``<judge>@<name>`` it labels as; 409 when the name is taken."""
    versioned_judge(session, judge)
    taken = select(JudgeVersion.rater_id).where(JudgeVersion.judge_id == judge.id, JudgeVersion.name == body.name)
    if session.scalar(taken) is not None:
        raise Conflict(
            f"judge {echo(judge.external_id)} already has a version {echo(body.name)}", code="version_exists"
        )
    rater = add_rater(session, project, RaterCreate(external_id=f"{judge.external_id}@{body.name}", kind="judge"))
    version = JudgeVersion(rater_id=rater.id, judge_id=judge.id, project_id=project.id, **body.model_dump())
    try:
        with session.begin_nested():
            session.add(version)
            session.flush()
    except IntegrityError:  # a concurrent twin won the race
        raise Conflict(f"version {echo(body.name)} was just created", code="version_exists") from None
    return version, rater


def versions_page(session: Session, judge_id: int, page: PageParams) -> list[tuple[JudgeVersion, Rater, int]]:
    """``(version, its rater, current label count)`` of a judge by rater id after the cursor (one more
    than the page)."""
    counts = (
        select(CurrentLabel.rater_id, func.count().label("n"))
        .join(JudgeVersion, JudgeVersion.rater_id == CurrentLabel.rater_id)
        .where(JudgeVersion.judge_id == judge_id)
        .group_by(CurrentLabel.rater_id)
        .subquery()
    )
    stmt = (
        select(JudgeVersion, Rater, func.coalesce(counts.c.n, 0))
        .join(Rater, Rater.id == JudgeVersion.rater_id)
        .outerjoin(counts, counts.c.rater_id == JudgeVersion.rater_id)
        .where(JudgeVersion.judge_id == judge_id)
        .order_by(JudgeVersion.rater_id)
        .limit(page.limit + 1)
    )
    if page.after is not None:
        stmt = stmt.where(JudgeVersion.rater_id > page.after)
    return [(version, rater, n) for version, rater, n in session.execute(stmt)]


def version_rater(session: Session, judge: Rater, name: str) -> Rater:
    """The rater of the judge's version ``name`` (the judge itself under its own external id); 404 otherwise."""
    if name == judge.external_id:
        return judge
    stmt = (
        select(Rater)
        .join(JudgeVersion, JudgeVersion.rater_id == Rater.id)
        .where(JudgeVersion.judge_id == judge.id, JudgeVersion.name == name)
    )
    found = session.scalar(stmt)
    if found is None:
        raise NotFound(f"judge {echo(judge.external_id)} has no version {echo(name)}")
    return found


def primary_rater(session: Session, project_id: str) -> Rater:
    """The project's primary; 422 when it has none (a comparison needs its reference)."""
    found = session.scalar(select(Rater).where(Rater.project_id == project_id, Rater.kind == "primary"))
    if found is None:
        raise Invalid("the project has no primary rater to compare with", code="no_primary")
    return found


def human_raters(session: Session, project_id: str) -> list[Rater]:
    """The project's primary and secondary humans, by id."""
    kinds = ("primary", "human")
    return list(
        session.scalars(select(Rater).where(Rater.project_id == project_id, Rater.kind.in_(kinds)).order_by(Rater.id))
    )


def current_cells(session: Session, rater_id: int, criterion: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rater's current labels on ``criterion`` as arrays ``(item ids, values, seqs)``, by item id."""
    stmt = (
        select(CurrentLabel.item_id, CurrentLabel.value, CurrentLabel.seq)
        .where(CurrentLabel.rater_id == rater_id, CurrentLabel.criterion == criterion, CurrentLabel.shown_order != "BA")
        .order_by(CurrentLabel.item_id)
    )
    rows = session.execute(stmt).all()
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, object), np.zeros(0, np.int64)
    items, values, seqs = zip(*rows)
    return np.array(items, dtype=np.int64), np.array(values, dtype=object), np.array(seqs, dtype=np.int64)


def set_drift_watch(session: Session, judge: Rater, criterion: str, body: DriftWatchSettings) -> DriftWatch:
    """The judge's drift watch with these settings, its alarm cleared; 422 for a rater that is not a judge."""
    if judge.kind != "judge":
        raise Invalid(f"rater {echo(judge.external_id)} is a {judge.kind}, not a judge")
    if body.drop >= body.baseline:
        raise Invalid(f"drop ({body.drop}) must be below baseline ({body.baseline})")
    watch = session.get(DriftWatch, judge.id)
    if watch is None:
        watch = DriftWatch(rater_id=judge.id, project_id=judge.project_id)
        session.add(watch)
    settings = body.model_dump(exclude={"criterion"})
    for name, value in settings.items():
        setattr(watch, name, value)
    watch.criterion, watch.alarm_label_seq = criterion, None
    session.flush()
    return watch


def drift_watches(session: Session, project_id: str, *, pending: bool = True) -> list[tuple[DriftWatch, Rater]]:
    """The project's drift watches with their judges: those that have not alarmed yet (``pending``), or all."""
    stmt = (
        select(DriftWatch, Rater)
        .join(Rater, Rater.id == DriftWatch.rater_id)
        .where(DriftWatch.project_id == project_id)
        .order_by(DriftWatch.rater_id)
    )
    if pending:
        stmt = stmt.where(DriftWatch.alarm_label_seq.is_(None))
    return [(watch, rater) for watch, rater in session.execute(stmt)]


def version_lines(session: Session, project_id: str) -> list[tuple[Rater, list[tuple[str, int]]]]:
    """Each judge of the project that has versions, with its versions' ``(name, rater id)``, oldest first."""
    stmt = (
        select(Rater, JudgeVersion.name, JudgeVersion.rater_id)
        .join(JudgeVersion, JudgeVersion.judge_id == Rater.id)
        .where(JudgeVersion.project_id == project_id)
        .order_by(Rater.id, JudgeVersion.rater_id)
    )
    lines: dict[int, tuple[Rater, list[tuple[str, int]]]] = {}
    for judge, name, rater_id in session.execute(stmt):
        lines.setdefault(judge.id, (judge, []))[1].append((name, rater_id))
    return list(lines.values())
