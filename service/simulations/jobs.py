"""Simulation jobs (docs/method.md §6): the run itself, the process pool that runs large ones, and liveness.

A large simulation is a ``simulations`` row plus a task in this server process's pool. The
pool is started lazily at the first job (``spawn`` context: no fork of a threaded server)
and sized by ``simulation_workers``; the app's shutdown stops it (:meth:`JobRunner.shutdown`), and its
processes end by themselves when the server process is killed (:mod:`service.core.parent_watch`).
The child opens its own engine from the database URL, marks the row ``running``, writes
``done``/``total`` (grid cells) at most once a second, and stores the result or the error.

Liveness: while a job is queued or running, a daemon thread of the server process that
holds it renews ``params["alive_at"]`` every ``HEARTBEAT_SECONDS``. A job whose renewal is
older than ``STALE_AFTER`` belongs to a server that died (its queue is gone with it), so it
is marked failed: at every submission, before counting the jobs in flight for the 429
bound, and when it is read. A heartbeat is used rather than a fixed run-time limit because
a queued job may legitimately wait behind others, and a long grid may legitimately run
for minutes; neither says the job is lost, a silent owner does.
"""

from __future__ import annotations

import logging
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from planner.simulate import SimulationResult, replay, simulate
from service.core.db import make_engine, session_scope
from service.core.parent_watch import computing_child
from service.core.sql import rowcount
from service.data.models import Simulation, utcnow
from service.documents.sessions import worker_sessionmaker

ACTIVE = ("queued", "running")
HEARTBEAT_SECONDS = 5.0
STALE_AFTER = timedelta(seconds=60)
PROGRESS_SECONDS = 1.0
STALE_ERROR = "the server running this job stopped before it finished; submit it again"
CANCELLED_ERROR = "cancelled on request (DELETE)"


class JobCancelled(Exception):
    """The job's row left ``running`` (cancelled, or failed as stale) while it ran: stop computing."""


log = logging.getLogger("annoplan")


@dataclass(frozen=True)
class SimulationSpec:
    """A resolved simulation: keyword arguments of ``planner.simulate`` (or ``planner.replay``
    when ``humans`` is set: dense codes ``(n_items, n_humans)``, primary first, and
    ``judges`` ``(n_items, n_judges)``), and the ``alpha_sig`` that defines ``min_rho``."""

    options: dict[str, Any]
    alpha_sig: float
    humans: np.ndarray | None = None
    judges: np.ndarray | None = None

    @property
    def cells(self) -> int:
        """Grid cells: human accuracies x overlap rates x designs x coefficients."""
        p_h = self.options.get("p_h")
        accuracies = 1 if p_h is None or isinstance(p_h, (int, float)) else len(p_h)
        o = self.options
        return accuracies * len(o["rho"]) * len(o["design"]) * len(o["coefficient"])

    @property
    def n_items(self) -> int:
        return int(self.humans.shape[0]) if self.humans is not None else int(self.options["n_items"])

    @property
    def n_raters(self) -> int:
        """Humans plus judges."""
        if self.humans is not None and self.judges is not None:
            return int(self.humans.shape[1] + self.judges.shape[1])
        p_j = self.options["p_j"]
        return int(self.options["n_humans"]) + (1 if isinstance(p_j, (int, float)) else len(p_j))

    @property
    def work(self) -> int:
        """The size bound's measure: trials x grid cells x n_items x raters."""
        return int(self.options["trials"]) * self.cells * self.n_items * self.n_raters


def result_document(result: SimulationResult, alpha_sig: float) -> dict[str, Any]:
    """The result as JSON: settings, cells, and ``min_rho`` for every (design, coefficient, p_h) curve."""
    document = result.as_dict()
    curves = dict.fromkeys((c.design, c.coefficient, c.p_h) for c in result.cells)
    document["min_rho"] = [
        {
            "design": design,
            "coefficient": coefficient,
            "p_h": list(p_h) if isinstance(p_h, tuple) else p_h,
            "alpha_sig": alpha_sig,
            "rho": result.min_rho(alpha_sig, design=design, coefficient=coefficient, p_h=p_h),
        }
        for design, coefficient, p_h in curves
    ]
    return document


