"""The job queue's history turn: the dashboard's pool-score points, written on purpose rather than by reads.

One process of the deployment that runs the queue per ``history_point_seconds`` (a periodic turn,
:func:`service.data.jobs.claim_period`) stores, for each label project whose ``label_seq`` moved past the
newest stored point of its first criterion (the one the dashboard draws), the human-pool score at that
``label_seq``: the value the reliability document of those labels reports. At most
:data:`PROJECTS_PER_TURN` projects a turn, taken in id order from where the last turn stopped (the cursor
rides on the turn's row), which bounds a turn's work to that many matrix reads and serves every due project
within a few turns. So the history holds a point per period while labels move, at the ``label_seq`` of the
turn, and none while they do not (docs/operations.md). The turn also queues each history's one-time replay
(:mod:`service.documents.history_replays`: what precedes the first point), when it takes a project with no
point stored, and for histories stored before it did so (:func:`unmarked_histories`), in the same write
transaction: a view only reads the replay's state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from planner.patterns import item_patterns
from service.core.background import PollingThread
from service.core.db import session_scope
from service.data import jobs
from service.data.models import Job, PoolScore, Project
from service.documents import history_replays
from service.documents.reliability import estimator_in_force, judge_validation
from service.matrices.store import current_matrix
from service.planning.lists import inclusion_by_item
from service.planning.plans import current_plan

TURN = "pool-score-history"
"""The periodic task's name on the job queue."""
PROJECTS_PER_TURN = 16
"""Most projects one turn computes a point of."""
LEASE_SECONDS = 600.0
"""How long a turn stays its process's: the first read of a project of millions of labels takes seconds to a
minute."""

log = logging.getLogger("annoplan.history")


def pool_score_point(session: Session, project: Project, criterion: str) -> tuple[int, float | None]:
    """The ``label_seq`` of ``criterion``'s labels in hand and their human-pool score, as the reliability
    document reports it (its first judge's ``human_pool.estimate``, docs/method.md §6; None when undefined)."""
    matrix = current_matrix(session, project, criterion)
    judges, humans, primary = matrix.columns("judge"), matrix.columns("primary", "human"), matrix.columns("primary")
    if not judges or len(humans) < 2:
        return matrix.label_seq, None
    decision = project.decision_settings
    inclusion = inclusion_by_item(session, current_plan(session, project.id), matrix)
    validation = judge_validation(
        matrix.raters,
        item_patterns(matrix.codes, matrix.n_labels, inclusion=inclusion),
        judges[0],
        humans,
        decision,
        n_resamples=1,  # the estimate is the point statistic: no interval is kept
        rng=0,
        estimator=estimator_in_force(decision, matrix.raters),
        primary=primary[0] if primary else None,
    )
    estimate: float | None = validation["human_pool"]["estimate"]
    return matrix.label_seq, estimate


def points_due(session: Session, after: str) -> list[tuple[str, bool]]:
    """The label projects whose ``label_seq`` moved past the newest stored point of their first criterion (or
    that have labels and none), each with whether it has a stored point: at most :data:`PROJECTS_PER_TURN`, in
    id order from the first after ``after`` round to the start."""
    newest = {
        (pid, criterion): seq
        for pid, criterion, seq in session.execute(
            select(PoolScore.project_id, PoolScore.criterion, func.max(PoolScore.label_seq)).group_by(
                PoolScore.project_id, PoolScore.criterion
            )
        )
    }
    projects = session.execute(
        select(Project.id, Project.label_seq, Project.criteria).where(Project.label_seq > 0, Project.scale != "numeric")
    ).all()
    due = sorted(
        (pid, (pid, criteria[0]) in newest)
        for pid, seq, criteria in projects
        if newest.get((pid, criteria[0]), -1) < seq
    )
    return ([d for d in due if d[0] > after] + [d for d in due if d[0] <= after])[:PROJECTS_PER_TURN]


