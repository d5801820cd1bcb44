"""Projects' bodies: their decision settings (how the judge is validated), scale and value range, and the
project created, patched and read."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from planner import Coefficient, Rule
from service.schemas.base import Criteria, Labels, Strict


class DecisionSettings(Strict):
    """How the judge is validated (docs/method.md §3); defaults are docs/method.md's."""

    coefficient: Coefficient = Field(
        "po",
        description="Agreement coefficient F the judge is compared on: p_o, Cohen's kappa, Krippendorff's alpha or "
        "Gwet's AC1 (docs/method.md §2).",
    )
    rule: Rule = Field(
        "margin",
        description="Decision rule: the judge may trail each human by at most epsilon (margin), or the alternative "
        "annotator test (alt-test; docs/method.md §3).",
    )
    epsilon: float | None = Field(None, ge=0, le=1, description="Margin; defaults to 0.05 (margin) or 0.2 (alt-test).")
    alpha_sig: float = Field(
        0.05, gt=0, lt=1, description="Level of the fixed-sample decision: the error rate the plan promises to hold."
    )
    omega_threshold: float = Field(
        0.5, ge=0, le=1, description="Share of held-out humans the judge must win (omega) to pass."
    )
    q: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="False discovery rate of the alt-test's Benjamini-Yekutieli correction across humans.",
    )
    inconclusive_level: float = Field(
        0.2,
        gt=0,
        lt=1,
        description="The decision is inconclusive when the probability of the opposite decision under resampling "
        "(p_opposite) is above this.",
    )
    handling: Literal["exclude", "recode", "three_class"] = Field(
        "exclude", description="Default reporting rule for CANNOT_ASSESS (docs/method.md §7)."
    )
    recode_to: str | None = Field(None, description="Label CANNOT_ASSESS is recoded to (handling=recode).")
    aggregation: Literal["micro", "macro", "item"] = Field(
        "micro", description="Default aggregation of rubric criteria in reports (docs/method.md §7)."
    )
    positive_label: str | None = Field(
        None,
        description="The positive (MET) label of reports: F1, phi and positive rates refer to it. "
        "Unset, for two labels: the one that is a MET word (pass, yes, met, true, correct, "
        "positive, accept, 1), else the last one (['ok', 'toxic'] -> toxic); a project with "
        "more labels must declare it.",
    )

    estimator: Literal["paired", "ppi"] = Field(
        "paired",
        description="How each secondary's margin d_k is estimated: on the overlap alone (paired), or "
        "prediction-powered from the judge-primary agreement on every item (ppi; rule margin, "
        "coefficient po; docs/method.md §9).",
    )

    @model_validator(mode="after")
    def _ppi_needs_the_margin(self) -> DecisionSettings:
        if self.estimator == "ppi" and (self.rule != "margin" or self.coefficient != "po"):
            raise ValueError("estimator 'ppi' estimates p_o margins: use rule 'margin' and coefficient 'po'")
        return self

    monitoring: Literal["anytime", "fixed"] | None = Field(
        None,
        description="How the live decision may be read: 'anytime' (valid at every look, "
        "docs/method.md §8; the default for p_o and the alt-test) or 'fixed' (valid once, at the "
        "planned overlap; provisional before it; the default and only mode for kappa, alpha, AC1).",
    )
    multiplicity: Literal["e-bh", "bonferroni"] = Field(
        "e-bh",
        description="How anytime monitoring combines the humans' e-values (docs/method.md §8); with slices, every "
        "slice's humans form one family (e-bh: false certifications at most a share alpha_sig of all; bonferroni: "
        "no wrong certification but with probability alpha_sig; docs/method.md §3b).",
    )
    slices: str | None = Field(
        None,
        pattern=r"^feature:.+$",
        description="'feature:<name>': /reliability also reports the decision per value of this item feature, "
        "corrected across slices (docs/method.md §3b), as `?by=` does for one request.",
    )
    slice_epsilon: dict[str, Annotated[float, Field(ge=0, le=1)]] | None = Field(
        None, description="A margin per slice value (docs/method.md §3b); slices not named use epsilon."
    )
    power: float = Field(
        0.8,
        gt=0,
        lt=1,
        description="1 - beta: the chance with which a certification plan's overlap lets the decision in force "
        "pass the judge it is planned for. In anytime mode m is the smallest overlap per secondary by which the "
        "monitor, simulated in the service's arrival order, passes the prior's (or pilot's) judge with this "
        "probability (docs/method.md §8.1); fixed mode plans the one-look recipe (§4).",
    )

    @model_validator(mode="after")
    def _monitorable(self) -> DecisionSettings:
        if self.monitoring == "anytime" and self.coefficient != "po":
            raise ValueError(
                f"monitoring='anytime' needs coefficient 'po' (margin rule or alt-test): "
                f"{self.coefficient} is a ratio, not a bounded mean, so it is monitored 'fixed' "
                "only (docs/method.md §8)"
            )
        return self

    def resolved_monitoring(self) -> str:
        """The monitoring mode in force: the declared one, or anytime where it applies."""
        if self.monitoring is not None:
            return self.monitoring
        return "anytime" if self.coefficient == "po" else "fixed"

    def resolved_epsilon(self) -> float:
        """The margin in force: the declared one or the rule's default."""
        if self.epsilon is not None:
            return self.epsilon
        return 0.2 if self.rule == "alt-test" else 0.05


