"""The live documents dashboards poll: ``/reliability`` (the judge's status) and ``/ranking``.

Undefined numbers are ``null`` and come with a ``reason``; intervals are ``[low, high]`` pairs
whose ends are ``null`` when undefined. Models forbid extra fields, so a test that validates
served documents catches any drift between the code that builds them and this contract.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.simulations import Approximate, EstimateRead

Interval = list[float | None]
CiMethod = Annotated[
    Literal["percentile", "delta"],
    Field(
        description="How ci was computed: a percentile item bootstrap, or estimate +- z SE under the PPI or Neyman "
        "estimate (docs/method.md §2, §9)."
    ),
]


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RaterMargin(_Document):
    """One held-out human: the overlap ``m`` and the judge's margin over it (or the alt-test)."""

    rater: str
    m: int
    d: float | None = Field(description="Judge's pool score minus the human's (margin rule); null under the alt-test.")
    rho_f: float | None
    rho_h: float | None
    p_value: float | None
    ci: Interval = Field(description="Fixed-sample interval: valid at the planned overlap only, not at every look.")
    ci_method: CiMethod
    approximate: Approximate
    won: bool | None = Field(
        description="Whether the fixed-sample rule won this human; null when skipped. Under anytime monitoring "
        "the decision reads monitoring.raters[].status instead."
    )
    reason: str


class HumanPool(_Document):
    """The human-pool score: mean over humans of their agreement with the others."""

    estimate: float | None
    ci: Interval
    ci_method: CiMethod
    approximate: Approximate
    n_raters: int


class BandPoint(_Document):
    """One point of a human's confidence sequence: bounds on ``d_k`` after ``n`` usable items."""

    label_seq: int
    n: int
    lower: float
    upper: float


class RaterMonitoring(_Document):
    """One held-out human under anytime-valid monitoring (docs/method.md §8)."""

    rater: str
    status: Literal["won", "lost", "open"] = Field(description="Certified won or lost at some look, else open.")
    certified_at_label_seq: int | None
    e_value: float | None = Field(description="Capital against 'the judge is worse than the margin'.")
    e_value_lost: float | None = Field(description="Capital against 'the judge is within the margin'.")
    threshold: float = Field(description="What one e-value must reach alone (K / alpha).")
    n: int = Field(description="Usable items in arrival order.")
    d: float | None
    cs: Interval = Field(description="Confidence-sequence bounds on d_k now (valid at every look).")
    band_agrees: bool = Field(
        description="Whether the band now tells the status: won above -epsilon, lost below, open across "
        "(the status is the e-values', docs/method.md §8)."
    )
    band: list[BandPoint] = Field(description="The confidence sequence at up to 60 points of label_seq.")


class Monitoring(_Document):
    """The decision that may be read at every look, and what it rests on (docs/method.md §8)."""

    mode: Literal["anytime", "fixed"]
    decision: Literal["pass", "reject", "continue", "inconclusive", "insufficient_data"]
    reason: str
    looks: int = Field(description="Prefixes (distinct label_seq values) at which the decision was evaluated.")
    decided_at_label_seq: int | None
    needed_won: int
    budget: int | None = Field(
        description="Usable overlap per human after which 'continue' is 'inconclusive': the plan's monitoring "
        "budget (docs/method.md §8.1); in anytime mode the secondaries' lists grow to it while the decision is open."
    )
    settle: str | None = Field(
        None, description="For an inconclusive decision, what would settle it (docs/method.md §8.1); else null."
    )
    alpha: float
    epsilon: float
    multiplicity: Literal["e-bh", "bonferroni"]
    weighting: Literal["none", "ht"] = Field(
        description="'ht': the e-processes bet on inverse-inclusion-weighted differences and d is the "
        "weighted mean (a Neyman panel, docs/method.md §9)."
    )
    raters: list[RaterMonitoring]


class ShownAs(_Document):
    """A decision as a document showed it."""

    decision: str
    label_seq: int = Field(description="The label_seq of the document that first showed it.")
    decided_at_label_seq: int | None = Field(description="The label_seq the monitor decided at (anytime mode).")


