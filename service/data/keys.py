"""API keys: generation, hashing (only the hash is stored), lookup and the admin bootstrap."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from service.core.errors import Conflict, Invalid, NotFound, Unauthorized, echo
from service.data.models import ApiKey, Rater, new_public_id, utcnow
from service.schemas.keys import Role


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id, role and scope."""

    key_id: str
    role: Role
    project_id: str | None
    rater_id: int | None


def new_secret() -> str:
    """A fresh API key secret (shown once, never stored)."""
    return "ak_" + secrets.token_urlsafe(32)


def key_hash(secret: str) -> str:
    """The stored form of a key: SHA-256 of the secret (keys are random, so no salt is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def create_key(
    session: Session,
    *,
    role: Role,
    project_id: str | None = None,
    rater_id: int | None = None,
    name: str | None = None,
    secret: str | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Add a key row and return it with its secret; ``expires_at`` (timezone-aware, in the future) or never."""
    if expires_at is not None and (expires_at.tzinfo is None or expires_at <= utcnow()):
        raise Invalid(
            f"expires_at {expires_at.isoformat()} must be a future moment with a timezone (e.g. 2027-01-31T00:00:00Z)",
            code="invalid_expiry",
        )
    secret = secret or new_secret()
    row = ApiKey(
        id=new_public_id("k"),
        key_hash=key_hash(secret),
        role=role,
        project_id=project_id,
        rater_id=rater_id,
        name=name,
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    return row, secret


def principal_for(session: Session, authorization: str | None) -> Principal:
    """The principal behind an ``Authorization: Bearer`` header, or 401."""
    if not authorization:
        raise Unauthorized("missing Authorization header; send 'Authorization: Bearer <api key>'")
    scheme, _, secret = authorization.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Unauthorized("Authorization must be 'Bearer <api key>'")
    return principal_of_key(session.scalar(select(ApiKey).where(ApiKey.key_hash == key_hash(secret.strip()))))


def principal_of_key(row: ApiKey | None) -> Principal:
    """The principal of a key row, or 401: unknown, revoked, or expired (``key_expired``)."""
    if row is None or row.revoked_at is not None:
        raise Unauthorized("unknown or revoked API key")
    if row.expires_at is not None and row.expires_at <= utcnow():
        raise Unauthorized(
            f"this API key expired at {row.expires_at.isoformat(timespec='seconds')}; ask an admin for a new one",
            code="key_expired",
        )
    return Principal(row.id, Role(row.role), row.project_id, row.rater_id)


def ensure_admin_key(session: Session, configured: str | None) -> str | None:
    """Make sure an admin key exists; return a newly generated secret to print, else None.

    A configured ``ANNOPLAN_ADMIN_KEY`` is registered (once). Without one, a key is generated
    only when no admin key exists yet.
    """
    if configured:
        if session.scalar(select(ApiKey.id).where(ApiKey.key_hash == key_hash(configured))):
            return None
        create_key(session, role=Role.ADMIN, name="ANNOPLAN_ADMIN_KEY", secret=configured)
        return None
    has_admin = session.scalar(select(ApiKey.id).where(ApiKey.role == Role.ADMIN, ApiKey.revoked_at.is_(None)).limit(1))
    if has_admin:
        return None
    _, secret = create_key(session, role=Role.ADMIN, name="generated at first start")
    return secret


def working(now: datetime) -> ColumnElement[bool]:
    """The condition a key row meets while it authenticates: not revoked, not expired at ``now``."""
    return ApiKey.revoked_at.is_(None) & or_(ApiKey.expires_at.is_(None), ApiKey.expires_at > now)


def listed_keys(session: Session, *, include_revoked: bool = False) -> list[tuple[ApiKey, str | None]]:
    """Every unrevoked key (never a secret; expired ones too, with their ``expires_at``) with its rater's external
    id, oldest first; revoked ones on request."""
    stmt = select(ApiKey, Rater.external_id).outerjoin(Rater, Rater.id == ApiKey.rater_id)
    if not include_revoked:
        stmt = stmt.where(ApiKey.revoked_at.is_(None))
    return [(key, rater) for key, rater in session.execute(stmt.order_by(ApiKey.created_at, ApiKey.id))]


def revoke_key(session: Session, key_id: str) -> ApiKey:
    """Revoke any key by id (it stops working at once); revoking a revoked key changes nothing.

    The last working (unrevoked, unexpired) admin key cannot be revoked (409): nobody could administer
    the service. An expired key can always be revoked.
    """
    row = session.scalar(select(ApiKey).where(ApiKey.id == key_id).with_for_update())
    if row is None:
        raise NotFound(f"key {echo(key_id)} not found")
    if row.revoked_at is not None:
        return row
    now = utcnow()
    if row.role == "admin" and (row.expires_at is None or row.expires_at > now):
        admins = session.scalars(select(ApiKey.id).where(ApiKey.role == "admin", working(now)).with_for_update()).all()
        if admins == [row.id]:
            raise Conflict("this is the last working admin key; create another admin key first", code="last_admin_key")
    row.revoked_at = now
    session.flush()
    return row
