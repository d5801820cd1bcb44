"""Pairwise judge documents (docs/method.md §13): position consistency and bias, accuracy against the reference
in each order, Bradley-Terry strengths of the systems; of ``POST /pairwise``'s verdicts (pure) and of a pairwise
project's current labels (the ``pairwise`` block of its ``/reliability``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from planner import optional_float
from planner.intervals import ConfidenceInterval
from planner.preferences import bradley_terry, pairwise_accuracy, position_consistency, ppi_bradley_terry
from planner.selective import majority_labels
from service.core.errors import Invalid, echo
from service.data.models import Item, Project
from service.matrices.matrix import LabelMatrix
from service.matrices.shown_orders import ba_verdicts
from service.schemas.pairwise import (
    AccuracyRead,
    PairwiseBlock,
    PairwiseBody,
    PairwiseJudgeRead,
    PairwiseRead,
    PositionRead,
    RankingRead,
    SystemStrength,
)

CODE = {"A": 0, "B": 1, "tie": 2}
MAX_SYSTEMS = 50
MAX_PROJECT_ITEMS = 200_000
"""A pairwise project's block is computed up to this many items (its items' features are read whole)."""


@dataclass(frozen=True)
class Systems:
    """The systems behind each item's answers: ``a``, ``b`` indices into ``names`` (-1: not known)."""

    a: np.ndarray
    b: np.ndarray
    names: list[str]


@dataclass(frozen=True)
class Resampling:
    confidence_level: float
    n_resamples: int
    seed: int | None


def _strengths(
    names: list[str], win_rates: np.ndarray, strengths: np.ndarray, intervals: tuple[ConfidenceInterval, ...]
) -> list[SystemStrength]:
    return [
        SystemStrength(
            system=name,
            win_rate=optional_float(float(win_rates[s])),
            strength=optional_float(float(strengths[s])),
            ci=intervals[s].as_list(),
        )
        for s, name in enumerate(names)
    ]


def _ranking(
    source: str, first: np.ndarray, second: np.ndarray, outcome: np.ndarray, names: list[str], how: Resampling
) -> RankingRead:
    bt = bradley_terry(
        first,
        second,
        outcome,
        n_systems=len(names),
        confidence_level=how.confidence_level,
        n_resamples=how.n_resamples,
        rng=how.seed,
    )
    systems = _strengths(names, bt.win_rates, bt.strengths, bt.intervals)
    return RankingRead(source=source, n_comparisons=bt.n_comparisons, systems=systems, reason=bt.reason)


