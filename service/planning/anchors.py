"""A judge's anchor panel: the frozen items each new version re-labels (docs/method.md §12)."""

from __future__ import annotations

import secrets

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner.designs import strat
from planner.versions import anchor_panel_size, independent_discordance
from service.core.errors import Conflict, Invalid, NotFound, echo
from service.data.models import AnchorPanel, Item, JudgeVersion, Project, Rater
from service.data.projects import lock_project
from service.data.queries import external_ids
from service.data.versions import current_cells, primary_rater, versioned_judge
from service.schemas.versions import AnchorPanelCreate, AnchorPanelRead


def _candidates(
    session: Session, project: Project, judge: Rater, criterion: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items the judge and the primary both labelled (by id), with the primary's label code (its stratum),
    a value outside the label set counting as one more stratum; and whether the judge agreed there."""
    primary = primary_rater(session, project.id)
    p_items, p_values, _ = current_cells(session, primary.id, criterion)
    j_items, j_values, _ = current_cells(session, judge.id, criterion)
    shared, at_p, at_j = np.intersect1d(p_items, j_items, return_indices=True)
    code = {label: k for k, label in enumerate(project.labels)}
    strata = np.array([code.get(str(v), len(project.labels)) for v in p_values[at_p]], dtype=np.int64)
    agreed = p_values[at_p].astype(str) == j_values[at_j].astype(str)
    return shared, strata, agreed


def freeze_anchor_panel(
    session: Session, project: Project, judge: Rater, criterion: str, body: AnchorPanelCreate
) -> AnchorPanel:
    """Size the panel (Connor 1987), draw it by Strat over the primary's labels and store it; every check
    (judge, primary, discordance, enough items, no panel yet) runs before anything is written."""
    versioned_judge(session, judge)
    lock_project(session, project.id)
    if session.get(AnchorPanel, judge.id) is not None:
        raise Conflict(f"judge {echo(judge.external_id)} already has a frozen anchor panel", code="panel_exists")
    items, strata, agreed = _candidates(session, project, judge, criterion)
    baseline = float(agreed.mean()) if items.size else None
    if body.discordance is not None:
        psi = body.discordance
    elif baseline is None or not body.drop < baseline < 1.0:
        raise Invalid(
            "give discordance: the judge's agreement with the primary "
            + ("is unknown (no shared item)" if baseline is None else f"({baseline:g}) leaves no room for the drop")
        )
    else:
        psi = independent_discordance(baseline, body.drop)
    if psi < body.drop:
        raise Invalid(f"discordance ({psi:g}) must be at least the drop ({body.drop:g}): |p10 - p01| <= p10 + p01")
    n = anchor_panel_size(body.drop, psi, alpha=body.alpha, power=body.power)
    if n > items.size:
        raise Conflict(
            f"the panel needs {n} anchor items; the judge and the primary share {items.size} labelled ones",
            code="too_few_items",
        )
    seed = body.seed if body.seed is not None else secrets.randbelow(2**62)
    drawn = strat(strata, n, raters=["anchors"], rng=seed)["anchors"]
    panel = AnchorPanel(
        rater_id=judge.id,
        project_id=project.id,
        criterion=criterion,
        drop=body.drop,
        discordance=psi,
        baseline=None if body.discordance is not None else baseline,
        alpha=body.alpha,
        power=body.power,
        seed=seed,
        items=items[drawn].tolist(),
        label_seq=project.label_seq,
    )
    session.add(panel)
    session.flush()
    return panel


def anchor_panel(session: Session, judge: Rater) -> AnchorPanel:
    """The judge's frozen panel; 404 when it has none."""
    panel = session.get(AnchorPanel, judge.id)
    if panel is None:
        raise NotFound(f"judge {echo(judge.external_id)} has no anchor panel", code="no_panel")
    return panel


def anchor_panel_read(session: Session, judge: Rater, panel: AnchorPanel) -> AnchorPanelRead:
    """The panel with its items' external ids and each version's progress through it."""
    found = external_ids(session, Item, panel.items)
    versions = session.execute(
        select(JudgeVersion.name, JudgeVersion.rater_id).where(JudgeVersion.judge_id == judge.id)
    ).all()
    relabelled = {
        name: int(np.isin(current_cells(session, rater_id, panel.criterion)[0], panel.items).sum())
        for name, rater_id in versions
    }
    return AnchorPanelRead(
        judge=judge.external_id,
        criterion=panel.criterion,
        n_items=len(panel.items),
        drop=panel.drop,
        power=panel.power,
        alpha=panel.alpha,
        discordance=panel.discordance,
        baseline=panel.baseline,
        seed=panel.seed,
        label_seq=panel.label_seq,
        created_at=panel.created_at,
        items=[found[i] for i in panel.items if i in found],
        relabelled=relabelled,
    )
