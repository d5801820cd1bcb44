"""Heavy computations in child processes, so no request holds a web worker's GIL for long.

Two ways in, one mechanism (a child forked from a ``forkserver`` that has the planner and the
service's computing modules imported, so a start costs milliseconds):

- :func:`off_worker` for the pure computation of a synchronous route (plan creation, fresh
  reliability documents, reports): load the arrays with the session in the request, call
  ``off_worker(cells, compute, arrays...)``, persist the result in the request. Below
  :data:`OFF_WORKER_CELLS` the computation runs in place (small projects stay fast); from it on,
  the request thread waits on a pipe without the GIL while a child computes.
  :func:`off_worker_each` runs independent computations in one child each, at once (a
  document's monitoring beside its other statistics: the request waits for the slowest).
- :func:`run_while_connected` for an async route whose client may leave (``/agreement``, a synchronous
  simulation): the child is killed when the client disconnects, so its work stops at once. :func:`computed`
  chooses for such a route by its work (:data:`service.core.limits.INLINE_WORK`) and holds one of the key's
  slots for large computations while the child runs.
- :func:`on_thread_while_connected` for a route whose work on a thread reads and writes the database around
  its computations (a plan): every :func:`off_worker` child the thread starts is killed when the client
  disconnects, and the thread's next :func:`off_worker` or :func:`ensure_connected` raises :class:`ClientGone`.

Either child ends the moment its web worker ends, even by ``SIGKILL`` (:mod:`service.core.parent_watch`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import traceback
from collections.abc import Callable
from contextvars import ContextVar
from multiprocessing import forkserver
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

import anyio
from starlette.requests import Request
from threadpoolctl import threadpool_limits

from service.core.errors import AppError
from service.core.limits import INLINE_WORK
from service.core.parent_watch import computing_child

T = TypeVar("T")
Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]
"""A computation for :func:`off_worker_each`: the function, its positional and its keyword arguments."""
POLL_SECONDS = 0.1
OFF_WORKER_CELLS = 50_000
"""Label-matrix cells (items x raters) from which :func:`off_worker` computes in a child process."""
_DEPARTURE: ContextVar[threading.Event | None] = ContextVar("departure", default=None)
"""Set, in the thread :func:`on_thread_while_connected` runs, when its request's client has disconnected."""

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(
    [
        "numpy",
        "scipy.optimize",
        "scipy.stats",
        "planner",
        "service.planning.plans",
        "service.simulations.jobs",
        "service.documents.reliability",
        "service.reporting.report",
    ]
)


def prestart() -> None:
    """Start the forkserver now (its imports take seconds of CPU), so the first computation of a starting
    worker does not wait for them; without it the first :func:`off_worker` call starts it."""
    forkserver.ensure_running()


class ComputationLost(AppError):
    """A child computation ended without a result (killed, out of memory): the request failed, retry later."""

    status_code = 503
    code = "computation_lost"


class ClientGone(Exception):
    """The client disconnected before the result was ready; nobody is left to answer."""


