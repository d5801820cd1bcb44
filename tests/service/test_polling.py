"""The background thread of the webhook sender and the strata warmer: a round at start, another at
once when poked (not at the 60 s poll), a failed round logged and outlived, nothing left after stop."""

from __future__ import annotations

import logging
import threading

import pytest

from service.core.background import PollingThread


class Rounds(PollingThread):
    thread_name = "annoplan-test-rounds"

    def __init__(self) -> None:
        super().__init__(poll_seconds=60, stop_seconds=5, log=logging.getLogger("annoplan.test"))
        self.done = threading.Semaphore(0)
        self.rounds = 0

    def run_once(self) -> None:
        self.rounds += 1
        self.done.release()
        if self.rounds == 1:
            raise OSError("the database restarted")


def test_rounds_at_start_and_when_poked_outliving_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    rounds = Rounds()
    rounds.start()
    try:
        assert rounds.done.acquire(timeout=5)  # the first round, at start: it fails
        rounds.poke()
        assert rounds.done.acquire(timeout=5)  # poked: the next round at once, not after 60 s
    finally:
        rounds.stop()
    assert rounds.rounds == 2 and rounds.stopping
    assert "annoplan-test-rounds: a round failed" in caplog.text and "the database restarted" in caplog.text
    assert not [t for t in threading.enumerate() if t.name == "annoplan-test-rounds"]
