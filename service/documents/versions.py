"""Judge versions: the paired comparison of two versions and the drift watch of one (docs/method.md §12)."""

from __future__ import annotations

import numpy as np
from sqlalchemy.orm import Session

from planner import optional_float
from planner.decision import validate_judge
from planner.versions import anchor_panel_size, compare_versions, drift_detection
from service.data.models import Project, Rater
from service.data.versions import (
    current_cells,
    drift_watches,
    human_raters,
    primary_rater,
    version_lines,
    version_rater,
)
from service.schemas.versions import AnchorPanel, DriftRead, VersionComparisonRead


def _codes(*values: np.ndarray) -> list[np.ndarray]:
    """The label values of each array as int codes of one shared code book."""
    _, inverse = np.unique(np.concatenate(values).astype(str), return_inverse=True)
    return np.split(inverse.astype(np.int64), np.cumsum([v.size for v in values])[:-1])


def _label_codes(project: Project, values: np.ndarray) -> np.ndarray:
    """Values as the project's label codes; a special value (or any other) is -1, left out."""
    distinct, inverse = np.unique(values.astype(str), return_inverse=True)
    index = {label: code for code, label in enumerate(project.labels)}
    return np.array([index.get(str(v), -1) for v in distinct], dtype=np.int64)[inverse]


def _decisions_on(
    session: Session, project: Project, versions: list[Rater], criterion: str, *, n_resamples: int, seed: int
) -> list[str | None]:
    """Each version's fixed-sample decision (docs/method.md §3, the project's rule) on the items both versions
    labelled, against the project's humans there; ``None`` when there is no such item."""
    cells = [current_cells(session, rater.id, criterion) for rater in versions]
    shared = np.intersect1d(cells[0][0], cells[1][0])
    if shared.size == 0:
        return [None, None]
    humans = [current_cells(session, rater.id, criterion) for rater in human_raters(session, project.id)]
    columns = []
    for items, values, _ in [*cells, *humans]:
        column = np.full(shared.size, -1, dtype=np.int64)
        found = np.isin(shared, items)
        column[found] = _label_codes(project, values[np.searchsorted(items, shared[found])])
        columns.append(column)
    codes = np.stack(columns, axis=1)
    decision = project.decision_settings
    out: list[str | None] = []
    for judge in (0, 1):
        others = [1 - judge]
        kept = np.delete(codes, others, axis=1)
        v = validate_judge(
            kept,
            judge=0,
            humans=list(range(1, kept.shape[1])),
            n_labels=len(project.labels),
            rule=decision.rule,
            coefficient=decision.coefficient,
            epsilon=decision.resolved_epsilon(),
            q=decision.q,
            omega_threshold=decision.omega_threshold,
            inconclusive_level=decision.inconclusive_level,
            n_resamples=n_resamples,
            rng=seed,
        )
        out.append(v.decision)
    return out


ANCHOR_DROP, ANCHOR_POWER = 0.05, 0.8


def _anchor_panel(n_items: int, discordant: int) -> AnchorPanel | None:
    """The anchor panel at the observed discordance (docs/method.md §12), or None without items."""
    if n_items == 0:
        return None
    psi = discordant / n_items
    size = anchor_panel_size(ANCHOR_DROP, psi, power=ANCHOR_POWER) if psi >= ANCHOR_DROP else None
    return AnchorPanel(drop=ANCHOR_DROP, power=ANCHOR_POWER, discordance=psi, n_items=size)


def version_comparison(
    session: Session, project: Project, judge: Rater, old: str, new: str, criterion: str, *, n_resamples: int, seed: int
) -> VersionComparisonRead:
    """Versions ``old`` and ``new`` of ``judge`` against the primary on the items all three labelled."""
    raters = [
        primary_rater(session, project.id),
        version_rater(session, judge, old),
        version_rater(session, judge, new),
    ]
    cells = [current_cells(session, rater.id, criterion) for rater in raters]
    shared = np.intersect1d(np.intersect1d(cells[0][0], cells[1][0]), cells[2][0])
    picked = [values[np.searchsorted(items, shared)] for items, values, _ in cells]
    reference, before, after = _codes(*picked)
    result = compare_versions(reference, before, after, n_resamples=n_resamples, rng=seed)
    old_decision, new_decision = _decisions_on(
        session, project, raters[1:], criterion, n_resamples=n_resamples, seed=seed
    )
    return VersionComparisonRead(
        criterion=criterion,
        old=raters[1].external_id,
        new=raters[2].external_id,
        n_items=result.n_items,
        old_agreement=optional_float(result.old_agreement),
        new_agreement=optional_float(result.new_agreement),
        version_agreement=optional_float(result.version_agreement),
        flip_rate=optional_float(result.flip_rate),
        lost=result.lost,
        gained=result.gained,
        change=optional_float(result.change),
        change_ci=result.change_interval.as_list(),
        approximate=result.change_interval.approximate,
        chi_square=optional_float(result.chi_square),
        mcnemar_p=result.mcnemar_p,
        reason=result.reason,
        old_decision=old_decision,
        new_decision=new_decision,
        anchor_panel=_anchor_panel(result.n_items, result.lost + result.gained),
    )


