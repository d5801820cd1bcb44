"""The dashboard's human-pool score over label_seq: a point stored each time a reliability document is computed.

Points are written as documents are built (any worker, any request), so a dashboard view reads
them instead of replaying the events. History from before the first stored point (projects older
than this store, or labels written before anyone looked) is replayed from the events once, as job-queue
work (:mod:`service.documents.history_replays`), not in the api process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from service.core.db import WRITE_OPTION
from service.core.errors import NotFound
from service.data.models import PoolScore, Project
from service.documents.history_replays import HistoryReplay, awaited_replay
from service.documents.reliability import DocumentCache, document_key, document_lineage, reliability_document
from service.documents.shown import decisions_to_record, store_shown
from service.matrices.arrival import first_look
from service.planning.plans import current_plan
from service.schemas.documents import ReliabilityDocument

SHOWN_POINTS = 200
"""At most this many points are drawn (evenly thinned, the last one kept)."""
log = logging.getLogger("annoplan")


@dataclass(frozen=True)
class PoolHistory:
    """The pool-score points a view draws, and the replay still under way (``None``: the history is whole)."""

    points: list[tuple[int, float | None]]
    replay: HistoryReplay | None


def cached_reliability(
    session: Session, project: Project, documents: DocumentCache, criterion: str, key: str, *, n_resamples: int
) -> ReliabilityDocument:
    """The reliability document under ``key`` (its ETag) from ``documents``, built when missing; a document
    built here has its human-pool score stored at its label_seq by a background thread (a read never waits
    for the database's writer: on SQLite the one writer may be a long ingest).
    """
    built: list[ReliabilityDocument] = []

    def build() -> ReliabilityDocument:
        built.append(reliability_document(session, project, criterion, n_resamples=n_resamples))
        return built[0]

    lineage = document_lineage(project, current_plan(session, project.id), criterion, "reliability")
    doc: ReliabilityDocument = documents.get_or_build(key, build, lineage=lineage)
    if built:
        bind, point = session.get_bind(), [(doc.label_seq, doc.human_pool.estimate)]
        documents.in_background(f"point|{key}", lambda: store_points(bind, project.id, criterion, point))
        shown = decisions_to_record(doc)
        if shown:
            documents.in_background(f"shown|{key}", lambda: store_shown(bind, project.id, shown))
        if project.opening_seq is None:  # the first look, or a later one while its write has not landed
            seq = first_look(project.id, doc.label_seq)
            documents.in_background(f"opening|{project.id}", lambda: store_opening(bind, project.id, seq))
    return doc


def store_opening(bind: Engine | Connection, project_id: str, label_seq: int) -> None:
    """Record the first look's ``label_seq`` as the project's opening (docs/method.md §8.2), once.

    Best effort, as :func:`store_points`: while it is not stored, this worker reads the opening from memory
    (``service.matrices.arrival.FIRST_LOOKS``) and its next document writes it again.
    """
    try:
        with Session(bind.execution_options(**{WRITE_OPTION: True})) as writer, writer.begin():
            writer.execute(
                text("UPDATE projects SET opening_seq = :s WHERE id = :p AND opening_seq IS NULL"),
                {"s": label_seq, "p": project_id},
            )
    except SQLAlchemyError as exc:
        log.warning("opening of project %s not stored: %s", project_id, exc)


def store_points(
    bind: Engine | Connection, project_id: str, criterion: str, points: list[tuple[int, float | None]]
) -> None:
    """Store points not stored yet, in a short write transaction of its own.

    History is a convenience of the reads that write it: a database refusing the write is logged
    and the read goes on.
    """
    rows = [{"p": project_id, "c": criterion, "s": seq, "v": score} for seq, score in points]
    insert = text(
        "INSERT INTO pool_scores (project_id, criterion, label_seq, score) VALUES (:p, :c, :s, :v) "
        "ON CONFLICT DO NOTHING"
    )
    try:
        with Session(bind.execution_options(**{WRITE_OPTION: True})) as writer, writer.begin():
            writer.execute(insert, rows)
    except SQLAlchemyError as exc:
        log.warning("pool-score history not stored for project %s: %s", project_id, exc)


def pool_score_history(
    session: Session,
    project: Project,
    criterion: str,
    shown: tuple[int, float | None],
    *,
    wait: float,
) -> PoolHistory:
    """The stored human-pool scores over label_seq (at most :data:`SHOWN_POINTS`), with ``shown``'s (the
    document on the page: its point may not be stored yet).

    What precedes the first stored point is replayed once, by the job queue; a view that does not get
    the replay within ``wait`` seconds draws the stored points without it, and says how far the replay
    has come.
    """
    points = _stored_points(session, project.id, criterion)
    under_way = None
    if not points or points[0][0] != 0:
        until = points[0][0] if points else project.label_seq
        replay = awaited_replay(
            sessionmaker(session.get_bind(), expire_on_commit=False), project.id, criterion, until, wait=wait
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


def project_reliability(
    session: Session, project: Project, documents: DocumentCache, *, n_resamples: int
) -> tuple[ReliabilityDocument, str]:
    """The reliability document of the first criterion and its ETag, from the document cache."""
    criterion = project.criteria[0]
    etag = document_key(session, project, current_plan(session, project.id), criterion, "reliability")
    return cached_reliability(session, project, documents, criterion, etag, n_resamples=n_resamples), etag


def shown_reliability(
    session: Session, project: Project, documents: DocumentCache, *, n_resamples: int, wait: float
) -> tuple[ReliabilityDocument, str]:
    """The reliability document of the first criterion a dashboard shows, and its ETag: the fresh one if it is
    ready within ``wait`` seconds, else the newest computed in this worker for the same settings and plan
    (valid at its own label_seq) while one background thread computes the fresh one.

    A worker that has computed none for them yet waits for the fresh one.
    """
    criterion = project.criteria[0]
    plan = current_plan(session, project.id)
    etag = document_key(session, project, plan, criterion, "reliability")
    doc = documents.get(etag)
    if doc is not None:
        return doc, etag
    newest = documents.newest(document_lineage(project, plan, criterion, "reliability"))
    if newest is None:  # computed here, not queued behind other projects' background work
        return cached_reliability(session, project, documents, criterion, etag, n_resamples=n_resamples), etag
    sibling = Session(session.get_bind(), info=session.info, expire_on_commit=False)
    fresh = documents.in_background(
        f"fresh|{etag}", lambda: _fresh_reliability(sibling, project.id, documents, n_resamples=n_resamples)
    )
    try:
        return fresh.result(timeout=wait)
    except TimeoutError:
        return newest[1], newest[0]


def _fresh_reliability(
    session: Session, project_id: str, documents: DocumentCache, *, n_resamples: int
) -> tuple[ReliabilityDocument, str]:
    """:func:`project_reliability` in ``session`` (closed after), for the project as it is now."""
    with session:
        project = session.get(Project, project_id)
        if project is None:
            raise NotFound(f"no project {project_id}")
        return project_reliability(session, project, documents, n_resamples=n_resamples)
