"""The live documents dashboards poll: ``/reliability`` (the judge's status) and ``/ranking``.

Undefined numbers are ``null`` and come with a ``reason``; intervals are ``[low, high]`` pairs
whose ends are ``null`` when undefined. Models forbid extra fields, so a test that validates
served documents catches any drift between the code that builds them and this contract.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.schemas.pairwise import PairwiseBlock
from service.schemas.simulations import Approximate, EstimateRead
from service.schemas.versions import VersionComparisonRead

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

    rater: str = Field(description="External id of the held-out human.")
    m: int = Field(description="Usable overlap items of this human: labeled by it, the judge and another human.")
    d: float | None = Field(description="Judge's pool score minus the human's (margin rule); null under the alt-test.")
    rho_f: float | None = Field(
        description="Alt-test: the judge's advantage probability over this human; null under the margin rule."
    )
    rho_h: float | None = Field(
        description="Alt-test: the human's advantage probability over the judge; null under the margin rule."
    )
    p_value: float | None = Field(
        description="Alt-test: the one-sided p-value of the paired t-test; null under the margin rule."
    )
    ci: Interval = Field(description="Fixed-sample interval: valid at the planned overlap only, not at every look.")
    ci_method: CiMethod
    approximate: Approximate
    won: bool | None = Field(
        description="Whether the fixed-sample rule won this human; null when skipped. Under anytime monitoring "
        "the decision reads monitoring.raters[].status instead."
    )
    reason: str = Field(description="Why a value is undefined or the human was skipped; empty when all are defined.")


class HumanPool(_Document):
    """The human-pool score: mean over humans of their agreement with the others."""

    estimate: float | None = Field(description="The human-pool score; null when undefined.")
    ci: Interval = Field(description="Interval of the estimate, [low, high].")
    ci_method: CiMethod
    approximate: Approximate
    n_raters: int = Field(description="Humans in the pool.")


class BandPoint(_Document):
    """One point of a human's confidence sequence: bounds on ``d_k`` after ``n`` usable items."""

    label_seq: int = Field(description="The label event at which the bounds were read.")
    n: int = Field(description="Usable items of the human then.")
    lower: float = Field(description="Lower bound on d_k then.")
    upper: float = Field(description="Upper bound on d_k then.")


class RaterMonitoring(_Document):
    """One held-out human under anytime-valid monitoring (docs/method.md §8)."""

    rater: str = Field(description="External id of the held-out human.")
    status: Literal["won", "lost", "open"] = Field(description="Certified won or lost at some look, else open.")
    certified_at_label_seq: int | None = Field(
        description="The label_seq at which the status was certified; null while open."
    )
    e_value: float | None = Field(description="Capital against 'the judge is worse than the margin'.")
    e_value_lost: float | None = Field(description="Capital against 'the judge is within the margin'.")
    threshold: float = Field(description="What one e-value must reach alone (K / alpha).")
    n: int = Field(description="Usable items in arrival order.")
    d: float | None = Field(
        description="The judge's mean margin over this human so far (d_k); null without a usable item."
    )
    cs: Interval = Field(description="Confidence-sequence bounds on d_k now (valid at every look).")
    band_agrees: bool = Field(
        description="Whether the band now tells the status: won above -epsilon, lost below, open across "
        "(the status is the e-values', docs/method.md §8)."
    )
    band: list[BandPoint] = Field(description="The confidence sequence at up to 60 points of label_seq.")


