"""Stateless agreement: coefficients with intervals for a posted label matrix (docs/method.md §2)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from fastapi import APIRouter, Request, Response

from planner.rater_pairs import summary_table
from service.core.errors import Invalid, TooLarge, echo, error_responses
from service.core.limits import bounded_work
from service.core.middleware import mark_deprecated
from service.core.offload import ClientGone, computed
from service.deps import PrincipalDep, SettingsDep
from service.schemas.simulations import AgreementBody, AgreementRead, EstimateRead

router = APIRouter(tags=["agreement"])

MAX_CELLS = 1_000_000
"""Largest matrix accepted, in cells (rows x columns)."""


def matrix_codes(body: AgreementBody) -> np.ndarray:
    """The posted matrix as codes ``0..L-1`` in label order, ``-1`` for ``null`` (413/422 on bad shapes)."""
    n_rows, n_cols = len(body.matrix), len(body.matrix[0])
    cells = sum(len(row) for row in body.matrix)
    if cells > MAX_CELLS:
        raise TooLarge(f"matrix has {cells:,} cells; the limit is {MAX_CELLS:,}", code="matrix_too_large")
    for r, row in enumerate(body.matrix):
        if len(row) != n_cols:
            raise Invalid(
                f"matrix rows must all have the same length: row 0 has {n_cols} ratings, row {r} has {len(row)}",
                code="ragged_matrix",
            )
    if n_cols < 2:
        raise Invalid("matrix needs at least two columns (raters)")
    code_of: dict[str | None, int] = {label: c for c, label in enumerate(body.labels)} | {None: -1}
    codes = np.fromiter((code_of.get(v, -2) for row in body.matrix for v in row), np.int64, n_rows * n_cols)
    codes = codes.reshape(n_rows, n_cols)
    unknown = np.argwhere(codes == -2)
    if unknown.size:
        r, c = (int(x) for x in unknown[0])
        raise Invalid(
            f"matrix[{r}][{c}] is {echo(body.matrix[r][c])}, which is not one of the labels "
            f"({len(unknown)} unknown value(s) in all)",
            code="unknown_label",
            fields=[{"loc": ["body", "matrix", int(i), int(j)], "value": body.matrix[i][j]} for i, j in unknown[:20]],
        )
    return codes


def agreement_table(codes: np.ndarray, body: AgreementBody) -> dict[str, dict[str, Any]]:
    """``planner.rater_pairs.summary_table`` of ``body``'s matrix as plain dicts, which can cross a process
    boundary."""
    table = summary_table(
        codes,
        n_labels=len(body.labels),
        scale=body.scale,
        values=body.values,
        confidence_level=body.confidence_level,
        n_resamples=body.n_resamples,
        rng=body.seed,
    )
    return {key: estimate.as_dict() for key, estimate in table.items()}


@router.post("/agreement", response_model=AgreementRead, responses=error_responses(401, 413, 422, 429))
async def post_agreement(
    body: AgreementBody, request: Request, response: Response, principal: PrincipalDep, settings: SettingsDep
) -> AgreementRead | Response:
    """Agreement of a posted matrix (any key; nothing is stored).

    Rows are items, columns raters, cells labels from `labels` or `null` for missing.
    Returns percent agreement, mean pairwise Cohen's kappa (weighted by the scale:
    linear for ordinal, quadratic for interval), Krippendorff's alpha at the scale's level
    and Gwet's AC1, each over the observed cells with an item-bootstrap interval at `confidence_level`:
    BCa when the interval is `approximate` (fewer than 100 items or a minority label under 10
    ratings), where BCa was measured to cover better, percentile otherwise; `interval_method`
    says which (docs/method.md §2). An undefined coefficient has `defined: false`, a `reason` and
    a null statistic. `seed` makes the intervals reproducible.

    The work, cells x `n_resamples`, is bounded by `ANNOPLAN_AGREEMENT_MAX_WORK` (413 past
    it). A large computation runs in a child process and stops if the client disconnects; a key may
    have `ANNOPLAN_COMPUTATIONS_PER_KEY` such at once (429 with `Retry-After` past it).
    """
    if body.values is not None and body.scale != "interval":
        raise Invalid("values apply to the interval scale only")
    if body.values is not None and len(body.values) != len(body.labels):
        raise Invalid(f"values must hold one number per label ({len(body.labels)}), got {len(body.values)}")
    cells = sum(len(row) for row in body.matrix)
    most = max(settings.agreement_max_work // max(cells, 1), 0)
    work = bounded_work(
        {"cells": cells, "resamples": body.n_resamples},
        settings.agreement_max_work,
        setting="agreement_max_work",
        code="agreement_too_large",
        advice=f"send at most {most:,} resamples for this matrix, or fewer cells",
    )
    codes = await asyncio.to_thread(matrix_codes, body)
    try:
        table = await computed(request, principal.key_id, work, agreement_table, codes, body)
    except ClientGone:
        return Response(status_code=499)  # nobody reads it: the client closed the connection
    mark_deprecated(response.headers, ["level"] if body.level is not None else [])
    return AgreementRead(
        n_items=codes.shape[0],
        n_raters=codes.shape[1],
        scale=body.scale,
        confidence_level=body.confidence_level,
        level=body.confidence_level,
        n_resamples=body.n_resamples,
        coefficients={key: EstimateRead(**estimate) for key, estimate in table.items()},
    )