def run_simulation(spec: SimulationSpec, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run ``spec`` with the planner and return :func:`result_document` (docs/method.md §6)."""
    options = dict(spec.options)
    seed = options.pop("seed")
    if spec.humans is None:
        result = simulate(**options, rng=seed, progress=progress)
    else:
        result = replay(spec.humans, judges=spec.judges, **options, rng=seed, progress=progress)
    return result_document(result, spec.alpha_sig)


# --- the child process ------------------------------------------------------------------


def _update(sessions: sessionmaker[Session], job_id: str, statuses: tuple[str, ...], **values: Any) -> bool:
    """Set ``values`` on the job if its status is one of ``statuses``; whether it was."""
    with session_scope(sessions, write=True) as session:
        changed = session.execute(
            update(Simulation).where(Simulation.id == job_id, Simulation.status.in_(statuses)).values(**values)
        )
        return bool(rowcount(changed))


def run_job(database_url: str, job_id: str, spec: SimulationSpec) -> None:
    """Pool entry point: run job ``job_id`` and store its progress, then its result or error.

    Nothing is run if the job is no longer queued (for instance marked stale meanwhile), and
    a result arriving after the job was marked failed is dropped.
    """
    engine = make_engine(database_url)
    sessions = worker_sessionmaker(engine)
    try:
        if not _update(sessions, job_id, ("queued",), status="running"):
            return
        last = -math.inf

        def progress(done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if done == total or now - last >= PROGRESS_SECONDS:
                last = now
                if not _update(sessions, job_id, ("running",), done=done, total=total):
                    raise JobCancelled(job_id)  # a cancel (any server's) is seen at the next progress write

        try:
            result = run_simulation(spec, progress)
        except JobCancelled:
            return
        except Exception as exc:  # the job's outcome, not the pool's: store it
            log.exception("simulation %s failed", job_id)
            _update(
                sessions,
                job_id,
                ("running",),
                status="failed",
                error=f"{type(exc).__name__}: {exc}",
                finished_at=utcnow(),
            )
            return
        _update(sessions, job_id, ("running",), status="done", result=result, finished_at=utcnow())
    finally:
        engine.dispose()


# --- the server process -----------------------------------------------------------------


def alive_at(params: dict[str, Any]) -> datetime | None:
    """When the job's owner last renewed it, from its params."""
    try:
        return datetime.fromisoformat(params["alive_at"])
    except (KeyError, TypeError, ValueError):
        return None


def with_heartbeat(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with ``alive_at`` set to now."""
    return {**params, "alive_at": utcnow().isoformat()}


class JobRunner:
    """This server process's pool, the jobs it holds, and the thread that renews them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._held: dict[str, tuple[sessionmaker[Session], dict[str, Any]]] = {}
        self._heartbeat: threading.Thread | None = None
        self._stopping = False

    def holds(self, job_id: str) -> bool:
        """Whether the job is queued or running in this process's pool."""
        with self._lock:
            return job_id in self._held

    def submit(
        self,
        sessions: sessionmaker[Session],
        database_url: str,
        job_id: str,
        params: dict[str, Any],
        spec: SimulationSpec,
        *,
        workers: int,
    ) -> None:
        """Queue a job whose ``queued`` row is committed; the pool starts at the first job."""
        with self._lock:
            self._held[job_id] = (sessions, params)
            if self._heartbeat is None:
                self._heartbeat = threading.Thread(target=self._renew, name="annoplan-sim-heartbeat", daemon=True)
                self._heartbeat.start()
            try:
                try:
                    future = self._executor(workers).submit(run_job, database_url, job_id, spec)
                except BrokenProcessPool:  # a worker died (e.g. out of memory): start a fresh pool
                    self._pool = None
                    future = self._executor(workers).submit(run_job, database_url, job_id, spec)
            except BaseException:
                del self._held[job_id]
                raise
        future.add_done_callback(lambda f: self._finished(job_id, f))

    def shutdown(self) -> None:
        """Stop the pool with the server: queued jobs are cancelled, running ones stopped.

        Both are marked failed here before it returns (the client may submit them again).
        Without this, a job's worker process (and multiprocessing's resource tracker) outlived a
        server stopped with SIGTERM until the job ended.
        """
        with self._lock:
            pool, self._pool = self._pool, None
            if pool is None:
                return
            self._stopping = True
            # Taken now: the pool's callbacks pop the jobs as their workers die, and an update
            # left to them could be cut off by the process exit (the row stayed running).
            held = list(self._held.items())
        # The executor has no public way to stop a running task: end its worker processes.
        workers = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in workers:
            process.terminate()
        for process in workers:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=True)  # its callbacks have all run once it returns
        with self._lock:
            self._stopping = False
        for job_id, (sessions, _) in held:  # recorded here, before the process exits
            try:
                _update(
                    sessions,
                    job_id,
                    ACTIVE,
                    status="failed",
                    error="cancelled: the server shut down",
                    finished_at=utcnow(),
                )
            except Exception:
                log.exception("could not record the cancellation of simulation %s", job_id)

    def _executor(self, workers: int) -> ProcessPoolExecutor:
        if self._pool is None:
            # end_with: a pool worker outlived a SIGKILLed server, computing a job nobody would read
            self._pool = ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=computing_child,
                initargs=(os.getpid(),),
            )
        return self._pool

    def _finished(self, job_id: str, future: Future[None]) -> None:
        with self._lock:
            sessions, _ = self._held.pop(job_id)
            if self._stopping:  # shutdown records the job itself
                return
        error = "cancelled: the server shut down" if future.cancelled() else future.exception()
        if error is None:
            return
        try:
            _update(
                sessions,
                job_id,
                ACTIVE,
                status="failed",
                error=f"the worker process failed: {error}",
                finished_at=utcnow(),
            )
        except Exception:
            log.exception("could not record the failure of simulation %s", job_id)

    def _renew(self) -> None:
        while True:
            time.sleep(HEARTBEAT_SECONDS)
            with self._lock:
                held = list(self._held.items())
            for job_id, (sessions, params) in held:
                try:
                    _update(sessions, job_id, ACTIVE, params=with_heartbeat(params))
                except Exception:
                    log.warning("could not renew simulation %s", job_id, exc_info=True)


