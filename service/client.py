"""A typed Python client of the annoplan API, synchronous (:class:`Client`) and asynchronous
(:class:`AsyncClient`), over httpx.

Each method is one endpoint (or a loop of them: pages followed to the end, uploads sent in
chunks); answers are the service's own response models, and an error answer raises an
:class:`ApiError` subclass that carries the API's error body. See docs/integrations.md.

Every method is written once, as a *flow*: a generator that yields the requests (and pauses) it
needs and receives their answers, knowing nothing of I/O. The two clients are its transports: each
runs a flow's requests over its httpx client, blocking or awaited.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import time
import uuid
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

import httpx
from pydantic import BaseModel, TypeAdapter

from service.integrations.scores import ImportSummary
from service.label_studio.connect import ConnectResult
from service.label_studio.sync import SyncResult
from service.schemas.batches import BatchRead, BatchStatus
from service.schemas.certificates import Statement, VerifyResult
from service.schemas.documents import ReliabilityDocument
from service.schemas.items import ItemRead, ItemsUpserted
from service.schemas.labels import LabelRow, LabelsAccepted
from service.schemas.plans import PlanRead
from service.schemas.projects import ProjectRead
from service.schemas.raters import RaterRead
from service.schemas.report import Report

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")

CHUNK_ROWS = 5_000
"""Rows per upload request (the service's own limit, ``max_rows``, is 100,000 by default)."""


class ApiError(Exception):
    """An error answer: its HTTP ``status``, the API's ``error`` code, ``detail`` and whole ``body``, and the
    ``response`` itself (its request, headers and text) when it came over HTTP."""

    def __init__(self, status: int, body: dict[str, Any], response: httpx.Response | None = None):
        self.status = status
        self.body = body
        self.response = response
        self.error = str(body.get("error", ""))
        self.detail = str(body.get("detail", ""))
        super().__init__(f"{status} {self.error}: {self.detail}")


class Unauthorized(ApiError):
    """401: no key, or an unknown or revoked one."""


class Forbidden(ApiError):
    """403: the key's role may not do this."""


class NotFound(ApiError):
    """404: no such project (or not this key's), item, rater, batch or document."""


class Conflict(ApiError):
    """409: the request contradicts the project's state (a second primary, a kind clash, ...)."""


class TooLarge(ApiError):
    """413: too many rows or too large a body."""


class UnsupportedMediaType(ApiError):
    """415: a body type the endpoint does not read."""


class Invalid(ApiError):
    """422: the request is wrong; ``detail`` names the row or field."""


class ServerError(ApiError):
    """5xx: the service (or something it called) failed."""


_ERRORS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    415: UnsupportedMediaType,
    422: Invalid,
}


def error_of(response: httpx.Response) -> ApiError:
    """The typed exception of an error answer (any other 4xx is an :class:`ApiError`)."""
    try:
        body = response.json()
    except ValueError:
        body = {"error": "unreadable", "detail": response.text[:1000]}
    if not isinstance(body, dict):
        body = {"error": "unreadable", "detail": str(body)[:1000]}
    kind = ServerError if response.status_code >= 500 else _ERRORS.get(response.status_code, ApiError)
    return kind(response.status_code, body, response)


@dataclass(frozen=True)
class Polled(Generic[M]):
    """A conditional read: the ``document`` (``None`` when unchanged since ``etag`` was sent), its ETag,
    and whether it changed."""

    document: M | None
    etag: str | None
    modified: bool


@dataclass
class Labels:
    """Exported labels, with dataframe views when pandas or polars is installed."""

    rows: list[LabelRow] = field(default_factory=list)

    def to_pandas(self) -> Any:
        """The labels as a pandas DataFrame (one column per field of :class:`LabelRow`)."""
        return importlib.import_module("pandas").DataFrame(
            [r.model_dump() for r in self.rows], columns=list(LabelRow.model_fields)
        )

    def to_polars(self) -> Any:
        """The labels as a polars DataFrame."""
        return importlib.import_module("polars").DataFrame(
            [r.model_dump() for r in self.rows], schema=list(LabelRow.model_fields)
        )


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: dict[str, Any] | None = None
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] | None = None


