"""Decisions already shown stay on record; a later change of one is marked (docs/method.md §8.3).

The first pass or reject a reliability document shows for a judge is kept (``shown_decisions``) as of its
``label_seq``. A later document whose decision for that judge differs carries ``rewritten_at``: the first
label event since that changed or retracted a label the shown decision read, and per rater how many.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.core.db import WRITE_OPTION
from service.core.sql import driver_rows
from service.data.models import ShownDecision, utcnow
from service.schemas.documents import JudgeValidation, ReliabilityDocument

TERMINAL = frozenset({"pass", "reject"})
log = logging.getLogger("annoplan")


def _decided_at(validation: JudgeValidation) -> int | None:
    """The label_seq the monitor decided at, when the decision in force is the monitored one."""
    block = validation.monitoring
    return None if block is None or validation.provisional else block.decided_at_label_seq


def mark_rewrites(
    session: Session, project_id: str, criterion: str, label_seq: int, validations: list[dict[str, Any]]
) -> None:
    """Set each validation's ``rewritten_at``: None, or what changed since the pass or reject first shown for its
    judge when its decision now differs."""
    shown = {
        row.judge: row
        for row in session.scalars(
            select(ShownDecision).where(ShownDecision.project_id == project_id, ShownDecision.criterion == criterion)
        )
    }
    for v in validations:
        record = shown.get(v["judge"])
        v["rewritten_at"] = (
            None if record is None or record.decision == v["decision"] else _rewrite(session, record, label_seq, v)
        )


def _rewrite(session: Session, record: ShownDecision, label_seq: int, validation: dict[str, Any]) -> dict[str, Any]:
    """The ``rewritten_at`` mark of ``validation`` against the decision on ``record``."""
    rows = driver_rows(
        session,
        "SELECT r.external_id, e.kind, COUNT(*), MIN(e.seq) FROM label_events e JOIN raters r ON r.id = e.rater_id "
        "WHERE e.project_id = ? AND e.criterion = ? AND e.seq > ? AND e.seq <= ? "
        "AND (e.kind = 'retraction' OR e.rank <= ?) GROUP BY r.external_id, e.kind",
        (record.project_id, record.criterion, record.label_seq, label_seq, record.label_seq),
    )
    corrected = {str(r): int(n) for r, kind, n, _ in rows if kind != "retraction"}
    retracted = {str(r): int(n) for r, kind, n, _ in rows if kind == "retraction"}
    first = min((int(seq) for *_, seq in rows), default=label_seq)
    if rows:
        parts = [f"{n} of {r}'s labels changed" for r, n in sorted(corrected.items())]
        parts += [f"{n} of {r}'s labels retracted" for r, n in sorted(retracted.items())]
        what = "; ".join(parts)
    else:
        what = "no label it read changed: the settings or the plan did"
    changed = (
        f"{record.decision} shown at label_seq {record.label_seq} is now {validation['decision']}: {what} "
        f"since (first at label_seq {first})"
    )
    return {
        "label_seq": first,
        "shown": {
            "decision": record.decision,
            "label_seq": record.label_seq,
            "decided_at_label_seq": record.decided_at,
        },
        "decision": validation["decision"],
        "corrected": corrected,
        "retracted": retracted,
        "changed": changed,
    }


def decisions_to_record(doc: ReliabilityDocument) -> list[dict[str, Any]]:
    """The pass or reject decisions ``doc`` shows (not provisional, not a rewrite of another): rows to keep."""
    return [
        {
            "c": doc.criterion,
            "j": v.judge,
            "d": v.decision,
            "s": doc.label_seq,
            "at": _decided_at(v),
        }
        for v in doc.judges
        if v.decision in TERMINAL and not v.provisional and v.rewritten_at is None
    ]


def store_shown(bind: Engine | Connection, project_id: str, rows: list[dict[str, Any]]) -> None:
    """Keep ``rows`` (:func:`decisions_to_record`) where no decision is on record for their judge yet.

    Best effort, in a short write transaction of its own (a read never waits for the writer): while it is not
    stored, the next document shows the decision again and stores it.
    """
    insert = text(
        "INSERT INTO shown_decisions (project_id, criterion, judge, decision, label_seq, decided_at, created_at) "
        "VALUES (:p, :c, :j, :d, :s, :at, :now) ON CONFLICT DO NOTHING"
    )
    try:
        with Session(bind.execution_options(**{WRITE_OPTION: True})) as writer, writer.begin():
            writer.execute(insert, [r | {"p": project_id, "now": utcnow()} for r in rows])
    except SQLAlchemyError as exc:
        log.warning("shown decisions of project %s not stored: %s", project_id, exc)
