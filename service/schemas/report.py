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

    value: float | None
    reason: str | None = None


class Bound(BaseModel):
    """An interval ``[low, high]``; null when it cannot be given, with the cause in ``reason``."""

    value: tuple[float, float] | None
    reason: str | None = None


class TableOut(BaseModel):
    """Counts of (human, judge) verdict pairs."""

    categories: list[str] = Field(description="Row categories (human) = column categories (judge), in order.")
    counts: list[list[int]]
    n: int


class Marginals(BaseModel):
    """One rater's verdict distribution."""

    counts: dict[str, int] = Field(description="Pairs per verdict, CANNOT_ASSESS and INVALID included.")
    scored_shares: dict[str, float] = Field(description="Share of each scored category among the scored pairs.")


class Rates(BaseModel):
    """Shares of all pairs; ``coverage`` = share where both sides gave a regular label (docs/method.md §7)."""

    human_abstain: float | None
    judge_abstain: float | None
    human_invalid: float | None
    judge_invalid: float | None
    coverage: float | None
    reason: str | None = None


class Association(BaseModel):
    """The one association statistic reported (docs/method.md §2, binary verdicts)."""

    statistic: Literal["phi"] = "phi"
    value: float | None
    reason: str | None = None
    note: str


class Kappa(BaseModel):
    """Cohen's kappa with its interval, next to both raters' positive rates (docs/method.md §2)."""

    value: float | None
    standard_error: float | None
    interval: tuple[float, float] | None
    interval_method: str | None
    confidence_level: float
    human_positive_rate: float | None
    judge_positive_rate: float | None
    reason: str | None = None


class Bounds(BaseModel):
    """What the full set of pairs allows under exclusion (docs/method.md §7, "Coverage")."""

    covered_accuracy: Stat
    manski_accuracy: Bound
    sharp: dict[str, Bound] = Field(description="Sharp bounds over every allocation of the abstained pairs.")


class ProtocolOut(BaseModel):
    """The declared protocol a number was computed under (docs/method.md §7)."""

    scale: str
    population: str
    handling: Handling
    recode_to: str | None
    labels: list[str]
    positive: str
    costs: str
    ordering: list[str]
    cost_matrix: list[list[float]]
    aggregation: str
    resampling_unit: str
    rule: Rule | None = Field(None, description="How criteria are combined per item (aggregation 'item' only).")


class Comparison(BaseModel):
    """One judge against the primary human on one table of pairs."""

    protocol: ProtocolOut
    table: TableOut
    scored_table: TableOut
    n_items: int = Field(description="Pairs in the table (N).")
    n_eff: int = Field(description="Pairs scored under the handling rule.")
    human_marginals: Marginals
    judge_marginals: Marginals
    rates: Rates
    accuracy: Stat
    association: Association
    kappa: Kappa
    f1_met: Stat
    bounds: Bounds


class CriterionComparison(Comparison):
    criterion: str


class Included(BaseModel):
    statistic: str
    included: int
    total: int


class AggregateOut(BaseModel):
    """The criteria aggregated at one level; never compare across levels (docs/method.md §7)."""

    aggregation: Level
    level: Level = Field(
        description="Deprecated: the same as aggregation, sent for one release.", json_schema_extra={"deprecated": True}
    )
    criteria: list[str]
    protocol: ProtocolOut
    accuracy: Stat
    association: Association
    kappa: Kappa
    f1_met: Stat
    included: list[Included] = Field(description="Criteria entering each statistic, out of all.")
    pooled: Comparison | None = Field(description="The pooled (micro) or combined (item) table; null for macro.")


class JudgeReport(BaseModel):
    judge: str
    human: str
    criteria: list[CriterionComparison]
    aggregate: AggregateOut


class ChecklistItem(BaseModel):
    item: str
    satisfied: bool
    why: str


class Report(BaseModel):
    """The protocol-aware report of a project (docs/method.md §7)."""

    project: str
    project_name: str
    label_seq: int
    protocol: ProtocolOut
    criteria: list[str]
    judges: list[JudgeReport]
    checklist: list[ChecklistItem]
    notes: list[str]


# --------------------------------------------------------------------------- assembly
