"""The report of a numeric project (docs/method.md §2b, §3d, §7): per criterion each judge's decision on the
numbers and each judge-human pair's agreement, under the declared protocol."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from service.schemas.documents import IccRead, ScoreJudgeRead, ScorePair


class ScoreProtocol(BaseModel):
    """The protocol a numeric project's numbers are computed under."""

    scale: Literal["numeric"] = Field(description="Always numeric.")
    value_range: dict[str, float | None] = Field(description="The project's value_range: min, max and step.")
    handling: Literal["exclude"] = Field(description="CANNOT_ASSESS and INVALID are left out of every statistic.")
    aggregation: Literal["per criterion"] = Field(description="Each criterion is reported on its own.")
    intervals: str = Field(description="How the intervals are computed: analytic (F, Fisher z, t), no resampling.")
    rule: str = Field(description="The decision rule: alt-test (negative-RMSE alignment) or margin.")
    epsilon: float = Field(description="The margin in force.")
    q: float = Field(description="The alt-test's BY level over the humans.")
    omega_threshold: float = Field(description="Share of humans a judge must win to pass.")


class ScoreCriterionReport(BaseModel):
    """One criterion of a numeric project: the decisions, the humans' agreement and each judge-human pair."""

    criterion: str = Field(description="The criterion.")
    n_items: int = Field(description="Items with a number from at least two raters.")
    n_special: int = Field(description="CANNOT_ASSESS and INVALID labels, excluded.")
    judges: list[ScoreJudgeRead] = Field(description="Every judge's fixed-sample decision on the numbers.")
    icc: list[IccRead] = Field(description="The humans' six ICCs (listwise: items every human rated).")
    interval_alpha: float | None = Field(description="Krippendorff's interval alpha of the humans' ratings.")
    interval_alpha_reason: str = Field(description="Why interval_alpha is null; empty when it is defined.")
    pairs: list[ScorePair] = Field(description="Each judge against each human: CCC, Bland-Altman, MAE, RMSE.")


class ScoreReport(BaseModel):
    """``/report`` of a numeric project: per criterion the judges' decisions and agreement on the numbers."""

    scale: Literal["numeric"] = Field(description="Always numeric: the report of a numeric project.")
    project: str = Field(description="The project's id.")
    project_name: str = Field(description="The project's name.")
    label_seq: int = Field(description="The last label event the report reads.")
    protocol: ScoreProtocol = Field(description="The protocol the numbers are computed under.")
    criteria: list[ScoreCriterionReport] = Field(description="Each criterion reported.")
    notes: list[str] = Field(description="What the report could not compute, or how to read it.")
