"""Each Label Studio annotation and prediction linked to the cell it labels, and retractions through the links.

A deletion in Label Studio, or an annotation gone from a later export, retracts that cell's label,
unless another annotation of the same rater still labels the cell: then the newest of those is the
cell's label again at once (a link remembers the label its annotation gave).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.orm import Session

from service.core.errors import Invalid, echo
from service.core.sql import insert_many
from service.data.items import ids_by_external
from service.data.keys import Principal
from service.data.labels import retract_labels, write_labels
from service.data.models import (
    Item,
    LabelStudioLink,
    Project,
    Rater,
    table_of,
)
from service.data.projects import lock_project
from service.data.queries import external_ids
from service.label_studio.payloads import (
    TaskId,
)
from service.schemas.labels import LabelIn, LabelsRetracted

Cell = tuple[str, str]  # (item external id, rater external id)
LinkRow = tuple[str, int, str, int, int]  # (source, ls_id, criterion, item id, rater id)
LINK_COLUMNS = (
    "project_id",
    "source",
    "ls_id",
    "item_id",
    "rater_id",
    "criterion",
    "ls_task",
    "ls_project",
    "value",
    "value_known",
)
LINK_KEY = ("project_id", "source", "ls_id", "criterion")


def ls_id_of(value: TaskId | None) -> int | None:
    """A Label Studio object id as an int (ids of hand-made exports may be other strings)."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def project_criterion(project: Project, criterion: str | None) -> str:
    if criterion is None and len(project.criteria) == 1:
        return project.criteria[0]
    if criterion not in project.criteria:
        raise Invalid(
            f"criterion {echo(criterion)} is not one of the project's criteria {project.criteria}; pass ?criterion=",
            code="validation_error",
        )
    return str(criterion)


@dataclass(frozen=True)
class LinksGone:
    """What forgetting links did: cells retracted, cells given back an older annotation's label, the last label seq."""

    retracted: int
    restored: int
    label_seq: int


def retract_links(
    session: Session,
    project: Project,
    principal: Principal,
    links: list[LinkRow],
    *,
    keep: Collection[tuple[int, int]] = (),
) -> LinksGone:
    """Forget these links and retract the cells they labelled, unless another link (or a cell in
    ``keep``: (item id, rater id) labelled by the export being read) still labels the cell.

    A cell another link still labels takes what the newest of them (the highest Label Studio id)
    gave, as a sync would read it: its label (a correction event when it differs), or a retraction
    when it gave none (skipped, emptied); left as it is when that link's value is not known (made
    before links kept values, or a choice no label maps to).
    """
    for source, ls_id, criterion, _, _ in links:
        session.execute(
            delete(LabelStudioLink).where(
                LabelStudioLink.project_id == project.id,
                LabelStudioLink.source == source,
                LabelStudioLink.ls_id == ls_id,
                LabelStudioLink.criterion == criterion,
            )
        )
    cells = {(item_id, rater_id, criterion) for _, _, criterion, item_id, rater_id in links}
    cells = {c for c in cells if (c[0], c[1]) not in keep}
    newest: dict[tuple[int, int, str], tuple[int, str | None, bool]] = {}
    if cells:
        for item_id, rater_id, criterion, ls_id, value, known in session.execute(
            select(
                LabelStudioLink.item_id,
                LabelStudioLink.rater_id,
                LabelStudioLink.criterion,
                LabelStudioLink.ls_id,
                LabelStudioLink.value,
                LabelStudioLink.value_known,
            ).where(
                LabelStudioLink.project_id == project.id,
                LabelStudioLink.item_id.in_(sorted({c[0] for c in cells})),
            )
        ):
            cell = (item_id, rater_id, criterion)
            if cell in cells and (cell not in newest or ls_id > newest[cell][0]):
                newest[cell] = (ls_id, value, known)
    retract = sorted(c for c in cells if c not in newest or (newest[c][2] and newest[c][1] is None))
    back = {c: str(newest[c][1]) for c in sorted(newest) if newest[c][2] and newest[c][1] is not None}
    done = retract_labels(session, project, retract)
    restored = 0
    label_seq = done.label_seq
    if back:
        items = external_ids(session, Item, (i for i, _, _ in back))
        raters = external_ids(session, Rater, (r for _, r, _ in back))
        rows: list[LabelIn] = [
            {"item": items[i], "rater": raters[r], "criterion": c, "value": v} for (i, r, c), v in back.items()
        ]
        written = write_labels(session, project, principal, rows)
        restored, label_seq = written.accepted, max(label_seq, written.label_seq or 0)
    return LinksGone(retracted=done.retracted, restored=restored, label_seq=label_seq)