class Monitoring(_Document):
    """The decision that may be read at every look, and what it rests on (docs/method.md §8)."""

    mode: Literal["anytime", "fixed"] = Field(
        description="anytime (valid at every look) or fixed (valid once, at the planned overlap)."
    )
    decision: Literal["pass", "reject", "continue", "inconclusive", "insufficient_data"] = Field(
        description="pass, reject, continue, inconclusive or insufficient_data (docs/method.md §3, §8)."
    )
    reason: str = Field(description="Why the decision is what it is, in one sentence.")
    looks: int = Field(description="Prefixes (distinct label_seq values) at which the decision was evaluated.")
    decided_at_label_seq: int | None = Field(
        description="The label_seq at which pass or reject was reached; null while undecided."
    )
    needed_won: int = Field(description="Humans the judge must win to pass (omega_threshold of them).")
    budget: int | None = Field(
        description="Usable overlap per human after which 'continue' is 'inconclusive': the plan's monitoring "
        "budget (docs/method.md §8.1); in anytime mode the secondaries' lists grow to it while the decision is open."
    )
    settle: str | None = Field(
        None, description="For an inconclusive decision, what would settle it (docs/method.md §8.1); else null."
    )
    alpha: float = Field(description="Bound on a wrong decision over every look.")
    epsilon: float = Field(description="The margin in force.")
    multiplicity: Literal["e-bh", "bonferroni"] = Field(
        description="How the humans' e-values are combined: e-BH or Bonferroni."
    )
    weighting: Literal["none", "ht"] = Field(
        description="'ht': the e-processes bet on inverse-inclusion-weighted differences and d is the "
        "weighted mean (a Neyman panel, docs/method.md §9)."
    )
    raters: list[RaterMonitoring] = Field(description="Each held-out human's status and evidence.")


class ShownAs(_Document):
    """A decision as a document showed it."""

    decision: str = Field(description="The decision shown.")
    label_seq: int = Field(description="The label_seq of the document that first showed it.")
    decided_at_label_seq: int | None = Field(description="The label_seq the monitor decided at (anytime mode).")


class Rewritten(_Document):
    """A pass or reject already shown that the labels in hand now decide otherwise (docs/method.md §8.3)."""

    label_seq: int = Field(
        description="The first label event after the shown decision that changed or retracted a label it read "
        "(the document's label_seq when none did: the settings or the plan changed)."
    )
    shown: ShownAs = Field(description="The decision as it was first shown.")
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

    judge: str = Field(description="External id of the judge.")
    decision: str = Field(
        description="The decision in force: pass, reject, continue, inconclusive or insufficient_data "
        "(docs/method.md §3, §8)."
    )
    reason: str = Field(description="Why the decision is what it is, in one sentence.")
    omega: float | None = Field(
        description="Share of humans won: certified won under anytime monitoring, else by the fixed-sample rule."
    )
    fixed_omega: float | None = Field(description="The fixed-sample rule's share of humans won.")
    omega_threshold: float = Field(description="Share of humans the judge must win to pass.")
    p_opposite: float | None = Field(
        description="Bootstrap probability of the opposite fixed-sample decision; null when undefined."
    )
    rule: str = Field(description="The decision rule: margin or alt-test.")
    coefficient: str = Field(description="The agreement coefficient F: po, kappa, alpha or ac1.")
    epsilon: float = Field(description="The margin in force.")
    raters: list[RaterMargin] = Field(description="Each held-out human's margin under the fixed-sample rule.")
    human_pool: HumanPool = Field(description="The human-pool score.")
    provisional: bool = Field(description="A fixed-sample decision read before every secondary has the plan's m.")
    fixed_decision: str = Field(description="The fixed-sample decision, in both monitoring modes.")
    monitoring: Monitoring | None = Field(
        description="The anytime-valid decision and its evidence; null in fixed mode."
    )
    rewritten_at: Rewritten | None = Field(
        None, description="Set when this judge's decision differs from the pass or reject first shown for it."
    )


class DocumentProtocol(_Document):
    """How abstentions are handled and what is resampled."""

    scale: str = Field(description="The project's scale.")
    handling: str = Field(description="How CANNOT_ASSESS is handled here: exclude (left out).")
    aggregation: str = Field(description="Always per criterion: the document reads one criterion.")
    resampling_unit: str = Field(description="What the bootstrap resamples: items.")
    note: str = Field(description="What the protocol means for these numbers, in one sentence.")