class Rewritten(_Document):
    """A pass or reject already shown that the labels in hand now decide otherwise (docs/method.md §8.3)."""

    label_seq: int = Field(
        description="The first label event after the shown decision that changed or retracted a label it read "
        "(the document's label_seq when none did: the settings or the plan changed)."
    )
    shown: ShownAs
    decision: str = Field(description="The decision now.")
    corrected: dict[str, int] = Field(description="Per rater, labels it read that were changed since.")
    retracted: dict[str, int] = Field(description="Per rater, labels it read that were retracted since.")
    changed: str = Field(description="What changed, in one sentence.")


class JudgeValidation(_Document):
    """One judge's decision against the human pool, with the per-human margins behind it.

    ``decision`` is the one in force: the monitored decision in anytime mode, else the
    fixed-sample one (``provisional`` until every secondary has the plan's ``m``);
    ``fixed_decision`` is the fixed-sample decision in both modes.
    """

    judge: str
    decision: str
    reason: str
    omega: float | None = Field(
        description="Share of humans won: certified won under anytime monitoring, else by the fixed-sample rule."
    )
    fixed_omega: float | None = Field(description="The fixed-sample rule's share of humans won.")
    omega_threshold: float
    p_opposite: float | None
    rule: str
    coefficient: str
    epsilon: float
    raters: list[RaterMargin]
    human_pool: HumanPool
    provisional: bool
    fixed_decision: str
    monitoring: Monitoring | None
    rewritten_at: Rewritten | None = Field(
        None, description="Set when this judge's decision differs from the pass or reject first shown for it."
    )


class DocumentProtocol(_Document):
    """How abstentions are handled and what is resampled."""

    scale: str
    handling: str
    aggregation: str
    resampling_unit: str
    note: str


class RaterProgress(_Document):
    """Planned items a secondary has labeled."""

    rater: str
    done: int
    listed: int = Field(
        description="Items on its list: the plan's m, more once the list grew past m while the monitored "
        "decision was open (docs/method.md §8.1)."
    )


class PlanProgress(_Document):
    """How far the secondaries are through the plan in force."""

    plan: str
    m_target: int | None
    m_budget: int | None = Field(
        description="The plan's monitoring budget per secondary: lists grow to it while the monitored decision "
        "is open, and an open decision there is inconclusive (docs/method.md §8.1)."
    )
    design: str
    m_done_min: int
    remaining_labels: int = Field(
        description="Listed items not yet labeled, over the secondaries (extensions included)."
    )
    raters: list[RaterProgress]


class FeasibleWith(_Document):
    """What would let an infeasible certification fit: a larger ``epsilon`` (null if none up to
    0.5 does) and the corpus size the recipe needs."""

    epsilon: float | None
    n_items: int | None


class RecipeNow(_Document):
    """The certification recipe re-estimated from the overlap in hand (pilot moments)."""

    source: str
    m_cert: int | None
    reason: str
    feasible: bool | None = None
    more_overlap_needed: int | None = None
    mu_d: float | None = None
    sigma0_sq: float | None = None
    mu_d_ci: Interval | None = None
    sigma0_sq_ci: Interval | None = None
    m_pilot: int | None = None
    n_raters_pilot: int | None = None
    feasible_with: FeasibleWith | None = None


class SliceRater(_Document):
    """One held-out human within a slice."""

    rater: str
    n: int = Field(description="Usable items of this human in the slice (its m, or its monitored n).")
    d: float | None = Field(description="d_k (margin) or rho_f - rho_h (alt-test); the monitored mean in anytime mode.")
    p_value: float | None = Field(description="The alt-test's p-value (fixed mode); null otherwise.")
    status: Literal["won", "lost", "open", "skipped"] = Field(
        description="Fixed mode: won or lost after the correction across slices, skipped when not used; anytime: "
        "certified won or lost at slice level alpha / S, else open."
    )


