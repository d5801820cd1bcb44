"""Label events: validated, de-duplicated, append-only writes with a per-project sequence.

An event is a label or a retraction (``kind = 'retraction'``, no value): a retraction ends
the cell's current label (its ``current_labels`` row goes) and keeps the history.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, text, tuple_, update
from sqlalchemy.orm import Session

from service.core.errors import Forbidden, Invalid, echo
from service.core.sql import CHUNK, chunks, db_value, driver_rows, in_values, insert_many
from service.data.items import few_of, ids_by_external
from service.data.keys import Principal
from service.data.models import Batch, CurrentLabel, Item, LabelEvent, Project, Rater, RaterProgress, table_of, utcnow
from service.data.projects import lock_project, reserve
from service.schemas.keys import Role
from service.schemas.labels import LabelIn, LabelsAccepted, LabelsRetracted, RetractionIn

CANNOT_ASSESS = "CANNOT_ASSESS"
INVALID = "INVALID"
ONE_ORDER = "shown_order <> 'BA'"
"""The labels every label-set statistic reads (SQL): a pairwise judge's label of an item in the AB order
stands for its label; the BA order enters only the pairwise statistics (docs/method.md §13)."""


EVENT_COLUMNS = (
    "project_id",
    "seq",
    "item_id",
    "rater_id",
    "criterion",
    "value",
    "batch_id",
    "created_at",
    "rank",
    "confidence",
    "shown_order",
)
"""The columns a label write inserts into ``label_events``."""

SPAN = 4
"""A write's items are read as one range of ids when that range is under this many times their number."""

Cell = tuple[int, int, str]
"""(item id, rater id, criterion)."""
OrderedCell = tuple[int, int, str, str]
"""(item id, rater id, criterion, shown order): a pairwise judge's cell per order (``''``: any other label)."""
Cells = dict[OrderedCell, tuple[str, str | None, int]]
"""Per cell of a write: its value, batch and row number."""


def label_for(choice: str, labels: list[str], label_map: dict[str, Any] | None = None) -> str | None:
    """The project label a choice maps to: through ``label_map``, else the exact label, else the
    one equal ignoring case.

    >>> label_for("PASS", ["pass", "fail"]), label_for("Unsure", ["pass", "fail"])
    ('pass', None)
    >>> label_for("a", ["A", "a"]), label_for("b", ["A", "B", "b "]), label_for("x", ["X", "x "])
    ('a', 'B', 'X')
    >>> label_for("ok", ["OK", "Ok"]) is None
    True
    >>> label_for("Mixed", ["pos", "neg"], {"Mixed": "neg"})
    'neg'
    """
    if label_map and choice in label_map:
        return str(label_map[choice])
    if choice in labels:
        return choice
    folded = [label for label in labels if label.casefold() == choice.casefold()]
    return folded[0] if len(folded) == 1 else None


def _allowed_values(project: Project, kind: str) -> frozenset[str]:
    """The values a rater of ``kind`` may write in ``project``."""
    extra = {CANNOT_ASSESS} if project.allow_abstain else set()
    if kind == "judge":
        extra.add(INVALID)
    return frozenset(project.labels) | extra


def _value_error(project: Project, value: str, kind: str, n: int) -> Invalid:
    if project.kind == "pairwise" and value == "tie":
        return Invalid(f"row {n}: this pairwise project disallows ties; its verdicts are {project.labels}")
    if value == CANNOT_ASSESS:
        return Invalid(f"row {n}: CANNOT_ASSESS is not allowed in this project (allow_abstain is false)")
    if value == INVALID:
        return Invalid(f"row {n}: INVALID is only accepted from judges, not from a {kind} rater")
    return Invalid(f"row {n}: unknown label {echo(value)}; the project's labels are {project.labels}")


def _checked_value(project: Project, value: str | float, rater: tuple[int, str, frozenset[str]], n: int) -> str:
    """The value row ``n`` stores: one of the rater's allowed values, or in a numeric project the canonical
    text of a number in its ``value_range`` (``3``, ``3.0`` and ``"3"`` are one value); 422 naming the row."""
    if isinstance(value, str) and (value in rater[2] or project.scale != "numeric"):
        if value not in rater[2]:
            raise _value_error(project, value, rater[1], n)
        return value
    if project.scale != "numeric":
        # the error a string field gave before numbers were values (kept: clients match on the code)
        raise Invalid(
            f"row {n}: value {value!r} is a number; the project's labels are the strings {project.labels}",
            code="validation_error",
        )
    if isinstance(value, str) and value in (CANNOT_ASSESS, INVALID):
        raise _value_error(project, value, rater[1], n)
    return numeric_label(project.value_range or {}, value, n)