class RaterProgress(_Document):
    """Planned items a secondary has labeled."""

    rater: str = Field(description="External id of the secondary.")
    done: int = Field(description="Items of its list it has labeled.")
    listed: int = Field(
        description="Items on its list: the plan's m, more once the list grew past m while the monitored "
        "decision was open (docs/method.md §8.1)."
    )


class PlanProgress(_Document):
    """How far the secondaries are through the plan in force."""

    plan: str = Field(description="The id of the plan in force.")
    m_target: int | None = Field(description="The plan's overlap per secondary, m; null when the plan has none.")
    m_budget: int | None = Field(
        description="The plan's monitoring budget per secondary: lists grow to it while the monitored decision "
        "is open, and an open decision there is inconclusive (docs/method.md §8.1)."
    )
    design: str = Field(description="The plan's design.")
    m_done_min: int = Field(description="Fewest planned items labeled by any secondary.")
    remaining_labels: int = Field(
        description="Listed items not yet labeled, over the secondaries (extensions included)."
    )
    raters: list[RaterProgress] = Field(description="Each secondary's progress.")


class FeasibleWith(_Document):
    """What would let an infeasible certification fit: a larger ``epsilon`` (null if none up to
    0.5 does) and the corpus size the recipe needs."""

    epsilon: float | None = Field(
        description="The smallest margin at which the recipe fits; null if none up to 0.5 does."
    )
    n_items: int | None = Field(description="The corpus size the recipe needs; null if no size does.")


class RecipeNow(_Document):
    """The certification recipe re-estimated from the overlap in hand (pilot moments)."""

    source: str = Field(description="Where the estimate comes from: the pilot (the overlap in hand).")
    m_cert: int | None = Field(
        description="The overlap per secondary the labels in hand call for; null when none can be given."
    )
    reason: str = Field(description="Why the recipe is what it is, or why there is none.")
    feasible: bool | None = Field(None, description="Whether m_cert fits in the corpus; null before any overlap.")
    more_overlap_needed: int | None = Field(
        None, description="Overlap items per secondary still to label to reach m_cert."
    )
    mu_d: float | None = Field(None, description="Estimated mean per-item margin of the judge over a human.")
    sigma0_sq: float | None = Field(None, description="Estimated per-item variance of that margin.")
    mu_d_ci: Interval | None = Field(None, description="Bootstrap interval of mu_d.")
    sigma0_sq_ci: Interval | None = Field(None, description="Bootstrap interval of sigma0_sq.")
    m_pilot: int | None = Field(None, description="Held-out comparisons the estimate rests on.")
    n_raters_pilot: int | None = Field(None, description="Humans in those comparisons.")
    feasible_with: FeasibleWith | None = Field(
        None, description="What would make an infeasible recipe fit; null when it fits."
    )


class SliceRater(_Document):
    """One held-out human within a slice."""

    rater: str = Field(description="External id of the held-out human.")
    n: int = Field(description="Usable items of this human in the slice (its m, or its monitored n).")
    d: float | None = Field(description="d_k (margin) or rho_f - rho_h (alt-test); the monitored mean in anytime mode.")
    p_value: float | None = Field(description="The alt-test's p-value (fixed mode); null otherwise.")
    status: Literal["won", "lost", "open", "skipped"] = Field(
        description="Fixed mode: won or lost after the correction across slices, skipped when not used; anytime: "
        "certified won or lost by the family of every slice's humans (see Slices.correction), else open."
    )


class SliceRow(_Document):
    """The decision on one value of the slicing feature (docs/method.md §3b)."""

    value: str = Field(description="The feature's value shared by the slice's items.")
    n_items: int = Field(description="Usable items: the judge and at least two humans labeled them.")
    epsilon: float | None = Field(description="The margin of this slice (decision.slice_epsilon, else epsilon).")
    decision: str = Field(description="The judge's decision on the slice.")
    reason: str = Field(description="Why the slice's decision is what it is.")
    omega: float | None = Field(description="Share of the slice's humans the judge won; null when none is used.")
    d: float | None = Field(description="Mean over the slice's used humans of d (see SliceRater.d).")
    raters: list[SliceRater] = Field(description="Each held-out human within the slice.")


