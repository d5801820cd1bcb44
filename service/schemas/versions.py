"""Judge versions: a version's body, the paired comparison of two versions, and the drift watch."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from service.schemas.base import Strict, Text

Interval = list[float | None]


class JudgeVersionCreate(Strict):
    """A new version of a judge: it labels as the judge rater ``<judge>@<name>``."""

    name: str = Field(
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._:+-]+$",
        examples=["v2"],
        description="The version's name; it labels as <judge>@<name>.",
    )
    model: Text | None = Field(
        None, max_length=200, examples=["gpt-4o-2024-08-06"], description="The model behind the version (for people)."
    )
    prompt_digest: Text | None = Field(
        None, max_length=128, examples=["sha256:9f2c..."], description="A digest of its prompt (for people)."
    )

    model_config = {
        "json_schema_extra": {
            "examples": [{"name": "v2", "model": "gpt-4o-2024-08-06", "prompt_digest": "sha256:9f2c"}]
        }
    }


class JudgeVersionRead(BaseModel):
    name: str = Field(description="The version's name.")
    rater: str = Field(description="The external id the version labels as (a judge rater of its own).")
    rater_id: str = Field(description="Internal id of the version's rater.")
    judge: str = Field(description="The external id of the judge it is a version of.")
    model: str | None = Field(description="The model behind the version; null when not given.")
    prompt_digest: str | None = Field(description="A digest of its prompt; null when not given.")
    created_at: datetime = Field(description="When the version was registered (UTC).")
    n_labels: int = Field(description="Current labels of the version.")


class AnchorPanel(BaseModel):
    """Anchor items a next version must re-label to detect ``drop`` with ``power`` (Connor 1987, §12)."""

    drop: float = Field(description="The drop in agreement the panel detects.")
    power: float = Field(description="The chance the panel detects that drop.")
    discordance: float = Field(description="(lost + gained)/n_items: the share of items one version got right alone.")
    n_items: int | None = Field(description="The panel's size; null when the discordance is below the drop.")


class VersionComparisonRead(BaseModel):
    """Two versions of a judge on the items where both and the primary have a label (docs/method.md §12)."""

    criterion: str = Field(description="The criterion compared.")
    old: str = Field(description="External id of the old version's rater.")
    new: str = Field(description="External id of the new version's rater.")
    n_items: int = Field(description="Items labelled by both versions and the primary.")
    old_agreement: float | None = Field(description="The old version's agreement with the primary.")
    new_agreement: float | None = Field(description="The new version's agreement with the primary.")
    version_agreement: float | None = Field(description="The share of items where the two versions agree.")
    flip_rate: float | None = Field(description="The share of items where the two versions give different labels.")
    lost: int = Field(description="Items the old version gets right and the new one wrong (McNemar's b).")
    gained: int = Field(description="Items the new version gets right and the old one wrong (c).")
    change: float | None = Field(description="new_agreement - old_agreement, (c - b)/n.")
    change_ci: Interval = Field(description="Paired bootstrap interval of the change.")
    approximate: bool = Field(description="Under 100 items or a discordant count under 10: coverage is approximate.")
    chi_square: float | None = Field(description="McNemar's (b - c)^2/(b + c); null with no discordant item.")
    mcnemar_p: float = Field(description="Exact two-sided McNemar p-value.")
    reason: str | None = Field(description="Why the comparison is undefined (null when it is defined).")
    old_decision: str | None = Field(
        description="The old version's decision (the project's rule) on the items both versions labelled, against "
        "the project's humans there; null when the versions share no item."
    )
    new_decision: str | None = Field(description="The new version's decision on the same items: does it still pass?")
    anchor_panel: AnchorPanel | None = Field(
        description="The anchor panel for a drop of .05 at power .8 and level .05, at this comparison's discordance "
        "(null when undefined)."
    )


class DriftRead(BaseModel):
    """The CUSUM e-detector on a judge's agreement with the primary, in the order the pairs completed."""

    criterion: str = Field(description="The criterion watched.")
    judge: str = Field(description="External id of the judge watched.")
    baseline: float = Field(description="The agreement with the primary the judge was approved at, p0.")
    drop: float = Field(description="The drop in agreement the detector looks for.")
    horizon: int = Field(description="Labels over which false alarms are bounded.")
    alpha: float = Field(description="Bound on any false alarm within the horizon.")
    n_labels: int = Field(description="Items labelled by the judge and the primary, in the order they completed.")
    agreement: float | None = Field(description="The judge's agreement with the primary over those items.")
    drifted: bool = Field(description="Whether the detector has reached its threshold.")
    alarm_label_seq: int | None = Field(description="The label_seq of the pair that raised the alarm.")
    log_detector: float | None = Field(description="log M_t after the last pair (null with no pair).")
    threshold: float = Field(description="horizon/alpha: P(any false alarm within horizon labels) <= alpha.")


