"""The job queue: background work as ``jobs`` rows that workers claim with a lease (docs/operations.md).

A job is ``queued`` until a worker claims it: the claim sets it ``running`` with a lease (an
owner, a fresh token and an expiry) and counts an attempt. The holder renews the lease while
it works and ends the job ``done`` or ``failed``, or puts it back ``queued`` after a backoff
when the failure may pass. A worker that dies renews nothing: once its lease has run out the
job is due again and the next claim takes it over, until ``max_attempts`` claims have been
spent, when it is failed. Every write of a holder names its token, so a worker that lost its
lease (taken over, cancelled) changes nothing.

The claim is atomic on both databases: PostgreSQL locks the rows it takes and skips those
another claimer has locked (``FOR UPDATE SKIP LOCKED``); SQLite has one writer at a time, and
a write unit takes its lock at ``BEGIN IMMEDIATE`` (service.core.db), before it reads.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from service.core.db import session_scope
from service.core.sql import rowcount
from service.data.models import Job, WebhookDelivery, utcnow

ACTIVE = ("queued", "running")
EXHAUSTED_ERROR = "its worker stopped before finishing it {attempts} times; submit it again"


def worker_name(role: str) -> str:
    """This process's name as a lease owner: host, process id and role."""
    return f"{socket.gethostname()}:{os.getpid()}:{role}"


@dataclass(frozen=True)
class Claimed:
    """A job this worker holds the lease of: its token fences every write about it.

    ``exhausted`` is set for a job whose lease ran out with no attempt left: the claim has
    failed it, and its kind should record the failure wherever else it shows.
    """

    id: int
    kind: str
    key: str
    payload: dict[str, Any]
    token: str
    attempts: int
    max_attempts: int
    exhausted: bool = False


def enqueue(
    session: Session,
    kind: str,
    key: str,
    payload: dict[str, Any],
    *,
    max_attempts: int = 3,
    run_after: datetime | None = None,
) -> Job:
    """Add a queued job in the caller's transaction (it is claimable once that commits)."""
    job = Job(
        kind=kind,
        key=key,
        payload=payload,
        state="queued",
        attempts=0,
        max_attempts=max_attempts,
        run_after=run_after or utcnow(),
    )
    session.add(job)
    session.flush()
    return job


def _due(now: datetime) -> ColumnElement[bool]:
    """Queued and past its ``run_after``, or running on a lease that has run out."""
    return ((Job.state == "queued") & (Job.run_after <= now)) | ((Job.state == "running") & (Job.lease_until < now))


def claim(
    sessions: sessionmaker[Session],
    kinds: Iterable[str],
    *,
    owner: str,
    lease_seconds: float,
    limit: int = 1,
    on_exhausted: Callable[[Session, list[Claimed]], None] | None = None,
    ready: Callable[[datetime], ColumnElement[bool]] | None = None,
) -> list[Claimed]:
    """Lease up to ``limit`` due jobs of ``kinds`` to ``owner``; rows other claimers hold are skipped.

    A due job whose attempts are spent is failed instead (``exhausted``), and handed to
    ``on_exhausted`` in the claim's own transaction. ``ready(now)``, when given, is a further
    condition a job must meet to be due (a webhook target: it has a delivery due).
    """
    kinds = tuple(kinds)
    if limit < 1:
        return []
    now = utcnow()
    due = Job.kind.in_(kinds) & _due(now)
    if ready is not None:
        due = due & ready(now)
    with session_scope(sessions) as session:  # a cheap read first: SQLite's write lock only when there is work
        if session.scalar(select(Job.id).where(due).limit(1)) is None:
            return []
    token = secrets.token_hex(16)
    with session_scope(sessions, write=True) as session:
        rows = session.execute(
            select(Job.id, Job.kind, Job.key, Job.payload, Job.attempts, Job.max_attempts, Job.state)
            .where(due)
            .order_by(Job.run_after, Job.id)
            .limit(limit)
            .with_for_update(skip_locked=True)
        ).all()
        spent = [r for r in rows if r.state == "running" and r.attempts >= r.max_attempts]
        taken = [r for r in rows if not (r.state == "running" and r.attempts >= r.max_attempts)]
        if taken:
            session.execute(
                update(Job)
                .where(Job.id.in_([r.id for r in taken]))
                .values(
                    state="running",
                    lease_owner=owner,
                    lease_token=token,
                    lease_until=now + timedelta(seconds=lease_seconds),
                    attempts=Job.attempts + 1,
                )
            )
        exhausted = [
            Claimed(r.id, r.kind, r.key, r.payload, token, r.attempts, r.max_attempts, exhausted=True) for r in spent
        ]
        for r in spent:
            session.execute(
                update(Job)
                .where(Job.id == r.id)
                .values(
                    state="failed",
                    lease_owner=None,
                    lease_token=None,
                    lease_until=None,
                    error=EXHAUSTED_ERROR.format(attempts=r.attempts),
                    finished_at=now,
                )
            )
        if exhausted and on_exhausted is not None:
            on_exhausted(session, exhausted)
    return exhausted + [Claimed(r.id, r.kind, r.key, r.payload, token, r.attempts + 1, r.max_attempts) for r in taken]


