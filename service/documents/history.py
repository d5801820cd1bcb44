"""The dashboard's human-pool score over label_seq, as a view draws it from the stored points.

The points are written on purpose, by the job queue's history turn (:mod:`service.documents.history_keeper`:
a point at the ``label_seq`` a project's labels moved to, at most one per project and period), never by a
read; a view draws them with the point of the document on its page. History from before the first stored
point (projects older than this store, or labels written before the turn first saw them) is replayed from the
events once, as job-queue work the history turn queues (:mod:`service.documents.history_replays`), not in the
api process.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from service.data.models import PoolScore, Project
from service.documents.history_replays import HistoryReplay, awaited_replay

SHOWN_POINTS = 200
"""At most this many points are drawn (evenly thinned, the last one kept)."""


@dataclass(frozen=True)
class PoolHistory:
    """The pool-score points a view draws, and the replay still under way (``None``: the history is whole)."""

    points: list[tuple[int, float | None]]
    replay: HistoryReplay | None


def pool_score_history(
    session: Session,
    project: Project,
    criterion: str,
    shown: tuple[int, float | None],
    *,
    wait: float,
) -> PoolHistory:
    """The stored human-pool scores over label_seq (at most :data:`SHOWN_POINTS`), with ``shown``'s (the
    document on the page: drawn, not stored; the history turn stores its own point of that label_seq).

    What precedes the first stored point is replayed once, by the job queue (the history turn queues it); a
    view only reads the replay's state, and one that does not get it finished within ``wait`` seconds draws
    the stored points without it and says how far the replay has come (not started: the turn has yet to
    queue it). A view writes nothing.
    """
    points = _stored_points(session, project.id, criterion)
    under_way = None
    if not points or points[0][0] != 0:
        replay = awaited_replay(
            sessionmaker(session.get_bind(), expire_on_commit=False), project.id, criterion, wait=wait
        )
        if replay.finished:
            points = _stored_points(session, project.id, criterion)
        if not points or points[0][0] != 0:
            points, under_way = [(0, None), *points], None if replay.finished else replay
    points = points[1:]  # label_seq 0 marks the replay; no labels, no score
    if shown[0] > 0:
        points = sorted(dict(points + [shown]).items())
    if len(points) > SHOWN_POINTS:
        keep = np.unique(np.linspace(0, len(points) - 1, SHOWN_POINTS).round().astype(int))
        points = [points[k] for k in keep]
    return PoolHistory(points, under_way)


def _stored_points(session: Session, project_id: str, criterion: str) -> list[tuple[int, float | None]]:
    """The stored points of ``criterion``'s pool score, in label_seq order."""
    with Session(session.get_bind()) as reader:  # a fresh read: the replay's points may have landed meanwhile
        return [
            (int(seq), score)
            for seq, score in reader.execute(
                select(PoolScore.label_seq, PoolScore.score)
                .where(PoolScore.project_id == project_id, PoolScore.criterion == criterion)
                .order_by(PoolScore.label_seq)
            )
        ]
