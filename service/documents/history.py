"""The dashboard's human-pool score over label_seq: a point stored each time a reliability document is computed.

Points are written as documents are built (any worker, any request), so a dashboard view reads
them instead of replaying the events. History from before the first stored point (projects older
than this store, or labels written before anyone looked) is replayed from the events once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, Engine, select, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from planner import optional_float
from planner.decision import validate_judge
from service.core.db import WRITE_OPTION
from service.core.errors import NotFound
from service.core.sql import driver_rows
from service.data.models import PoolScore, Project
from service.documents.reliability import DocumentCache, document_key, document_lineage, reliability_document
from service.documents.shown import decisions_to_record, store_shown
from service.matrices.arrival import first_look
from service.matrices.matrix import cell_indices, corpus
from service.planning.plans import current_plan
from service.schemas.documents import ReliabilityDocument

REPLAY_POINTS = 8
"""Points of a replayed stretch of history, at quantiles of its label events."""
SHOWN_POINTS = 200
"""At most this many points are drawn (evenly thinned, the last one kept)."""
log = logging.getLogger("annoplan")


@dataclass
class HistoryReplay:
    """How far this worker's one-time replay of a project's history has come: label events applied of
    the events to replay (``total`` is ``None`` until they are read). Written by the replaying thread,
    read by views; plain ints, so a view sees one value or the next."""

    done: int = 0
    total: int | None = None
    finished: bool = False


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
    documents: DocumentCache,
    *,
    wait: float,
) -> PoolHistory:
    """The stored human-pool scores over label_seq (at most :data:`SHOWN_POINTS`), with ``shown``'s (the
    document on the page: its point may not be stored yet).

    What precedes the first stored point is replayed once, by a background thread; a view that does
    not get the replay within ``wait`` seconds draws the stored points without it, and says how far
    the replay has come.
    """
    points = [
        (int(seq), score)
        for seq, score in session.execute(
            select(PoolScore.label_seq, PoolScore.score)
            .where(PoolScore.project_id == project.id, PoolScore.criterion == criterion)
            .order_by(PoolScore.label_seq)
        )
    ]
    under_way = None
    if not points or points[0][0] != 0:
        until = points[0][0] if points else project.label_seq
        name = f"replay|{project.id}|{criterion}"
        progress: HistoryReplay = documents.get_or_build(f"progress|{name}", HistoryReplay)
        sibling = Session(session.get_bind(), info=session.info)
        replay = documents.in_background(name, lambda: _replayed(sibling, project.id, criterion, until, progress))
        try:
            points = sorted(dict(replay.result(timeout=wait) + points).items())
        except TimeoutError:
            points, under_way = [(0, None), *points], progress
    points = points[1:]  # label_seq 0 marks the replay; no labels, no score
    if shown[0] > 0:
        points = sorted(dict(points + [shown]).items())
    if len(points) > SHOWN_POINTS:
        keep = np.unique(np.linspace(0, len(points) - 1, SHOWN_POINTS).round().astype(int))
        points = [points[k] for k in keep]
    return PoolHistory(points, under_way)


def _replayed(
    session: Session, project_id: str, criterion: str, until: int, progress: HistoryReplay
) -> list[tuple[int, float | None]]:
    """The history through ``until`` replayed from the events (:func:`pool_history`) and stored, with its mark."""
    progress.done, progress.total, progress.finished = 0, None, False
    try:
        with session:
            project = session.get(Project, project_id)
            history = pool_history(session, project, criterion, until=until, progress=progress) if project else []
        replayed = [(0, None), *history]
        store_points(session.get_bind(), project_id, criterion, replayed)
        return replayed
    finally:
        progress.finished = True


def pool_history(
    session: Session,
    project: Project,
    criterion: str,
    *,
    until: int | None = None,
    progress: HistoryReplay | None = None,
) -> list[tuple[int, float | None]]:
    """The human-pool score at up to 8 points of the label sequence (through ``until``), replayed from the events,
    at quantiles of the events from the first label of a second human; ``progress`` follows the events applied."""
    events = driver_rows(
        session,
        "SELECT seq, item_id, rater_id, value FROM label_events WHERE project_id = ? AND criterion = ? AND seq <= ? "
        "ORDER BY seq",
        (project.id, criterion, project.label_seq if until is None else until),
    )
    if progress is not None:
        progress.total = len(events)
    item_ids, raters = corpus(session, project)
    judges = [k for k, r in enumerate(raters) if r.kind == "judge"]
    humans = [k for k, r in enumerate(raters) if r.kind in ("primary", "human")]
    if not events or not judges or len(humans) < 2:
        return []
    decision = project.decision_settings
    seqs = np.fromiter((e[0] for e in events), np.int64, len(events))
    rows, cols, codes = cell_indices(project, item_ids, raters, [e[1:] for e in events])
    flat = rows * len(raters) + cols
    raw = np.full((item_ids.size, len(raters)), -1, dtype=np.int64)
    # The score is undefined until a second human has labeled: the cuts are spread over the events from
    # there (a corpus the primary labels first would otherwise leave all but the last cut undefined).
    is_human = np.isin(cols, humans)
    _, first = np.unique(cols[is_human], return_index=True)
    begin = int(np.sort(np.flatnonzero(is_human)[first])[1]) if first.size >= 2 else 0
    cuts = np.unique(np.quantile(seqs[begin:], np.linspace(0, 1, REPLAY_POINTS + 1)[1:], method="higher"))
    points: list[tuple[int, float | None]] = []
    start = 0
    for cut in cuts:
        end = int(np.searchsorted(seqs, cut, side="right"))
        # Events in seq order: the last event of a cell in this stretch is its value at the cut.
        _, last = np.unique(flat[start:end][::-1], return_index=True)
        latest = start + (end - start - 1 - last)
        raw.flat[flat[latest]] = codes[latest]
        start = end
        v = validate_judge(
            np.where(raw >= len(project.labels), -1, raw),
            judge=judges[0],
            humans=humans,
            n_labels=len(project.labels),
            rule=decision.rule,
            coefficient=decision.coefficient,
            epsilon=decision.resolved_epsilon(),
            n_resamples=20,
            rng=0,
        )
        points.append((int(cut), optional_float(v.human_pool.estimate)))
        if progress is not None:
            progress.done = end
    return points


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
