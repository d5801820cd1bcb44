"""Every API key of the service, admin keys included: listed and revoked by an admin."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from service.core.errors import error_responses
from service.data.keys import listed_keys, revoke_key
from service.data.models import ApiKey
from service.deps import AdminPrincipal, ReadSession, WriterTurn, WriteSession
from service.schemas.keys import KeyRead

router = APIRouter(prefix="/keys", tags=["keys"])
KeyId = Annotated[str, Path(description="The key's id (not its secret).")]


def key_read(key: ApiKey, rater: str | None) -> KeyRead:
    """The public view of a key."""
    return KeyRead(
        id=key.id,
        role=key.role,
        project=key.project_id,
        rater=rater,
        name=key.name,
        created_at=key.created_at,
        revoked_at=key.revoked_at,
        expires_at=key.expires_at,
    )


@router.get("", response_model=list[KeyRead], responses=error_responses(401, 403))
def list_keys(
    session: ReadSession,
    _admin: AdminPrincipal,
    include_revoked: Annotated[bool, Query(description="List revoked keys too.")] = False,
) -> list[KeyRead]:
    """Every unrevoked key of the service, admin keys included, oldest first (admin); an expired one shows its
    `expires_at` in the past. Secrets are never shown."""
    return [key_read(key, rater) for key, rater in listed_keys(session, include_revoked=include_revoked)]


@router.delete("/{kid}", status_code=204, responses=error_responses(401, 403, 404, 409))
def delete_key(kid: KeyId, _turn: WriterTurn, session: WriteSession, _admin: AdminPrincipal) -> Response:
    """Revoke any key, an admin key too (admin); it stops working at once. 409 for the last admin key."""
    revoke_key(session, kid)
    return Response(status_code=204)
