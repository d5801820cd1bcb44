"""Dashboard logins: a random token per browser login, kept only as its hash, expiring and revocable.

The login cookie holds the token, never the API key: a copied cookie is not a Bearer key, it stops
at logout, at its expiry, or when its key is revoked.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from service.core.errors import Unauthorized
from service.data.keys import Principal
from service.data.models import ApiKey, Login, new_public_id, utcnow
from service.schemas import Role


def token_hash(token: str) -> str:
    """The stored form of a login token: SHA-256 (tokens are random, so no salt is needed)."""
    return hashlib.sha256(b"login." + token.encode()).hexdigest()


def open_login(session: Session, principal: Principal, *, max_age_seconds: int) -> str:
    """A new login of the principal's key for ``max_age_seconds``; returns its token (set in the
    cookie, never stored). Logins that have expired are deleted on the way."""
    now = utcnow()
    session.execute(delete(Login).where(Login.expires_at < now))
    token = "ls_" + secrets.token_urlsafe(32)
    session.add(
        Login(
            id=new_public_id("ls"),
            token_hash=token_hash(token),
            key_id=principal.key_id,
            created_at=now,
            expires_at=now + timedelta(seconds=max_age_seconds),
        )
    )
    session.flush()
    return token


def principal_for_login(session: Session, token: str) -> Principal:
    """The principal of a live login's key, or 401 (unknown, logged out, expired, or its key revoked)."""
    row = session.execute(
        select(Login, ApiKey).join(ApiKey, ApiKey.id == Login.key_id).where(Login.token_hash == token_hash(token))
    ).first()
    if row is None:
        raise Unauthorized("unknown login; log in again at /login")
    login, key = row
    if login.revoked_at is not None or login.expires_at <= utcnow():
        raise Unauthorized("this login has ended (logged out or expired); log in again at /login")
    if key.revoked_at is not None:
        raise Unauthorized("unknown or revoked API key")
    return Principal(key.id, Role(key.role), key.project_id, key.rater_id)


def close_login(session: Session, token: str) -> bool:
    """Revoke the login of ``token`` (logout); whether a live one was revoked."""
    result = session.execute(
        update(Login)
        .where(Login.token_hash == token_hash(token), Login.revoked_at.is_(None))
        .values(revoked_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return bool(getattr(result, "rowcount", 0))
