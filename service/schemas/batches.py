"""Batches' bodies: a batch asked for, given, and its status."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from service.core.identifiers import ExternalId
from service.schemas.base import Strict


class BatchCreate(Strict):
    rater: ExternalId | None = Field(None, description="External id of the rater; implied for annotator keys.")
    size: int = Field(50, ge=1, description="Items wanted (at most the configured batch limit, default 1000).")


class BatchRead(BaseModel):
    id: str | None = Field(description="The batch's id, to send with its labels; null when no items were given.")
    rater: str = Field(description="External id of the rater the batch is for.")
    items: list[str] = Field(description="External ids of the items to label, held for this rater until expires_at.")
    design: str = Field(description="The plan's design the items were drawn by.")
    expires_at: datetime | None = Field(
        description="When the items still unlabeled go back to the rater's queue; null when no items were given."
    )
    done: bool = Field(False, description="Whether the rater's list is finished: no item will be given.")
    remaining: int = Field(
        description="Items of this rater's list still unlabeled, held or not. In anytime mode a labeled list "
        "grows past the plan's m (by the plan's design) while the monitored decision is 'continue', up to the "
        "plan's monitoring budget (docs/method.md §8.1): remaining is 0 only when it will not."
    )
    reason: str | None = Field(
        None,
        description="Why no items were given (done or all held): e.g. the monitored decision is pass, or the "
        "monitoring budget is reached and the decision is inconclusive.",
    )


class BatchStatus(BaseModel):
    id: str = Field(description="The batch's id.")
    rater: str = Field(description="External id of the rater the batch is for.")
    items: list[str] = Field(description="External ids of the batch's items.")
    design: str = Field(description="The plan's design the items were drawn by.")
    created_at: datetime = Field(description="When the batch was given (UTC).")
    expires_at: datetime = Field(description="When its items still unlabeled go back to the rater's queue.")
    released: bool = Field(description="Whether the batch was released (DELETE) before it expired.")
    expired: bool = Field(description="Whether expires_at has passed.")
    labeled: int = Field(description="Items of the batch the rater has labeled.")
    unlabeled: list[str] = Field(description="External ids of the items still to label.")