def _powered_ranking(shown_ab: np.ndarray, reference: np.ndarray, systems: Systems, how: Resampling) -> RankingRead:
    """Bradley-Terry prediction-powered by the judge's AB verdicts on the items without a human majority."""
    known = systems.a >= 0
    labeled, unlabeled = known & (reference >= 0) & (shown_ab >= 0), known & (reference < 0) & (shown_ab >= 0)
    n = int(labeled.sum() + unlabeled.sum())
    if not labeled.any() or not unlabeled.any():
        reason = "needs items with a human majority and the judge's AB verdict, and items with the verdict alone"
        return RankingRead(source="humans+judge", n_comparisons=n, systems=[], reason=reason)
    a, b = systems.a, systems.b
    ppi = ppi_bradley_terry(
        a[labeled],
        b[labeled],
        reference[labeled],
        shown_ab[labeled],
        a[unlabeled],
        b[unlabeled],
        shown_ab[unlabeled],
        n_systems=len(systems.names),
        confidence_level=how.confidence_level,
        n_resamples=how.n_resamples,
        rng=how.seed,
    )
    wins = np.zeros(len(systems.names))
    games = np.zeros(len(systems.names))
    share = np.select([reference[labeled] == 0, reference[labeled] == 1], [1.0, 0.0], 0.5)
    np.add.at(wins, a[labeled], share)
    np.add.at(wins, b[labeled], 1.0 - share)
    np.add.at(games, np.concatenate([a[labeled], b[labeled]]), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        win_rates = wins / games  # the humans' own: the judge's votes power the strengths only
    strengths = _strengths(systems.names, win_rates, ppi.strengths, ppi.intervals)
    return RankingRead(source="humans+judge", n_comparisons=n, systems=strengths, reason=ppi.reason)


def verdicts_read(
    shown_ab: np.ndarray,
    shown_ba: np.ndarray,
    reference: np.ndarray | None,
    systems: Systems | None,
    how: Resampling,
    *,
    powered: bool = False,
) -> PairwiseRead:
    """The pairwise statistics of one judge's verdicts per item (codes 0 A, 1 B, 2 tie, -1 none) in each order,
    with the reference (human majority) and the systems when given; ``powered`` adds the humans+judge ranking."""
    position = position_consistency(shown_ab, shown_ba)
    accuracy = None
    if reference is not None:
        a = pairwise_accuracy(reference, shown_ab, shown_ba)
        accuracy = AccuracyRead(
            n_items=a.n_items,
            right_ab=optional_float(a.right_ab),
            right_ba=optional_float(a.right_ba),
            right_both=optional_float(a.right_both),
            reason=a.reason,
        )
    rankings = []
    if systems is not None and len(systems.names) >= 2:
        judged = np.concatenate([shown_ab, shown_ba])
        both_a, both_b = np.concatenate([systems.a, systems.a]), np.concatenate([systems.b, systems.b])
        keep = (judged >= 0) & (both_a >= 0)
        rankings.append(_ranking("judge", both_a[keep], both_b[keep], judged[keep], systems.names, how))
        if reference is not None:
            keep = (reference >= 0) & (systems.a >= 0)
            rankings.append(_ranking("humans", systems.a[keep], systems.b[keep], reference[keep], systems.names, how))
            if powered:
                rankings.append(_powered_ranking(shown_ab, reference, systems, how))
    return PairwiseRead(
        position=PositionRead(
            n_items=position.n_items,
            consistency=optional_float(position.consistency),
            first_favoured=position.first_favoured,
            second_favoured=position.second_favoured,
            bias_rate=optional_float(position.bias_rate),
            bias_direction=position.bias_direction,
            bias_p=position.bias_p,
            reason=position.reason,
        ),
        accuracy=accuracy,
        rankings=rankings,
    )


def pairwise_work(body: PairwiseBody) -> dict[str, int]:
    """The work of ``body``'s Bradley-Terry rankings as factors (service.core.limits.bounded_work): per ranking
    (the judge's, and the humans' with a reference), each resample's product of its comparison cells, at most
    one per (first, second, outcome), with their systems-squared tables; 0 rankings without ``systems``."""
    systems = len({s.a for s in body.systems} | {s.b for s in body.systems}) if body.systems is not None else 0
    rankings = 0 if body.systems is None else 1 + (body.reference is not None)
    return {
        "rankings": rankings,
        "resamples": body.n_resamples,
        "comparison cells": min(len(body.verdicts), 3 * systems * systems),
        "systems squared": systems * systems,
    }


def pairwise_document(body: PairwiseBody) -> PairwiseRead:
    """The document of a pairwise judge's verdicts; 422 for a repeated (item, order), an item's systems
    given twice or equal, a verdict on an item without systems, or more than 50 systems."""
    items = sorted({v.item for v in body.verdicts} | {r.item for r in body.reference or []})
    index = {item: k for k, item in enumerate(items)}
    shown = {"AB": np.full(len(items), -1, np.int64), "BA": np.full(len(items), -1, np.int64)}
    for v in body.verdicts:
        column = shown[v.order]
        if column[index[v.item]] >= 0:
            raise Invalid(f"item {echo(v.item)} has two verdicts shown {v.order}", code="duplicate_verdict")
        column[index[v.item]] = CODE[v.verdict]
    reference = None
    if body.reference is not None:
        reference = np.full(len(items), -1, np.int64)
        for r in body.reference:
            if reference[index[r.item]] >= 0:
                raise Invalid(f"item {echo(r.item)} has two reference verdicts", code="duplicate_verdict")
            reference[index[r.item]] = CODE[r.verdict]
    systems = None
    if body.systems is not None:
        names = sorted({s.a for s in body.systems} | {s.b for s in body.systems})
        if len(names) > MAX_SYSTEMS:
            raise Invalid(f"{len(names)} systems; at most {MAX_SYSTEMS} are ranked", code="too_many_systems")
        number = {name: k for k, name in enumerate(names)}
        sys_a, sys_b = np.full(len(items), -1, np.int64), np.full(len(items), -1, np.int64)
        for s in body.systems:
            if s.a == s.b:
                raise Invalid(f"item {echo(s.item)} compares system {echo(s.a)} with itself")
            k = index.get(s.item)
            if k is None:
                continue  # an item nobody judged
            if sys_a[k] >= 0:
                raise Invalid(f"item {echo(s.item)} has its systems given twice", code="duplicate_systems")
            sys_a[k], sys_b[k] = number[s.a], number[s.b]
        if np.any(sys_a < 0):
            missing = items[int(np.flatnonzero(sys_a < 0)[0])]
            raise Invalid(f"item {echo(missing)} has verdicts but no systems", code="missing_systems")
        systems = Systems(sys_a, sys_b, names)
    how = Resampling(body.confidence_level, body.n_resamples, body.seed)
    return verdicts_read(shown["AB"], shown["BA"], reference, systems, how)


def _item_systems(session: Session, project: Project, item_ids: np.ndarray) -> Systems:
    """The systems of each item (by ``item_ids``' rows) from its features ``system_a`` and ``system_b``; an item
    without both, with equal ones, or past the first MAX_SYSTEMS names has none (-1)."""
    row = {int(i): k for k, i in enumerate(item_ids)}
    pairs: list[tuple[int, str, str]] = []
    for item_id, features in session.execute(select(Item.id, Item.features).where(Item.project_id == project.id)):
        a, b = (features or {}).get("system_a"), (features or {}).get("system_b")
        if isinstance(a, str) and isinstance(b, str) and a != b and int(item_id) in row:
            pairs.append((row[int(item_id)], a, b))
    names = sorted({a for _, a, _ in pairs} | {b for _, _, b in pairs})[:MAX_SYSTEMS]
    number = {name: k for k, name in enumerate(names)}
    sys_a, sys_b = np.full(item_ids.size, -1, np.int64), np.full(item_ids.size, -1, np.int64)
    for k, a, b in pairs:
        if a in number and b in number:
            sys_a[k], sys_b[k] = number[a], number[b]
    return Systems(sys_a, sys_b, names)


def pairwise_block(
    session: Session, project: Project, matrix: LabelMatrix, *, n_resamples: int, seed: int
) -> dict[str, Any]:
    """The ``pairwise`` block of a pairwise project's ``/reliability`` (docs/method.md §13): per judge, position
    consistency and bias, accuracy against the human majority in both orders, and the systems (item features
    ``system_a``, ``system_b``) ranked by the judge, the humans and both; the AB order is the matrix's."""
    n = int(matrix.item_ids.size)
    if n > MAX_PROJECT_ITEMS:
        reason = f"{n} items; the pairwise statistics are computed up to {MAX_PROJECT_ITEMS}"
        return PairwiseBlock(n_items=0, n_reference=0, n_systems=0, judges=[], reason=reason).model_dump(mode="json")
    codes = {label: k for k, label in enumerate(project.labels)}
    humans = matrix.columns("primary", "human")
    reference = majority_labels(matrix.codes, humans) if humans else np.full(n, -1, np.int64)
    systems = _item_systems(session, project, matrix.item_ids)
    how = Resampling(0.95, n_resamples, seed)
    judges = []
    seen = reference >= 0
    for col in matrix.columns("judge"):
        rater = matrix.raters[col]
        shown_ab = matrix.codes[:, col].astype(np.int64)
        ba = ba_verdicts(session, matrix, rater.id, codes)
        seen |= (shown_ab >= 0) | (ba >= 0)
        read = verdicts_read(shown_ab, ba, reference, systems, how, powered=True)
        judges.append(PairwiseJudgeRead(judge=rater.external_id, **read.model_dump()))
    block = PairwiseBlock(
        n_items=int(seen.sum()),
        n_reference=int((reference >= 0).sum()),
        n_systems=len(systems.names),
        judges=judges,
        reason=None if judges else "no judge rater yet",
    )
    return block.model_dump(mode="json")
