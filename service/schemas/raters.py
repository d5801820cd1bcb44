"""Raters' bodies: their kind, and a rater created, patched and read."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from service.core.identifiers import ExternalId
from service.schemas.base import Strict

RaterKind = Literal["judge", "primary", "human"]


class RaterCreate(Strict):
    external_id: ExternalId = Field(description="Your id of the rater; labels name it.")
    kind: RaterKind = Field(
        description="judge (the model validated), primary (the human who labels every item) or human (a secondary, "
        "who labels the plan's overlap)."
    )
    name: str | None = Field(None, max_length=200, description="A name for people.")


class RaterPatch(Strict):
    kind: RaterKind | None = Field(None, description="A new kind; only while the project has no plan.")
    name: str | None = Field(None, min_length=1, max_length=200, description="A new name.")


class RaterRead(BaseModel):
    id: str = Field(description="The rater's internal id.")
    external_id: str = Field(description="Your id of the rater.")
    kind: RaterKind = Field(description="judge, primary or human.")
    name: str | None = Field(None, description="The rater's name; null when none was given.")
    n_labels: int = Field(description="Current labels of this rater.")
