"""API keys' bodies: the roles a key may have, a key asked for, made (its secret shown once) and listed."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, Field, model_validator

from service.core.identifiers import ExternalId
from service.schemas.base import Strict


class Role(StrEnum):
    """What a key may do: everything (admin), run one project (pm), label as one rater
    (annotator), or read one project's aggregates (viewer)."""

    ADMIN = "admin"
    PM = "pm"
    ANNOTATOR = "annotator"
    VIEWER = "viewer"


class KeyCreate(Strict):
    role: Role = Field(
        description="What the key may do: run the project (pm), label as one rater (annotator) or read its "
        "aggregates (viewer)."
    )
    rater: ExternalId | None = Field(None, description="External id of the rater (annotator keys only).")
    name: str | None = Field(None, max_length=200, description="A note on whom the key is for (shown in the key list).")
    expires_at: AwareDatetime | None = Field(
        None,
        description="When the key stops working (401 `key_expired`): a future moment with a timezone; omitted: never.",
    )

    @model_validator(mode="after")
    def _rater_only_for_annotators(self) -> KeyCreate:
        if self.role == "annotator" and not self.rater:
            raise ValueError("an annotator key needs 'rater' (the rater's external_id)")
        if self.role != "annotator" and self.rater:
            raise ValueError("'rater' is only for annotator keys")
        return self


class KeyCreated(BaseModel):
    id: str = Field(description="The key's id (for listing and revoking), not its secret.")
    role: Role = Field(description="What the key may do.")
    project: str | None = Field(description="The project the key is for; null for an admin key.")
    rater: str | None = Field(description="The rater an annotator key labels as (external id); null for other roles.")
    expires_at: datetime | None = Field(description="When the key stops working; null: never.")
    key: str = Field(description="The secret; shown once, only its hash is stored.")


class KeyRead(BaseModel):
    """A key as listed: who it is for, never its secret."""

    id: str = Field(description="The key's id (for revoking).")
    role: Role = Field(description="What the key may do.")
    project: str | None = Field(description="The project the key is for; null for an admin key.")
    rater: str | None = Field(description="The rater an annotator key labels as (external id); null for other roles.")
    name: str | None = Field(description="The note given when the key was made.")
    created_at: datetime = Field(description="When the key was made (UTC).")
    revoked_at: datetime | None = Field(description="When the key was revoked; null while it works.")
    expires_at: datetime | None = Field(description="When the key stops (or stopped) working; null: never.")