def _call(
    out: Connection, worker_pid: int, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    computing_child(worker_pid)  # its parent is the forkserver: it would outlive a killed worker
    try:
        # One BLAS thread: a document's children run side by side, and a multithreaded BLAS
        # spent more CPU than it saved on their small products (bench/document_children.py).
        with threadpool_limits(1):
            result = fn(*args, **kwargs)
        out.send((True, result))
    except BaseException as exc:  # sent to the parent, which raises it there
        out.send((False, (exc, traceback.format_exc())))
    finally:
        out.close()


def _started(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[BaseProcess, Connection]:
    """A child computing ``fn(*args, **kwargs)`` and the end of the pipe its outcome arrives on."""
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_call, args=(sender, os.getpid(), fn, args, kwargs), daemon=True)
    child.start()
    sender.close()
    return child, receiver


def _outcome(ok: bool, value: Any) -> Any:
    """The child's result, or its exception raised here (the child's traceback as its cause)."""
    if not ok:
        exc, where = value
        raise exc from RuntimeError(where)
    return value


def _ended_without_result(child: BaseProcess) -> ComputationLost:
    return ComputationLost(
        f"the computation's process ended without a result (exit code {child.exitcode}); retry later"
    )


def off_worker(cells: int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``: in place below :data:`OFF_WORKER_CELLS` ``cells``, else in a child process.

    ``fn`` must be a pure function of picklable arguments (numpy arrays, dataclasses, pydantic
    models; no session), importable in the child. Its exceptions are raised here.
    """
    result: T = off_worker_each(cells, (fn, args, kwargs))[0]
    return result


def off_worker_each(cells: int, *calls: Call) -> list[Any]:
    """The result of each ``(fn, args, kwargs)`` of ``calls``, as :func:`off_worker` computes one: in place one
    after the other below :data:`OFF_WORKER_CELLS` ``cells``, else each in its own child process, all at once.

    The first exception is raised here (:class:`ComputationLost`, a 503, for a child that ended
    without a result), and the other children are killed; under :func:`on_thread_while_connected`
    :class:`ClientGone` once the client has left (checked first, and every :data:`POLL_SECONDS` while
    children compute).
    """
    ensure_connected()
    if cells < OFF_WORKER_CELLS:
        return [fn(*args, **kwargs) for fn, args, kwargs in calls]
    started: list[tuple[BaseProcess, Connection]] = []
    results: dict[int, Any] = {}
    try:
        for fn, args, kwargs in calls:
            started.append(_started(fn, args, kwargs))
        waiting = dict(enumerate(started))
        while waiting:
            # in the OS, not holding the GIL
            ready_now = wait([receiver for _, receiver in waiting.values()], timeout=POLL_SECONDS)
            ensure_connected()
            for ready in ready_now:
                k = next(k for k, (_, receiver) in waiting.items() if receiver is ready)
                child, receiver = waiting.pop(k)
                try:
                    ok, value = receiver.recv()
                except EOFError:
                    child.join()
                    raise _ended_without_result(child) from None
                results[k] = _outcome(ok, value)
    finally:
        for child, receiver in started:
            receiver.close()
            if len(results) < len(calls) and child.is_alive():  # left early: nobody waits for it
                child.kill()
            child.join()
    return [results[k] for k in range(len(calls))]


async def run_while_connected(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a child process; :class:`ClientGone` if the client leaves first."""
    child, receiver = await asyncio.to_thread(_started, fn, args, kwargs)
    try:
        while not receiver.poll():
            if await request.is_disconnected():
                raise ClientGone
            if not child.is_alive() and not receiver.poll():
                raise _ended_without_result(child)
            await asyncio.sleep(POLL_SECONDS)
        ok, value = receiver.recv()
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        await asyncio.to_thread(child.join)
    result: T = _outcome(ok, value)
    return result


def ensure_connected() -> None:
    """Nothing while the client of the request :func:`on_thread_while_connected` runs this thread for is
    connected (or outside such a thread); :class:`ClientGone` once it has left."""
    gone = _DEPARTURE.get()
    if gone is not None and gone.is_set():
        raise ClientGone


async def on_thread_while_connected(
    request: Request, fn: Callable[..., T], /, *args: Any, limiter: anyio.CapacityLimiter | None = None
) -> T:
    """``fn(*args)`` on a thread (``limiter``'s), watching ``request``'s client: once it disconnects, the
    children of the thread's :func:`off_worker` calls are killed within :data:`POLL_SECONDS` and its next
    :func:`off_worker` or :func:`ensure_connected` raises :class:`ClientGone`, which is raised here.
    A computation the thread runs in place (below :data:`OFF_WORKER_CELLS`) ends before it is noticed."""
    gone = threading.Event()

    async def watch() -> None:
        while not await request.is_disconnected():
            await asyncio.sleep(POLL_SECONDS)
        gone.set()

    watcher = asyncio.create_task(watch())
    token = _DEPARTURE.set(gone)  # the thread runs in a copy of this context
    try:
        return await anyio.to_thread.run_sync(fn, *args, limiter=limiter)
    finally:
        _DEPARTURE.reset(token)
        watcher.cancel()


async def computed(request: Request, key_id: str, work: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: in a thread up to :data:`INLINE_WORK` units of ``work``; past it in a child process that
    holds one of the key's large-computation slots while it runs (429 ``Busy`` past the key's share,
    ``ANNOPLAN_COMPUTATIONS_PER_KEY``) and is killed when the client leaves (:class:`ClientGone`)."""
    if work <= INLINE_WORK:
        return await asyncio.to_thread(fn, *args)
    with request.app.state.computation_slots.slot(None, key_id):
        return await run_while_connected(request, fn, *args)
