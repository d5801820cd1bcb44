"""Items' bodies: an uploaded row, an item read, and what an upload changed."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from service.core.identifiers import ExternalId
from service.schemas.base import StrictRow, Text


class ItemIn(StrictRow):
    external_id: ExternalId = Field(description="Your id of the item; an upload with a known id updates that item.")
    features: dict[Text, Text | int | float | bool | None] = Field(
        default_factory=dict,
        description="Item features (strings, numbers, booleans), e.g. a domain to slice or stratify by.",
    )
    text: Text | None = Field(None, description="The text shown to annotators (optional).")


class ItemRead(BaseModel):
    id: str = Field(description="The item's internal id.")
    external_id: str = Field(description="Your id of the item.")
    position: int = Field(description="The item's place in upload order (0 first).")
    features: dict[str, Any] = Field(description="The item's features.")
    text: str | None = Field(description="The item's text; null when none was given.")


class ItemsUpserted(BaseModel):
    created: int = Field(description="Items that were new.")
    updated: int = Field(description="Known items whose text or features changed.")
    unchanged: int = Field(description="Known items sent again as they were.")