class SliceRow(_Document):
    """The decision on one value of the slicing feature (docs/method.md §3b)."""

    value: str
    n_items: int = Field(description="Usable items: the judge and at least two humans labeled them.")
    epsilon: float | None
    decision: str
    reason: str
    omega: float | None
    d: float | None = Field(description="Mean over the slice's used humans of d (see SliceRater.d).")
    raters: list[SliceRater]


class Slices(_Document):
    """The first judge's decision per slice, failing slices first (docs/method.md §3b)."""

    by: str = Field(description="'feature:<name>'.")
    mode: Literal["anytime", "fixed"]
    correction: Literal["by-joint", "per-slice", "none", "bonferroni-slices"] = Field(
        description="How slices are corrected: one Benjamini-Yekutieli family over every slice's humans (alt-test, "
        "fixed), nothing (margin rule, fixed: no test), or alpha / S per slice (anytime)."
    )
    q: float | None
    alpha: float | None
    n_items_without: int = Field(description="Items without a value of the feature, in no slice.")
    headline: str = Field(examples=["passes overall; fails on slice de (omega 0.00, d -0.17)"])
    failing: list[str]
    slices: list[SliceRow]


class ReliabilityDocument(_Document):
    """The live status: the first judge's decision at the top level, every judge in ``judges``."""

    label_seq: int
    n_items: int
    criterion: str
    protocol: DocumentProtocol
    rule: str
    coefficient: str
    omega_threshold: float
    weighting: Literal["none", "ht"] = Field(
        description="'ht': estimates weighted by inverse inclusion probability (a Neyman panel)."
    )
    estimator: Literal["paired", "ppi"] = Field(
        description="How secondaries' margins are estimated: the overlap alone, or prediction-powered "
        "from the judge-primary agreement on every item (docs/method.md §9)."
    )
    judge: str | None
    decision: str
    reason: str
    omega: float | None
    fixed_omega: float | None = None
    p_opposite: float | None = None
    epsilon: float | None = None
    raters: list[RaterMargin]
    human_pool: HumanPool
    coefficients: dict[str, EstimateRead]
    coefficients_population: str
    plan: PlanProgress | None
    recipe_now: RecipeNow
    judges: list[JudgeValidation]
    monitoring_mode: Literal["anytime", "fixed"]
    provisional: bool
    fixed_decision: str
    monitoring: Monitoring | None
    slices: Slices | None = Field(
        None, description="Per slice of an item feature (?by=feature:<name>, or the project's decision.slices)."
    )
    rewritten_at: Rewritten | None = Field(
        None, description="The first judge's decision differs from the pass or reject first shown for it."
    )


class JudgeRank(_Document):
    """One judge's score with its interval, and how often it comes first under resampling."""

    judge: str
    score: float | None
    ci: Interval
    omega: float | None
    p_top1: float | None
    n_raters: int
    defined: bool
    reason: str


class RankMargin(_Document):
    """The score difference between two judges, and how often resampling flips their order."""

    better: str
    worse: str
    margin: float | None
    ci: Interval
    p_flip: float | None


class RankingDocument(_Document):
    """Judges ranked by score; empty with a ``reason`` without a judge and two humans."""

    label_seq: int
    criterion: str
    rule: str
    coefficient: str
    judges: list[JudgeRank]
    order: list[str]
    margins: list[RankMargin]
    flip_share: float | None
    n_items: int | None = None
    reason: str | None = None


class IccRead(_Document):
    """One intraclass correlation of the humans' ratings (docs/method.md §2b), listwise over items."""

    form: str
    statistic: float | None
    ci: Interval = Field(description="F-based interval (Shrout & Fleiss 1979; McGraw & Wong 1996).")
    approximate: Approximate
    n_items: int
    n_dropped: int
    reason: str


