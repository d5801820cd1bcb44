"""The report's body: verdict tables, statistics with their reasons, protocol and checklist."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Handling = Literal["exclude", "recode", "three_class"]
Level = Literal["micro", "macro", "item"]
Costs = Literal["nominal", "linear", "quadratic"]
Rule = Literal["all", "any"]


class Stat(BaseModel):
    """A statistic; ``value`` is null when undefined, with the cause in ``reason``."""

    value: float | None = Field(description="The statistic; null when undefined.")
    reason: str | None = Field(None, description="Why the value is null (undefined); null when it is defined.")


class Bound(BaseModel):
    """An interval ``[low, high]``; null when it cannot be given, with the cause in ``reason``."""

    value: tuple[float, float] | None = Field(description="The bounds [low, high]; null when they cannot be given.")
    reason: str | None = Field(None, description="Why the value is null (undefined); null when it is defined.")


class TableOut(BaseModel):
    """Counts of (human, judge) verdict pairs."""

    categories: list[str] = Field(description="Row categories (human) = column categories (judge), in order.")
    counts: list[list[int]] = Field(description="counts[i][j]: pairs with human category i and judge category j.")
    n: int = Field(description="Pairs in the table.")


class Marginals(BaseModel):
    """One rater's verdict distribution."""

    counts: dict[str, int] = Field(description="Pairs per verdict, CANNOT_ASSESS and INVALID included.")
    scored_shares: dict[str, float] = Field(description="Share of each scored category among the scored pairs.")


class Rates(BaseModel):
    """Shares of all pairs; ``coverage`` = share where both sides gave a regular label (docs/method.md §7)."""

    human_abstain: float | None = Field(description="Share of pairs where the human answered CANNOT_ASSESS.")
    judge_abstain: float | None = Field(description="Share of pairs where the judge answered CANNOT_ASSESS.")
    human_invalid: float | None = Field(description="Share of pairs where the human's label is INVALID.")
    judge_invalid: float | None = Field(description="Share of pairs where the judge's label is INVALID.")
    coverage: float | None = Field(description="Share of pairs where both gave a regular label.")
    reason: str | None = Field(None, description="Why the rates are null (no pairs); null when they are defined.")


class Association(BaseModel):
    """The one association statistic reported (docs/method.md §2, binary verdicts)."""

    statistic: Literal["phi"] = Field("phi", description="The statistic reported: phi.")
    value: float | None = Field(description="phi of the binary verdicts; null when undefined.")
    reason: str | None = Field(None, description="Why the value is null (undefined); null when it is defined.")
    note: str = Field(description="What phi measures and its limits, in one sentence.")


class Kappa(BaseModel):
    """Cohen's kappa with its interval, next to both raters' positive rates (docs/method.md §2)."""

    value: float | None = Field(description="Cohen's kappa; null when undefined.")
    standard_error: float | None = Field(description="Its standard error.")
    interval: tuple[float, float] | None = Field(description="Its interval [low, high] at confidence_level.")
    interval_method: str | None = Field(description="How the interval was computed.")
    confidence_level: float = Field(description="Coverage of the interval.")
    human_positive_rate: float | None = Field(
        description="Share of the human's scored verdicts that are the positive label."
    )
    judge_positive_rate: float | None = Field(
        description="Share of the judge's scored verdicts that are the positive label."
    )
    reason: str | None = Field(None, description="Why the value is null (undefined); null when it is defined.")


class Bounds(BaseModel):
    """What the full set of pairs allows under exclusion (docs/method.md §7, "Coverage")."""

    covered_accuracy: Stat = Field(description="Accuracy on the pairs where both gave a regular label.")
    manski_accuracy: Bound = Field(description="Accuracy bounds over every outcome of the abstained pairs (Manski).")
    sharp: dict[str, Bound] = Field(description="Sharp bounds over every allocation of the abstained pairs.")


