"""``Idempotency-Key``: replay the first response to a repeated write, 409 on a changed body."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Invalid
from service.data.keys import Principal
from service.data.models import IdempotencyRecord

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retry-safe writes: the same key and body return the first response again.",
    ),
]


def request_fingerprint(request: Request, body: bytes) -> str:
    """A hash of what makes two writes the same: method, path, query and body."""
    h = hashlib.sha256()
    for part in (request.method, request.url.path, request.url.query):
        h.update(part.encode())
        h.update(b"\0")
    h.update(body)
    return h.hexdigest()


def idempotent_write(
    session: Session,
    principal: Principal,
    key: str | None,
    fingerprint: str,
    write: Callable[[], tuple[int, Any]],
) -> JSONResponse:
    """Run ``write`` once per (key, body); a replay returns the stored response and writes nothing.

    The record is claimed before the write, inside the same transaction: a concurrent twin
    waits on the unique index and then replays, and a failed write leaves no record behind.
    """
    if key is None:
        status, body = write()
        return JSONResponse(jsonable_encoder(body), status)
    if not 1 <= len(key) <= 200:
        raise Invalid("Idempotency-Key must be 1 to 200 characters", code="invalid_idempotency_key")
    record = IdempotencyRecord(
        key_id=principal.key_id, idempotency_key=key, request_hash=fingerprint, status_code=0, response={}
    )
    try:
        with session.begin_nested():
            session.add(record)
            session.flush()
    except IntegrityError:
        replay = replayed(session, principal, key, fingerprint)
        if replay is None:  # the twin rolled back; ask the client to retry
            raise Conflict("a request with this Idempotency-Key is in flight; retry") from None
        return replay
    status, body = write()
    record.status_code = status
    record.response = jsonable_encoder(body)
    return JSONResponse(record.response, status)


def replayed(session: Session, principal: Principal, key: str | None, fingerprint: str) -> JSONResponse | None:
    """The stored response to a write already made with ``key`` and this body (409 for another body);
    None when there is none, e.g. to skip a long computation before :func:`idempotent_write` replays."""
    if key is None:
        return None
    first = session.scalar(
        select(IdempotencyRecord).where(
            IdempotencyRecord.key_id == principal.key_id,
            IdempotencyRecord.idempotency_key == key,
        )
    )
    if first is None or first.status_code == 0:  # none, or claimed by a write not yet committed
        return None
    if first.request_hash != fingerprint:
        raise Conflict("this Idempotency-Key was used with a different request", code="idempotency_key_reused")
    return JSONResponse(first.response, first.status_code, headers={"Idempotent-Replayed": "true"})