class Slices(_Document):
    """The first judge's decision per slice, failing slices first (docs/method.md §3b)."""

    by: str = Field(description="'feature:<name>'.")
    mode: Literal["anytime", "fixed"] = Field(description="The monitoring mode the slices are decided in.")
    correction: Literal["by-joint", "per-slice", "none", "e-bh-joint", "bonferroni-slices"] = Field(
        description="How slices are corrected: one Benjamini-Yekutieli family over every slice's humans (alt-test, "
        "fixed), nothing (margin rule, fixed: no test), one e-BH at alpha over every slice's humans' e-processes "
        "(anytime, multiplicity e-bh: false certifications are at most a share alpha of all slices' "
        "certifications), or each e-value at S K / alpha (anytime, multiplicity bonferroni, and numeric projects: "
        "alpha / S per slice)."
    )
    q: float | None = Field(description="The alt-test's BY level across slices (fixed mode); null otherwise.")
    alpha: float | None = Field(
        description="The anytime level of the slices' family (see correction); null in fixed mode."
    )
    n_items_without: int = Field(description="Items without a value of the feature, in no slice.")
    headline: str = Field(
        examples=["passes overall; fails on slice de (omega 0.00, d -0.17)"],
        description="The decision overall and on the failing slices, in one sentence.",
    )
    failing: list[str] = Field(description="Values of the slices the judge does not pass.")
    slices: list[SliceRow] = Field(description="Each slice's decision, failing slices first.")


class ReliabilityDocument(_Document):
    """The live status: the first judge's decision at the top level, every judge in ``judges``."""

    label_seq: int = Field(
        description="The project's label_seq the document was computed at (the last label event it reads)."
    )
    n_items: int = Field(description="Items in the project.")
    criterion: str = Field(description="The criterion the document is about (?criterion=, default the first).")
    protocol: DocumentProtocol = Field(
        description="The protocol the numbers are computed under: the scale, abstentions, the resampling unit."
    )
    rule: str = Field(description="The decision rule: margin or alt-test.")
    coefficient: str = Field(description="The agreement coefficient F: po, kappa, alpha or ac1.")
    omega_threshold: float = Field(description="Share of humans the judge must win to pass.")
    weighting: Literal["none", "ht"] = Field(
        description="'ht': estimates weighted by inverse inclusion probability (a Neyman panel)."
    )
    estimator: Literal["paired", "ppi"] = Field(
        description="How secondaries' margins are estimated: the overlap alone, or prediction-powered "
        "from the judge-primary agreement on every item (docs/method.md §9)."
    )
    judge: str | None = Field(description="External id of the first judge; null when the project has none.")
    decision: str = Field(
        description="The first judge's decision in force: pass, reject, continue, inconclusive or insufficient_data "
        "(docs/method.md §3, §8)."
    )
    reason: str = Field(description="Why the decision is what it is, in one sentence.")
    omega: float | None = Field(description="Share of humans the first judge won; null when undefined.")
    fixed_omega: float | None = Field(None, description="The fixed-sample rule's share of humans won.")
    p_opposite: float | None = Field(None, description="Bootstrap probability of the opposite fixed-sample decision.")
    epsilon: float | None = Field(None, description="The margin in force.")
    raters: list[RaterMargin] = Field(description="Each held-out human's margin against the first judge.")
    human_pool: HumanPool = Field(description="The human-pool score.")
    coefficients: dict[str, EstimateRead] = Field(
        description="po, kappa, alpha and ac1 of the humans, with their intervals."
    )
    coefficients_population: str = Field(description="Whose labels the coefficients are computed over.")
    plan: PlanProgress | None = Field(description="Progress through the plan in force; null without a plan.")
    recipe_now: RecipeNow = Field(description="The certification recipe re-estimated from the overlap in hand.")
    judges: list[JudgeValidation] = Field(description="Every judge's decision, the first one included.")
    monitoring_mode: Literal["anytime", "fixed"] = Field(
        description="anytime (valid at every look) or fixed (valid once, at the planned overlap)."
    )
    provisional: bool = Field(description="A fixed-sample decision read before every secondary has the plan's m.")
    fixed_decision: str = Field(description="The first judge's fixed-sample decision, in both modes.")
    monitoring: Monitoring | None = Field(
        description="The anytime-valid decision and its evidence; null in fixed mode."
    )
    pairwise: PairwiseBlock | None = Field(
        None,
        description="A pairwise project's judges (docs/method.md §13): position consistency and bias, accuracy "
        "against the human majority in both orders, the systems' Bradley-Terry strengths; the decision above "
        "reads each judge's AB-order verdicts.",
    )
    versions: list[VersionComparisonRead] | None = Field(
        None,
        description="Each judge version against the version before it (the judge itself before its first), on the "
        "items both and the primary labelled, as GET /raters/{rid}/versions/compare answers it (docs/method.md §12): "
        "agreements, flip rate, McNemar, the change's paired interval, and whether the new version still passes "
        "there; each version's decision on all its items is its entry in judges. The newest versions' pairs, at most "
        "20 and 2,000,000 items over all (fewer past 100,000 items, one at least); null when no judge has a version "
        "or the project has no primary.",
    )
    slices: Slices | None = Field(
        None, description="Per slice of an item feature (?by=feature:<name>, or the project's decision.slices)."
    )
    rewritten_at: Rewritten | None = Field(
        None, description="The first judge's decision differs from the pass or reject first shown for it."
    )


