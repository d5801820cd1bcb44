"""Simulation jobs (docs/method.md §6): the run itself, and the runner that takes them off the job queue.

A large simulation is a ``simulations`` row (what the client polls) and a ``jobs`` row of
kind ``simulation`` (service.data.jobs) written in one transaction. A job worker (an
``annoplan worker`` process, or an api process when ``api_runs_jobs``) claims the job with
a lease and runs it in its process pool (``spawn`` context: no fork of a threaded server),
sized by ``simulation_workers``. The child opens its own engine from the database URL, marks
the simulation ``running``, writes ``done``/``total`` (grid cells) at most once a second,
and stores the result or the error; each of its writes is fenced by the lease's token, so a
child whose worker lost the job (cancelled, or taken over) changes nothing.

Liveness is the lease: the runner renews it every third of ``job_lease_seconds``. A worker
that dies renews nothing, so once its lease runs out another worker's next claim takes the
job over and runs it again from the start (the run is seeded: the same result), at most
``simulation_attempts`` times in all. A child whose worker died ends with it
(:mod:`service.core.parent_watch`). A worker stopped with SIGTERM or SIGINT gives its jobs
back instead (queued at once, the attempt not counted), so a redeploy costs no attempt.
"""

from __future__ import annotations

import base64
import json
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
from functools import partial
from typing import Any

import numpy as np
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from planner.simulate import SimulationResult, replay, simulate
from service.core.background import PollingThread
from service.core.db import make_engine, session_scope
from service.core.parent_watch import computing_child
from service.core.settings import Settings
from service.core.sql import rowcount
from service.data import jobs
from service.data.models import Simulation, utcnow
from service.documents.sessions import worker_sessionmaker

ACTIVE = ("queued", "running")
KIND = "simulation"
PROGRESS_SECONDS = 1.0
CANCELLED_ERROR = "cancelled on request (DELETE)"


class JobCancelled(Exception):
    """The job left this child while it ran (cancelled, taken over, or its worker died): stop computing."""


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


# --- the job's payload ------------------------------------------------------------------


def _array(values: np.ndarray | None) -> dict[str, Any] | None:
    if values is None:
        return None
    data = base64.b64encode(values.tobytes()).decode()
    return {"dtype": str(values.dtype), "shape": list(values.shape), "data": data}


def _from_array(stored: dict[str, Any] | None) -> np.ndarray | None:
    if stored is None:
        return None
    flat = np.frombuffer(base64.b64decode(stored["data"]), dtype=stored["dtype"])
    return flat.reshape(stored["shape"]).copy()


def _plain(value: Any) -> Any:
    """``value`` as JSON types (numpy scalars become Python numbers)."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if isinstance(v, np.generic) else str(v)))


def spec_payload(spec: SimulationSpec) -> dict[str, Any]:
    """The job row's payload: everything a worker on another host needs to run ``spec``."""
    return {
        "options": _plain(spec.options),
        "alpha_sig": spec.alpha_sig,
        "humans": _array(spec.humans),
        "judges": _array(spec.judges),
    }


def spec_from_payload(payload: dict[str, Any]) -> SimulationSpec:
    """The spec :func:`spec_payload` stored."""
    return SimulationSpec(
        payload["options"], payload["alpha_sig"], _from_array(payload["humans"]), _from_array(payload["judges"])
    )


def enqueue_simulation(session: Session, sim_id: str, spec: SimulationSpec, *, attempts: int) -> None:
    """Queue the job of the simulation ``sim_id`` in the caller's transaction (the one adding its row)."""
    jobs.enqueue(session, KIND, sim_id, spec_payload(spec), max_attempts=attempts)


# --- the child process ------------------------------------------------------------------


def _update(session: Session, job: jobs.Claimed, statuses: tuple[str, ...], **values: Any) -> bool:
    """Set ``values`` on the simulation if its status is one of ``statuses`` and ``job``'s lease holds; whether so."""
    changed = session.execute(
        update(Simulation)
        .where(Simulation.id == job.key, Simulation.status.in_(statuses), jobs.held(KIND, job.key, job.token))
        .values(**values)
    )
    return bool(rowcount(changed))