RUNNER = JobRunner()


def cancel_job(session: Session, job_id: str) -> bool:
    """Mark a queued or running job failed as cancelled; whether it was still in flight.

    A queued job then never starts; a running one stops at its next progress write (at most
    about a second of computing later, or one grid cell when a cell takes longer).
    """
    changed = session.execute(
        update(Simulation)
        .where(Simulation.id == job_id, Simulation.status.in_(ACTIVE))
        .values(status="failed", error=CANCELLED_ERROR, finished_at=utcnow())
    )
    return bool(rowcount(changed))


def is_stale(job_id: str, status: str, params: dict[str, Any]) -> bool:
    """Whether a queued/running job is held by no live server: not ours, not renewed for ``STALE_AFTER``."""
    if status not in ACTIVE or RUNNER.holds(job_id):
        return False
    seen = alive_at(params)
    return seen is None or seen < utcnow() - STALE_AFTER


def expire_stale(session: Session, *, job_id: str | None = None) -> int:
    """Mark failed the stale jobs (all, or ``job_id``); return how many."""
    stmt = select(Simulation.id, Simulation.status, Simulation.params).where(Simulation.status.in_(ACTIVE))
    if job_id is not None:
        stmt = stmt.where(Simulation.id == job_id)
    stale = [sid for sid, status, params in session.execute(stmt) if is_stale(sid, status, params)]
    if stale:
        session.execute(
            update(Simulation)
            .where(Simulation.id.in_(stale), Simulation.status.in_(ACTIVE))
            .values(status="failed", error=STALE_ERROR, finished_at=utcnow())
        )
    return len(stale)