class ProtocolOut(BaseModel):
    """The declared protocol a number was computed under (docs/method.md §7)."""

    scale: str = Field(description="The project's scale.")
    population: str = Field(description="The pairs a number is about, in one phrase.")
    handling: Handling = Field(
        description="How CANNOT_ASSESS is treated: exclude, recode (to recode_to) or three_class."
    )
    recode_to: str | None = Field(description="The label CANNOT_ASSESS is recoded to (handling recode); else null.")
    labels: list[str] = Field(description="The project's labels, in order.")
    positive: str = Field(description="The positive (MET) label F1, phi and positive rates refer to.")
    costs: str = Field(description="Disagreement costs: nominal, linear or quadratic.")
    ordering: list[str] = Field(description="The categories in the order the costs assume.")
    cost_matrix: list[list[float]] = Field(
        description="cost_matrix[i][j]: the cost of human category i against judge category j."
    )
    aggregation: str = Field(description="How criteria are aggregated: micro, macro or item.")
    resampling_unit: str = Field(description="What intervals resample: items.")
    rule: Rule | None = Field(None, description="How criteria are combined per item (aggregation 'item' only).")


class Comparison(BaseModel):
    """One judge against the primary human on one table of pairs."""

    protocol: ProtocolOut = Field(description="The protocol the numbers were computed under.")
    table: TableOut = Field(description="Counts of every (human, judge) verdict pair, special values included.")
    scored_table: TableOut = Field(description="Counts of the pairs scored under the handling rule.")
    n_items: int = Field(description="Pairs in the table (N).")
    n_eff: int = Field(description="Pairs scored under the handling rule.")
    human_marginals: Marginals = Field(description="The human's verdict distribution.")
    judge_marginals: Marginals = Field(description="The judge's verdict distribution.")
    rates: Rates = Field(description="Abstention, invalid and coverage rates.")
    accuracy: Stat = Field(description="Share of scored pairs where judge and human agree.")
    association: Association = Field(description="phi of the binary verdicts.")
    kappa: Kappa = Field(description="Cohen's kappa with its interval.")
    f1_met: Stat = Field(description="F1 of the positive label, the human as reference.")
    bounds: Bounds = Field(description="What the full set of pairs allows under exclusion.")


class CriterionComparison(Comparison):
    criterion: str = Field(description="The criterion compared.")


class Included(BaseModel):
    statistic: str = Field(description="The statistic.")
    included: int = Field(description="Criteria where it is defined (and enters the aggregate).")
    total: int = Field(description="Criteria in all.")


class AggregateOut(BaseModel):
    """The criteria aggregated at one level; never compare across levels (docs/method.md §7)."""

    aggregation: Level = Field(
        description="micro (pooled pairs), macro (mean over criteria) or item (criteria combined per item)."
    )
    level: Level = Field(
        description="Deprecated: the same as aggregation, sent for one release.", json_schema_extra={"deprecated": True}
    )
    criteria: list[str] = Field(description="The criteria aggregated.")
    protocol: ProtocolOut = Field(description="The protocol the numbers were computed under.")
    accuracy: Stat = Field(description="Aggregated accuracy.")
    association: Association = Field(description="Aggregated phi.")
    kappa: Kappa = Field(description="Aggregated Cohen's kappa.")
    f1_met: Stat = Field(description="Aggregated F1 of the positive label.")
    included: list[Included] = Field(description="Criteria entering each statistic, out of all.")
    pooled: Comparison | None = Field(description="The pooled (micro) or combined (item) table; null for macro.")


class JudgeReport(BaseModel):
    judge: str = Field(description="External id of the judge.")
    human: str = Field(description="External id of the primary human it is compared with.")
    criteria: list[CriterionComparison] = Field(description="The comparison on each criterion.")
    aggregate: AggregateOut = Field(description="The criteria aggregated at the project's level.")


class ChecklistItem(BaseModel):
    item: str = Field(description="What a report should state.")
    satisfied: bool = Field(description="Whether this report states it.")
    why: str = Field(description="Why it is satisfied, or what fails.")


class Report(BaseModel):
    """The protocol-aware report of a project (docs/method.md §7)."""

    project: str = Field(description="The project's id.")
    project_name: str = Field(description="The project's name.")
    label_seq: int = Field(description="The project's label_seq the report was computed at.")
    protocol: ProtocolOut = Field(description="The project's declared protocol.")
    criteria: list[str] = Field(description="The criteria reported.")
    judges: list[JudgeReport] = Field(description="Each judge against the primary human.")
    checklist: list[ChecklistItem] = Field(description="What a reader should be told, and whether the report tells it.")
    notes: list[str] = Field(description="Remarks on the numbers, one sentence each.")


# --------------------------------------------------------------------------- assembly
