"""The dashboard's one-time history replay as job-queue work, off the api processes (issue 32).

A pool-score history with no replay mark (the point at ``label_seq`` 0) is replayed once from the events
(:func:`pool_history`). The job queue's history turn queues it (:func:`queue_replay`, from
:mod:`service.documents.history_keeper`): a job of kind ``history-replay`` per (project, criterion), which a
process that runs the queue (``annoplan worker``, or an api process with ``api_runs_jobs``) claims with a
lease and runs on a thread of its own. A view only reads how far it has come (:func:`replay_state`): a read
queues nothing.
Its progress (events applied of the events to replay) is written to the job's row after each stretch,
with the lease renewed; the replayed points and the mark are stored in the transaction that ends the job,
so the mark is there exactly when the job is done. A worker that dies leaves the replay to the next
claim after its lease runs out (the replay is deterministic: the same points).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from sqlalchemy import select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from planner import optional_float
from planner.decision import validate_judge
from service.core.background import PollingThread
from service.core.db import session_scope
from service.core.settings import Settings
from service.core.sql import driver_rows
from service.data import jobs
from service.data.models import Job, Project, utcnow
from service.matrices.matrix import cell_indices, corpus

KIND = "history-replay"
LEASE_SECONDS = 600.0
"""A replay's lease, renewed at each stretch: the events' read of a project of millions of labels takes
seconds to a minute before the first stretch."""
ATTEMPTS = 3
"""Claims a replay may spend (its worker died, or it failed) before it is failed."""

REPLAY_POINTS = 8
"""Points of a replayed stretch of history, at quantiles of its label events."""

log = logging.getLogger("annoplan.history")


@dataclass
class HistoryReplay:
    """How far the one-time replay of a project's history has come: label events applied of the events to
    replay (``total`` is ``None`` until they are read), and whether it has ended."""

    done: int = 0
    total: int | None = None
    finished: bool = False


def pool_history(
    session: Session,
    project: Project,
    criterion: str,
    *,
    until: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[int, float | None]]:
    """The human-pool score at up to 8 points of the label sequence (through ``until``), replayed from the events,
    at quantiles of the events from the first label of a second human; ``progress(events applied, events)`` is
    called after each stretch."""
    events = driver_rows(
        session,
        "SELECT seq, item_id, rater_id, value FROM label_events WHERE project_id = ? AND criterion = ? AND seq <= ? "
        "ORDER BY seq",
        (project.id, criterion, project.label_seq if until is None else until),
    )
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
            progress(end, len(events))
    return points


def replay_key(project_id: str, criterion: str) -> str:
    """The replay job's key: one per (project, criterion)."""
    return f"{project_id}|{criterion}"


def queue_replay(session: Session, project_id: str, criterion: str, until: int) -> bool:
    """Queue the replay of ``criterion``'s history through ``until`` in the caller's write transaction, unless
    a replay of it is already queued, running or ended; whether this call queued it."""
    key = replay_key(project_id, criterion)
    if session.execute(select(Job.id).where(Job.kind == KIND, Job.key == key)).first() is not None:
        return False
    try:
        with session.begin_nested():  # another turn queued it meanwhile: its row stands, this one is dropped
            jobs.enqueue(
                session,
                KIND,
                key,
                {"project": project_id, "criterion": criterion, "until": until},
                max_attempts=ATTEMPTS,
            )
    except IntegrityError:
        return False
    return True


def replay_state(sessions: sessionmaker[Session], project_id: str, criterion: str) -> HistoryReplay | None:
    """How far the replay of ``criterion``'s history has come, read from its job's row (``finished`` once done
    or failed); ``None`` while no replay is queued. A read: it writes nothing."""
    with session_scope(sessions) as session:
        found = session.execute(
            select(Job.state, Job.payload).where(Job.kind == KIND, Job.key == replay_key(project_id, criterion))
        ).first()
    if found is None:
        return None
    state, payload = found
    return HistoryReplay(int(payload.get("done", 0)), payload.get("total"), state in ("done", "failed"))


def awaited_replay(sessions: sessionmaker[Session], project_id: str, criterion: str, *, wait: float) -> HistoryReplay:
    """:func:`replay_state`, polled until the replay is finished or ``wait`` seconds have passed; not started,
    at once, while none is queued (the history turn has yet to queue it: nothing to wait for)."""
    deadline = time.monotonic() + wait
    replay = replay_state(sessions, project_id, criterion)
    while replay is not None and not replay.finished and time.monotonic() < deadline:
        time.sleep(min(0.05, max(deadline - time.monotonic(), 0.0)))
        replay = replay_state(sessions, project_id, criterion)
    return HistoryReplay() if replay is None else replay


def _write_progress(sessions: sessionmaker[Session], job: jobs.Claimed, done: int, total: int | None) -> None:
    with session_scope(sessions, write=True) as session:
        session.execute(
            update(Job)
            .where(Job.id == job.id, Job.lease_token == job.token, Job.state == "running")
            .values(
                payload={**job.payload, "done": done, "total": total},
                lease_until=utcnow() + timedelta(seconds=LEASE_SECONDS),
            )
        )


def run_replay(sessions: sessionmaker[Session], job: jobs.Claimed) -> bool:
    """Replay the job's history and store its points with the mark as the job ends; whether this worker still
    held it."""
    pid, criterion, until = job.payload["project"], job.payload["criterion"], int(job.payload["until"])

    def progress(done: int, total: int) -> None:
        _write_progress(sessions, job, done, total)

    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        history = pool_history(session, project, criterion, until=until, progress=progress) if project else []
    rows = [{"p": pid, "c": criterion, "s": seq, "v": score} for seq, score in [(0, None), *history]]
    with session_scope(sessions, write=True) as session:
        if not jobs.finish(session, job, result={"points": len(history)}):
            return False
        if project is not None:
            session.execute(
                text(
                    "INSERT INTO pool_scores (project_id, criterion, label_seq, score) VALUES (:p, :c, :s, :v) "
                    "ON CONFLICT DO NOTHING"
                ),
                rows,
            )
    return True


class HistoryReplayer(PollingThread):
    """A job-running process's thread that claims history replays and runs them, one at a time."""

    thread_name = "annoplan-history-replays"

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, *, owner: str) -> None:
        super().__init__(poll_seconds=settings.job_poll_seconds, stop_seconds=10.0, log=log)
        self.sessions = sessions
        self.settings = settings
        self.owner = owner

    def run_once(self) -> int:
        """Claim and run due replays until none is due or the thread stops; how many ended here."""
        ran = 0
        while not self.stopping:
            claimed = [
                job
                for job in jobs.claim(self.sessions, [KIND], owner=self.owner, lease_seconds=LEASE_SECONDS)
                if not job.exhausted
            ]
            if not claimed:
                return ran
            job = claimed[0]
            try:
                ran += run_replay(self.sessions, job)
            except Exception as error:
                log.exception("history replay %s failed", job.key)
                with session_scope(self.sessions, write=True) as session:
                    jobs.retry_or_fail(
                        session,
                        job,
                        f"the replay failed: {type(error).__name__}",
                        base=self.settings.job_retry_base_seconds,
                        cap=self.settings.job_retry_cap_seconds,
                    )
        return ran
