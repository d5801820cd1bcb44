"""A typed Python client of the annoplan API, synchronous (:class:`Client`) and asynchronous
(:class:`AsyncClient`), over httpx.

Each method is one endpoint (or a loop of them: pages followed to the end, uploads sent in
chunks); answers are the service's own response models, and an error answer raises an
:class:`ApiError` subclass that carries the API's error body. See docs/integrations.md.
"""

from __future__ import annotations

import asyncio
import importlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from service.integrations.scores import ImportSummary
from service.schemas import (
    BatchRead,
    BatchStatus,
    ItemRead,
    ItemsUpserted,
    LabelRow,
    LabelsAccepted,
    PlanRead,
    ProjectRead,
    RaterRead,
)
from service.schemas.certificates import Statement, VerifyResult
from service.schemas.documents import ReliabilityDocument
from service.schemas.report import Report

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

CHUNK_ROWS = 5_000
"""Rows per upload request (the service's own limit, ``max_rows``, is 100,000 by default)."""


class ApiError(Exception):
    """An error answer: its HTTP ``status``, the API's ``error`` code, ``detail`` and whole ``body``."""

    def __init__(self, status: int, body: dict[str, Any]):
        self.status = status
        self.body = body
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
    return kind(response.status_code, body)


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


def _model(model: type[M]) -> Callable[[httpx.Response], M]:
    return lambda r: model.model_validate(r.json())


def _page_reader(model: type[M]) -> Callable[[httpx.Response], tuple[list[M], str | None]]:
    adapter = TypeAdapter(list[model])  # type: ignore[valid-type]
    return lambda r: (adapter.validate_python(r.json()["items"]), r.json()["next_cursor"])


def _text(r: httpx.Response) -> str:
    return r.text


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


class _Calls:
    """The requests of every method, shared by the sync and async clients."""

    @staticmethod
    def create_project(body: dict[str, Any]) -> _Call[ProjectRead]:
        return _Call("POST", "/projects", _model(ProjectRead), json=body)

    @staticmethod
    def project(pid: str) -> _Call[ProjectRead]:
        return _Call("GET", f"/projects/{pid}", _model(ProjectRead))

    @staticmethod
    def update_project(pid: str, changes: dict[str, Any]) -> _Call[ProjectRead]:
        return _Call("PATCH", f"/projects/{pid}", _model(ProjectRead), json=changes)

    @staticmethod
    def page(
        path: str, model: type[M], cursor: str | None, params: dict[str, Any]
    ) -> _Call[tuple[list[M], str | None]]:
        query = {**params, "limit": 1000, **({"cursor": cursor} if cursor else {})}
        return _Call("GET", path, _page_reader(model), params=query)

    @staticmethod
    def add_rater(pid: str, body: dict[str, Any]) -> _Call[RaterRead]:
        return _Call("POST", f"/projects/{pid}/raters", _model(RaterRead), json=body)

    @staticmethod
    def update_rater(pid: str, rid: str, changes: dict[str, Any]) -> _Call[RaterRead]:
        return _Call("PATCH", f"/projects/{pid}/raters/{rid}", _model(RaterRead), json=changes)

    @staticmethod
    def upload(path: str, rows: Sequence[Any], model: type[M], key: str) -> _Call[M]:
        return _Call("POST", path, _model(model), json=list(rows), headers={"Idempotency-Key": key})

    @staticmethod
    def create_plan(pid: str, body: dict[str, Any]) -> _Call[PlanRead]:
        return _Call("POST", f"/projects/{pid}/plan", _model(PlanRead), json=body)

    @staticmethod
    def plan(pid: str) -> _Call[PlanRead]:
        return _Call("GET", f"/projects/{pid}/plan", _model(PlanRead))

    @staticmethod
    def create_batch(pid: str, body: dict[str, Any]) -> _Call[BatchRead]:
        return _Call("POST", f"/projects/{pid}/batches", _model(BatchRead), json=body)

    @staticmethod
    def batch(pid: str, bid: str) -> _Call[BatchStatus]:
        return _Call("GET", f"/projects/{pid}/batches/{bid}", _model(BatchStatus))

    @staticmethod
    def release_batch(pid: str, bid: str) -> _Call[BatchStatus]:
        return _Call("POST", f"/projects/{pid}/batches/{bid}/release", _model(BatchStatus))

    @staticmethod
    def reliability(pid: str, etag: str | None, params: dict[str, Any]) -> _Call[Polled[ReliabilityDocument]]:
        def read(r: httpx.Response) -> Polled[ReliabilityDocument]:
            if r.status_code == 304:
                return Polled(None, r.headers.get("etag", etag), False)
            return Polled(ReliabilityDocument.model_validate(r.json()), r.headers.get("etag"), True)

        headers = {"If-None-Match": etag} if etag else None
        return _Call("GET", f"/projects/{pid}/reliability", read, params=params, headers=headers)

    @staticmethod
    def report(pid: str, params: dict[str, Any]) -> _Call[Report]:
        return _Call("GET", f"/projects/{pid}/report", _model(Report), params=params)

    @staticmethod
    def report_text(pid: str, fmt: str, params: dict[str, Any]) -> _Call[str]:
        return _Call("GET", f"/projects/{pid}/report", _text, params={**params, "format": fmt})

    @staticmethod
    def create_certificate(pid: str, body: dict[str, Any]) -> _Call[Statement]:
        return _Call("POST", f"/projects/{pid}/certificates", _model(Statement), json=body)

    @staticmethod
    def certificate(pid: str, cid: str) -> _Call[Statement]:
        return _Call("GET", f"/projects/{pid}/certificates/{cid}", _model(Statement))

    @staticmethod
    def verify_certificate(body: dict[str, Any]) -> _Call[VerifyResult]:
        return _Call("POST", "/certificates/verify", _model(VerifyResult), json=body)

    @staticmethod
    def import_file(
        pid: str, source: str, content: bytes, content_type: str, params: dict[str, Any]
    ) -> _Call[ImportSummary]:
        return _Call(
            "POST",
            f"/projects/{pid}/import/{source}",
            _model(ImportSummary),
            params=params,
            content=content,
            headers={"content-type": content_type, "Idempotency-Key": uuid.uuid4().hex},
        )

    @staticmethod
    def export_generic(pid: str) -> _Call[str]:
        return _Call("GET", f"/projects/{pid}/export/generic", _text)


