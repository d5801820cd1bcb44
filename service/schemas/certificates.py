"""Request and response bodies of validation certificates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.schemas import Strict

JSON_SAFE = 2**53 - 1  # RFC 8785 numbers are IEEE doubles: larger integers are not canonical


class CertificateCreate(Strict):
    """What to freeze: the labels up to ``label_seq`` (default: all so far), one criterion, a seed."""

    label_seq: int | None = Field(None, ge=0, le=JSON_SAFE, description="Certify the labels up to this sequence.")
    criterion: str | None = Field(None, max_length=100, description="Criterion (default: the project's first).")
    seed: int = Field(0, ge=0, le=JSON_SAFE, description="Seed of the bootstrap (numpy PCG64), below 2^53.")
    n_resamples: int | None = Field(None, ge=1, le=100_000, description="Bootstrap resamples (default: the server's).")


class Subject(BaseModel):
    name: str
    digest: dict[str, str]


class Statement(BaseModel):
    """An in-toto Statement v1 whose predicate is the certified decision and everything needed to re-derive it."""

    model_config = ConfigDict(populate_by_name=True)

    type: str = Field(alias="_type")
    subject: list[Subject]
    predicateType: str  # noqa: N815 (in-toto's field name)
    predicate: dict[str, Any]


class CertificateSummary(BaseModel):
    id: str
    label_seq: int
    criterion: str
    decision: str
    report_sha256: str
    created_at: datetime


class VerifyRequest(BaseModel):
    """A certificate and the label export (current labels or history; rows with item, rater, criterion, value, seq)."""

    certificate: dict[str, Any]
    labels: list[dict[str, Any]] = Field(max_length=1_000_000)


class MismatchRead(BaseModel):
    field: str = Field(
        description="What disagrees: `labels-snapshot`, `report`, a setting such as "
        "`decision.epsilon`, or a result field such as `result.omega`."
    )
    reason: str
    certified: Any
    found: Any


class VerifyResult(BaseModel):
    match: bool
    mismatches: list[MismatchRead]
    notes: list[str] = Field(description="Differences that are not mismatches, such as other software versions.")
