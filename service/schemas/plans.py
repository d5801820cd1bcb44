"""Plans' bodies: what to plan for and from what, and the plan read."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from service.schemas.base import Strict
from service.schemas.plan_checks import PlanCheckRead

Design = Literal["auto", "strat", "disjoint", "seq-refined", "seq-coverage", "random", "depth-first", "neyman"]


class PlanCreate(Strict):
    """What to plan for and from what (docs/method.md §4–5)."""

    purpose: Literal["certify", "rank"] = Field(
        "certify",
        description="certify one judge against the humans, or rank several judges (a judge's drift plan, the "
        "anchor items each new version re-labels, is POST /projects/{pid}/raters/{rid}/anchor-panel).",
    )
    source: Literal["prior", "pilot"] = Field(
        "prior", description="Plan from prior accuracies (p_h, p_j) or from the pilot labels in hand."
    )
    p_h: float | None = Field(None, gt=0, lt=1, description="Prior human accuracy (source=prior).")
    p_j: float | None = Field(None, gt=0, lt=1, description="Prior judge accuracy (source=prior).")
    n_raters: int | None = Field(
        None, ge=2, le=100, description="K humans, primary included; default: the project's humans (at least 2)."
    )
    n_judges: int | None = Field(None, ge=2, le=100, description="Judges to rank (purpose=rank).")
    delta_min: float | None = Field(None, gt=0, lt=1, description="Smallest judge margin to resolve (purpose=rank).")
    design: Design = Field(
        "auto",
        description="How the overlap items are drawn for the secondaries; auto picks the one with the smallest "
        "simulated error (docs/method.md §5).",
    )
    strata: str = Field(
        "agreement",
        max_length=200,
        description="Strata of the neyman design, known before any overlap: 'agreement' (judge-primary "
        "agreement), 'labels' (the cell primary label x judge label; source=prior), or 'feature:<name>' "
        "(the value of the items' feature <name>, given on upload; every item needs one, every value at "
        "least 2 items, at most 100 values). S_h per stratum from the prior (with the judge-primary "
        "agreement seen in it) or the pilot (docs/method.md §9).",
        examples=["agreement", "labels", "feature:domain"],
    )
    m: int | None = Field(None, ge=1, description="Override the recipe's overlap per secondary annotator.")
    slices: str | None = Field(
        None,
        pattern=r"^feature:.+$",
        max_length=200,
        description="'feature:<name>' (purpose certify, design strat): size the overlap so each value's slice can be "
        "decided, the recipe on the slice's items at its epsilon (the decision's slice_epsilon), and draw the panel "
        "slice by slice, each stratified by the primary's label; with m given, m is the budget, shared across "
        "slices by Neyman allocation (docs/method.md §3b). Every item needs a value, every value 2 items.",
        examples=["feature:language"],
    )
    budget: int | None = Field(
        None,
        ge=1,
        description="Monitoring budget per secondary (anytime mode, list designs): while the monitored decision is "
        "'continue', a secondary's batches go on past m with items drawn by the same design, up to this many; "
        "reached and still open, the decision is 'inconclusive'. Default: the simulated overlap by which "
        "(1 + power)/2 of the monitored runs decide (docs/method.md §8.1). Below m: 422.",
    )
    seed: int | None = Field(None, ge=0, lt=2**63, description="Seed of the item draw; random when absent.")
    promise: Literal["rater", "judge"] = Field(
        "rater",
        description="What the certification's m keeps false rejection within alpha_sig/2 for: 'rater', each "
        "held-out human (the default), or 'judge', the judge as a whole (P(omega < omega_threshold)), a smaller m "
        "(docs/method.md §4, item 6). 'judge' plans from priors with design 'disjoint' under the margin rule on "
        "p_o, paired estimator, monitoring 'fixed' (its promise is the one look at m); elsewhere 422. The plan "
        "says which it keeps (recipe.promise) and shows the per-human m beside it (recipe.m_per_rater).",
        examples=["rater", "judge"],
    )

    @model_validator(mode="after")
    def _needs(self) -> PlanCreate:
        if self.source == "prior" and (self.p_h is None or self.p_j is None):
            raise ValueError("source 'prior' needs p_h and p_j")
        if self.promise == "judge" and (self.purpose, self.source, self.design) != ("certify", "prior", "disjoint"):
            raise ValueError(
                "promise 'judge' plans a certification from priors on disjoint secondaries (one held-in label per "
                "overlap item): use purpose 'certify', source 'prior' and design 'disjoint'"
            )
        if self.budget is not None and self.m is not None and self.budget < self.m:
            raise ValueError(
                f"budget {self.budget} is below m = {self.m}: the budget is at or after the planned overlap"
            )
        if self.purpose == "rank" and self.delta_min is None:
            raise ValueError("purpose 'rank' needs delta_min")
        if self.slices is not None and (self.purpose != "certify" or self.design != "strat"):
            raise ValueError("slices plan a stratified certification panel: use purpose 'certify' and design 'strat'")
        if self.strata not in ("agreement", "labels") and not (
            self.strata.startswith("feature:") and len(self.strata) > len("feature:")
        ):
            raise ValueError(f"strata must be 'agreement', 'labels' or 'feature:<name>', got {self.strata[:100]!r}")
        if self.strata == "labels" and self.source != "prior":
            raise ValueError("strata 'labels' take each cell's spread from the prior: use source 'prior'")
        if "strata" in self.model_fields_set and self.design != "neyman":
            raise ValueError(
                f"strata choose the neyman design's strata; design {self.design!r} has none (use design 'neyman')"
            )
        return self


class PlanRead(BaseModel):
    id: str = Field(description="The plan's id.")
    purpose: str = Field(description="certify or rank.")
    source: str = Field(description="prior or pilot.")
    design: str = Field(description="The design the overlap items are drawn by.")
    seed: int = Field(description="Seed of the item draw (resend it to draw the same items).")
    m: int | None = Field(
        description="Overlap per secondary: the items each secondary human labels beside the primary, who labels "
        "every item. Null when no overlap fits (the recipe says why)."
    )
    label_seq: int = Field(description="The project's label_seq when the plan was made.")
    created_at: datetime = Field(description="When the plan was made (UTC).")
    recipe: dict[str, Any] = Field(
        description="The planner's recipe: its inputs, the overlap it needs and why (docs/method.md §4)."
    )
    check: PlanCheckRead | None = Field(
        None, description="Each candidate design simulated at the planned overlap (certification plans)."
    )
    progress: dict[str, Any] | None = Field(
        None, description="How far the secondaries are through the plan; null when the plan is not in force."
    )