class DriftWatchSettings(Strict):
    """The drift detector a judge is watched with; a `judge.drifted` webhook announces its alarm once."""

    baseline: float = Field(gt=0, lt=1, description="The agreement with the primary the judge was approved at, p0.")
    drop: float = Field(0.05, gt=0, lt=1, description="The drop in agreement to detect (below baseline).")
    horizon: int = Field(10_000, ge=1, le=10**9, description="Labels over which false alarms are bounded.")
    alpha: float = Field(0.05, ge=1e-9, lt=1, description="Bound on any false alarm within the horizon.")
    criterion: Text | None = Field(None, max_length=100, description="Criterion (default: the project's first).")

    model_config = {"json_schema_extra": {"examples": [{"baseline": 0.88, "drop": 0.05, "horizon": 10000}]}}


class DriftWatchRead(BaseModel):
    judge: str = Field(description="External id of the judge watched.")
    criterion: str = Field(description="The criterion watched.")
    baseline: float = Field(description="The agreement with the primary the judge was approved at, p0.")
    drop: float = Field(description="The drop in agreement to detect.")
    horizon: int = Field(description="Labels over which false alarms are bounded.")
    alpha: float = Field(description="Bound on any false alarm within the horizon.")
    alarm_label_seq: int | None = Field(description="The label_seq of the alarm announced (null: none yet).")


class AnchorPanelCreate(Strict):
    """Size and draw a judge's anchor panel (docs/method.md §12)."""

    drop: float = Field(0.05, gt=0, lt=1, description="The drop in agreement with the primary to detect.")
    power: float = Field(0.8, gt=0, lt=1, description="1 - beta: the chance the panel's McNemar test detects it.")
    alpha: float = Field(0.05, gt=0, lt=1, description="Two-sided level of that test.")
    discordance: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Expected share of items on which exactly one version agrees with the primary (psi, at least "
        "drop); default: the versions erring independently at the judge's observed agreement p0 and p0 - drop.",
    )
    criterion: Text | None = Field(None, max_length=100, description="Criterion (default: the project's first).")
    seed: int | None = Field(None, ge=0, lt=2**63, description="Seed of the draw; random when absent.")

    model_config = {"json_schema_extra": {"examples": [{"drop": 0.05, "power": 0.8}]}}


class AnchorPanelRead(BaseModel):
    """A judge's frozen anchor items: what each new version re-labels, exported for the judge's pipeline."""

    judge: str = Field(description="The judge rater's external id.")
    criterion: str = Field(description="The criterion the anchors are labelled on.")
    n_items: int = Field(description="Anchor items: Connor's paired-proportions size for the drop.")
    drop: float = Field(description="The drop in agreement with the primary the panel detects.")
    power: float = Field(description="The probability of detecting that drop.")
    alpha: float = Field(description="The two-sided level of the paired comparison of versions.")
    discordance: float = Field(description="psi: the share of anchors on which two versions disagree about agreeing.")
    baseline: float | None = Field(description="The judge's agreement with the primary the default psi was read at.")
    seed: int = Field(description="The seed of the Strat draw of the anchor items.")
    label_seq: int = Field(description="The labels in hand when the panel was drawn.")
    created_at: datetime = Field(description="When the panel was frozen (UTC).")
    items: list[str] = Field(description="The anchor items' external ids, in labelling order.")
    relabelled: dict[str, int] = Field(description="Per version of the judge: anchor items it has labelled so far.")
