"""Health checks' bodies: the database's and the job queue's state."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Health(BaseModel):
    status: Literal["ok", "degraded"] = Field(description="ok, or degraded when the database is not.")
    database: Literal["ok", "unreachable", "read_only", "full", "busy"] = Field(
        description="The database's state: ok, unreachable, read_only, full or busy."
    )
    detail: str | None = Field(None, description="What is wrong with the database, when it is not ok.")


class QueueHealth(BaseModel):
    """The job queue's state (`GET /healthz/queue`)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"status": "no_worker", "workers": 0, "oldest_waiting_seconds": 42.5}]}
    )

    status: Literal["ok", "no_worker"] = Field(
        description="`no_worker` when no job worker has shown itself live within its lease: queued work waits."
    )
    workers: int = Field(description="Job workers live now (each renews a heartbeat every third of its lease).")
    oldest_waiting_seconds: float | None = Field(
        description="How long the oldest due simulation or webhook delivery has waited; null when none waits."
    )
