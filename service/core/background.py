"""A worker's background thread that does one round of work every few seconds, or at once when poked,
until the worker's lifespan stops it (the webhook sender, the modal strata warmer, the table
statistics keeper)."""

from __future__ import annotations

import logging
import threading


class PollingThread:
    """:meth:`run_once` in a daemon thread every ``poll_seconds``, or at once after :meth:`poke`, until
    :meth:`stop`. A failed round is logged and the next one runs: the thread outlives a database restart."""

    thread_name = "annoplan-polling"

    def __init__(self, *, poll_seconds: float, stop_seconds: float, log: logging.Logger) -> None:
        self.poll_seconds = poll_seconds
        self.stop_seconds = stop_seconds
        self.log = log
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> object:
        """One round of the thread's work."""
        raise NotImplementedError

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called: a long round ends early."""
        return self._stop.is_set()

    def poke(self) -> None:
        """Run the next round now."""
        self._wake.set()

    def start(self) -> None:
        """Run rounds in a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the thread after the round in progress, waiting for it at most ``stop_seconds``."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.stop_seconds)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.run_once()
            except Exception:
                self.log.exception("%s: a round failed", self.thread_name)
            self._wake.wait(self.poll_seconds)