def _link_rows(session: Session, *where: Any) -> list[LinkRow]:
    return [
        (source, ls_id, criterion, item_id, rater_id)
        for source, ls_id, criterion, item_id, rater_id in session.execute(
            select(
                LabelStudioLink.source,
                LabelStudioLink.ls_id,
                LabelStudioLink.criterion,
                LabelStudioLink.item_id,
                LabelStudioLink.rater_id,
            ).where(*where)
        )
    ]


def retract_deleted(
    session: Session, project: Project, principal: Principal, annotation_ids: list[int]
) -> tuple[LinksGone, list[int]]:
    """Retract the labels of deleted annotations, under every criterion they labelled (a cell another
    annotation still labels takes the newest one's label: see ``retract_links``).

    Returns what was retracted and restored, and the ids this project never linked.
    """
    lock_project(session, project.id)
    links = _link_rows(
        session,
        LabelStudioLink.project_id == project.id,
        LabelStudioLink.source == "annotation",
        LabelStudioLink.ls_id.in_(annotation_ids),
    )
    done = retract_links(session, project, principal, links)
    found = {ls_id for _, ls_id, _, _, _ in links}
    return done, [i for i in annotation_ids if i not in found]


def retract_tasks(
    session: Session, project: Project, principal: Principal, task_ids: list[int], ls_project: int | None
) -> tuple[LinksGone, list[int]]:
    """Retract every label that annotations and predictions of deleted tasks gave (``TASKS_DELETED``).

    A link knows its task (and Label Studio project, when known: a link of another Label Studio
    project is left alone); a link made before links knew their task is found by the item whose
    external id is the task id. Returns what was retracted (and restored: see ``retract_links``)
    and the task ids no link names.
    """
    lock_project(session, project.id)
    scoped = [LabelStudioLink.project_id == project.id]
    if ls_project is not None:
        scoped.append(or_(LabelStudioLink.ls_project == ls_project, LabelStudioLink.ls_project.is_(None)))
    by_task = _link_rows(session, *scoped, LabelStudioLink.ls_task.in_(task_ids))
    old_items = ids_by_external(session, Item, project.id, [str(t) for t in task_ids])
    legacy = (
        _link_rows(
            session, *scoped, LabelStudioLink.ls_task.is_(None), LabelStudioLink.item_id.in_(list(old_items.values()))
        )
        if old_items
        else []
    )
    found = {
        task
        for (task,) in session.execute(
            select(LabelStudioLink.ls_task).where(*scoped, LabelStudioLink.ls_task.in_(task_ids)).distinct()
        )
    }
    legacy_items = {item_id for _, _, _, item_id, _ in legacy}
    found |= {int(ext) for ext, item_id in old_items.items() if item_id in legacy_items}
    done = retract_links(session, project, principal, by_task + legacy)
    return done, [t for t in task_ids if t not in found]


def withdraw(
    session: Session,
    project: Project,
    item: str,
    rater: str,
    criterion: str | None,
    annotation: TaskId | None,
    *,
    task: TaskId | None = None,
    ls_project: int | None = None,
) -> LabelsRetracted:
    """Retract ``rater``'s label of ``item`` (a skipped or emptied annotation); nothing when either is unknown.

    The annotation stays linked to the cell (as giving no label), so its later deletion or relabeling is tied back.
    """
    crit = project_criterion(project, criterion)
    lock_project(session, project.id)
    item_id = ids_by_external(session, Item, project.id, [item]).get(item)
    rater_id = ids_by_external(session, Rater, project.id, [rater]).get(rater)
    if item_id is None or rater_id is None:
        return LabelsRetracted(retracted=0, label_seq=project.label_seq)
    if (ls_id := ls_id_of(annotation)) is not None:
        insert_many(
            session,
            table_of(LabelStudioLink),
            LINK_COLUMNS,
            [(project.id, "annotation", ls_id, item_id, rater_id, crit, ls_id_of(task), ls_project, None, True)],
            on_conflict=LINK_KEY,
        )
    return retract_labels(session, project, [(item_id, rater_id, crit)])
