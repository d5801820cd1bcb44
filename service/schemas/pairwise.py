"""Pairwise (A/B) judges: the body of ``POST /pairwise`` and its document (docs/method.md §13)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from service.core.identifiers import ExternalId
from service.schemas import Strict, StrictRow

Interval = list[float | None]
Verdict = Literal["A", "B", "tie"]


class PairwiseVerdict(StrictRow):
    """A judge's verdict on an item, in the item's own answer names, and the order the answers were shown."""

    item: ExternalId
    order: Literal["AB", "BA"]
    verdict: Verdict


class ReferenceVerdict(StrictRow):
    item: ExternalId
    verdict: Verdict


class ItemSystems(StrictRow):
    """The systems that wrote an item's answers A and B."""

    item: ExternalId
    a: ExternalId
    b: ExternalId


class PairwiseBody(Strict):
    """A pairwise judge's verdicts (one item may hold both orders), optionally the human majority
    verdict per item and the systems behind each item's answers."""

    verdicts: list[PairwiseVerdict] = Field(min_length=1, max_length=100_000)
    reference: list[ReferenceVerdict] | None = Field(None, max_length=100_000)
    systems: list[ItemSystems] | None = Field(None, max_length=100_000)
    allow_ties: bool = Field(True, description="Whether a verdict may be 'tie' (422 for a tie when not).")
    confidence_level: float = Field(0.95, gt=0, lt=1)
    n_resamples: int = Field(500, ge=1, le=2000)
    seed: int | None = Field(None, ge=0, lt=2**63)

    model_config = {
        "json_schema_extra": {
            "examples": [
                {
                    "verdicts": [
                        {"item": "q1", "order": "AB", "verdict": "A"},
                        {"item": "q1", "order": "BA", "verdict": "A"},
                        {"item": "q2", "order": "AB", "verdict": "A"},
                        {"item": "q2", "order": "BA", "verdict": "B"},
                    ],
                    "reference": [{"item": "q1", "verdict": "A"}, {"item": "q2", "verdict": "B"}],
                    "systems": [
                        {"item": "q1", "a": "model-x", "b": "model-y"},
                        {"item": "q2", "a": "model-y", "b": "model-x"},
                    ],
                    "seed": 1,
                }
            ]
        },
    }

    @model_validator(mode="after")
    def _ties_allowed(self) -> PairwiseBody:
        if not self.allow_ties:
            rows: list[PairwiseVerdict | ReferenceVerdict] = [*self.verdicts, *(self.reference or [])]
            tied = next((r.item for r in rows if r.verdict == "tie"), None)
            if tied is not None:
                raise ValueError(f"item {tied[:100]!r} has a tie, which allow_ties=false disallows")
        return self


class PositionRead(BaseModel):
    n_items: int = Field(description="Items judged in both orders.")
    consistency: float | None = Field(description="Share of them with the same verdict in both orders.")
    first_favoured: int = Field(description="Flips that picked the answer shown first both times.")
    second_favoured: int
    bias_rate: float | None = Field(description="Flips over items.")
    bias_direction: Literal["first", "second"] | None
    bias_p: float = Field(description="Exact two-sided binomial p of first_favoured among the flips.")
    reason: str | None


class AccuracyRead(BaseModel):
    n_items: int = Field(description="Items with a reference verdict and a verdict in both orders.")
    right_ab: float | None
    right_ba: float | None
    right_both: float | None
    reason: str | None


class SystemStrength(BaseModel):
    system: str
    win_rate: float | None = Field(description="(wins + ties/2)/games.")
    strength: float | None = Field(description="Bradley-Terry log-strength, centred to mean 0.")
    ci: Interval


class RankingRead(BaseModel):
    source: Literal["judge", "humans"]
    n_comparisons: int
    systems: list[SystemStrength]
    reason: str | None


class PairwiseRead(BaseModel):
    position: PositionRead
    accuracy: AccuracyRead | None = Field(description="Against the reference verdicts (null without them).")
    rankings: list[RankingRead] = Field(description="Bradley-Terry from the judge's and the humans' verdicts.")
