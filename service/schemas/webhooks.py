"""Request and response bodies of outbound webhooks."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from service.schemas import Strict

EventType = Literal[
    "decision.changed", "plan.created", "plan.reached", "batch.expired", "certificate.created", "judge.drifted"
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
    id: str
    url: str
    events: list[str]
    created_at: datetime


class WebhookCreated(WebhookRead):
    secret: str = Field(description="The signing secret (Standard Webhooks `whsec_...`); shown only now.")


class DeliveryRead(BaseModel):
    """One event's delivery to one webhook."""

    id: int
    event_id: str = Field(description="The `webhook-id` header of every attempt.")
    event_type: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    next_attempt_at: datetime | None
    retry_until: datetime
    last_attempt_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    delivered_at: datetime | None
    created_at: datetime
