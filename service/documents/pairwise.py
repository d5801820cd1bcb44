"""The pairwise judge document of ``POST /pairwise`` (docs/method.md §13): position consistency and bias,
accuracy against the reference in each order, Bradley-Terry strengths of the systems; pure."""

from __future__ import annotations

import numpy as np

from planner import optional_float
from planner.preferences import bradley_terry, pairwise_accuracy, position_consistency
from service.core.errors import Invalid, echo
from service.schemas.pairwise import (
    AccuracyRead,
    PairwiseBody,
    PairwiseRead,
    PositionRead,
    RankingRead,
    SystemStrength,
)

CODE = {"A": 0, "B": 1, "tie": 2}
MAX_SYSTEMS = 50


def _ranking(
    source: str, first: np.ndarray, second: np.ndarray, outcome: np.ndarray, names: list[str], body: PairwiseBody
) -> RankingRead:
    bt = bradley_terry(
        first,
        second,
        outcome,
        n_systems=len(names),
        confidence_level=body.confidence_level,
        n_resamples=body.n_resamples,
        rng=body.seed,
    )
    systems = [
        SystemStrength(
            system=name,
            win_rate=optional_float(float(bt.win_rates[s])),
            strength=optional_float(float(bt.strengths[s])),
            ci=bt.intervals[s].as_list(),
        )
        for s, name in enumerate(names)
    ]
    return RankingRead(source=source, n_comparisons=bt.n_comparisons, systems=systems, reason=bt.reason)


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
    position = position_consistency(shown["AB"], shown["BA"])
    accuracy = None
    reference = np.full(len(items), -1, np.int64)
    if body.reference is not None:
        for r in body.reference:
            if reference[index[r.item]] >= 0:
                raise Invalid(f"item {echo(r.item)} has two reference verdicts", code="duplicate_verdict")
            reference[index[r.item]] = CODE[r.verdict]
        a = pairwise_accuracy(reference, shown["AB"], shown["BA"])
        accuracy = AccuracyRead(
            n_items=a.n_items,
            right_ab=optional_float(a.right_ab),
            right_ba=optional_float(a.right_ba),
            right_both=optional_float(a.right_both),
            reason=a.reason,
        )
    rankings = []
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
        judged = np.concatenate([shown["AB"], shown["BA"]])
        both_a, both_b = np.concatenate([sys_a, sys_a]), np.concatenate([sys_b, sys_b])
        keep = judged >= 0
        rankings.append(_ranking("judge", both_a[keep], both_b[keep], judged[keep], names, body))
        if body.reference is not None:
            keep = reference >= 0
            rankings.append(_ranking("humans", sys_a[keep], sys_b[keep], reference[keep], names, body))
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
