"""The job queue's snapshot turn: large projects' label matrices saved where starting workers read them.

An api process that runs no jobs (PostgreSQL's default) saves no snapshot: it only reads them. One
process of the deployment that runs the queue per ``matrix_snapshot_seconds`` (a periodic turn,
:func:`service.data.jobs.claim_period`) picks the (project, criterion) of at least
``matrix_snapshot_min_cells`` cells whose newest snapshot is furthest behind its ``label_seq``, by more
than a fiftieth of its cells (``SNAPSHOT_EVERY``) or with none yet, and saves one snapshot of it: one
matrix per turn, which bounds a turn's work to one project's read (docs/operations.md)."""

from __future__ import annotations

import logging

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from service.core.background import PollingThread
from service.core.db import session_scope
from service.data import jobs
from service.data.models import Project, Rater
from service.matrices.snapshots import SnapshotPlace, newest_snapshots
from service.matrices.store import SNAPSHOT_EVERY, MatrixStore

TURN = "matrix-snapshots"
"""The periodic task's name on the job queue."""
LEASE_SECONDS = 600.0
"""How long a turn stays its process's: a full read of a project of millions of labels takes seconds to a minute."""

log = logging.getLogger("annoplan.snapshots")


def snapshot_due(session: Session, place: SnapshotPlace, min_cells: int) -> tuple[str, str] | None:
    """The (project, criterion) whose snapshot is furthest behind past :data:`SNAPSHOT_EVERY`, or None."""
    raters = select(Rater.project_id, func.count().label("n")).group_by(Rater.project_id).subquery()
    rows = session.execute(
        select(Project.id, Project.label_seq, Project.criteria, Project.item_count * raters.c.n)
        .join(raters, raters.c.project_id == Project.id)
        .where(Project.label_seq > 0, Project.item_count * raters.c.n >= max(min_cells, 1))
    ).all()
    newest = newest_snapshots(place, session, [r[0] for r in rows])
    due, behind_most = None, 0
    for pid, label_seq, criteria, cells in rows:
        for criterion in criteria:
            last = newest.get((pid, criterion))
            behind = label_seq - (last or 0)
            if last is not None and behind <= cells // SNAPSHOT_EVERY:
                continue
            if behind > behind_most:
                due, behind_most = (pid, criterion), behind
    return due


class SnapshotKeeper(PollingThread):
    """A job-running process's thread taking the deployment's snapshot turn every ``poll_seconds``."""

    thread_name = "annoplan-matrix-snapshots"

    def __init__(
        self, sessions: sessionmaker[Session], store: MatrixStore, *, poll_seconds: float, min_cells: int
    ) -> None:
        super().__init__(poll_seconds=poll_seconds, stop_seconds=LEASE_SECONDS, log=log)
        self.sessions = sessions
        self.store = store
        self.min_cells = min_cells
        self.owner = jobs.worker_name("matrix-snapshots")

    def run_once(self) -> tuple[str, str, int] | None:
        """On this process's turn, save the snapshot most due; its (project, criterion, label_seq)."""
        place = self.store.snapshots
        if place is None:
            return None
        turn = jobs.claim_period(
            self.sessions, TURN, period_seconds=self.poll_seconds, owner=self.owner, lease_seconds=LEASE_SECONDS
        )
        if turn is None:
            return None
        saved = int(turn.payload.get("saved", 0))
        try:
            with session_scope(self.sessions) as session:
                due = snapshot_due(session, place, self.min_cells)
                if due is None:
                    return None
                project = session.get(Project, due[0])
                assert project is not None
                label_seq = self.store.save_now(session, project, due[1])
            saved += 1
            log.info("saved the matrix snapshot of project %s (%r) at label_seq %d", *due, label_seq)
            return (*due, label_seq)
        finally:
            jobs.end_period(self.sessions, turn, payload={"saved": saved})