def held(kind: str, key: str, token: str) -> ColumnElement[bool]:
    """Whether the job ``(kind, key)`` is running on the lease of ``token``: the fence of a holder's writes."""
    return exists().where(Job.kind == kind, Job.key == key, Job.lease_token == token, Job.state == "running")


def renew(sessions: sessionmaker[Session], jobs: list[Claimed], *, lease_seconds: float) -> set[int]:
    """Extend the leases of ``jobs`` by ``lease_seconds`` from now; the ids whose lease this worker still held."""
    if not jobs:
        return set()
    until = utcnow() + timedelta(seconds=lease_seconds)
    kept = set()
    with session_scope(sessions, write=True) as session:
        for job in jobs:
            changed = session.execute(
                update(Job)
                .where(Job.id == job.id, Job.lease_token == job.token, Job.state == "running")
                .values(lease_until=until)
            )
            if rowcount(changed):
                kept.add(job.id)
    return kept


def finish(session: Session, job: Claimed, *, result: dict[str, Any] | None = None) -> bool:
    """Mark the held job done, in the caller's transaction; whether this worker still held it."""
    return _end(session, job, state="done", result=result, finished_at=utcnow())


def fail(session: Session, job: Claimed, error: str) -> bool:
    """Mark the held job failed for good, in the caller's transaction; whether this worker still held it."""
    return _end(session, job, state="failed", error=error, finished_at=utcnow())


def backoff_seconds(attempts: int, *, base: float, cap: float) -> float:
    """Seconds before the next try after ``attempts`` failed ones: ``min(base 2^(attempts-1), cap)``."""
    return float(min(base * 2.0 ** min(max(attempts, 1) - 1, 60), cap))


def retry_or_fail(session: Session, job: Claimed, error: str, *, base: float, cap: float) -> str | None:
    """After a failure that may pass: back to ``queued`` after :func:`backoff_seconds` while attempts
    remain, else failed. The state it was left in, or None when this worker no longer held it."""
    if job.attempts >= job.max_attempts:
        return "failed" if fail(session, job, error) else None
    delay = backoff_seconds(job.attempts, base=base, cap=cap)
    run_after = utcnow() + timedelta(seconds=delay)
    return "queued" if _end(session, job, state="queued", error=error, run_after=run_after) else None


def release(session: Session, job: Claimed) -> bool:
    """Give the job back at once, its attempt not counted (this worker stops; the job did not fail)."""
    return _end(session, job, state="queued", attempts=Job.attempts - 1, run_after=utcnow())


def hand_back(session: Session, job: Claimed) -> bool:
    """End a turn at a standing job (one claimed again and again, as a webhook target is): queued,
    due behind the jobs that waited longer, its attempts reset; whether this worker still held it."""
    return _end(session, job, state="queued", attempts=0, error=None, run_after=utcnow())


def cancel(session: Session, kind: str, key: str, error: str) -> bool:
    """Fail the job ``(kind, key)`` if it is queued or running, whoever holds it; whether it was.

    Its holder's next write or renewal finds the lease gone and changes nothing.
    """
    changed = session.execute(
        update(Job)
        .where(Job.kind == kind, Job.key == key, Job.state.in_(ACTIVE))
        .values(state="failed", error=error, lease_owner=None, lease_token=None, lease_until=None, finished_at=utcnow())
    )
    return bool(rowcount(changed))


def _end(session: Session, job: Claimed, **values: Any) -> bool:
    changed = session.execute(
        update(Job)
        .where(Job.id == job.id, Job.lease_token == job.token, Job.state == "running")
        .values(lease_owner=None, lease_token=None, lease_until=None, **values)
    )
    return bool(rowcount(changed))


PERIODIC = "periodic"