class JudgeRank(_Document):
    """One judge's score with its interval, and how often it comes first under resampling."""

    judge: str = Field(description="External id of the judge.")
    score: float | None = Field(
        description="The judge's score: its mean d_k (margin) or rho (alt-test); null when undefined."
    )
    ci: Interval = Field(description="Interval of the score, [low, high].")
    omega: float | None = Field(description="Share of humans the judge won.")
    p_top1: float | None = Field(description="Bootstrap probability that this judge ranks first.")
    n_raters: int = Field(description="Held-out humans the score averages over.")
    defined: bool = Field(description="Whether the score is defined.")
    reason: str = Field(description="Why the score is undefined; empty when it is defined.")


class RankMargin(_Document):
    """The score difference between two judges, and how often resampling flips their order."""

    better: str = Field(description="External id of the judge ranked higher.")
    worse: str = Field(description="External id of the judge ranked lower.")
    margin: float | None = Field(description="Score of better minus score of worse.")
    ci: Interval = Field(description="Interval of the margin, [low, high].")
    p_flip: float | None = Field(description="Bootstrap probability that the two judges' order flips.")


class RankingDocument(_Document):
    """Judges ranked by score; empty with a ``reason`` without a judge and two humans."""

    label_seq: int = Field(
        description="The project's label_seq the document was computed at (the last label event it reads)."
    )
    criterion: str = Field(description="The criterion ranked on.")
    rule: str = Field(description="The decision rule whose score ranks: margin (mean d_k) or alt-test (rho).")
    coefficient: str = Field(description="The agreement coefficient F.")
    judges: list[JudgeRank] = Field(description="The judges, best first.")
    order: list[str] = Field(description="External ids of the judges, best first.")
    margins: list[RankMargin] = Field(description="Every pair of judges, with the margin between them.")
    flip_share: float | None = Field(description="Share of pairwise orders that flip under resampling.")
    n_items: int | None = Field(None, description="Items the judges are compared on.")
    reason: str | None = Field(None, description="Why there is no ranking; null when there is one.")


class IccRead(_Document):
    """One intraclass correlation of the humans' ratings (docs/method.md §2b), listwise over items."""

    form: str = Field(description="The ICC form: 1,1, 2,1, 3,1, 1,k, 2,k or 3,k (Shrout & Fleiss).")
    statistic: float | None = Field(description="The ICC; null when undefined.")
    ci: Interval = Field(description="F-based interval (Shrout & Fleiss 1979; McGraw & Wong 1996).")
    approximate: Approximate
    n_items: int = Field(description="Items every human rated (used).")
    n_dropped: int = Field(description="Items left out because a rating was missing.")
    reason: str = Field(description="Why the ICC is undefined; empty when it is defined.")