def _chunks(rows: Sequence[T], size: int) -> list[Sequence[T]]:
    return [rows[start : start + size] for start in range(0, len(rows), size)]


def _headers(key: str | None, headers: dict[str, str] | None) -> dict[str, str]:
    return {**({"Authorization": f"Bearer {key}"} if key else {}), **(headers or {})}


class Client:
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
        self.http.headers.update(_headers(key, None))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def _run(self, call: _Call[T]) -> T:
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
                break
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
        if r.status_code >= 400:
            raise error_of(r)
        return call.read(r)

    def _all(self, path: str, model: type[M], **params: Any) -> list[M]:
        rows: list[M] = []
        cursor: str | None = None
        while True:
            page, cursor = self._run(_Calls.page(path, model, cursor, params))
            rows += page
            if cursor is None:
                return rows

    def create_project(self, name: str, labels: Sequence[str], **settings: Any) -> ProjectRead:
        """A new project (admin); ``settings`` are the other fields of the project body."""
        return self._run(_Calls.create_project({"name": name, "labels": list(labels), **settings}))

    def projects(self) -> list[ProjectRead]:
        """Every project the key sees."""
        return self._all("/projects", ProjectRead)

    def project(self, pid: str) -> ProjectRead:
        return self._run(_Calls.project(pid))

    def update_project(self, pid: str, **changes: Any) -> ProjectRead:
        return self._run(_Calls.update_project(pid, changes))

    def upsert_items(self, pid: str, items: Sequence[dict[str, Any]], *, chunk: int = CHUNK_ROWS) -> ItemsUpserted:
        """Create or update items in chunks (each with its own Idempotency-Key); the counts summed."""
        key = uuid.uuid4().hex
        return _sum_items(
            [
                self._run(_Calls.upload(f"/projects/{pid}/items", part, ItemsUpserted, f"{key}-{n}"))
                for n, part in enumerate(_chunks(items, chunk))
            ]
        )

    def items(self, pid: str) -> list[ItemRead]:
        return self._all(f"/projects/{pid}/items", ItemRead)

    def add_rater(self, pid: str, external_id: str, kind: str, name: str | None = None) -> RaterRead:
        return self._run(_Calls.add_rater(pid, {"external_id": external_id, "kind": kind, "name": name}))

    def update_rater(self, pid: str, rid: str, **changes: Any) -> RaterRead:
        return self._run(_Calls.update_rater(pid, rid, changes))

    def raters(self, pid: str) -> list[RaterRead]:
        return self._all(f"/projects/{pid}/raters", RaterRead)

    def upload_labels(self, pid: str, rows: Sequence[dict[str, Any]], *, chunk: int = CHUNK_ROWS) -> LabelsAccepted:
        """Append labels in chunks, each all-or-nothing with its own Idempotency-Key; the counts summed.

        A chunk that fails raises; the chunks before it stay written (a resubmission of all rows
        writes only what is missing, as duplicates are counted, not written).
        """
        key = uuid.uuid4().hex
        parts = [
            self._run(_Calls.upload(f"/projects/{pid}/labels", part, LabelsAccepted, f"{key}-{n}"))
            for n, part in enumerate(_chunks(rows, chunk))
        ]
        return _sum_labels(parts, None if parts else self.project(pid).label_seq)

    def labels(self, pid: str, **filters: Any) -> Labels:
        """The exported labels (``history``, ``rater``, ``criterion``, ``since_seq`` as the endpoint takes)."""
        return Labels(self._all(f"/projects/{pid}/labels", LabelRow, **filters))

    def create_plan(self, pid: str, **body: Any) -> PlanRead:
        return self._run(_Calls.create_plan(pid, body))

    def plan(self, pid: str) -> PlanRead:
        return self._run(_Calls.plan(pid))

    def create_batch(self, pid: str, **body: Any) -> BatchRead:
        return self._run(_Calls.create_batch(pid, body))

    def batch(self, pid: str, bid: str) -> BatchStatus:
        return self._run(_Calls.batch(pid, bid))

    def release_batch(self, pid: str, bid: str) -> BatchStatus:
        return self._run(_Calls.release_batch(pid, bid))

    def reliability(self, pid: str, etag: str | None = None, **params: Any) -> Polled[ReliabilityDocument]:
        """The reliability document, or (``etag`` given and nothing changed) ``modified`` false and no document."""
        return self._run(_Calls.reliability(pid, etag, params))

    def wait_for_reliability(
        self, pid: str, etag: str | None, *, interval: float = 1.0, timeout: float = 60.0, **params: Any
    ) -> Polled[ReliabilityDocument]:
        """Poll with ``If-None-Match: etag`` every ``interval`` seconds until the document changes
        (or ``timeout`` passes: the last unchanged answer)."""
        deadline = time.monotonic() + timeout
        while True:
            polled = self.reliability(pid, etag, **params)
            if polled.modified or time.monotonic() + interval > deadline:
                return polled
            time.sleep(interval)

    def report(self, pid: str, **params: Any) -> Report:
        return self._run(_Calls.report(pid, params))

    def report_text(self, pid: str, fmt: str = "html", **params: Any) -> str:
        """The report as ``csv`` or ``html`` text."""
        return self._run(_Calls.report_text(pid, fmt, params))

    def create_certificate(self, pid: str, **body: Any) -> Statement:
        return self._run(_Calls.create_certificate(pid, body))

    def certificate(self, pid: str, cid: str) -> Statement:
        return self._run(_Calls.certificate(pid, cid))

    def verify_certificate(self, **body: Any) -> VerifyResult:
        return self._run(_Calls.verify_certificate(body))

    def import_file(
        self, pid: str, source: str, content: bytes, content_type: str = "application/json", **params: Any
    ) -> ImportSummary:
        """Import a file (``source``: ``generic``, ``promptfoo``, ``inspect``, ``langfuse``, ``langsmith``)."""
        return self._run(_Calls.import_file(pid, source, content, content_type, params))

    def export_generic(self, pid: str) -> str:
        """The current labels in the generic long format, as CSV text."""
        return self._run(_Calls.export_generic(pid))