def claim_period(
    sessions: sessionmaker[Session], name: str, *, period_seconds: float, owner: str, lease_seconds: float
) -> Claimed | None:
    """This process's turn at the periodic task ``name``, or None when its period is not over or
    another process holds it: once per period for the whole deployment, not once per process.

    The task's row (kind ``periodic``) is made at its first claim; a turn moves its
    ``run_after`` a period on and leases it, and :func:`end_period` hands it back. A holder
    that dies leaves it to the first claim after its lease runs out.
    """
    now = utcnow()
    with session_scope(sessions) as session:  # a cheap read first: SQLite's write lock only on a turn
        due = (
            session.execute(select(Job.id).where(Job.kind == PERIODIC, Job.key == name, _period_due(now))).first()
            is not None
        )
        missing = not due and session.scalar(select(Job.id).where(Job.kind == PERIODIC, Job.key == name)) is None
    if missing:
        try:
            with session_scope(sessions, write=True) as session:
                enqueue(session, PERIODIC, name, {}, max_attempts=1, run_after=now)
        except IntegrityError:  # another process made it first
            pass
    elif not due:
        return None
    token = secrets.token_hex(16)
    with session_scope(sessions, write=True) as session:
        changed = session.execute(
            update(Job)
            .where(Job.kind == PERIODIC, Job.key == name, _period_due(now))
            .values(
                state="running",
                lease_owner=owner,
                lease_token=token,
                lease_until=now + timedelta(seconds=lease_seconds),
                run_after=now + timedelta(seconds=period_seconds),
                attempts=Job.attempts + 1,
            )
            .returning(Job.id, Job.attempts, Job.payload)
        ).first()
    if changed is None:
        return None
    return Claimed(changed.id, PERIODIC, name, changed.payload, token, changed.attempts, 1)


def _period_due(now: datetime) -> ColumnElement[bool]:
    """Its period over, and nobody holding it (or its holder's lease run out)."""
    return (Job.run_after <= now) & ((Job.state != "running") | (Job.lease_until < now))


def end_period(sessions: sessionmaker[Session], turn: Claimed, *, payload: dict[str, Any] | None = None) -> bool:
    """Hand the periodic task back after this turn (its next period was set by the claim), with
    ``payload`` for the next turn when given (what this one saw)."""
    values: dict[str, Any] = {"state": "queued"} if payload is None else {"state": "queued", "payload": payload}
    with session_scope(sessions, write=True) as session:
        return _end(session, turn, **values)


WORKER = "worker"
"""The kind of a job worker's heartbeat row: its name the key, its lease how long it counts as live."""
STANDING = (PERIODIC, WORKER, "webhook")
"""Kinds whose rows stand for good (periodic tasks, heartbeats, webhook targets): no work waits in them."""


def beat(sessions: sessionmaker[Session], owner: str, *, lease_seconds: float) -> None:
    """Note that the job worker ``owner`` is live for ``lease_seconds`` more (its heartbeat row)."""
    until = utcnow() + timedelta(seconds=lease_seconds)
    with session_scope(sessions, write=True) as session:
        changed = session.execute(
            update(Job).where(Job.kind == WORKER, Job.key == owner).values(lease_owner=owner, lease_until=until)
        )
        if not rowcount(changed):
            job = enqueue(session, WORKER, owner, {}, max_attempts=1)
            job.state, job.lease_owner, job.lease_until = "running", owner, until


def retire(sessions: sessionmaker[Session], owner: str) -> None:
    """Remove the heartbeat of ``owner`` (it stops), and those of workers dead for a day or more."""
    with session_scope(sessions, write=True) as session:
        session.execute(
            delete(Job).where(Job.kind == WORKER, (Job.key == owner) | (Job.lease_until < utcnow() - timedelta(days=1)))
        )


def live_on_host(session: Session, host: str, role: str = "worker") -> list[str]:
    """The job workers of ``role`` on ``host`` whose heartbeat is within its lease (their names)."""
    names = session.scalars(
        select(Job.key).where(
            Job.kind == WORKER,
            Job.key.startswith(f"{host}:", autoescape=True),
            Job.key.endswith(f":{role}", autoescape=True),
            Job.lease_until > utcnow(),
        )
    )
    return sorted(names)


@dataclass(frozen=True)
class QueueState:
    """How many job workers are live, and how long the oldest waiting work has waited."""

    workers: int
    oldest_waiting_seconds: float | None


def queue_state(session: Session) -> QueueState:
    """Live workers (a heartbeat within its lease) and the age of the oldest due job or webhook delivery."""
    now = utcnow()
    workers = session.scalar(select(func.count()).where(Job.kind == WORKER, Job.lease_until > now)) or 0
    oldest_job = session.scalar(
        select(func.min(Job.run_after)).where(Job.state == "queued", Job.run_after <= now, Job.kind.not_in(STANDING))
    )
    oldest_delivery = session.scalar(
        select(func.min(WebhookDelivery.next_attempt_at)).where(
            WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now
        )
    )
    waiting = [t for t in (oldest_job, oldest_delivery) if t is not None]
    age = None if not waiting else max(0.0, (now - min(_aware(t) for t in waiting)).total_seconds())
    return QueueState(int(workers), age)


def _aware(moment: datetime) -> datetime:
    """An aggregate over a timestamp column skips its type's conversion on SQLite: read it as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