ProjectKind = Literal["pointwise", "pairwise"]
"""A project's kind: a label per item (``pointwise``), or a verdict on an item's two answers (``pairwise``,
docs/method.md §13)."""
ProjectScale = Literal["nominal", "ordinal", "interval", "numeric"]
"""A project's scale: a label scale (``planner.Scale``), or ``numeric`` (numbers in a declared range)."""
MAX_RANGE_STEPS = 1_000_000
"""The most values a stepped range may hold."""


class ValueRange(Strict):
    """The values a numeric project's labels may take: ``min <= x <= max``, on ``min + j step`` when
    ``step`` is set."""

    min: float = Field(description="The smallest value a label may take.")
    max: float = Field(description="The largest value a label may take.")
    step: float | None = Field(None, gt=0, description="Labels must be `min + j step` (j = 0, 1, ...); none: any.")

    @model_validator(mode="after")
    def _ordered_and_stepped(self) -> ValueRange:
        if not self.min < self.max:
            raise ValueError(f"value_range needs min < max, got min {self.min} and max {self.max}")
        if self.step is not None:
            steps = (self.max - self.min) / self.step
            if steps > MAX_RANGE_STEPS:
                raise ValueError(f"value_range holds {steps:.0f} steps, more than {MAX_RANGE_STEPS:,}")
            if abs(steps - round(steps)) > 1e-9 * max(1.0, steps):
                raise ValueError(f"value_range.step {self.step} does not divide max - min = {self.max - self.min}")
        return self


class TargetSettings(Strict):
    delta: float = Field(0.05, gt=0, lt=1, description="Precision target of the human-pool score.")


PAIRWISE_LABELS = ["A", "B", "tie"]
"""A pairwise project's verdicts (docs/method.md §13): answer A, answer B, a tie (left out: ties disallowed)."""


class ProjectCreate(Strict):
    name: str = Field(min_length=1, max_length=200, description="A name for people; need not be unique.")
    kind: ProjectKind = Field(
        "pointwise",
        description="pointwise: a label per item; pairwise: a verdict on an item's answers A and B (labels A, B "
        "and, unless ties are disallowed, tie; a judge's label names the order it was shown them, AB or BA).",
    )
    labels: Labels | None = Field(
        None,
        description="Ordered label set; required unless the scale is numeric. A pairwise project's are "
        "['A', 'B', 'tie'] (the default) or ['A', 'B'] (no ties).",
    )
    scale: ProjectScale = Field(
        "nominal",
        description="How labels relate: unordered (nominal), ordered (ordinal), equally spaced (interval), or "
        "numbers in value_range (numeric).",
    )
    value_range: ValueRange | None = Field(
        None, description="Numeric scale only (and required there): the range labels must lie in."
    )
    criteria: Criteria = Field(
        default_factory=lambda: ["default"],
        description="The rubric's criteria; each label names one (default: one criterion, 'default').",
    )
    allow_abstain: bool = Field(False, description="Whether raters may answer CANNOT_ASSESS.")
    decision: DecisionSettings = Field(
        default_factory=DecisionSettings, description="How the judge is validated; omitted fields take their defaults."
    )
    target: TargetSettings = Field(default_factory=TargetSettings, description="Precision targets of the plan.")
    order_seed: int | None = Field(
        None,
        ge=0,
        lt=2**53,
        description="Seed of the item order in which the monitored decision reads labels of one arrival rank "
        "(docs/method.md §8.2); drawn when absent, fixed for the project's life.",
    )

    @model_validator(mode="after")
    def _decision_labels_are_labels(self) -> ProjectCreate:
        if self.kind == "pairwise" and self.labels is None:
            self.labels = list(PAIRWISE_LABELS)
        problem = (
            kind_problem(self.kind, self.scale, self.labels)
            or scale_problem(self.scale, self.labels, self.value_range)
            or decision_label_problem(self.decision.model_dump(), self.labels or [])
        )
        if problem:
            raise ValueError(problem)
        return self