@dataclass(frozen=True)
class _Pause:
    """A wait between two requests of a flow (polling)."""

    seconds: float


Flow = Generator["_Call[Any] | _Pause", Any, T]
"""A method's requests in order: yields each call (and pause), is sent its answer, returns the result."""


def _ask(call: _Call[T]) -> Flow[T]:
    """The flow of one request: its answer read."""
    answer = yield call
    return cast(T, answer)


def _model(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda r: model.model_validate(r.json())


def _page_reader(model: type[M]) -> Callable[[httpx.Response], tuple[list[M], str | None]]:
    adapter = TypeAdapter(list[model])  # type: ignore[valid-type]
    return lambda r: (adapter.validate_python(r.json()["items"]), r.json()["next_cursor"])


def _text(r: httpx.Response) -> str:
    return r.text


def _content(r: httpx.Response) -> bytes:
    return r.content


def _sum_items(parts: Sequence[ItemsUpserted]) -> ItemsUpserted:
    return ItemsUpserted(
        created=sum(p.created for p in parts),
        updated=sum(p.updated for p in parts),
        unchanged=sum(p.unchanged for p in parts),
    )


def _sum_labels(parts: Sequence[LabelsAccepted], label_seq: int | None) -> LabelsAccepted:
    """The chunks' answers as one; ``label_seq`` stays null for an annotator key (the server hides it)."""
    seqs = [s for s in (label_seq, *(p.label_seq for p in parts)) if s is not None]
    return LabelsAccepted(
        accepted=sum(p.accepted for p in parts),
        duplicates=sum(p.duplicates for p in parts),
        label_seq=max(seqs) if seqs else None,
    )


def _chunks(rows: Sequence[T], size: int) -> list[Sequence[T]]:
    return [rows[start : start + size] for start in range(0, len(rows), size)]


def _all(path: str, model: type[M], params: dict[str, Any]) -> Flow[list[M]]:
    """Every row of a paged list, pages followed to the end."""
    rows: list[M] = []
    cursor: str | None = None
    while True:
        query = {**params, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        page, cursor = yield from _ask(_Call("GET", path, _page_reader(model), params=query))
        rows += page
        if cursor is None:
            return rows


def _uploaded(path: str, rows: Sequence[Any], model: type[M], chunk: int) -> Flow[list[M]]:
    """The answers to ``rows`` sent in chunks, each with its own Idempotency-Key (kept by a retry)."""
    key = uuid.uuid4().hex
    answers = []
    for n, part in enumerate(_chunks(rows, chunk)):
        headers = {"Idempotency-Key": f"{key}-{n}"}
        answers.append((yield from _ask(_Call("POST", path, _model(model), json=list(part), headers=headers))))
    return answers


# --------------------------------------------------------------------------- the methods, as flows


def _create_project(name: str, labels: Sequence[str], **settings: Any) -> Flow[ProjectRead]:
    """A new project (admin); ``settings`` are the other fields of the project body."""
    body = {"name": name, "labels": list(labels), **settings}
    return (yield from _ask(_Call("POST", "/projects", _model(ProjectRead), json=body)))


def _projects() -> Flow[list[ProjectRead]]:
    """Every project the key sees."""
    return (yield from _all("/projects", ProjectRead, {}))


def _project(pid: str) -> Flow[ProjectRead]:
    """One project."""
    return (yield from _ask(_Call("GET", f"/projects/{pid}", _model(ProjectRead))))


def _update_project(pid: str, **changes: Any) -> Flow[ProjectRead]:
    """Change a project's settings (``changes`` as the PATCH body)."""
    return (yield from _ask(_Call("PATCH", f"/projects/{pid}", _model(ProjectRead), json=changes)))


def _upsert_items(pid: str, items: Sequence[dict[str, Any]], *, chunk: int = CHUNK_ROWS) -> Flow[ItemsUpserted]:
    """Create or update items in chunks (each with its own Idempotency-Key); the counts summed."""
    return _sum_items((yield from _uploaded(f"/projects/{pid}/items", items, ItemsUpserted, chunk)))


def _items(pid: str) -> Flow[list[ItemRead]]:
    """Every item of a project, in upload order."""
    return (yield from _all(f"/projects/{pid}/items", ItemRead, {}))


def _add_rater(pid: str, external_id: str, kind: str, name: str | None = None) -> Flow[RaterRead]:
    """A new rater: ``kind`` judge, primary or human."""
    body = {"external_id": external_id, "kind": kind, "name": name}
    return (yield from _ask(_Call("POST", f"/projects/{pid}/raters", _model(RaterRead), json=body)))


def _update_rater(pid: str, rid: str, **changes: Any) -> Flow[RaterRead]:
    """Change a rater's name (or kind, before a plan)."""
    return (yield from _ask(_Call("PATCH", f"/projects/{pid}/raters/{rid}", _model(RaterRead), json=changes)))


def _raters(pid: str) -> Flow[list[RaterRead]]:
    """Every rater of a project."""
    return (yield from _all(f"/projects/{pid}/raters", RaterRead, {}))


def _upload_labels(pid: str, rows: Sequence[dict[str, Any]], *, chunk: int = CHUNK_ROWS) -> Flow[LabelsAccepted]:
    """Append labels in chunks, each all-or-nothing with its own Idempotency-Key; the counts summed.

    A chunk that fails raises; the chunks before it stay written (a resubmission of all rows
    writes only what is missing, as duplicates are counted, not written).
    """
    parts = yield from _uploaded(f"/projects/{pid}/labels", rows, LabelsAccepted, chunk)
    return _sum_labels(parts, None if parts else (yield from _project(pid)).label_seq)


def _labels(pid: str, **filters: Any) -> Flow[Labels]:
    """The exported labels (``history``, ``rater``, ``criterion``, ``since_seq`` as the endpoint takes)."""
    return Labels((yield from _all(f"/projects/{pid}/labels", LabelRow, filters)))


def _create_plan(pid: str, **body: Any) -> Flow[PlanRead]:
    """A new plan (the body of ``POST /plan``)."""
    return (yield from _ask(_Call("POST", f"/projects/{pid}/plan", _model(PlanRead), json=body)))


def _plan(pid: str) -> Flow[PlanRead]:
    """The plan in force."""
    return (yield from _ask(_Call("GET", f"/projects/{pid}/plan", _model(PlanRead))))


def _create_batch(pid: str, **body: Any) -> Flow[BatchRead]:
    """The next batch of a rater's planned items (``rater``, ``size``)."""
    return (yield from _ask(_Call("POST", f"/projects/{pid}/batches", _model(BatchRead), json=body)))


def _batch(pid: str, bid: str) -> Flow[BatchStatus]:
    """A batch and how far its rater is through it."""
    return (yield from _ask(_Call("GET", f"/projects/{pid}/batches/{bid}", _model(BatchStatus))))


def _release_batch(pid: str, bid: str) -> Flow[BatchStatus]:
    """End a batch's lease now: its unlabeled items go back to the rater's queue."""
    return (yield from _ask(_Call("POST", f"/projects/{pid}/batches/{bid}/release", _model(BatchStatus))))


def _reliability(pid: str, etag: str | None = None, **params: Any) -> Flow[Polled[ReliabilityDocument]]:
    """The reliability document, or (``etag`` given and nothing changed) ``modified`` false and no document."""

    def read(r: httpx.Response) -> Polled[ReliabilityDocument]:
        if r.status_code == 304:
            return Polled(None, r.headers.get("etag", etag), False)
        return Polled(ReliabilityDocument.model_validate(r.json()), r.headers.get("etag"), True)

    headers = {"If-None-Match": etag} if etag else None
    return (yield from _ask(_Call("GET", f"/projects/{pid}/reliability", read, params=params, headers=headers)))


def _wait_for_reliability(
    pid: str, etag: str | None, *, interval: float = 1.0, timeout: float = 60.0, **params: Any
) -> Flow[Polled[ReliabilityDocument]]:
    """Poll with ``If-None-Match: etag`` every ``interval`` seconds until the document changes
    (or ``timeout`` passes: the last unchanged answer)."""
    deadline = time.monotonic() + timeout
    while True:
        polled = yield from _reliability(pid, etag, **params)
        if polled.modified or time.monotonic() + interval > deadline:
            return polled
        yield _Pause(interval)


def _report(pid: str, **params: Any) -> Flow[Report]:
    """The protocol-aware report."""
    return (yield from _ask(_Call("GET", f"/projects/{pid}/report", _model(Report), params=params)))


def _report_text(pid: str, fmt: str = "html", **params: Any) -> Flow[str]:
    """The report as ``csv`` or ``html`` text."""
    query = {**params, "format": fmt}
    return (yield from _ask(_Call("GET", f"/projects/{pid}/report", _text, params=query)))


def _create_certificate(pid: str, **body: Any) -> Flow[Statement]:
    """A validation certificate of the labels so far (``label_seq``, ``criterion``, ``seed``, ...)."""
    return (yield from _ask(_Call("POST", f"/projects/{pid}/certificates", _model(Statement), json=body)))


def _certificate(pid: str, cid: str) -> Flow[Statement]:
    """A certificate issued before."""
    return (yield from _ask(_Call("GET", f"/projects/{pid}/certificates/{cid}", _model(Statement))))


def _verify_certificate(**body: Any) -> Flow[VerifyResult]:
    """Recompute a certificate from a label export (``certificate``, ``labels``)."""
    return (yield from _ask(_Call("POST", "/certificates/verify", _model(VerifyResult), json=body)))


def _import_file(
    pid: str, source: str, content: bytes, content_type: str = "application/json", **params: Any
) -> Flow[ImportSummary]:
    """Import a file (``source``: ``generic``, ``promptfoo``, ``inspect``, ``langfuse``, ``langsmith``); a generic
    file's ``content_type`` is ``text/csv``, ``application/x-ndjson``, ``application/vnd.apache.parquet`` or JSON."""
    headers = {"content-type": content_type, "Idempotency-Key": uuid.uuid4().hex}
    call = _Call(
        "POST",
        f"/projects/{pid}/import/{source}",
        _model(ImportSummary),
        params=params,
        content=content,
        headers=headers,
    )
    return (yield from _ask(call))


def _export_generic(pid: str) -> Flow[str]:
    """The current labels in the generic long format, as CSV text."""
    return (yield from _ask(_Call("GET", f"/projects/{pid}/export/generic", _text)))


def _export_generic_parquet(pid: str) -> Flow[bytes]:
    """The current labels in the generic long format, as a Parquet file (a server with the ``dataframes`` extra)."""
    params = {"format": "parquet"}
    return (yield from _ask(_Call("GET", f"/projects/{pid}/export/generic", _content, params=params)))


def _sync_label_studio(pid: str, **body: Any) -> Flow[SyncResult]:
    """Reconcile the project with a Label Studio project's snapshot (``url``, ``project``, ``token``, ...)."""
    path = f"/projects/{pid}/integrations/label-studio/sync"
    return (yield from _ask(_Call("POST", path, _model(SyncResult), json=body)))


def _connect_label_studio(pid: str, **body: Any) -> Flow[ConnectResult]:
    """Set a Label Studio project up for the project (``url``, ``project``, ``token``, ``webhook_url``, ...)."""
    path = f"/projects/{pid}/integrations/label-studio/connect"
    return (yield from _ask(_Call("POST", path, _model(ConnectResult), json=body)))


# --------------------------------------------------------------------------- the transports


class _Method(Generic[P, T]):
    """A method of both clients: read from a :class:`Client` it runs its flow and returns the result, from
    an :class:`AsyncClient` it returns a coroutine of it."""

    def __init__(self, flow: Callable[P, Flow[T]]):
        self.flow = flow
        self.__doc__ = flow.__doc__

    @overload
    def __get__(self, client: None, owner: type[Any]) -> _Method[P, T]: ...
    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, client: AsyncClient, owner: type[Any]) -> Callable[P, Coroutine[Any, Any, T]]: ...
    def __get__(self, client: Client | AsyncClient | None, owner: type[Any]) -> Any:
        if client is None:
            return self
        run = client.run
        return functools.wraps(self.flow)(lambda *args, **kwargs: run(self.flow(*args, **kwargs)))


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


class _Methods:
    """The API's methods, written once (see each flow's docstring)."""

    create_project = _Method(_create_project)
    projects = _Method(_projects)
    project = _Method(_project)
    update_project = _Method(_update_project)
    upsert_items = _Method(_upsert_items)
    items = _Method(_items)
    add_rater = _Method(_add_rater)
    update_rater = _Method(_update_rater)
    raters = _Method(_raters)
    upload_labels = _Method(_upload_labels)
    labels = _Method(_labels)
    create_plan = _Method(_create_plan)
    plan = _Method(_plan)
    create_batch = _Method(_create_batch)
    batch = _Method(_batch)
    release_batch = _Method(_release_batch)
    reliability = _Method(_reliability)
    wait_for_reliability = _Method(_wait_for_reliability)
    report = _Method(_report)
    report_text = _Method(_report_text)
    create_certificate = _Method(_create_certificate)
    certificate = _Method(_certificate)
    verify_certificate = _Method(_verify_certificate)
    import_file = _Method(_import_file)
    export_generic = _Method(_export_generic)
    export_generic_parquet = _Method(_export_generic_parquet)
    sync_label_studio = _Method(_sync_label_studio)
    connect_label_studio = _Method(_connect_label_studio)


def _options(call: _Call[Any]) -> dict[str, Any]:
    """The httpx request options of a call."""
    return {"params": call.params, "json": call.json, "content": call.content, "headers": call.headers}


def _answer(r: httpx.Response, call: _Call[T]) -> T:
    if r.status_code >= 400:
        raise error_of(r)
    return call.read(r)


class Client(_Methods):
    """The annoplan API at ``base_url`` with API key ``key``; a request that fails in transport is
    retried ``retries`` times (uploads keep their Idempotency-Key, so a retry never writes twice)."""

    def __init__(
        self,
        base_url: str,
        key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 2,
        http: httpx.Client | None = None,
    ):
        self.retries = retries
        self.http = http or httpx.Client(base_url=base_url, timeout=timeout)
        self.http.headers.update(_headers(key))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def run(self, flow: Flow[T]) -> T:
        """A flow's result, its requests sent one after the other."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, _Pause):
                    time.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(self._send(step))
        except StopIteration as done:
            return cast(T, done.value)

    def _send(self, call: _Call[T]) -> T:
        for attempt in range(self.retries + 1):
            try:
                r = self.http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json,
                    content=call.content,
                    headers=call.headers,
                )
                return _answer(r, call)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
        raise AssertionError("unreachable")


class AsyncClient(_Methods):
    """:class:`Client`'s methods as coroutines, over ``httpx.AsyncClient``."""

    def __init__(
        self,
        base_url: str,
        key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 2,
        http: httpx.AsyncClient | None = None,
    ):
        self.retries = retries
        self.http = http or httpx.AsyncClient(base_url=base_url, timeout=timeout)
        self.http.headers.update(_headers(key))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def run(self, flow: Flow[T]) -> T:
        """A flow's result, its requests awaited one after the other."""
        try:
            step = next(flow)
            while True:
                if isinstance(step, _Pause):
                    await asyncio.sleep(step.seconds)
                    step = flow.send(None)
                else:
                    step = flow.send(await self._send(step))
        except StopIteration as done:
            return cast(T, done.value)

    async def _send(self, call: _Call[T]) -> T:
        for attempt in range(self.retries + 1):
            try:
                r = await self.http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    json=call.json,
                    content=call.content,
                    headers=call.headers,
                )
                return _answer(r, call)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
        raise AssertionError("unreachable")