MAX_VERSION_COMPARISONS = 20
"""A reliability document compares at most this many pairs of versions (the newest), each a paired bootstrap
and two decisions ..."""
MAX_VERSION_ITEMS = 2_000_000
"""... and at most this many items over all its pairs (fewer pairs in a larger corpus, one at least): each pair
reads its raters' labels and resamples its shared items, as GET /versions/compare does for one."""


def version_comparisons(
    session: Session, project: Project, criterion: str, *, n_resamples: int, seed: int
) -> list[VersionComparisonRead] | None:
    """Each version of each judge against the version before it (the judge itself before its first), the
    newest versions' pairs within ``MAX_VERSION_COMPARISONS`` and ``MAX_VERSION_ITEMS``, oldest first; ``None``
    when no judge has a version or the project has no primary."""
    pairs = sorted(
        (rater_id, judge, old, new)
        for judge, versions in version_lines(session, project.id)
        for old, (new, rater_id) in zip([judge.external_id, *(name for name, _ in versions)], versions, strict=False)
    )
    if not pairs or not any(rater.kind == "primary" for rater in human_raters(session, project.id)):
        return None
    kept = max(1, min(MAX_VERSION_COMPARISONS, MAX_VERSION_ITEMS // max(project.item_count, 1)))
    return [
        version_comparison(session, project, judge, old, new, criterion, n_resamples=n_resamples, seed=seed)
        for _, judge, old, new in pairs[-kept:]
    ]


def judge_drift(
    session: Session,
    project: Project,
    judge: Rater,
    criterion: str,
    *,
    baseline: float,
    drop: float,
    horizon: int,
    alpha: float,
) -> DriftRead:
    """The drift detector on the judge's agreement with the primary, pairs ordered by the label that completed them.

    A pair's moment is the later ``label_seq`` of its two current labels: the order the service saw it.
    """
    primary = primary_rater(session, project.id)
    (p_items, p_values, p_seqs), (j_items, j_values, j_seqs) = (
        current_cells(session, rater.id, criterion) for rater in (primary, judge)
    )
    shared, p_at, j_at = np.intersect1d(p_items, j_items, return_indices=True)
    completed = np.maximum(p_seqs[p_at], j_seqs[j_at])
    order = np.argsort(completed, kind="stable")
    agrees = (p_values[p_at] == j_values[j_at])[order].astype(np.int8)
    drift = None
    if shared.size:
        drift = drift_detection(agrees, baseline=baseline, drop=drop, horizon=horizon, alpha=alpha)
    alarm = int(drift.alarm_at) if drift is not None else -1
    return DriftRead(
        criterion=criterion,
        judge=judge.external_id,
        baseline=baseline,
        drop=drop,
        horizon=horizon,
        alpha=alpha,
        n_labels=int(shared.size),
        agreement=float(agrees.mean()) if shared.size else None,
        drifted=alarm >= 0,
        alarm_label_seq=int(completed[order][alarm]) if alarm >= 0 else None,
        log_detector=float(drift.log_detector) if drift is not None else None,
        threshold=horizon / alpha,
    )


def project_drift(session: Session, project: Project) -> list[DriftRead]:
    """The drift document of every watched judge of the project (the dashboard's drift panel)."""
    return [
        judge_drift(
            session,
            project,
            judge,
            watch.criterion,
            baseline=watch.baseline,
            drop=watch.drop,
            horizon=watch.horizon,
            alpha=watch.alpha,
        )
        for watch, judge in drift_watches(session, project.id, pending=False)
    ]
