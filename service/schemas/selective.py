"""Selective evaluation: the request and the calibrated cascade (docs/method.md §3c)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from service.core.identifiers import ExternalId
from service.schemas.base import Strict, Text

SHOWN_ESCALATED = 100
"""Escalated items named in a response (all of them are counted)."""


class SelectiveCreate(Strict):
    """Calibrate the judges' confidence thresholds on the human-labelled items."""

    alpha: float = Field(0.1, gt=0, lt=1, description="The disagreement with the human majority kept items may have.")
    delta: float = Field(0.1, gt=0, lt=1, description="The chance the guarantee may fail (1 - delta: its confidence).")
    judges: list[ExternalId] | None = Field(
        None,
        min_length=1,
        max_length=10,
        description="The cascade, cheapest first (judge raters' external ids); default: every judge in rater order.",
    )
    criterion: Text | None = Field(None, description="Criterion (default: the project's first).")
    grid_size: int = Field(1001, ge=11, le=10001, description="Candidate thresholds 0, 1/(g-1), .., 1.")
    split_delta: bool = Field(
        True, description="Test each of J judges at delta / J so the cascade's guarantee holds at 1 - delta."
    )
    escalate_to: list[ExternalId] | None = Field(
        None,
        max_length=20,
        description="Human raters whose planned lists get the escalated items (the next batches); needs a plan.",
    )

    model_config = {
        "json_schema_extra": {
            "examples": [{"alpha": 0.1, "delta": 0.1, "judges": ["small", "large"], "escalate_to": ["h2"]}]
        }
    }


class StageRead(BaseModel):
    """One judge of the cascade."""

    judge: str = Field(description="External id of the stage's judge.")
    threshold: float | None = Field(description="Calibrated lambda; null when no candidate passed (keeps nothing).")
    n_reached: int = Field(description="Calibration items that reached this judge (no earlier judge kept them).")
    n_kept: int = Field(description="Calibration items this judge keeps (its confidence at or above the threshold).")
    disagreements: int = Field(description="Kept calibration items where the judge disagrees with the human majority.")
    risk: float | None = Field(description="Disagreement share among the kept calibration items.")
    upper_bound: float | None = Field(description="Exact binomial upper bound on it at 1 - delta_j.")
    delta: float = Field(description="The level this stage is tested at, delta_j.")
    defined: bool = Field(description="Whether a threshold was calibrated.")
    reason: str = Field(description="Why no threshold was calibrated; empty when one was.")


class CurveRead(BaseModel):
    """The first judge's coverage, risk and bound at every tenth candidate threshold (the dashboard's curve)."""

    thresholds: list[float] = Field(description="Candidate thresholds lambda.")
    coverage: list[float] = Field(description="Share of calibration items kept at each threshold.")
    risk: list[float | None] = Field(
        description="Disagreement share among the kept items at each threshold; null when none is kept."
    )
    upper_bound: list[float | None] = Field(
        description="Exact binomial upper bound on that risk; null when none is kept."
    )


class SelectiveRead(BaseModel):
    """The calibrated cascade, its guarantee, and where the corpus's items go."""

    criterion: str = Field(description="The criterion calibrated.")
    alpha: float = Field(description="The disagreement with the human majority the kept items may have.")
    delta: float = Field(description="The chance the guarantee may fail.")
    split_delta: bool = Field(description="Whether each of J judges was tested at delta / J.")
    n_calibration: int = Field(description="Items with a human majority and every cascade judge's confident label.")
    stages: list[StageRead] = Field(description="The cascade's judges, cheapest first.")
    coverage: float | None = Field(description="Share of the calibration items some judge keeps.")
    risk: float | None = Field(
        description="Disagreement share among the calibration items some judge keeps; null when none is."
    )
    guarantee: str = Field(description="The guarantee the cascade gives, in one sentence.")
    curve: CurveRead = Field(description="The first judge's coverage and risk over thresholds.")
    n_items: int = Field(description="Corpus items with a label of some cascade judge.")
    kept_by: dict[str, int] = Field(description="Corpus items each judge keeps.")
    n_escalated: int = Field(description="Corpus items no judge keeps: humans label them.")
    escalated: list[str] = Field(description=f"The first {SHOWN_ESCALATED} escalated items (external ids).")
    escalated_to: dict[str, int] = Field(description="Escalated items appended to each escalate_to rater's list.")
