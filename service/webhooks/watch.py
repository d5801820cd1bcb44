"""Changes nobody writes down: the live decision flipping, a plan reached, a batch lease running out,
a watched judge drifting.

The webhook sender calls :func:`announce_changes` each round, so label writes pay nothing:
the decision is re-read (through the reliability document cache the dashboards share) only
for projects whose ``label_seq`` moved and that have a webhook listening. Each check is a
periodic turn: one process of the deployment per period does it, not every sender.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.core.db import session_scope
from service.core.settings import Settings
from service.core.sql import rowcount
from service.data import jobs
from service.data.models import Batch, DecisionWatch, DriftWatch, Project, Webhook, WebhookEvent, utcnow
from service.data.outbox import emit
from service.data.versions import drift_watches
from service.documents.looks import project_reliability
from service.documents.reliability import DocumentCache
from service.documents.versions import judge_drift
from service.planning.batches import batch_status
from service.planning.plans import current_plan, plan_progress
from service.schemas.documents import ReliabilityDocument

BATCH_LOOKBACK = timedelta(days=2)
DECISION_WATCH = "decision-watch"
"""The periodic task re-reading the decisions of the projects listening for a decision event."""
DECISION_EVENTS = frozenset({"decision.changed", "decision.finalized"})
"""The events the decision watcher announces (it re-reads a project's decision when one is listened for)."""
EVENT_WATCH = "event-watch"
"""The periodic task checking plans reached, batch leases run out and watched judges' drift."""
WATCHED_EVENTS = ("plan.reached", "batch.expired", "judge.drifted")
"""The events :data:`EVENT_WATCH` announces."""
FINAL = ("pass", "reject", "inconclusive")
"""Decisions that end the decision's ``continue`` (docs/method.md §10b: ``decision.finalized``)."""


def live_decision(
    session: Session, project: Project, documents: DocumentCache, *, n_resamples: int
) -> ReliabilityDocument:
    """The reliability document of the project's first criterion, from the shared cache or computed into it: a
    look (it is announced), recorded as one (:func:`service.documents.looks.record_look`)."""
    return project_reliability(session, project, documents, n_resamples=n_resamples)[0]


def record_baseline(
    session: Session, project: Project, documents: DocumentCache, *, n_resamples: int, retry_window_seconds: float
) -> None:
    """Note the current decision (once per project), so the next change is announced against it; a decision
    already final is announced as ``decision.finalized`` (once)."""
    if session.get(DecisionWatch, project.id) is None:
        doc = live_decision(session, project, documents, n_resamples=n_resamples)
        session.add(
            DecisionWatch(project_id=project.id, label_seq=doc.label_seq, decision=doc.decision, omega=doc.omega)
        )
        session.flush()
        announce_final(session, project.id, doc, retry_window_seconds=retry_window_seconds)


def announce_final(session: Session, pid: str, doc: ReliabilityDocument, *, retry_window_seconds: float) -> None:
    """Queue ``decision.finalized`` when the decision in force of ``doc`` first leaves ``continue`` (pass,
    reject or inconclusive, not provisional): once per project and criterion, however many senders, rounds or
    retries see it (its dedupe key; docs/method.md §10b). Written in the caller's transaction."""
    if doc.decision not in FINAL or doc.provisional:
        return
    monitoring = doc.judges[0].monitoring if doc.judges else None
    decided_at = monitoring.decided_at_label_seq if monitoring and doc.monitoring_mode == "anytime" else None
    try:
        with session.begin_nested():  # a twin another sender wrote meanwhile rolls back this event only
            emit(
                session,
                pid,
                "decision.finalized",
                {
                    "criterion": doc.criterion,
                    "decision": doc.decision,
                    "label_seq": doc.label_seq,
                    "decided_at_label_seq": decided_at,
                    "omega": doc.omega,
                    "provisional": doc.provisional,
                    "monitoring_mode": doc.monitoring_mode,
                    "reason": doc.reason,
                },
                retry_window_seconds=retry_window_seconds,
                dedupe_key=f"decision.finalized:{doc.criterion}",
            )
    except IntegrityError:
        pass


def _subscriptions(sessions: sessionmaker[Session]) -> dict[str, dict[str, Any]]:
    """Per event type, the projects listening and the earliest subscription time."""
    listening: dict[str, dict[str, Any]] = {}
    with session_scope(sessions) as session:
        for pid, events, created in session.execute(select(Webhook.project_id, Webhook.events, Webhook.created_at)):
            for event in events:
                first = listening.setdefault(event, {}).get(pid)
                listening[event][pid] = created if first is None else min(first, created)
    return listening


@dataclass
class DecisionReads:
    """What the decision watcher did, summed over the deployment's turns (they ride on its periodic
    row): decisions read (documents for a moved ``label_seq``), and those recorded. Equal when each
    change is read once, by one process; a read another process had recorded first is not."""

    read: int = 0
    recorded: int = 0

    def as_payload(self) -> dict[str, int]:
        return {"decisions_read": self.read, "decisions_recorded": self.recorded}

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> DecisionReads:
        return cls(int(payload.get("decisions_read", 0)), int(payload.get("decisions_recorded", 0)))


def _decision_changed(
    sessions: sessionmaker[Session], pid: str, settings: Settings, documents: DocumentCache, reads: DecisionReads
) -> None:
    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        watch = session.get(DecisionWatch, pid)
        if project is None or (watch is not None and watch.label_seq == project.label_seq):
            return
        doc = live_decision(session, project, documents, n_resamples=settings.bootstrap_resamples)
        reads.read += 1
    try:
        with session_scope(sessions, write=True) as session:
            if watch is None:
                watched = DecisionWatch(project_id=pid, label_seq=doc.label_seq, decision=doc.decision, omega=doc.omega)
                session.add(watched)
                session.flush()
                reads.recorded += 1
                announce_final(session, pid, doc, retry_window_seconds=settings.webhook_retry_window_seconds)
                return
            moved = rowcount(  # compare-and-set: of several senders, one records (and announces) it
                session.execute(
                    update(DecisionWatch)
                    .where(DecisionWatch.project_id == pid, DecisionWatch.label_seq == watch.label_seq)
                    .values(label_seq=doc.label_seq, decision=doc.decision, omega=doc.omega)
                )
            )
            reads.recorded += moved
            if moved and doc.decision != watch.decision:
                emit(
                    session,
                    pid,
                    "decision.changed",
                    {
                        "criterion": doc.criterion,
                        "label_seq": doc.label_seq,
                        "old": {"decision": watch.decision, "omega": watch.omega, "label_seq": watch.label_seq},
                        "new": {"decision": doc.decision, "omega": doc.omega, "provisional": doc.provisional},
                        "omega": doc.omega,
                        "provisional": doc.provisional,
                        "rewritten_at": None if doc.rewritten_at is None else doc.rewritten_at.model_dump(),
                        "monitoring_mode": doc.monitoring_mode,
                        "reason": doc.reason,
                    },
                    retry_window_seconds=settings.webhook_retry_window_seconds,
                    dedupe_key=f"decision.changed:{doc.label_seq}",
                )
            if moved:
                announce_final(session, pid, doc, retry_window_seconds=settings.webhook_retry_window_seconds)
    except IntegrityError:  # another sender recorded the same first sight or event
        pass


def _plan_reached(sessions: sessionmaker[Session], pid: str, settings: Settings, seen: dict[str, int]) -> None:
    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        if project is None or seen.get(pid) == project.label_seq:
            return
        seen[pid] = project.label_seq
        plan = current_plan(session, pid)
        progress = plan_progress(session, project, plan)
    if plan is None or progress is None or not plan.m or progress["m_done_min"] < plan.m:
        return
    try:
        with session_scope(sessions, write=True) as session:
            emit(
                session,
                pid,
                "plan.reached",
                {**progress, "label_seq": project.label_seq},
                retry_window_seconds=settings.webhook_retry_window_seconds,
                dedupe_key=f"plan.reached:{plan.id}",
            )
    except IntegrityError:
        pass


def _batches_expired(sessions: sessionmaker[Session], pid: str, since: Any, settings: Settings) -> None:
    now = utcnow()
    with session_scope(sessions) as session:
        expired = session.scalars(
            select(Batch).where(
                Batch.project_id == pid,
                Batch.released_at.is_(None),
                Batch.expires_at <= now,
                Batch.expires_at > max(since, now - BATCH_LOOKBACK),
            )
        ).all()
        if not expired:
            return
        done = set(
            session.scalars(
                select(WebhookEvent.dedupe_key).where(
                    WebhookEvent.project_id == pid,
                    WebhookEvent.dedupe_key.in_([f"batch.expired:{b.id}" for b in expired]),
                )
            )
        )
        statuses = [batch_status(session, b) for b in expired if f"batch.expired:{b.id}" not in done]
    for status in statuses:
        if not status.unlabeled:
            continue
        try:
            with session_scope(sessions, write=True) as session:
                emit(
                    session,
                    pid,
                    "batch.expired",
                    {
                        "batch": status.id,
                        "rater": status.rater,
                        "expires_at": status.expires_at.isoformat(),
                        "items": len(status.items),
                        "labeled": status.labeled,
                        "unlabeled": status.unlabeled,
                    },
                    retry_window_seconds=settings.webhook_retry_window_seconds,
                    dedupe_key=f"batch.expired:{status.id}",
                )
        except IntegrityError:
            pass


def _judge_drifted(sessions: sessionmaker[Session], pid: str, settings: Settings, seen: dict[str, int]) -> None:
    """Announce each watched judge's first alarm since its watch was set (docs/method.md §12)."""
    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        if project is None or seen.get(pid) == project.label_seq:
            return
        seen[pid] = project.label_seq
        found = []
        for watch, judge in drift_watches(session, pid):
            drift = judge_drift(
                session,
                project,
                judge,
                watch.criterion,
                baseline=watch.baseline,
                drop=watch.drop,
                horizon=watch.horizon,
                alpha=watch.alpha,
            )
            if drift.drifted:
                found.append((watch.rater_id, drift))
    for rater_id, drift in found:
        try:
            with session_scope(sessions, write=True) as session:
                moved = rowcount(  # compare-and-set: of several senders, one records (and announces) it
                    session.execute(
                        update(DriftWatch)
                        .where(DriftWatch.rater_id == rater_id, DriftWatch.alarm_label_seq.is_(None))
                        .values(alarm_label_seq=drift.alarm_label_seq)
                    )
                )
                if moved:
                    emit(
                        session,
                        pid,
                        "judge.drifted",
                        drift.model_dump(),
                        retry_window_seconds=settings.webhook_retry_window_seconds,
                        dedupe_key=f"judge.drifted:{rater_id}:{drift.alarm_label_seq}",
                    )
        except IntegrityError:
            pass


@dataclass
class Seen:
    """What the deployment's watcher has looked at: per project, the ``label_seq`` of its last plan check
    and drift check. It rides on the periodic row of :data:`EVENT_WATCH` from one turn to the next."""

    plan_checked: dict[str, int] = field(default_factory=dict)
    drift_checked: dict[str, int] = field(default_factory=dict)

    def as_payload(self, listening: set[str]) -> dict[str, dict[str, int]]:
        """The payload for the next turn, kept to the projects still listening (its size stays bounded)."""
        return {
            "plan_checked": {p: s for p, s in self.plan_checked.items() if p in listening},
            "drift_checked": {p: s for p, s in self.drift_checked.items() if p in listening},
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Seen:
        return cls(dict(payload.get("plan_checked", {})), dict(payload.get("drift_checked", {})))


def announce_changes(
    sessions: sessionmaker[Session], settings: Settings, documents: DocumentCache, *, owner: str
) -> None:
    """Write the outbox events of changes no request announces.

    Each check is a periodic turn (:func:`service.data.jobs.claim_period`): of every sender on every
    host, one per ``webhook_decision_seconds`` re-reads the decisions of the projects whose labels moved
    (while labels stream in, a changed project's decision is recomputed once per period, so ingest keeps
    the CPU), and one per ``webhook_watch_seconds`` checks plans reached, batch leases run out and
    watched judges' drift.
    """
    listening = _subscriptions(sessions)
    decisions = {pid: t for event in sorted(DECISION_EVENTS) for pid, t in listening.get(event, {}).items()}
    turn = None
    if decisions:
        turn = jobs.claim_period(
            sessions,
            DECISION_WATCH,
            period_seconds=settings.webhook_decision_seconds,
            owner=owner,
            lease_seconds=settings.webhook_lease_seconds,
        )
    if turn is not None:
        reads = DecisionReads.from_payload(turn.payload)
        try:
            for pid in decisions:
                _decision_changed(sessions, pid, settings, documents, reads)
        finally:
            jobs.end_period(sessions, turn, payload=reads.as_payload())
    checked = {event: listening.get(event, {}) for event in WATCHED_EVENTS}
    if not any(checked.values()):
        return
    turn = jobs.claim_period(
        sessions,
        EVENT_WATCH,
        period_seconds=settings.webhook_watch_seconds,
        owner=owner,
        lease_seconds=settings.webhook_lease_seconds,
    )
    if turn is None:
        return
    seen = Seen.from_payload(turn.payload)
    try:
        for pid in checked["plan.reached"]:
            _plan_reached(sessions, pid, settings, seen.plan_checked)
        for pid, since in checked["batch.expired"].items():
            _batches_expired(sessions, pid, since, settings)
        for pid in checked["judge.drifted"]:
            _judge_drifted(sessions, pid, settings, seen.drift_checked)
    finally:
        jobs.end_period(sessions, turn, payload=seen.as_payload({p for events in checked.values() for p in events}))