def run_job(database_url: str, job: jobs.Claimed, spec: SimulationSpec, owner_pid: int) -> None:
    """Pool entry point: run the claimed ``job`` and store its progress, then its result or error.

    Nothing is run if the simulation is no longer queued or running, or the lease is gone;
    progress stops being computed once either happens, or once the worker process
    ``owner_pid`` that claimed the job has died (its lease will run out and another worker
    takes the job over).
    """
    engine = make_engine(database_url)
    sessions = worker_sessionmaker(engine)

    def write(statuses: tuple[str, ...], **values: Any) -> bool:
        with session_scope(sessions, write=True) as session:
            return _update(session, job, statuses, **values)

    try:
        if not write(ACTIVE, status="running", done=0, result=None, error=None):
            return
        last = -math.inf

        def progress(done: int, total: int) -> None:
            nonlocal last
            if os.getppid() != owner_pid:
                raise JobCancelled(job.key)
            now = time.monotonic()
            if done == total or now - last >= PROGRESS_SECONDS:
                last = now
                if not write(("running",), done=done, total=total):
                    raise JobCancelled(job.key)  # a cancel or a takeover is seen at the next progress write

        try:
            result = run_simulation(spec, progress)
        except JobCancelled:
            return
        except Exception as exc:  # the job's outcome, not the pool's: store it
            log.exception("simulation %s failed", job.key)
            error = f"{type(exc).__name__}: {exc}"
            with session_scope(sessions, write=True) as session:
                if _update(session, job, ("running",), status="failed", error=error, finished_at=utcnow()):
                    jobs.fail(session, job, error)
            return
        with session_scope(sessions, write=True) as session:
            if _update(session, job, ("running",), status="done", result=result, finished_at=utcnow()):
                jobs.finish(session, job)
    finally:
        engine.dispose()


# --- the worker process -----------------------------------------------------------------


def _fail_exhausted(session: Session, spent: list[jobs.Claimed]) -> None:
    session.execute(
        update(Simulation)
        .where(Simulation.id.in_([job.key for job in spent]), Simulation.status.in_(ACTIVE))
        .values(
            status="failed",
            error=jobs.EXHAUSTED_ERROR.format(attempts=spent[0].attempts),
            finished_at=utcnow(),
        )
    )