class ScorePair(_Document):
    """A judge against one human on the items both rated a number (docs/method.md §2b)."""

    judge: str = Field(description="External id of the judge.")
    human: str = Field(description="External id of the human.")
    n_items: int = Field(description="Items both rated with a number.")
    ccc: float | None = Field(description="Lin's concordance correlation.")
    ccc_ci: Interval = Field(description="Fisher-z interval of the CCC (Lin 1989).")
    bias: float | None = Field(description="Bland-Altman mean difference, judge minus human.")
    bias_ci: Interval = Field(description="Interval of the bias.")
    sd: float | None = Field(description="SD of the differences.")
    lower: float | None = Field(description="Lower limit of agreement, bias - 1.96 sd.")
    lower_ci: Interval = Field(description="Interval of the lower limit of agreement.")
    upper: float | None = Field(description="Upper limit of agreement, bias + 1.96 sd.")
    upper_ci: Interval = Field(description="Interval of the upper limit of agreement.")
    mae: float | None = Field(description="Mean absolute difference, judge minus human.")
    rmse: float | None = Field(description="Root mean squared difference.")
    reason: str = Field(description="Why a statistic is undefined; empty when all are defined.")


class ScoreRaterRead(_Document):
    """One held-out human under the numeric decision (docs/method.md §3d)."""

    rater: str = Field(description="External id of the held-out human.")
    m: int = Field(description="Items of this human with a number from the judge and another human.")
    d: float | None = Field(description="Margin rule: mean agreement difference (judge minus human); else null.")
    rho_f: float | None = Field(description="Alt-test: the judge's advantage probability; null under the margin rule.")
    rho_h: float | None = Field(description="Alt-test: the human's advantage probability; null under the margin rule.")
    p_value: float | None = Field(description="Alt-test: the one-sided p-value; null under the margin rule.")
    won: bool | None = Field(description="Whether the judge won this human; null when skipped.")
    reason: str = Field(description="Why a value is undefined or the human was skipped; empty when all are defined.")


class ScoreJudgeRead(_Document):
    """One judge's fixed-sample decision on numeric labels (docs/method.md §3d)."""

    judge: str = Field(description="External id of the judge.")
    decision: str = Field(description="pass, reject, inconclusive or insufficient_data.")
    reason: str = Field(description="Why the decision is what it is, in one sentence.")
    omega: float | None = Field(description="Share of humans the judge won; null when undefined.")
    rho: float | None = Field(description="Alt-test: mean advantage probability; margin: mean d.")
    n_items: int = Field(description="Items with the judge's number and at least two humans'.")
    raters: list[ScoreRaterRead] = Field(description="Each held-out human.")


class ScoreRaterMonitoringRead(_Document):
    """One held-out human under anytime monitoring of a score judge (docs/method.md §8b)."""

    rater: str = Field(description="The held-out human's external id.")
    m: int = Field(description="Items usable for this human so far (the judge, it and another human rated them).")
    estimate: float | None = Field(description="Running mean of the per-item alignment difference xi.")
    lower: float | None = Field(description="Lower bound of the confidence sequence at alpha / K, after the last item.")
    upper: float | None = Field(description="Upper bound of the confidence sequence at alpha / K, after the last item.")
    status: Literal["won", "lost", "open"] = Field(
        description="won: the lower bound cleared -epsilon; lost: the upper bound fell below it; never reverts."
    )
    decided_at: int = Field(description="The item count at which the status was certified (0 while open).")


class ScoreMonitoringRead(_Document):
    """One judge's anytime-monitored decision on numeric labels (docs/method.md §8b): valid at every look."""

    judge: str = Field(description="The judge rater's external id.")
    decision: str = Field(
        description="pass, reject, continue, inconclusive (every human reached the plan's monitoring budget "
        "with the decision open) or insufficient_data."
    )
    reason: str = Field(description="Why the decision is what it is, in one sentence.")
    omega: float | None = Field(description="Share of humans certified won.")
    alpha: float = Field(description="The error bound over every look (split over the K humans).")
    raters: list[ScoreRaterMonitoringRead] = Field(description="Each held-out human's monitoring.")


