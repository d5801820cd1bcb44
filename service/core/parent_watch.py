"""A child process that ends with the web worker that started it, however that worker ends (issue 30).

A computation's child is not the worker's child: a ``forkserver`` child's parent is the forkserver, and
a process pool outlives a worker killed with ``SIGKILL`` (nothing runs the worker's shutdown). Without a
watch, such a child kept computing for minutes with nobody to answer, and held its memory. The watch is a
``pidfd`` of the worker, readable the moment it exits: no polling, and a reused pid cannot fool it.
"""

from __future__ import annotations

import os
import select
import threading

CHILD_NICENESS = 10
"""How much lower a computing child's CPU priority is than its worker's: requests the worker serves meanwhile
(other projects' batches and labels) get the cores first, the computation what is left (bench/fairness.py)."""

ORPHAN_EXIT_CODE = 70
"""The exit status of a child that ended because the worker it computed for had ended."""


def computing_child(worker_pid: int) -> None:
    """In a child process started to compute for worker ``worker_pid``: yield the CPU to requests, end with it."""
    os.nice(CHILD_NICENESS)
    end_with(worker_pid)


def end_with(worker_pid: int) -> None:
    """In a child process: end this process as soon as process ``worker_pid`` ends (at once if it already has)."""
    try:
        worker = os.pidfd_open(worker_pid)
    except ProcessLookupError:
        os._exit(ORPHAN_EXIT_CODE)
    threading.Thread(target=_exit_when_ended, args=(worker,), name="annoplan-parent-watch", daemon=True).start()


def _exit_when_ended(worker: int) -> None:
    select.select([worker], [], [])
    os._exit(ORPHAN_EXIT_CODE)  # no cleanup: nothing this process holds is wanted by anyone
