"""Request and response bodies (pydantic), kept apart from the ORM models.

The resources' bodies (projects, items, raters, labels, plans, batches, pages, errors) are
here; the larger documents have a module each: ``documents`` (``/reliability``, ``/ranking``),
``report``, ``simulations`` (and ``/agreement``), ``plan_checks`` (a plan's simulated check).
Label Studio's objects stay with their adapter in ``service.label_studio.reconcile``."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, NotRequired

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StringConstraints,
    field_validator,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from planner import SPECIAL, Coefficient, Rule
from service.core.identifiers import ExternalId
from service.schemas.plan_checks import PlanCheckRead

SPECIAL_VALUES = SPECIAL


class Role(StrEnum):
    """What a key may do: everything (admin), run one project (pm), label as one rater
    (annotator), or read one project's aggregates (viewer)."""

    ADMIN = "admin"
    PM = "pm"
    ANNOTATOR = "annotator"
    VIEWER = "viewer"


RaterKind = Literal["judge", "primary", "human"]


def _distinct_names(names: list[str]) -> list[str]:
    if any(not n or len(n) > 200 for n in names):
        raise ValueError("names must be non-empty strings of at most 200 characters")
    if len(set(names)) != len(names):
        raise ValueError("names must be distinct")
    return names


def _no_special_values(labels: list[str]) -> list[str]:
    clash = sorted(set(labels) & set(SPECIAL_VALUES))
    if clash:
        raise ValueError(f"{', '.join(clash)} is reserved and cannot be a label")
    return labels


def _short_names(names: list[str]) -> list[str]:
    if any(len(n) > 100 for n in names):
        raise ValueError("criterion names must be at most 100 characters")
    return names


Criteria = Annotated[
    list[str], Field(min_length=1, max_length=100), AfterValidator(_distinct_names), AfterValidator(_short_names)
]
Labels = Annotated[
    list[str],
    Field(min_length=2, max_length=100, description="Ordered label set."),
    AfterValidator(_distinct_names),
    AfterValidator(_no_special_values),
]


def _no_nul(value: Any) -> Any:
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, dict):
        texts = [*value.keys(), *value.values()]
    else:
        texts = list(value) if isinstance(value, list) else []
    if any(isinstance(t, str) and "\x00" in t for t in texts):
        raise ValueError("must not contain NUL characters")
    return value


