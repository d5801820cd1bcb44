"""Pairwise (A/B) judges: the body of ``POST /pairwise`` and its document (docs/method.md §13)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from service.core.identifiers import ExternalId
from service.schemas.base import Strict, StrictRow

Interval = list[float | None]
Verdict = Literal["A", "B", "tie"]


class PairwiseVerdict(StrictRow):
    """A judge's verdict on an item, in the item's own answer names, and the order the answers were shown."""

    item: ExternalId = Field(description="External id of the item.")
    order: Literal["AB", "BA"] = Field(description="The order the answers were shown: AB (A first) or BA.")
    verdict: Verdict = Field(description="The answer the judge preferred, by the item's own names A and B, or tie.")


class ReferenceVerdict(StrictRow):
    item: ExternalId = Field(description="External id of the item.")
    verdict: Verdict = Field(description="The human majority's verdict: A, B or tie.")


class ItemSystems(StrictRow):
    """The systems that wrote an item's answers A and B."""

    item: ExternalId = Field(description="External id of the item.")
    a: ExternalId = Field(description="The system that wrote answer A.")
    b: ExternalId = Field(description="The system that wrote answer B.")


class PairwiseBody(Strict):
    """A pairwise judge's verdicts (one item may hold both orders), optionally the human majority
    verdict per item and the systems behind each item's answers."""

    verdicts: list[PairwiseVerdict] = Field(
        min_length=1,
        max_length=100_000,
        description="The judge's verdicts; an item judged in both orders shows position bias.",
    )
    reference: list[ReferenceVerdict] | None = Field(
        None, max_length=100_000, description="The human majority verdict per item, for the judge's accuracy."
    )
    systems: list[ItemSystems] | None = Field(
        None, max_length=100_000, description="The systems behind each item's answers, for the Bradley-Terry rankings."
    )
    allow_ties: bool = Field(True, description="Whether a verdict may be 'tie' (422 for a tie when not).")
    confidence_level: float = Field(0.95, gt=0, lt=1, description="Coverage of the intervals.")
    n_resamples: int = Field(500, ge=1, le=2000, description="Bootstrap resamples of the intervals.")
    seed: int | None = Field(None, ge=0, lt=2**63, description="Seed of the bootstrap; random when absent.")

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
    second_favoured: int = Field(description="Flips that picked the answer shown second both times.")
    bias_rate: float | None = Field(description="Flips over items.")
    bias_direction: Literal["first", "second"] | None = Field(
        description="The position favoured by more flips; null when neither is."
    )
    bias_p: float = Field(description="Exact two-sided binomial p of first_favoured among the flips.")
    reason: str | None = Field(description="Why the value is null (undefined); null when it is defined.")


class AccuracyRead(BaseModel):
    n_items: int = Field(description="Items with a reference verdict and a verdict in both orders.")
    right_ab: float | None = Field(description="Share of items judged as the reference in the AB order.")
    right_ba: float | None = Field(description="Share of items judged as the reference in the BA order.")
    right_both: float | None = Field(description="Share of items judged as the reference in both orders.")
    reason: str | None = Field(description="Why the value is null (undefined); null when it is defined.")


class SystemStrength(BaseModel):
    system: str = Field(description="The system's name.")
    win_rate: float | None = Field(description="(wins + ties/2)/games.")
    strength: float | None = Field(description="Bradley-Terry log-strength, centred to mean 0.")
    ci: Interval = Field(description="Bootstrap interval of the strength.")


class RankingRead(BaseModel):
    source: Literal["judge", "humans", "humans+judge"] = Field(
        description="Whose verdicts ranked the systems: the judge's, the humans' (reference), or both "
        "(humans+judge: prediction-powered over the judge's AB verdicts where no human majority is in hand)."
    )
    n_comparisons: int = Field(description="Verdicts between two systems used.")
    systems: list[SystemStrength] = Field(description="The systems, strongest first.")
    reason: str | None = Field(description="Why no ranking was computed; null when one was.")


class PairwiseRead(BaseModel):
    position: PositionRead = Field(description="Position bias: how often the verdict follows the order shown.")
    accuracy: AccuracyRead | None = Field(description="Against the reference verdicts (null without them).")
    rankings: list[RankingRead] = Field(description="Bradley-Terry from the judge's and the humans' verdicts.")


class PairwiseJudgeRead(PairwiseRead):
    """One judge of a pairwise project: its position statistics, accuracy against the human majority in both
    orders, and the systems ranked by its verdicts, the humans' and both."""

    judge: str = Field(description="External id of the judge.")


class PairwiseBlock(BaseModel):
    """The pairwise statistics of a pairwise project's ``/reliability`` (docs/method.md §13)."""

    n_items: int = Field(description="Items with a verdict of a judge or a human majority.")
    n_reference: int = Field(description="Items with a human majority verdict (the reference; a tied majority: none).")
    n_systems: int = Field(description="Systems named by the items' features system_a and system_b.")
    judges: list[PairwiseJudgeRead] = Field(description="Every judge, in rater order.")
    reason: str | None = Field(description="Why no judge is reported; null when the block is computed.")
