"""Fair sharing within a worker process: how many computations of one project, and of one API key, may
be in flight at once (plans, Label Studio syncs, synchronous simulations), so one project or key cannot
take every slot (docs/operations.md, "Fair sharing"). Past its share a request is a 429 with ``Retry-After``.

A client that asks again at once, ignoring ``Retry-After``, is answered 429 again by
:class:`RefusedAgain` before any routing, key lookup or database work while the project (or key) is still
at its share: a refused request cost as much of the worker as any authenticated request (about
4 ms of CPU), so a loop of them from one project slowed every other project's requests
(bench/fairness.py). That answer comes only after a pause (``ANNOPLAN_REFUSAL_DELAY_SECONDS``) that
costs the worker no CPU: a loop on 429s then sends at most one request per pause and connection,
where it sent hundreds a second, each still parsed and answered by the worker the others share."""

from __future__ import annotations

import asyncio
import hashlib
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from service.core.errors import AppError, error_body

RETRY_AFTER_SECONDS = 5
MAX_REFUSALS = 10_000
"""Refusals remembered per worker at most (keys x routes whose project is at its share)."""


Holder = tuple[str, str]
"""Who holds slots: ``("project", project id)`` or ``("key", API key id)``."""

WHOSE = {"project": "this project", "key": "this key"}


class Slots:
    """At most ``per_project`` holders per project and ``per_key`` per API key at once, in this process: a
    key's share counts its requests in every project it reaches (an admin key's across all of them).
    Computations outside any project (``per_project`` None) are bounded per key only.

    ``every_request``: every request of the routes using these slots takes one (plans, syncs), so that a
    repeat of a refused request would be refused again and :class:`RefusedAgain` may answer it early; not
    so for slots only some requests take (simulations answered at once, large computations): a repeat
    with a smaller or larger body may not need a slot."""

    def __init__(self, what: str, per_project: int | None, per_key: int, *, every_request: bool = True):
        self.what = what
        self.every_request = every_request
        self.limits = {"key": per_key} if per_project is None else {"project": per_project, "key": per_key}
        self._lock = threading.Lock()
        self._held: dict[Holder, int] = {}

    def full(self, holder: Holder) -> bool:
        """Whether the project or key holds all of its slots right now."""
        with self._lock:
            return self._held.get(holder, 0) >= self.limits[holder[0]]

    @contextmanager
    def slot(self, project_id: str | None, key_id: str) -> Iterator[None]:
        """Hold one of the project's and one of the key's slots for the block (a request outside any
        project, or of slots bounded per key only, holds the key's only); 429 :class:`Busy` at once, naming
        which is full, when either is."""
        holders: list[Holder] = [("key", key_id)]
        if project_id is not None and "project" in self.limits:
            holders.insert(0, ("project", project_id))
        with self._lock:
            for holder in holders:
                held, most = self._held.get(holder, 0), self.limits[holder[0]]
                if held >= most:
                    raise Busy(
                        f"{WHOSE[holder[0]]} already has {held} {self.what} in flight (at most {most} at once); "
                        f"retry in {RETRY_AFTER_SECONDS} s",
                        slots=self,
                        holder=holder,
                    )
            for holder in holders:
                self._held[holder] = self._held.get(holder, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                for holder in holders:
                    left = self._held[holder] - 1
                    if left:
                        self._held[holder] = left
                    else:
                        del self._held[holder]


class Busy(AppError):
    """A project or key (or the service) already has as many of these computations in flight as it may."""

    status_code = 429
    code = "too_many_in_flight"

    def __init__(self, detail: str, *, slots: Slots | None = None, holder: Holder | None = None):
        super().__init__(detail)
        self.slots = slots
        self.holder = holder


Refusal = tuple[bytes, str, str]
"""What a refusal is remembered by: a hash of the ``Authorization`` header, the method and the path."""


def refusal_of(authorization: bytes, method: str, path: str) -> Refusal:
    """The key a request is remembered (and found again) by; the header is kept only as its SHA-256."""
    return hashlib.sha256(authorization).digest(), method, path


Share = tuple[Slots, Holder]
"""What refused a request: the slots and the project or key that held all of them."""


class Refusals:
    """The requests of this worker refused with :class:`Busy` for a project's or key's slots, while those stay full."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: dict[Refusal, Share] = {}

    def remember(self, authorization: str | None, method: str, path: str, busy: Busy) -> None:
        """Note that this caller's request was refused for ``busy``'s project or key slots (a refusal for
        another reason, for slots only some requests take, or of a request without a key, is not remembered)."""
        if authorization is None or busy.slots is None or busy.holder is None or not busy.slots.every_request:
            return
        with self._lock:
            if len(self._refused) >= MAX_REFUSALS:
                self._refused = {k: v for k, v in self._refused.items() if v[0].full(v[1])}
            if len(self._refused) < MAX_REFUSALS:
                self._refused[refusal_of(authorization.encode("latin-1"), method, path)] = (busy.slots, busy.holder)

    def still_refused(self, refusal: Refusal) -> Share | None:
        """What refused this request before, if that project or key still holds all its slots; else None (forgotten)."""
        with self._lock:
            if not self._refused:
                return None
            share = self._refused.get(refusal)
            if share is None:
                return None
            if share[0].full(share[1]):
                return share
            del self._refused[refusal]
            return None

    def __bool__(self) -> bool:
        return bool(self._refused)


class RefusedAgain:
    """ASGI middleware: a request refused with :class:`Busy` and sent again by the same key while its project
    (or the key) is still at its share is answered 429 here, before routing, the key's lookup or the database,
    after ``delay`` seconds (an asleep request costs no CPU); if a slot freed meanwhile, it takes the usual way."""

    def __init__(self, app: ASGIApp, refusals: Refusals, delay: float = 0.0):
        self.app = app
        self.refusals = refusals
        self.delay = delay

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.refusals:
            authorization = dict(scope["headers"]).get(b"authorization")
            refusal = None if authorization is None else refusal_of(authorization, scope["method"], scope["path"])
            share = None if refusal is None else self.refusals.still_refused(refusal)
            if refusal is not None and share is not None and self.delay > 0:
                await asyncio.sleep(self.delay)
                share = self.refusals.still_refused(refusal)
            if share is not None:
                await _busy_again(send, share)
                return
        await self.app(scope, receive, send)


async def _busy_again(send: Send, share: Share) -> None:
    slots, (kind, _) = share
    most = slots.limits[kind]
    detail = (
        f"{WHOSE[kind]} still has {most} {slots.what} in flight (at most {most} at once); "
        f"retry in {RETRY_AFTER_SECONDS} s, as Retry-After said"
    )
    body = orjson.dumps(error_body(Busy.code, detail))
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(math.ceil(RETRY_AFTER_SECONDS)).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def install_refusal_memory(app: FastAPI, refusals: Refusals) -> None:
    """Answer :class:`Busy` with the one error body (``Retry-After`` comes from ``SecurityHeaders``), remembering
    a refusal for project slots so that :class:`RefusedAgain` answers its too-early repeats."""

    @app.exception_handler(Busy)
    async def _busy(request: Request, exc: Busy) -> JSONResponse:
        refusals.remember(request.headers.get("authorization"), request.method, request.scope["path"], exc)
        return JSONResponse(error_body(exc.code, exc.detail), exc.status_code)