def numeric_label(value_range: dict[str, Any], value: str | float, n: int) -> str:
    """The canonical text of ``value`` as a label of a numeric project with ``value_range`` (an integer
    without ``.0``, else the shortest text that reads back as the same float); 422 naming row ``n``."""
    low, high, step = value_range["min"], value_range["max"], value_range.get("step")
    where = f"the project's value_range [{low:g}, {high:g}]" + (f" in steps of {step:g}" if step else "")
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except ValueError:
        raise Invalid(f"row {n}: {echo(str(value))} is not a number; labels are numbers in {where}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise Invalid(f"row {n}: {echo(str(value))} is outside {where}")
    if step:
        steps = (number - low) / step
        if abs(steps - round(steps)) > 1e-9 * max(1.0, abs(steps)):
            raise Invalid(f"row {n}: {echo(str(value))} is not on {where}")
    return str(int(number)) if number.is_integer() and abs(number) < 2**53 else repr(number)


def _checked_order(project: Project, row: LabelIn, kind: str, n: int) -> str:
    """The shown order row ``n`` stores: ``AB`` or ``BA`` for a pairwise project's judge (required there), ``''``
    for every other label; 422 naming the row for an order anywhere else or a judge's label without one."""
    order = row.get("order")
    if project.kind != "pairwise":
        if order is not None:
            raise Invalid(f"row {n}: order applies to a pairwise project's judge labels; this project is pointwise")
        return ""
    if kind != "judge":
        if order is not None:
            raise Invalid(f"row {n}: only a judge's label carries an order; {echo(row['rater'])} is a {kind}")
        return ""
    if order is None:
        raise Invalid(f"row {n}: a judge's label in a pairwise project names the order it was shown: AB or BA")
    return order


def _criterion_error(project: Project, criterion: str | None, n: int) -> Invalid:
    if criterion is None:
        return Invalid(f"row {n}: 'criterion' is required; this project has criteria {project.criteria}")
    return Invalid(f"row {n}: unknown criterion {echo(criterion)}; the project has {project.criteria}")


def write_labels(session: Session, project: Project, principal: Principal, rows: list[LabelIn]) -> LabelsAccepted:
    """Append one event per changed cell; identical resubmissions are counted, not written.

    All-or-nothing: any bad row raises before anything is written.
    """
    lock_project(session, project.id)
    item_ids = ids_by_external(session, Item, project.id, sorted({r["item"] for r in rows}))
    raters = {
        ext: (rid, kind, _allowed_values(project, kind))
        for ext, rid, kind in session.execute(
            select(Rater.external_id, Rater.id, Rater.kind).where(Rater.project_id == project.id)
        )
    }
    criteria = set(project.criteria)
    default_criterion = project.criteria[0] if len(criteria) == 1 else None
    cells: Cells = {}
    confidence: dict[OrderedCell, float] = {}
    duplicates = 0
    for n, row in enumerate(rows, start=1):
        rater = raters.get(row["rater"])
        if principal.role == Role.ANNOTATOR and (rater is None or rater[0] != principal.rater_id):
            # Checked before existence, so an annotator cannot probe which rater ids exist.
            raise Forbidden(f"row {n}: an annotator key may only write its own rater's labels")
        if rater is None:
            raise Invalid(f"row {n}: unknown rater {echo(row['rater'])} in this project")
        item = item_ids.get(row["item"])
        if item is None:
            raise Invalid(f"row {n}: unknown item {echo(row['item'])} in this project")
        value = _checked_value(project, row["value"], rater, n)
        criterion = row.get("criterion") or default_criterion
        if criterion not in criteria:
            raise _criterion_error(project, row.get("criterion"), n)
        cell = (item, rater[0], criterion, _checked_order(project, row, rater[1], n))
        prior = cells.get(cell)
        if prior is not None:
            if prior[0] != value:
                shown = f" shown {cell[3]}" if cell[3] else ""
                raise Invalid(
                    f"rows {prior[2]} and {n} give different values for item {echo(row['item'])}{shown}, "
                    f"rater {echo(row['rater'])}: {echo(prior[0])} and {echo(value)}"
                )
            duplicates += 1
            continue
        cells[cell] = (value, row.get("batch"), n)
        given = row.get("confidence")
        if given is not None:
            if rater[1] != "judge":
                raise Invalid(
                    f"row {n}: only a judge's label carries a confidence; {echo(row['rater'])} is a {rater[1]}"
                )
            confidence[cell] = float(given)
    if any(batch is not None for _, batch, _ in cells.values()):
        _check_batches(session, project, cells)
    current, ranks = _current_values(session, project.id, cells)
    fresh = [(cell, value, batch) for cell, (value, batch, _) in cells.items() if current.get(cell) != value]
    duplicates += len(cells) - len(fresh)
    last_seq = project.label_seq
    if fresh:
        first_seq = reserve(session, project.id, "label_seq", len(fresh))
        last_seq = first_seq + len(fresh) - 1
        _append(session, project.id, fresh, first_seq, utcnow(), current, ranks, confidence)
        one_cell_per_item = len(criteria) == 1 and project.kind == "pointwise"
        _count_labeled_items(session, _items_gained(fresh, current, one_cell_per_item=one_cell_per_item))
    return LabelsAccepted(accepted=len(fresh), duplicates=duplicates, label_seq=last_seq)


def as_seen_by(principal: Principal, written: LabelsAccepted | LabelsRetracted) -> dict[str, Any]:
    """A write's answer as the caller may read it: an annotator does not see the project-wide ``label_seq``."""
    answer = written.model_dump()
    return {**answer, "label_seq": None} if principal.role == Role.ANNOTATOR else answer


def _items_gained(
    fresh: list[tuple[OrderedCell, str, str | None]], current: dict[OrderedCell, str], *, one_cell_per_item: bool
) -> Counter[int]:
    """Per rater, the items of ``fresh`` cells it had no current label on (any criterion or order) before."""
    labeled = {(i, r) for i, r, _, _ in current}
    if one_cell_per_item and not labeled:  # each cell is its own (item, rater) pair, none labeled before
        return Counter(r for (_, r, _, _), _, _ in fresh)
    return Counter(r for _, r in {(i, r) for (i, r, _, _), _, _ in fresh} - labeled)


def _check_batches(session: Session, project: Project, cells: Cells) -> None:
    """Every batch named must exist in this project and belong to the row's rater."""
    named = sorted({batch for _, batch, _ in cells.values() if batch is not None})
    owners = dict(
        session.execute(
            select(Batch.id, Batch.rater_id).where(Batch.project_id == project.id, Batch.id.in_(named))
        ).all()
    )
    for (_, rater_id, _, _), (_, batch, n) in cells.items():
        if batch is not None and owners.get(batch) != rater_id:
            raise Invalid(f"row {n}: batch {echo(batch)} is not a batch of this rater in this project")


def _current_values(
    session: Session, project_id: str, cells: Cells
) -> tuple[dict[OrderedCell, str], dict[OrderedCell, int]]:
    """The current labels of the cells' raters on the cells' items (every criterion and order; read as a range
    of item ids, it may hold other items too), and their arrival ranks (docs/method.md §8.2)."""
    if not cells:
        return {}, {}
    raters, rater_ids = in_values(session, "rater_id", sorted({r for _, r, _, _ in cells}))
    item_ids = sorted({i for i, _, _, _ in cells})
    sql = (
        "SELECT item_id, rater_id, criterion, shown_order, value, COALESCE(rank, seq) FROM current_labels "
        f"WHERE {raters}"
    )
    params: tuple[Any, ...]
    if item_ids[-1] - item_ids[0] < SPAN * len(item_ids):
        # a run of the corpus (a bulk upload in item order): one range of the primary key, not a
        # lookup per item (100,000 items at a million: 0.03-0.18 s instead of 0.33-0.62 s on PostgreSQL)
        sql = f"{sql} AND item_id BETWEEN ? AND ?"
        params = (rater_ids, item_ids[0], item_ids[-1])
    elif len(item_ids) <= CHUNK or few_of(session, project_id, len(item_ids)):
        # by primary key (the items are the project's; naming the project would lead SQLite to scan it)
        items, values = in_values(session, "item_id", item_ids)
        params = (rater_ids, values)
        sql = f"{sql} AND {items}"
    else:
        params = (rater_ids, project_id)
        sql = f"{sql} AND project_id = ?"
    rows = driver_rows(session, sql, params)
    return {(i, r, c, o): v for i, r, c, o, v, _ in rows}, {(i, r, c, o): rank for i, r, c, o, _, rank in rows}


def _append(
    session: Session,
    project_id: str,
    fresh: list[tuple[OrderedCell, str, str | None]],
    first_seq: int,
    now: datetime,
    current: dict[OrderedCell, str],
    ranks: dict[OrderedCell, int],
    confidence: dict[OrderedCell, float] | None = None,
) -> None:
    """Insert the events, then bring ``current_labels`` up to date from them in one statement: a plain
    insert when no cell has a current label in ``current`` (read under the project's lock, so exact),
    else an upsert (at a million items ~0.7 instead of ~1.0 s of PostgreSQL CPU per 100,000 new cells).

    A new cell's arrival rank is the write's last ``label_seq`` (every cell of one write shares it); a
    correction keeps its cell's rank from ``ranks``, so it never re-dates its item (docs/method.md §8.2).
    ``confidence``: the judge cells' confidences (a cell not in it has none).
    """
    stamp = db_value(session, LabelEvent.__table__.c.created_at, now)
    write_rank = first_seq + len(fresh) - 1
    given = confidence or {}
    insert_many(
        session,
        table_of(LabelEvent),
        EVENT_COLUMNS,
        [
            (
                project_id,
                first_seq + k,
                *cell[:3],
                value,
                batch,
                stamp,
                ranks.get(cell, write_rank),
                given.get(cell),
                cell[3],
            )
            for k, (cell, value, batch) in enumerate(fresh)
        ],
    )
    corrections = any(cell in current for cell, _, _ in fresh) if current else False
    upsert = (
        " ON CONFLICT (item_id, rater_id, criterion, shown_order) DO UPDATE SET value = excluded.value,"
        " seq = excluded.seq, rank = excluded.rank, confidence = excluded.confidence"
    )
    session.execute(
        text(
            "INSERT INTO current_labels (item_id, rater_id, criterion, shown_order, project_id, value, seq, rank, "
            "confidence) SELECT item_id, rater_id, criterion, shown_order, project_id, value, seq, rank, confidence "
            "FROM label_events "
            f"WHERE project_id = :project AND seq BETWEEN :first AND :last{upsert if corrections else ''}"
        ),
        {"project": project_id, "first": first_seq, "last": first_seq + len(fresh) - 1},
    )


def _count_labeled_items(session: Session, change: Counter[int]) -> None:
    """Add ``change`` (rater id -> items gained, negative: lost) to the raters' labeled-item counts."""
    rows = [(rater, n) for rater, n in sorted(change.items()) if n]
    if rows:
        insert_many(
            session,
            table_of(RaterProgress),
            ("rater_id", "labeled_items"),
            rows,
            on_conflict=("rater_id",),
            accumulate=True,
        )


def retract_labels(session: Session, project: Project, cells: Sequence[Cell | OrderedCell]) -> LabelsRetracted:
    """Append a retraction event for each cell that has a current label, and drop that label.

    A cell without a shown order, ``(item, rater, criterion)``, retracts the label of every order (a pairwise
    judge's two); with one, that order's. Cells without a current label (never labeled, or already
    retracted) write nothing.
    """
    lock_project(session, project.id)
    ordered = {cell for cell in cells if len(cell) == 4}
    every_order = {cell for cell in cells if len(cell) == 3}
    wanted = sorted({cell[:3] for cell in cells})
    labeled = sorted(
        {
            (i, r, c, o)
            for part in chunks(wanted, 1_000)
            for i, r, c, o in session.execute(
                select(
                    CurrentLabel.item_id, CurrentLabel.rater_id, CurrentLabel.criterion, CurrentLabel.shown_order
                ).where(
                    CurrentLabel.project_id == project.id,
                    tuple_(CurrentLabel.item_id, CurrentLabel.rater_id, CurrentLabel.criterion).in_(list(part)),
                )
            )
            if (i, r, c) in every_order or (i, r, c, o) in ordered
        }
    )
    if not labeled:
        return LabelsRetracted(retracted=0, label_seq=project.label_seq)
    first_seq = reserve(session, project.id, "label_seq", len(labeled))
    stamp = db_value(session, LabelEvent.__table__.c.created_at, utcnow())
    insert_many(
        session,
        table_of(LabelEvent),
        ("project_id", "seq", "item_id", "rater_id", "criterion", "shown_order", "kind", "created_at"),
        [(project.id, first_seq + k, *cell, "retraction", stamp) for k, cell in enumerate(labeled)],
    )
    key = (CurrentLabel.item_id, CurrentLabel.rater_id, CurrentLabel.criterion, CurrentLabel.shown_order)
    for part in chunks(labeled, 1_000):
        session.execute(delete(CurrentLabel).where(CurrentLabel.project_id == project.id, tuple_(*key).in_(list(part))))
    _forget_items(session, project, sorted({(i, r) for i, r, _, _ in labeled}))
    return LabelsRetracted(retracted=len(labeled), label_seq=first_seq + len(labeled) - 1)


def retract_rows(session: Session, project: Project, principal: Principal, rows: list[RetractionIn]) -> LabelsRetracted:
    """Withdraw the current label of each row's cell (a retraction event; the history keeps the label).

    All-or-nothing: an unknown item, rater or criterion, or an annotator naming another rater, raises
    before anything is written. A cell without a current label writes nothing, so a repeat is a no-op.
    """
    lock_project(session, project.id)
    item_ids = ids_by_external(session, Item, project.id, sorted({r["item"] for r in rows}))
    rater_ids = ids_by_external(session, Rater, project.id, sorted({r["rater"] for r in rows}))
    default_criterion = project.criteria[0] if len(project.criteria) == 1 else None
    cells: list[Cell | OrderedCell] = []
    for n, row in enumerate(rows, start=1):
        rater = rater_ids.get(row["rater"])
        if principal.role == Role.ANNOTATOR and (rater is None or rater != principal.rater_id):
            raise Forbidden(f"row {n}: an annotator key may only retract its own rater's labels")
        if rater is None:
            raise Invalid(f"row {n}: unknown rater {echo(row['rater'])} in this project")
        item = item_ids.get(row["item"])
        if item is None:
            raise Invalid(f"row {n}: unknown item {echo(row['item'])} in this project")
        criterion = row.get("criterion") or default_criterion
        if criterion not in project.criteria:
            raise _criterion_error(project, row.get("criterion"), n)
        order = row.get("order")
        if order is not None and project.kind != "pairwise":
            raise Invalid(f"row {n}: order applies to a pairwise project's judge labels; this project is pointwise")
        cells.append((item, rater, str(criterion)) if order is None else (item, rater, str(criterion), order))
    return retract_labels(session, project, cells)


def _forget_items(session: Session, project: Project, pairs: list[tuple[int, int]]) -> None:
    """After a retraction: the (item, rater) pairs left with no current label leave the raters'
    counts, and the primary's cursor steps back to the first such item so it is issued again."""
    still: set[tuple[int, int]] = set()
    if len(project.criteria) > 1 or project.kind == "pairwise":
        for part in chunks(pairs, 1_000):
            still.update(
                (i, r)
                for i, r in session.execute(
                    select(CurrentLabel.item_id, CurrentLabel.rater_id).where(
                        CurrentLabel.project_id == project.id,
                        tuple_(CurrentLabel.item_id, CurrentLabel.rater_id).in_(list(part)),
                    )
                )
            )
    lost = [(i, r) for i, r in pairs if (i, r) not in still]
    _count_labeled_items(session, Counter({r: -n for r, n in Counter(r for _, r in lost).items()}))
    by_rater: dict[int, int] = {}
    for i, r in lost:
        by_rater[r] = min(i, by_rater.get(r, i))
    for rater, first in by_rater.items():
        session.execute(
            update(Rater)
            .where(Rater.id == rater, Rater.kind == "primary", Rater.issued_through >= first)
            .values(issued_through=first - 1)
        )