def kind_problem(kind: str, scale: str, labels: list[str] | None) -> str | None:
    """Why the scale and labels do not fit a pairwise project (nominal, labels A, B and maybe tie); None
    when they do or the project is pointwise."""
    if kind != "pairwise":
        return None
    if scale != "nominal":
        return f"a pairwise project's verdicts are nominal, not {scale}"
    if labels not in (PAIRWISE_LABELS, PAIRWISE_LABELS[:2]):
        return f"a pairwise project's labels are ['A', 'B', 'tie'] or, without ties, ['A', 'B'], not {labels}"
    return None


def scale_problem(scale: str, labels: list[str] | None, value_range: object) -> str | None:
    """Why labels and ``value_range`` do not fit the scale (a numeric project has a range and no labels,
    the others labels and no range); None when they do."""
    if scale == "numeric":
        if value_range is None:
            return "a numeric project needs value_range {min, max, step?}"
        if labels:
            return "a numeric project has no labels: its labels are numbers in value_range"
        return None
    if not labels:
        return f"a {scale} project needs labels (at least two)"
    if value_range is not None:
        return "value_range applies to the numeric scale only"
    return None


def decision_label_problem(decision: dict[str, Any], labels: list[str]) -> str | None:
    """Why the decision settings name a label the project does not have (``recode_to``,
    ``positive_label``); None when they do not."""
    for field in ("recode_to", "positive_label"):
        value = decision.get(field)
        if value is not None and value not in labels:
            return f"decision.{field} must be one of the labels {labels}"
    return None


class ProjectPatch(Strict):
    name: str | None = Field(None, min_length=1, max_length=200, description="A new name.")
    labels: Labels | None = Field(
        None, description="A new ordered label set (every label already given must stay in it)."
    )
    scale: ProjectScale | None = Field(None, description="A new scale.")
    value_range: ValueRange | None = Field(None, description="Numeric scale only: the range labels must lie in.")
    criteria: Criteria | None = Field(None, description="A new list of criteria.")
    allow_abstain: bool | None = Field(None, description="Whether raters may answer CANNOT_ASSESS.")
    decision: DecisionSettings | None = Field(
        None, description="New decision settings, replacing the stored ones whole (omitted fields at defaults)."
    )
    target: TargetSettings | None = Field(None, description="New precision targets, replacing the stored ones whole.")
    label_map: dict[Annotated[str, Field(max_length=200)], str] | None = Field(
        None,
        max_length=1000,
        description="Label Studio choice -> project label, tried before the exact and case-insensitive match "
        "(imports, webhooks, replays); `{}` clears it.",
    )

    def changes(self) -> dict[str, Any]:
        """The fields this request sets; a settings object (``decision``, ``target``) replaces the stored one
        whole, its omitted fields at their defaults (stored complete, so every reader finds every field)."""
        changes = self.model_dump(exclude_unset=True)
        for key in ("decision", "target"):
            if changes.get(key) is not None:
                changes[key] = getattr(self, key).model_dump()
        return changes


class ProjectRead(BaseModel):
    id: str = Field(description="The project's id, used in every path under /projects/{pid}.")
    name: str = Field(description="The project's name.")
    kind: ProjectKind = Field("pointwise", description="pointwise (a label per item) or pairwise (A/B verdicts).")
    labels: list[str] = Field(description="Ordered label set; empty for a numeric project.")
    scale: ProjectScale = Field(description="How labels relate (nominal, ordinal, interval or numeric).")
    value_range: ValueRange | None = Field(None, description="A numeric project's range; null for the others.")
    criteria: list[str] = Field(description="The rubric's criteria.")
    allow_abstain: bool = Field(description="Whether raters may answer CANNOT_ASSESS.")
    decision: DecisionSettings = Field(description="How the judge is validated, every field resolved.")
    target: TargetSettings = Field(description="Precision targets of the plan.")
    label_seq: int = Field(
        description="The project's last label event: it grows with every label written or retracted."
    )
    n_items: int = Field(description="Items in the project.")
    created_at: datetime = Field(description="When the project was created (UTC).")
    order_seed: int | None = Field(None, description="Seed of the monitored decision's item order (§8.2).")
    opening_seq: int | None = Field(
        None, description="label_seq of the first look: the labels in hand then are read as one rank (§8.2)."
    )
    label_map: dict[str, str] = Field(default_factory=dict, description="Label Studio choice -> project label.")
    label_studio: dict[str, Any] | None = Field(
        None,
        description="The Label Studio choices control last read from a labeling config: `from_name`, "
        "`to_name`, `data_key` (where the text is), `choices`, `single`.",
    )