def store_due_points(
    sessions: sessionmaker[Session], after: str, *, stopping: Callable[[], bool] = lambda: False
) -> tuple[list[tuple[str, int, float | None]], str]:
    """Store the points due (:func:`points_due` after ``after``) and queue the replays due in one write
    transaction: the points stored, each (project, label_seq, score), and the last project taken (the next
    turn's ``after``). A project whose point fails is logged and left out, as is an undefined first point; a
    project taken with no point stored gets the replay of its history through the point's label_seq, and
    :func:`unmarked_histories` theirs; ``stopping`` ends the turn early."""
    points: list[tuple[str, str, int, float | None]] = []
    replays: list[tuple[str, str, int]] = []
    with session_scope(sessions) as session:
        for pid, stored in points_due(session, after):
            if stopping():
                break
            after, project = pid, session.get(Project, pid)
            if project is None:
                continue
            criterion = project.criteria[0]
            try:
                seq, score = pool_score_point(session, project, criterion)
            except Exception:  # one project's failure leaves the others' points
                log.exception("pool-score point of project %s not computed", pid)
                continue
            # The first point stored is a defined one: the replay draws what precedes the first point, so an
            # undefined first point (the judge's and the primary's labels in, no second human yet) would leave
            # the history between it and the next turn's point empty.
            if score is not None or stored:
                points.append((pid, criterion, seq, score))
            if not stored:  # the replay draws what precedes the first point
                replays.append((pid, criterion, seq))
        replays += unmarked_histories(session)
    if points or replays:
        with session_scope(sessions, write=True) as session:
            if points:
                session.execute(
                    text(
                        "INSERT INTO pool_scores (project_id, criterion, label_seq, score) "
                        "VALUES (:p, :c, :s, :v) ON CONFLICT DO NOTHING"
                    ),
                    [{"p": p, "c": c, "s": s, "v": v} for p, c, s, v in points],
                )
            for pid, criterion, until in replays:
                history_replays.queue_replay(session, pid, criterion, until)
    return [(p, s, v) for p, _, s, v in points], after


def unmarked_histories(session: Session) -> list[tuple[str, str, int]]:
    """The label projects whose first criterion has stored points but no replay mark (the point at label_seq 0)
    and no replay job (stored before the turn queued replays), each (project, criterion, first stored
    label_seq): at most :data:`PROJECTS_PER_TURN`, in id order."""
    queued = set(session.scalars(select(Job.key).where(Job.kind == history_replays.KIND)))
    first = session.execute(
        select(PoolScore.project_id, PoolScore.criterion, func.min(PoolScore.label_seq))
        .group_by(PoolScore.project_id, PoolScore.criterion)
        .having(func.min(PoolScore.label_seq) > 0)
        .order_by(PoolScore.project_id)
    ).all()
    unqueued = [(p, c, int(s)) for p, c, s in first if history_replays.replay_key(p, c) not in queued]
    drawn: dict[str, list[str]] = {
        pid: criteria
        for pid, criteria in session.execute(
            select(Project.id, Project.criteria).where(Project.id.in_({p for p, _, _ in unqueued}))
        )
    }
    return [(p, c, s) for p, c, s in unqueued if p in drawn and drawn[p][0] == c][:PROJECTS_PER_TURN]


class HistoryKeeper(PollingThread):
    """A job-running process's thread taking the deployment's history turn every ``poll_seconds``."""

    thread_name = "annoplan-pool-score-history"

    def __init__(self, sessions: sessionmaker[Session], *, poll_seconds: float) -> None:
        super().__init__(poll_seconds=poll_seconds, stop_seconds=LEASE_SECONDS, log=log)
        self.sessions = sessions
        self.owner = jobs.worker_name("pool-score-history")

    def run_once(self) -> list[tuple[str, int, float | None]]:
        """On this process's turn, :func:`store_due_points`; the points stored."""
        turn = jobs.claim_period(
            self.sessions, TURN, period_seconds=self.poll_seconds, owner=self.owner, lease_seconds=LEASE_SECONDS
        )
        if turn is None:
            return []
        after = str(turn.payload.get("after", ""))
        try:
            points, after = store_due_points(self.sessions, after, stopping=lambda: self.stopping)
        finally:
            jobs.end_period(self.sessions, turn, payload={"after": after})
        return points