class AsyncClient:
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
        self.http.headers.update(_headers(key, None))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def _run(self, call: _Call[T]) -> T:
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
                break
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
        if r.status_code >= 400:
            raise error_of(r)
        return call.read(r)

    async def _all(self, path: str, model: type[M], **params: Any) -> list[M]:
        rows: list[M] = []
        cursor: str | None = None
        while True:
            page, cursor = await self._run(_Calls.page(path, model, cursor, params))
            rows += page
            if cursor is None:
                return rows

    async def create_project(self, name: str, labels: Sequence[str], **settings: Any) -> ProjectRead:
        return await self._run(_Calls.create_project({"name": name, "labels": list(labels), **settings}))

    async def projects(self) -> list[ProjectRead]:
        return await self._all("/projects", ProjectRead)

    async def project(self, pid: str) -> ProjectRead:
        return await self._run(_Calls.project(pid))

    async def update_project(self, pid: str, **changes: Any) -> ProjectRead:
        return await self._run(_Calls.update_project(pid, changes))

    async def upsert_items(
        self, pid: str, items: Sequence[dict[str, Any]], *, chunk: int = CHUNK_ROWS
    ) -> ItemsUpserted:
        key = uuid.uuid4().hex
        return _sum_items(
            [
                await self._run(_Calls.upload(f"/projects/{pid}/items", part, ItemsUpserted, f"{key}-{n}"))
                for n, part in enumerate(_chunks(items, chunk))
            ]
        )

    async def items(self, pid: str) -> list[ItemRead]:
        return await self._all(f"/projects/{pid}/items", ItemRead)

    async def add_rater(self, pid: str, external_id: str, kind: str, name: str | None = None) -> RaterRead:
        return await self._run(_Calls.add_rater(pid, {"external_id": external_id, "kind": kind, "name": name}))

    async def update_rater(self, pid: str, rid: str, **changes: Any) -> RaterRead:
        return await self._run(_Calls.update_rater(pid, rid, changes))

    async def raters(self, pid: str) -> list[RaterRead]:
        return await self._all(f"/projects/{pid}/raters", RaterRead)

    async def upload_labels(
        self, pid: str, rows: Sequence[dict[str, Any]], *, chunk: int = CHUNK_ROWS
    ) -> LabelsAccepted:
        key = uuid.uuid4().hex
        parts = [
            await self._run(_Calls.upload(f"/projects/{pid}/labels", part, LabelsAccepted, f"{key}-{n}"))
            for n, part in enumerate(_chunks(rows, chunk))
        ]
        return _sum_labels(parts, None if parts else (await self.project(pid)).label_seq)

    async def labels(self, pid: str, **filters: Any) -> Labels:
        return Labels(await self._all(f"/projects/{pid}/labels", LabelRow, **filters))

    async def create_plan(self, pid: str, **body: Any) -> PlanRead:
        return await self._run(_Calls.create_plan(pid, body))

    async def plan(self, pid: str) -> PlanRead:
        return await self._run(_Calls.plan(pid))

    async def create_batch(self, pid: str, **body: Any) -> BatchRead:
        return await self._run(_Calls.create_batch(pid, body))

    async def batch(self, pid: str, bid: str) -> BatchStatus:
        return await self._run(_Calls.batch(pid, bid))

    async def release_batch(self, pid: str, bid: str) -> BatchStatus:
        return await self._run(_Calls.release_batch(pid, bid))

    async def reliability(self, pid: str, etag: str | None = None, **params: Any) -> Polled[ReliabilityDocument]:
        return await self._run(_Calls.reliability(pid, etag, params))

    async def wait_for_reliability(
        self, pid: str, etag: str | None, *, interval: float = 1.0, timeout: float = 60.0, **params: Any
    ) -> Polled[ReliabilityDocument]:
        deadline = time.monotonic() + timeout
        while True:
            polled = await self.reliability(pid, etag, **params)
            if polled.modified or time.monotonic() + interval > deadline:
                return polled
            await asyncio.sleep(interval)

    async def report(self, pid: str, **params: Any) -> Report:
        return await self._run(_Calls.report(pid, params))

    async def report_text(self, pid: str, fmt: str = "html", **params: Any) -> str:
        return await self._run(_Calls.report_text(pid, fmt, params))

    async def create_certificate(self, pid: str, **body: Any) -> Statement:
        return await self._run(_Calls.create_certificate(pid, body))

    async def certificate(self, pid: str, cid: str) -> Statement:
        return await self._run(_Calls.certificate(pid, cid))

    async def verify_certificate(self, **body: Any) -> VerifyResult:
        return await self._run(_Calls.verify_certificate(body))

    async def import_file(
        self, pid: str, source: str, content: bytes, content_type: str = "application/json", **params: Any
    ) -> ImportSummary:
        return await self._run(_Calls.import_file(pid, source, content, content_type, params))

    async def export_generic(self, pid: str) -> str:
        return await self._run(_Calls.export_generic(pid))
