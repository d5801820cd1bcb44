"""Request and response bodies of validation certificates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.base import Strict

JSON_SAFE = 2**53 - 1  # RFC 8785 numbers are IEEE doubles: larger integers are not canonical


class CertificateCreate(Strict):
    """What to freeze: the labels up to ``label_seq`` (default: all so far), one criterion, a seed."""

    label_seq: int | None = Field(None, ge=0, le=JSON_SAFE, description="Certify the labels up to this sequence.")
    criterion: str | None = Field(None, max_length=100, description="Criterion (default: the project's first).")
    seed: int = Field(0, ge=0, le=JSON_SAFE, description="Seed of the bootstrap (numpy PCG64), below 2^53.")
    n_resamples: int | None = Field(None, ge=1, le=100_000, description="Bootstrap resamples (default: the server's).")


class Subject(BaseModel):
    name: str = Field(description="What the digest is of (the report, the labels snapshot).")
    digest: dict[str, str] = Field(description="Digests by algorithm, e.g. {'sha256': '...'}.")


class Statement(BaseModel):
    """An in-toto Statement v1 whose predicate is the certified decision and everything needed to re-derive it."""

    model_config = ConfigDict(populate_by_name=True)

    type: str = Field(alias="_type", description="The in-toto Statement type URI.")
    subject: list[Subject] = Field(description="The documents the certificate is about, with their digests.")
    predicateType: str = Field(description="The URI of annoplan's predicate type.")  # noqa: N815 (in-toto's field name)
    predicate: dict[str, Any] = Field(
        description="The certified decision, its settings, software versions and everything needed to re-derive it "
        "from the labels."
    )


class CertificateSummary(BaseModel):
    id: str = Field(description="The certificate's id.")
    label_seq: int = Field(description="The last label event certified.")
    criterion: str = Field(description="The criterion certified.")
    decision: str = Field(description="The certified decision (pass, reject, inconclusive, ...).")
    report_sha256: str = Field(description="SHA-256 of the certified report.")
    created_at: datetime = Field(description="When it was issued (UTC).")


class VerifyRequest(BaseModel):
    """A certificate and the label export (current labels or history; rows with item, rater, criterion, value, seq)."""

    certificate: dict[str, Any] = Field(description="The certificate (in-toto Statement) as issued.")
    labels: list[dict[str, Any]] = Field(
        max_length=1_000_000, description="The label export the certificate is checked against (GET /labels rows)."
    )


class MismatchRead(BaseModel):
    field: str = Field(
        description="What disagrees: `labels-snapshot`, `report`, a setting such as "
        "`decision.epsilon`, or a result field such as `result.omega`."
    )
    reason: str = Field(description="What differs, in one sentence.")
    certified: Any = Field(description="The certified value.")
    found: Any = Field(description="The value recomputed from the labels sent.")


class VerifyResult(BaseModel):
    match: bool = Field(description="Whether the labels re-derive the certified decision and report exactly.")
    mismatches: list[MismatchRead] = Field(description="Each field that differs; empty when match is true.")
    notes: list[str] = Field(description="Differences that are not mismatches, such as other software versions.")
