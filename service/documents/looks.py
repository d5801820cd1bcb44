"""A read is a look (docs/method.md §8): the reliability document a reader is served, and what serving it records.

The anytime guarantee is about looks: the labels in hand at the first look are the opening (§8.2), and a pass
or reject a look shows stays on record (§8.3). Both are facts about what a reader was shown, so the reads that
serve a document write them (:func:`record_look`), and nothing else: the dashboard's pool-score history is
written by the job queue (:mod:`service.documents.history_keeper`), not by reads.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from service.core.db import WRITE_OPTION
from service.core.errors import NotFound
from service.data.models import Project
from service.documents.reliability import DocumentCache, document_key, document_lineage, reliability_document
from service.documents.shown import decisions_to_record, store_shown
from service.matrices.arrival import first_look
from service.planning.plans import current_plan
from service.schemas.documents import ReliabilityDocument

log = logging.getLogger("annoplan")


def record_look(
    bind: Engine | Connection, documents: DocumentCache, project: Project, doc: ReliabilityDocument, key: str
) -> None:
    """Record the look that serving the newly built ``doc`` (under ``key``, its ETag) is: the project's opening
    when none is stored (its first look, docs/method.md §8.2) and the pass or reject decisions ``doc`` shows
    (§8.3), once each.

    The writes are handed to background threads (a read never waits for the database's writer: on SQLite the
    one writer may be a long ingest), best effort: while the opening is not stored this worker reads it from
    memory and its next document writes it again; a shown decision not stored is shown and stored again.
    """
    shown = decisions_to_record(doc)
    if shown:
        documents.in_background(f"shown|{key}", lambda: store_shown(bind, project.id, shown))
    if project.opening_seq is None:  # the first look, or a later one while its write has not landed
        seq = first_look(project.id, doc.label_seq)
        documents.in_background(f"opening|{project.id}", lambda: store_opening(bind, project.id, seq))


def store_opening(bind: Engine | Connection, project_id: str, label_seq: int) -> None:
    """Record the first look's ``label_seq`` as the project's opening (docs/method.md §8.2), once.

    Best effort: while it is not stored, this worker reads the opening from memory
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


def looked_reliability(
    session: Session, project: Project, documents: DocumentCache, criterion: str, key: str, *, n_resamples: int
) -> ReliabilityDocument:
    """The reliability document under ``key`` (its ETag) from ``documents``, built when missing; a document
    built here is a look and is recorded as one (:func:`record_look`)."""
    built: list[ReliabilityDocument] = []

    def build() -> ReliabilityDocument:
        built.append(reliability_document(session, project, criterion, n_resamples=n_resamples))
        return built[0]

    lineage = document_lineage(project, current_plan(session, project.id), criterion, "reliability")
    doc: ReliabilityDocument = documents.get_or_build(key, build, lineage=lineage)
    if built:
        record_look(session.get_bind(), documents, project, doc, key)
    return doc


def project_reliability(
    session: Session, project: Project, documents: DocumentCache, *, n_resamples: int
) -> tuple[ReliabilityDocument, str]:
    """The reliability document of the first criterion and its ETag, from the document cache (a look)."""
    criterion = project.criteria[0]
    etag = document_key(session, project, current_plan(session, project.id), criterion, "reliability")
    return looked_reliability(session, project, documents, criterion, etag, n_resamples=n_resamples), etag


def shown_reliability(
    session: Session, project: Project, documents: DocumentCache, *, n_resamples: int, wait: float
) -> tuple[ReliabilityDocument, str]:
    """The reliability document of the first criterion a dashboard shows, and its ETag: the fresh one if it is
    ready within ``wait`` seconds, else the newest computed in this worker for the same settings and plan
    (valid at its own label_seq) while one background thread computes the fresh one (a look once built).

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
        return looked_reliability(session, project, documents, criterion, etag, n_resamples=n_resamples), etag
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