class StrictRow(BaseModel):
    """Rows of bulk uploads: unknown fields and non-finite numbers (NaN, Infinity) are refused;
    strings use :data:`Text` (no NUL)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Strict(StrictRow):
    """Request bodies: unknown fields and NUL characters are refused."""

    _nul = field_validator("*")(_no_nul)


# NUL cannot be stored by PostgreSQL; checked by pydantic's own (compiled) pattern matching,
# since bulk uploads validate hundreds of thousands of strings.
Text = Annotated[str, StringConstraints(pattern=r"^[^\x00]*$")]


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
        "e-bh", description="How anytime monitoring combines the humans' e-values (docs/method.md §8)."
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


class ProjectCreate(Strict):
    name: str = Field(min_length=1, max_length=200, description="A name for people; need not be unique.")
    labels: Labels | None = Field(None, description="Ordered label set; required unless the scale is numeric.")
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
        problem = scale_problem(self.scale, self.labels, self.value_range) or decision_label_problem(
            self.decision.model_dump(), self.labels or []
        )
        if problem:
            raise ValueError(problem)
        return self


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


class KeyCreate(Strict):
    role: Role = Field(
        description="What the key may do: run the project (pm), label as one rater (annotator) or read its "
        "aggregates (viewer)."
    )
    rater: ExternalId | None = Field(None, description="External id of the rater (annotator keys only).")
    name: str | None = Field(None, max_length=200, description="A note on whom the key is for (shown in the key list).")
    expires_at: AwareDatetime | None = Field(
        None,
        description="When the key stops working (401 `key_expired`): a future moment with a timezone; omitted: never.",
    )

    @model_validator(mode="after")
    def _rater_only_for_annotators(self) -> KeyCreate:
        if self.role == "annotator" and not self.rater:
            raise ValueError("an annotator key needs 'rater' (the rater's external_id)")
        if self.role != "annotator" and self.rater:
            raise ValueError("'rater' is only for annotator keys")
        return self


class KeyCreated(BaseModel):
    id: str = Field(description="The key's id (for listing and revoking), not its secret.")
    role: Role = Field(description="What the key may do.")
    project: str | None = Field(description="The project the key is for; null for an admin key.")
    rater: str | None = Field(description="The rater an annotator key labels as (external id); null for other roles.")
    expires_at: datetime | None = Field(description="When the key stops working; null: never.")
    key: str = Field(description="The secret; shown once, only its hash is stored.")


class KeyRead(BaseModel):
    """A key as listed: who it is for, never its secret."""

    id: str = Field(description="The key's id (for revoking).")
    role: Role = Field(description="What the key may do.")
    project: str | None = Field(description="The project the key is for; null for an admin key.")
    rater: str | None = Field(description="The rater an annotator key labels as (external id); null for other roles.")
    name: str | None = Field(description="The note given when the key was made.")
    created_at: datetime = Field(description="When the key was made (UTC).")
    revoked_at: datetime | None = Field(description="When the key was revoked; null while it works.")
    expires_at: datetime | None = Field(description="When the key stops (or stopped) working; null: never.")


class ItemIn(StrictRow):
    external_id: ExternalId = Field(description="Your id of the item; an upload with a known id updates that item.")
    features: dict[Text, Text | int | float | bool | None] = Field(
        default_factory=dict,
        description="Item features (strings, numbers, booleans), e.g. a domain to slice or stratify by.",
    )
    text: Text | None = Field(None, description="The text shown to annotators (optional).")


class ItemRead(BaseModel):
    id: str = Field(description="The item's internal id.")
    external_id: str = Field(description="Your id of the item.")
    position: int = Field(description="The item's place in upload order (0 first).")
    features: dict[str, Any] = Field(description="The item's features.")
    text: str | None = Field(description="The item's text; null when none was given.")


class ItemsUpserted(BaseModel):
    created: int = Field(description="Items that were new.")
    updated: int = Field(description="Known items whose text or features changed.")
    unchanged: int = Field(description="Known items sent again as they were.")


class RaterCreate(Strict):
    external_id: ExternalId = Field(description="Your id of the rater; labels name it.")
    kind: RaterKind = Field(
        description="judge (the model validated), primary (the human who labels every item) or human (a secondary, "
        "who labels the plan's overlap)."
    )
    name: str | None = Field(None, max_length=200, description="A name for people.")


class RaterPatch(Strict):
    kind: RaterKind | None = Field(None, description="A new kind; only while the project has no plan.")
    name: str | None = Field(None, min_length=1, max_length=200, description="A new name.")


class RaterRead(BaseModel):
    id: str = Field(description="The rater's internal id.")
    external_id: str = Field(description="Your id of the rater.")
    kind: RaterKind = Field(description="judge, primary or human.")
    name: str | None = Field(None, description="The rater's name; null when none was given.")
    n_labels: int = Field(description="Current labels of this rater.")


# A TypedDict, validated into plain dicts: at 100,000 rows a model instance per row took four times the
# validation's CPU. Absent optional fields stay absent (read them with ``get``).
@with_config(ConfigDict(extra="forbid", allow_inf_nan=False))
class LabelIn(TypedDict):
    """One label: the item's and the rater's external ids, the value, and optionally the criterion
    (required when the project has several), the batch it answers and, for a judge, its ``confidence``
    in [0, 1] (selective evaluation, docs/method.md §3c)."""

    item: Annotated[ExternalId, Field(description="External id of the item labeled.")]
    rater: Annotated[ExternalId, Field(description="External id of the rater who gave the label.")]
    criterion: NotRequired[
        Annotated[Text | None, Field(description="The criterion labeled; required when the project has several.")]
    ]
    value: Annotated[
        Annotated[Text, Field(min_length=1, max_length=200)] | StrictInt | StrictFloat,
        Field(
            description="One of the project's labels; in a numeric project a number in its value_range "
            "(a JSON number or a numeric string, as CSV cells are); or CANNOT_ASSESS / INVALID."
        ),
    ]
    batch: NotRequired[
        Annotated[Text | None, Field(description="The batch this label answers (its id from POST /batches).")]
    ]
    confidence: NotRequired[
        Annotated[
            Annotated[float, Field(ge=0, le=1)] | None,
            Field(description="A judge's confidence in its label, 0 to 1 (selective evaluation)."),
        ]
    ]


class RetractionIn(TypedDict):
    """One cell whose current label is withdrawn: the item's and the rater's external ids, and the
    criterion (required when the project has several)."""

    item: Annotated[ExternalId, Field(description="External id of the item.")]
    rater: Annotated[ExternalId, Field(description="External id of the rater whose label is withdrawn.")]
    criterion: NotRequired[
        Annotated[Text | None, Field(description="The criterion; required when the project has several.")]
    ]


class LabelsAccepted(BaseModel):
    accepted: int = Field(description="New label events written (first labels and corrections).")
    duplicates: int = Field(description="Rows equal to the cell's current label; nothing written.")
    label_seq: int | None = Field(
        description="The project's last label event after this write; null for an annotator key (the project-wide "
        "sequence would show it how much the other raters label)."
    )


class LabelsRetracted(BaseModel):
    retracted: int = Field(description="Retraction events written (cells whose current label was withdrawn).")
    label_seq: int = Field(description="The project's last label event after this write.")


class RetractionsRead(BaseModel):
    """What ``POST /projects/{pid}/labels/retractions`` wrote, as the caller may read it."""

    retracted: int = Field(description="Retraction events written (cells whose current label was withdrawn).")
    label_seq: int | None = Field(
        description="The project's last label event after this write; null for an annotator key (as for labels)."
    )


class LabelRow(BaseModel):
    item: str = Field(description="External id of the item.")
    rater: str = Field(description="External id of the rater.")
    criterion: str = Field(description="The criterion labeled.")
    value: str | None = Field(description="The label; null for a retraction event (`history=true` only).")
    seq: int = Field(description="The label event's label_seq.")
    batch: str | None = Field(description="The batch the label answered; null when it answered none.")
    created_at: datetime | None = Field(None, description="When the label was written (UTC).")
    retracted: bool = Field(False, description="Whether this event withdraws the cell's label (`history=true` only).")


class Health(BaseModel):
    status: Literal["ok", "degraded"] = Field(description="ok, or degraded when the database is not.")
    database: Literal["ok", "unreachable", "read_only", "full", "busy"] = Field(
        description="The database's state: ok, unreachable, read_only, full or busy."
    )
    detail: str | None = Field(None, description="What is wrong with the database, when it is not ok.")


class QueueHealth(BaseModel):
    """The job queue's state (`GET /healthz/queue`)."""

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"status": "no_worker", "workers": 0, "oldest_waiting_seconds": 42.5}]}
    )

    status: Literal["ok", "no_worker"] = Field(
        description="`no_worker` when no job worker has shown itself live within its lease: queued work waits."
    )
    workers: int = Field(description="Job workers live now (each renews a heartbeat every third of its lease).")
    oldest_waiting_seconds: float | None = Field(
        description="How long the oldest due simulation or webhook delivery has waited; null when none waits."
    )


