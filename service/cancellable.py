"""Heavy computations that stop when their client leaves, and never hold a web worker's GIL.

:func:`run_while_connected` runs a pure function in a child process (forked from a
``forkserver`` that has the planner imported, so a start costs milliseconds) and waits for it
without blocking the event loop. When the client disconnects, or the app shuts down, the
child is killed: its work stops at once instead of running on for nobody.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from starlette.requests import Request

T = TypeVar("T")
POLL_SECONDS = 0.1

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["numpy", "scipy.stats", "planner.agreement"])


class ClientGone(Exception):
    """The client disconnected before the result was ready; nobody is left to answer."""


def _call(out: Connection, fn: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> None:
    try:
        out.send((True, fn(*args, **kwargs)))
    except BaseException as exc:  # sent to the parent, which raises it there
        out.send((False, (exc, traceback.format_exc())))
    finally:
        out.close()


async def run_while_connected(request: Request, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a child process; :class:`ClientGone` if the client leaves first."""
    receiver, sender = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_call, args=(sender, fn, args, kwargs), daemon=True)
    await asyncio.to_thread(child.start)
    sender.close()
    try:
        while not receiver.poll():
            if await request.is_disconnected():
                raise ClientGone
            if not child.is_alive() and not receiver.poll():
                raise RuntimeError(f"the computation's process ended without a result (exit code {child.exitcode})")
            await asyncio.sleep(POLL_SECONDS)
        ok, value = receiver.recv()
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        await asyncio.to_thread(child.join)
    if not ok:
        exc, where = value
        raise exc from RuntimeError(where)
    return value
