"""Fair sharing within a worker process: how many computations of one project may be in flight
at once (plans, Label Studio syncs), so one project cannot take every slot (docs/operations.md,
"Work limits"). Past its share a request is a 429 with ``Retry-After``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from service.core.errors import AppError

RETRY_AFTER_SECONDS = 5


class Busy(AppError):
    """A project (or the service) already has as many of these computations in flight as it may."""

    status_code = 429
    code = "too_many_in_flight"


class ProjectSlots:
    """At most ``per_project`` holders per project at once, in this process."""

    def __init__(self, what: str, per_project: int):
        self.what = what
        self.per_project = per_project
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    @contextmanager
    def slot(self, project_id: str) -> Iterator[None]:
        """Hold one of the project's slots for the block; 429 :class:`Busy` at once when none is free."""
        with self._lock:
            held = self._held.get(project_id, 0)
            if held >= self.per_project:
                raise Busy(
                    f"this project already has {held} {self.what} in flight (at most {self.per_project} at once); "
                    f"retry in {RETRY_AFTER_SECONDS} s"
                )
            self._held[project_id] = held + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._held[project_id] - 1
                if left:
                    self._held[project_id] = left
                else:
                    del self._held[project_id]
