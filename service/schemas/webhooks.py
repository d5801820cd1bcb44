"""Request and response bodies of outbound webhooks."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from service.schemas.base import Strict

EventType = Literal[
    "decision.changed",
    "decision.finalized",
    "plan.created",
    "plan.reached",
    "batch.expired",
    "certificate.created",
    "judge.drifted",
]


class WebhookCreate(Strict):
    """Where to send which events."""

    url: str = Field(max_length=2000, description="http(s) URL; loopback and private targets are refused.")
    events: list[EventType] = Field(min_length=1, description="Event types to receive.")

    @field_validator("events")
    @classmethod
    def _distinct(cls, events: list[str]) -> list[str]:
        return sorted(set(events))


class WebhookRead(BaseModel):
    id: str = Field(description="The webhook's id.")
    url: str = Field(description="Where events are POSTed.")
    events: list[str] = Field(description="The event types it receives.")
    created_at: datetime = Field(description="When it was registered (UTC).")


class WebhookCreated(WebhookRead):
    secret: str = Field(description="The signing secret (Standard Webhooks `whsec_...`); shown only now.")


class DeliveryRead(BaseModel):
    """One event's delivery to one webhook."""

    id: int = Field(description="The delivery's id.")
    event_id: str = Field(description="The `webhook-id` header of every attempt.")
    event_type: str = Field(description="The event delivered, such as decision.changed.")
    status: Literal["pending", "delivered", "failed"] = Field(
        description="pending (to be tried again), delivered or failed (retries used up)."
    )
    attempts: int = Field(description="Attempts made so far.")
    next_attempt_at: datetime | None = Field(description="When the next attempt is due; null when none is.")
    retry_until: datetime = Field(description="After this moment a failed attempt is not retried.")
    last_attempt_at: datetime | None = Field(description="When the last attempt was made; null before the first.")
    last_status_code: int | None = Field(
        description="The HTTP status of the last attempt's answer; null when none came."
    )
    last_error: str | None = Field(description="Why the last attempt failed, in our words; null when it did not.")
    delivered_at: datetime | None = Field(description="When the target accepted it; null until then.")
    created_at: datetime = Field(description="When the event happened (UTC).")