class ScorePair(_Document):
    """A judge against one human on the items both rated a number (docs/method.md §2b)."""

    judge: str
    human: str
    n_items: int
    ccc: float | None = Field(description="Lin's concordance correlation.")
    ccc_ci: Interval = Field(description="Fisher-z interval of the CCC (Lin 1989).")
    bias: float | None = Field(description="Bland-Altman mean difference, judge minus human.")
    bias_ci: Interval
    sd: float | None = Field(description="SD of the differences.")
    lower: float | None = Field(description="Lower limit of agreement, bias - 1.96 sd.")
    lower_ci: Interval
    upper: float | None = Field(description="Upper limit of agreement, bias + 1.96 sd.")
    upper_ci: Interval
    mae: float | None
    rmse: float | None
    reason: str


class ScoreRaterRead(_Document):
    """One held-out human under the numeric decision (docs/method.md §3d)."""

    rater: str
    m: int
    d: float | None = Field(description="Margin rule: mean agreement difference (judge minus human); else null.")
    rho_f: float | None
    rho_h: float | None
    p_value: float | None
    won: bool | None = Field(description="Whether the judge won this human; null when skipped.")
    reason: str


class ScoreJudgeRead(_Document):
    """One judge's fixed-sample decision on numeric labels (docs/method.md §3d)."""

    judge: str
    decision: str
    reason: str
    omega: float | None
    rho: float | None = Field(description="Alt-test: mean advantage probability; margin: mean d.")
    n_items: int
    raters: list[ScoreRaterRead]


class ScoreRaterMonitoringRead(_Document):
    """One held-out human under anytime monitoring of a score judge (docs/method.md §8b)."""

    rater: str
    m: int = Field(description="Items usable for this human so far (the judge, it and another human rated them).")
    estimate: float | None = Field(description="Running mean of the per-item alignment difference xi.")
    lower: float | None = Field(description="Lower bound of the confidence sequence at alpha / K, after the last item.")
    upper: float | None
    status: Literal["won", "lost", "open"] = Field(
        description="won: the lower bound cleared -epsilon; lost: the upper bound fell below it; never reverts."
    )
    decided_at: int = Field(description="The item count at which the status was certified (0 while open).")


class ScoreMonitoringRead(_Document):
    """One judge's anytime-monitored decision on numeric labels (docs/method.md §8b): valid at every look."""

    judge: str
    decision: str = Field(description="pass, reject, continue or insufficient_data.")
    reason: str
    omega: float | None = Field(description="Share of humans certified won.")
    alpha: float
    raters: list[ScoreRaterMonitoringRead]


class ScoreReliabilityDocument(_Document):
    """``/reliability`` of a numeric project: the first judge's decision at the top level, every judge in
    ``judges``, the humans' ICCs and interval alpha, and each judge-human pair's CCC, Bland-Altman and errors."""

    scale: Literal["numeric"]
    label_seq: int
    criterion: str
    value_range: dict[str, float | None]
    rule: str
    epsilon: float
    q: float
    omega_threshold: float
    n_items: int = Field(description="Items with a number from at least two raters.")
    n_special: int = Field(description="CANNOT_ASSESS and INVALID labels, excluded from every statistic.")
    judge: str | None
    decision: str
    reason: str
    omega: float | None
    rho: float | None
    judges: list[ScoreJudgeRead]
    icc: list[IccRead] = Field(description="The humans' six ICCs (listwise: items every human rated).")
    interval_alpha: float | None = Field(description="Krippendorff's interval alpha of the humans' ratings.")
    interval_alpha_reason: str
    pairs: list[ScorePair]
    monitoring: list[ScoreMonitoringRead] | None = Field(
        None,
        description="Each judge's anytime-monitored decision when decision.monitoring is anytime (null when "
        "fixed); the top-level decision stays the fixed-sample one, valid once at the planned overlap.",
        examples=[
            [
                {
                    "judge": "gpt-judge",
                    "decision": "continue",
                    "reason": "",
                    "omega": 0.5,
                    "alpha": 0.05,
                    "raters": [
                        {
                            "rater": "h1",
                            "m": 400,
                            "estimate": 0.01,
                            "lower": -0.04,
                            "upper": 0.06,
                            "status": "won",
                            "decided_at": 380,
                        }
                    ],
                }
            ]
        ],
    )
    note: str