class ScoreReliabilityDocument(_Document):
    """``/reliability`` of a numeric project: the first judge's decision at the top level, every judge in
    ``judges``, the humans' ICCs and interval alpha, and each judge-human pair's CCC, Bland-Altman and errors."""

    scale: Literal["numeric"] = Field(description="Always numeric.")
    label_seq: int = Field(
        description="The project's label_seq the document was computed at (the last label event it reads)."
    )
    criterion: str = Field(description="The criterion the document is about.")
    value_range: dict[str, float | None] = Field(
        description="The project's value_range: min, max and step (null: any)."
    )
    rule: str = Field(description="The decision rule: margin or alt-test.")
    epsilon: float = Field(description="The margin in force.")
    q: float = Field(description="The alt-test's BY level over the humans.")
    omega_threshold: float = Field(description="Share of humans the judge must win to pass.")
    n_items: int = Field(description="Items with a number from at least two raters.")
    n_special: int = Field(description="CANNOT_ASSESS and INVALID labels, excluded from every statistic.")
    judge: str | None = Field(description="External id of the first judge; null when the project has none.")
    decision: str = Field(description="The first judge's decision.")
    reason: str = Field(description="Why the decision is what it is, in one sentence.")
    omega: float | None = Field(description="Share of humans the first judge won; null when undefined.")
    rho: float | None = Field(description="The first judge's rho (see ScoreJudgeRead.rho).")
    judges: list[ScoreJudgeRead] = Field(description="Every judge's decision.")
    icc: list[IccRead] = Field(description="The humans' six ICCs (listwise: items every human rated).")
    interval_alpha: float | None = Field(description="Krippendorff's interval alpha of the humans' ratings.")
    interval_alpha_reason: str = Field(description="Why interval_alpha is null; empty when it is defined.")
    pairs: list[ScorePair] = Field(description="Each judge against each human.")
    plan: PlanProgress | None = Field(
        None,
        description="Progress through the plan in force, as label projects show it: each secondary's items "
        "labeled against its list (the plan's m, more once the list grew past m while the monitored decision was "
        "open), and the labels still owed; null without a plan.",
    )
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
    slices: Slices | None = Field(
        None,
        description="The first judge's numeric decision per slice of an item feature (?by=feature:<name>, or the "
        "project's decision.slices; docs/method.md §3d); null without one.",
    )
    note: str = Field(description="What the numbers are computed over, in one sentence.")


class ScoreRankingDocument(_Document):
    """``/ranking`` of a numeric project: score judges ranked by the alignment score their decision uses (rho
    under the alt-test, the mean d_k under the margin rule; docs/method.md §3d), on the items every judge and
    two humans rated; empty with a ``reason`` without a judge and two humans."""

    scale: Literal["numeric"] = Field(description="Always numeric.")
    label_seq: int = Field(
        description="The project's label_seq the document was computed at (the last label event it reads)."
    )
    criterion: str = Field(description="The criterion ranked on.")
    rule: str = Field(
        description="The decision rule whose score ranks: alt-test (rho, the negative-RMSE advantage "
        "probability) or margin (mean d_k of the range-scaled absolute differences)."
    )
    epsilon: float = Field(description="The margin in force (each judge's omega is read at it).")
    judges: list[JudgeRank] = Field(description="The judges, best first.")
    order: list[str] = Field(description="External ids of the judges, best first.")
    margins: list[RankMargin] = Field(description="Every pair of judges, with the margin between them.")
    flip_share: float | None = Field(description="Share of pairwise orders that flip under resampling.")
    n_items: int | None = Field(None, description="Items the judges are compared on.")
    reason: str | None = Field(None, description="Why there is no ranking; null when there is one.")