class SimulationRunner(PollingThread):
    """One job worker's simulations: claims due ones while its pool has room, renews their leases."""

    thread_name = "annoplan-simulations"

    def __init__(self, sessions: sessionmaker[Session], settings: Settings, *, owner: str) -> None:
        self.lease_seconds = settings.job_lease_seconds
        super().__init__(poll_seconds=min(settings.job_poll_seconds, self.lease_seconds / 3), stop_seconds=10, log=log)
        self.sessions = sessions
        self.settings = settings
        self.owner = owner
        self.slots = settings.simulation_workers
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self._held: dict[int, jobs.Claimed] = {}
        self._renewed = -math.inf
        self._shutting_down = False

    def held(self) -> list[jobs.Claimed]:
        """The jobs this runner holds now."""
        with self._lock:
            return list(self._held.values())

    def run_once(self) -> int:
        """Renew the leases and this worker's heartbeat when a third of a lease has passed, then claim
        what the pool has room for; how many."""
        now = time.monotonic()
        if now - self._renewed >= self.lease_seconds / 3:
            self._renewed = now
            jobs.beat(self.sessions, self.owner, lease_seconds=self.lease_seconds)
            jobs.renew(self.sessions, self.held(), lease_seconds=self.lease_seconds)
        with self._lock:
            free = self.slots - len(self._held)
        claimed = jobs.claim(
            self.sessions,
            [KIND],
            owner=self.owner,
            lease_seconds=self.lease_seconds,
            limit=free,
            on_exhausted=_fail_exhausted,
        )
        started = 0
        for job in claimed:
            if not job.exhausted:
                self._start(job)
                started += 1
        return started

    def _start(self, job: jobs.Claimed) -> None:
        spec = spec_from_payload(job.payload)
        task = partial(run_job, self.settings.database_url, job, spec, os.getpid())
        with self._lock:
            self._held[job.id] = job
            try:
                try:
                    future = self._executor().submit(task)
                except BrokenProcessPool:  # a worker died (e.g. out of memory): start a fresh pool
                    self._pool = None
                    future = self._executor().submit(task)
            except BaseException:
                del self._held[job.id]
                raise
        future.add_done_callback(lambda f: self._finished(job, f))

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # computing_child: a pool process ends with its worker (a SIGKILLed worker left it computing a job
            # another worker takes over) and computes at a lower priority than the requests
            self._pool = ProcessPoolExecutor(
                self.slots,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=computing_child,
                initargs=(os.getpid(),),
            )
        return self._pool

    def _finished(self, job: jobs.Claimed, future: Future[None]) -> None:
        with self._lock:
            self._held.pop(job.id, None)
            if self._shutting_down:  # stop() records the job itself
                return
        error = None if future.cancelled() else future.exception()
        if error is not None:  # the pool, not the run, failed (the run's own errors are stored by the child)
            message = f"the worker process failed: {error}"
            settings = self.settings
            try:
                with session_scope(self.sessions, write=True) as session:
                    state = jobs.retry_or_fail(
                        session,
                        job,
                        message,
                        base=settings.job_retry_base_seconds,
                        cap=settings.job_retry_cap_seconds,
                    )
                    if state == "failed":
                        _update_any(session, job.key, status="failed", error=message, finished_at=utcnow())
                    elif state == "queued":
                        _update_any(session, job.key, status="queued", done=0)
            except Exception:
                log.exception("could not record the failure of simulation %s", job.key)
        self.poke()

    def stop(self) -> None:
        """Stop claiming, then stop the pool with the process: the jobs it held are given back.

        Each is queued again at once with its attempt not counted (this worker stopped; the job
        did not fail), and its simulation shows ``queued`` again: the next worker to claim runs
        it from the start (seeded: the same result). They are recorded here before it returns.
        Without stopping the pool, a job's worker process (and multiprocessing's resource
        tracker) outlived a worker stopped with SIGTERM until the job ended.
        """
        super().stop()
        try:
            jobs.retire(self.sessions, self.owner)
        except Exception:  # its heartbeat runs out instead
            log.exception("could not remove the heartbeat of %s", self.owner)
        with self._lock:
            pool, self._pool = self._pool, None
            if pool is None:
                return
            self._shutting_down = True
            # Taken now: the pool's callbacks pop the jobs as their workers die, and an update
            # left to them could be cut off by the process exit (the row stayed running).
            held = list(self._held.values())
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
            self._shutting_down = False
        for job in held:  # recorded here, before the process exits
            try:
                with session_scope(self.sessions, write=True) as session:
                    if jobs.release(session, job):
                        _update_any(session, job.key, status="queued", done=0)
            except Exception:  # its lease runs out instead, and the next claim takes it over
                log.exception("could not give back simulation %s", job.key)


def _update_any(session: Session, sim_id: str, **values: Any) -> None:
    """Set ``values`` on the simulation if it is still queued or running (its job's fate was just written)."""
    session.execute(update(Simulation).where(Simulation.id == sim_id, Simulation.status.in_(ACTIVE)).values(**values))


def cancel_job(session: Session, sim_id: str) -> bool:
    """Mark a queued or running simulation failed as cancelled, and its job; whether it was still in flight.

    A queued job then never starts; a running one stops at its next progress write (at most
    about a second of computing later, or one grid cell when a cell takes longer).
    """
    changed = session.execute(
        update(Simulation)
        .where(Simulation.id == sim_id, Simulation.status.in_(ACTIVE))
        .values(status="failed", error=CANCELLED_ERROR, finished_at=utcnow())
    )
    jobs.cancel(session, KIND, sim_id, CANCELLED_ERROR)
    return bool(rowcount(changed))
