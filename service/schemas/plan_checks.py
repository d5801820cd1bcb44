"""The ``check`` block of a plan: each candidate design simulated at the planned overlap (docs/method.md §6)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Rate = float | None


class DesignCheckRead(BaseModel):
    """One design's simulated error rates at overlap ``m`` with their Monte Carlo SE; null = undefined."""

    design: str = Field(description="The design simulated.")
    m: int = Field(description="Overlap per secondary annotator simulated.")
    trials: int = Field(description="Simulated trials.")
    fr: Rate = Field(description="Share of trials in which the judge of the prior (good in population) is rejected.")
    fr_se: Rate = Field(description="Monte Carlo SE of fr.")
    rater_fr: Rate = Field(
        description="The good judge's share of lost comparisons per held-out human: the secondaries pooled, the "
        "primary apart, the larger of the two."
    )
    rater_fr_se: Rate = Field(description="Monte Carlo SE of rater_fr.")
    fa: Rate = Field(description="Share of trials in which the mirror judge (as far below -epsilon) passes.")
    fa_se: Rate = Field(description="Monte Carlo SE of fa.")
    wrong: Rate = Field(description="Wrong-decision rate: (fr + fa) / 2, the two judges equally likely.")
    wrong_se: Rate = Field(description="Monte Carlo SE of wrong.")
    inconclusive: Rate = Field(
        description="Share of trials the bootstrap would call inconclusive (normal approximation; margin rule, p_o)."
    )
    inconclusive_se: Rate = Field(description="Monte Carlo SE of inconclusive.")
    p_j_bad: Rate = Field(description="Accuracy of the mirror judge whose FA is measured.")
    keeps_promise: bool = Field(
        description="The promised rate keeps the promise with its Monte Carlo error inside it: rate + 2 SE <= promise."
    )
    promise_status: Literal["kept", "unresolved", "broken", "undefined"] = Field(
        description="kept: rate + 2 SE <= promise; broken: rate - 2 SE > promise (m is raised unless the request "
        "fixed it); unresolved: in between, the trials cannot tell (the recipe's m stands, a raised m is raised "
        "until kept); undefined: the promised rate is."
    )
    note: str = Field(description="Why a rate is undefined (empty when all are defined).")


class PlanCheckRead(BaseModel):
    """Simulated decision errors of the candidate designs and of the plan as made (docs/method.md §6)."""

    simulated: bool = Field(description="Whether the designs were simulated.")
    reason: str = Field(description="What was simulated, or why nothing was.")
    channel: dict[str, float | str] | None = Field(
        None, description="The noise channel simulated: p_h, p_j and their source (the prior, or fitted to the pilot)."
    )
    promised: Literal["rater_fr", "fr"] | None = Field(
        None,
        description="The rate the recipe promises to hold: per held-out human (margin) or per judge (alt-test, "
        "or the margin rule planned with promise 'judge').",
    )
    promise: float | None = Field(None, description="alpha_sig / 2.")
    m_compared: int | None = Field(None, description="The overlap at which the candidate designs are compared.")
    designs: dict[str, DesignCheckRead] = Field(default_factory=dict, description="Each candidate at m_compared.")
    plan: DesignCheckRead | None = Field(None, description="The chosen design at the planned overlap.")
    raised_from: int | None = Field(
        None, description="The recipe's overlap when its simulated promise failed and the plan raised it."
    )
