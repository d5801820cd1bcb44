"""Request and response bodies of the simulation endpoints and of the stateless ``/agreement``."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import BaseModel, Field, model_validator

from planner import Rule, Scale
from service.schemas.base import Labels, Strict

Probability = Annotated[float, Field(ge=0, le=1)]
Rate = Annotated[float, Field(gt=0, le=1)]
DesignName = Literal["random", "depth-first", "shared-panel", "strat", "disjoint", "seq-refined", "seq-coverage"]
CoefficientName = Literal["po", "kappa", "alpha"]
JobStatus = Literal["queued", "running", "done", "failed"]


class SimulateBody(Strict):
    """Settings of a simulation (docs/method.md §6); every field has a default from the project.

    Without ``replay``, synthetic matrices are drawn from a symmetric noise channel. With
    ``replay: true`` the project's own dense labels (humans and judges who labeled every
    item) are subsampled instead, and the generator fields must be left out.
    """

    replay: bool = Field(False, description="Replay the project's dense labels instead of synthetic ones.")
    criterion: str | None = Field(None, description="Criterion whose labels are used; default the first.")
    n_items: int | None = Field(None, ge=1, description="Default: the project's item count.")
    n_humans: int | None = Field(
        None, ge=2, le=50, description="K humans, primary included; default: the plan's K, else the project's humans."
    )
    n_labels: int | None = Field(None, ge=2, le=100, description="Default: the project's label count.")
    p_h: Probability | Annotated[list[Probability | list[Probability]], Field(min_length=1, max_length=20)] | None = (
        Field(None, description="Human accuracy, a grid of them, or per-rater lists; default: the plan's prior.")
    )
    p_j: Probability | Annotated[list[Probability], Field(min_length=1, max_length=20)] | None = Field(
        None, description="Judge accuracy, one per judge; default: the plan's prior."
    )
    prevalence: Annotated[list[Annotated[float, Field(ge=0, le=1)]], Field(min_length=2, max_length=100)] | None = (
        Field(None, description="Label shares; default: the primary's labels in hand, else uniform.")
    )
    rho: Rate | Annotated[list[Rate], Field(min_length=1, max_length=50)] | None = Field(
        None, description="Overlap rate(s); default: the plan's m / n, else 0.05, 0.1, 0.15, 0.25, 0.5."
    )
    design: DesignName | Annotated[list[DesignName], Field(min_length=1, max_length=6)] | None = Field(
        None, description="Design(s); default: the plan's design, else strat."
    )
    coefficient: CoefficientName | Annotated[list[CoefficientName], Field(min_length=1, max_length=3)] | None = Field(
        None, description="Coefficient(s) F; default: the project's decision coefficient."
    )
    rule: Rule | None = Field(None, description="Decision rule; default: the project's.")
    epsilon: Probability | None = Field(None, description="Margin; default: the project's (or the rule's default).")
    delta: float | None = Field(None, gt=0, lt=1, description="Precision target; default: the project's target.delta.")
    omega_threshold: float | None = Field(None, gt=0, le=1, description="Pass threshold; default: the project's.")
    q: float | None = Field(None, gt=0, lt=1, description="BY level of the alt-test; default: the project's.")
    alpha_sig: float | None = Field(
        None, gt=0, lt=1, description="min_rho is the smallest rho with reliability >= 1 - alpha_sig."
    )
    trials: int = Field(300, ge=1, le=100_000, description="Simulated trials per grid cell.")
    clusters: int | None = Field(None, ge=1, description="Items in this many clusters of shared difficulty.")
    cluster_difficulty: Probability = Field(
        0.5, description="How strongly an item's cluster sets its difficulty, 0 (not) to 1."
    )
    seed: int | None = Field(None, ge=0, lt=2**63, description="Random seed; drawn (and echoed) when absent.")


class SimulationSettings(BaseModel):
    """The settings a simulation ran with, defaults resolved."""

    replay: bool = Field(description="Whether the project's dense labels were replayed instead of synthetic ones.")
    criterion: str | None = Field(None, description="Criterion whose labels were replayed; null for synthetic labels.")
    n_items: int = Field(description="Items per simulated matrix.")
    n_humans: int = Field(description="K humans, primary included.")
    n_judges: int = Field(description="Judges simulated.")
    n_labels: int = Field(description="Regular labels L.")
    p_h: float | list[float | list[float]] | None = Field(
        None, description="Human accuracy, a grid of them, or per-rater lists."
    )
    p_j: list[float] | None = Field(None, description="Judge accuracy, one per judge.")
    prevalence: list[float] | None = Field(None, description="Label shares of the simulated items.")
    rho: list[float] = Field(description="Overlap rates m / n of the grid.")
    design: list[str] = Field(description="Designs of the grid.")
    coefficient: list[str] = Field(description="Coefficients F of the grid.")
    rule: str = Field(description="Decision rule.")
    epsilon: float = Field(description="Margin.")
    delta: float = Field(description="Precision target of the human-pool score.")
    omega_threshold: float = Field(description="Share of humans the judge must win to pass.")
    q: float = Field(description="BY level of the alt-test.")
    alpha_sig: float = Field(description="min_rho is the smallest rho with reliability >= 1 - alpha_sig.")
    trials: int = Field(description="Simulated trials per grid cell.")
    clusters: int | None = Field(None, description="Clusters of shared difficulty; null: none.")
    cluster_difficulty: float | None = Field(
        None, description="How strongly a cluster sets its items' difficulty; null: no clusters."
    )
    seed: int = Field(description="The random seed used (resend it to repeat the run).")
    humans: list[str] | None = Field(None, description="Replay: the humans' external ids, primary first.")
    judges: list[str] | None = Field(None, description="Replay: the judges' external ids.")
    label_seq: int | None = Field(None, description="Replay: the last label event included.")
    work: int = Field(description="trials x grid cells x n_items x raters: the size bound's measure.")


class SimulationCellRead(BaseModel):
    """One grid point (docs/method.md §6); null where a rate has no denominator."""

    rho: float = Field(description="Overlap rate m / n.")
    design: str = Field(description="The design.")
    coefficient: str = Field(description="The coefficient F.")
    p_h: float | list[float] | None = Field(description="Human accuracy of this cell.")
    m: int = Field(description="Items per secondary human.")
    bias: float | None = Field(description="Mean of sparse minus dense human-pool score.")
    std: float | None = Field(description="Standard deviation of sparse minus dense human-pool score.")
    reliability: float = Field(description="Pr(|sparse - dense| <= delta).")
    false_rejection: float | None = Field(
        description="Share of judges passing on the dense matrix that the sparse decision rejects; null when none "
        "passes densely."
    )
    false_approval: float | None = Field(
        description="Share of judges not passing densely that the sparse decision passes; null when all pass densely."
    )
    wrong_decision: float = Field(description="Share of trials whose sparse decision differs from the dense one.")
    rater_false_rejection: float | None = Field(
        description="Per held-out human: share of dense wins the sparse rule loses."
    )
    undefined: int = Field(description="Trials whose sparse human-pool score is undefined.")
    trials: int = Field(description="Trials simulated.")


class MinRhoRead(BaseModel):
    """The simulated requirement of one curve: the smallest rho with reliability >= 1 - alpha_sig."""

    design: str = Field(description="The curve's design.")
    coefficient: str = Field(description="The curve's coefficient F.")
    p_h: float | list[float] | None = Field(description="The curve's human accuracy.")
    alpha_sig: float = Field(description="The target: reliability >= 1 - alpha_sig.")
    rho: float | None = Field(description="null when no rho of the grid reaches the target.")


class SimulationResultRead(BaseModel):
    n_items: int = Field(description="Items per simulated matrix.")
    n_humans: int = Field(description="K humans, primary included.")
    n_labels: int = Field(description="Regular labels L.")
    rule: str = Field(description="Decision rule.")
    epsilon: float = Field(description="Margin.")
    delta: float = Field(description="Precision target of the human-pool score.")
    omega_threshold: float = Field(description="Share of humans the judge must win to pass.")
    q: float = Field(description="BY level of the alt-test.")
    cells: list[SimulationCellRead] = Field(description="Every grid point's rates.")
    min_rho: list[MinRhoRead] = Field(description="Each curve's smallest sufficient rho.")


class SimulationRun(BaseModel):
    """A simulation small enough to answer at once."""

    status: Literal["done"] = Field("done", description="Always done: the result is in this answer.")
    settings: SimulationSettings = Field(description="The settings the simulation ran with, defaults resolved.")
    result: SimulationResultRead = Field(description="The simulated rates.")


class SimulationQueued(BaseModel):
    """A simulation too large to answer at once: poll ``poll`` for progress and result."""

    id: str = Field(description="The job's id.")
    status: JobStatus = Field(description="queued, running, done or failed.")
    poll: str = Field(description="The path to GET for progress and result.")


class SimulationJob(BaseModel):
    """A simulation job; ``done``/``total`` count grid cells."""

    id: str = Field(description="The job's id.")
    status: JobStatus = Field(description="queued, running, done or failed.")
    done: int = Field(description="Grid cells simulated so far.")
    total: int = Field(description="Grid cells in all.")
    settings: SimulationSettings = Field(description="The settings the simulation runs with, defaults resolved.")
    result: SimulationResultRead | None = Field(description="The simulated rates; null until done.")
    error: str | None = Field(description="Why the job failed; null unless failed.")
    created_at: datetime = Field(description="When the job was queued (UTC).")
    finished_at: datetime | None = Field(description="When it finished; null until then.")


LabelValue = Annotated[float, Field(ge=-1e12, le=1e12)]
"""A number an interval-scale label stands for: finite, and small enough that squared differences are too."""


class AgreementBody(Strict):
    """A label matrix: rows are items, columns raters, ``null`` a missing rating."""

    labels: Labels
    scale: Scale = Field("nominal", description="How the labels relate: nominal, ordinal or interval.")
    values: Annotated[list[LabelValue], Field(min_length=2, max_length=100)] | None = Field(
        None, description="Interval scale only: the number each label stands for (default 0..L-1)."
    )
    matrix: list[list[str | None]] = Field(
        min_length=1, description="One row per item, one column per rater; each cell a label or null (missing)."
    )
    confidence_level: float = Field(0.95, gt=0, lt=1, description="Coverage of each coefficient's interval.")
    level: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Deprecated name of confidence_level, accepted for one release (answered with a Deprecation "
        "header); sending both with different values is a 422.",
        json_schema_extra={"deprecated": True},
    )
    n_resamples: int = Field(1000, ge=1, le=10_000, description="Bootstrap resamples of the intervals.")
    seed: int | None = Field(None, ge=0, lt=2**63, description="Seed of the bootstrap, for reproducible intervals.")

    @model_validator(mode="after")
    def _one_confidence_level(self) -> Self:
        old = self.__dict__["level"]
        if old is not None:
            if "confidence_level" in self.model_fields_set and old != self.confidence_level:
                raise ValueError("send confidence_level only (level is its deprecated name)")
            self.confidence_level = old
        return self


Approximate = Annotated[
    bool,
    Field(
        description="The interval comes from fewer than 100 items or a minority label under 10 ratings (under 50 for "
        "an agreement coefficient's): its coverage may fall short of nominal (docs/method.md §2)."
    ),
]


class EstimateRead(BaseModel):
    """A coefficient with its interval; ``statistic`` null and ``defined`` false when undefined."""

    coefficient: str = Field(description="The coefficient: po, kappa, alpha or ac1.")
    statistic: float | None = Field(description="Its value; null when undefined.")
    n_items: int = Field(description="Items it was computed over.")
    defined: bool = Field(description="Whether it is defined.")
    reason: str = Field(description="Why it is undefined; empty when it is defined.")
    interval: list[float | None] = Field(
        description="Its interval [low, high] at the confidence level; ends null when undefined."
    )
    interval_method: Literal["bca", "percentile"] = Field(
        description="How the interval was computed: 'bca' (bias-corrected and accelerated item bootstrap) where it "
        "is approximate, where BCa was measured to cover better, else 'percentile' (docs/method.md §2)."
    )
    approximate: Approximate
    approximate_reason: str = Field(
        description="Why the interval is approximate ('' when it is not): e.g. 'the minority label has 34 ratings, "
        "fewer than 50' (at 100 items under such a skew kappa's and alpha's percentile intervals covered .92 of "
        ".95; docs/method.md §2).",
        examples=["", "the minority label has 34 ratings, fewer than 50"],
    )


class AgreementRead(BaseModel):
    n_items: int = Field(description="Items (rows) read.")
    n_raters: int = Field(description="Raters (columns) read.")
    scale: Scale = Field(description="The scale the coefficients were computed on.")
    confidence_level: float = Field(description="Coverage of the intervals.")
    level: float = Field(
        description="Deprecated: the same as confidence_level, sent for one release.",
        json_schema_extra={"deprecated": True},
    )
    n_resamples: int = Field(description="Bootstrap resamples used.")
    coefficients: dict[str, EstimateRead] = Field(description="po, kappa, alpha and ac1 (docs/method.md §2).")