Design = Literal["auto", "strat", "disjoint", "seq-refined", "seq-coverage", "random", "depth-first", "neyman"]


class PlanCreate(Strict):
    """What to plan for and from what (docs/method.md §4–5)."""

    purpose: Literal["certify", "rank"] = Field(
        "certify", description="certify one judge against the humans, or rank several judges."
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


class BatchCreate(Strict):
    rater: ExternalId | None = Field(None, description="External id of the rater; implied for annotator keys.")
    size: int = Field(50, ge=1, description="Items wanted (at most the configured batch limit, default 1000).")


class BatchRead(BaseModel):
    id: str | None = Field(description="The batch's id, to send with its labels; null when no items were given.")
    rater: str = Field(description="External id of the rater the batch is for.")
    items: list[str] = Field(description="External ids of the items to label, held for this rater until expires_at.")
    design: str = Field(description="The plan's design the items were drawn by.")
    expires_at: datetime | None = Field(
        description="When the items still unlabeled go back to the rater's queue; null when no items were given."
    )
    done: bool = Field(False, description="Whether the rater's list is finished: no item will be given.")
    remaining: int = Field(
        description="Items of this rater's list still unlabeled, held or not. In anytime mode a labeled list "
        "grows past the plan's m (by the plan's design) while the monitored decision is 'continue', up to the "
        "plan's monitoring budget (docs/method.md §8.1): remaining is 0 only when it will not."
    )
    reason: str | None = Field(
        None,
        description="Why no items were given (done or all held): e.g. the monitored decision is pass, or the "
        "monitoring budget is reached and the decision is inconclusive.",
    )


class BatchStatus(BaseModel):
    id: str = Field(description="The batch's id.")
    rater: str = Field(description="External id of the rater the batch is for.")
    items: list[str] = Field(description="External ids of the batch's items.")
    design: str = Field(description="The plan's design the items were drawn by.")
    created_at: datetime = Field(description="When the batch was given (UTC).")
    expires_at: datetime = Field(description="When its items still unlabeled go back to the rater's queue.")
    released: bool = Field(description="Whether the batch was released (DELETE) before it expired.")
    expired: bool = Field(description="Whether expires_at has passed.")
    labeled: int = Field(description="Items of the batch the rater has labeled.")
    unlabeled: list[str] = Field(description="External ids of the items still to label.")
