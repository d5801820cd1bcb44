"""Stateless pairwise judges: position consistency, accuracy in both orders, Bradley-Terry (docs/method.md §13)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from service.core.errors import error_responses
from service.core.limits import bounded_work
from service.core.offload import ClientGone, computed
from service.deps import PrincipalDep, SettingsDep
from service.documents.pairwise import pairwise_document, pairwise_work
from service.schemas.pairwise import PairwiseBody, PairwiseRead

router = APIRouter(tags=["pairwise"])


@router.post("/pairwise", response_model=PairwiseRead, responses=error_responses(401, 413, 422, 429))
async def post_pairwise(
    body: PairwiseBody, request: Request, principal: PrincipalDep, settings: SettingsDep
) -> PairwiseRead | Response:
    """A pairwise (A/B) judge's verdicts, analysed (any key; nothing is stored).

    Each verdict names the item's answer it prefers (`A`, `B` or `tie`, in the item's own answer
    names) and the order the answers were shown (`AB` or `BA`), so an item can hold both orders.
    Returns position consistency (same verdict in both orders) and position bias (flips that
    favour the first or the second position, with an exact binomial test); with `reference` (the
    human majority per item), the accuracy with each order and in both; with `systems`, the
    systems' win rates and Bradley-Terry strengths with bootstrap intervals, from the judge's
    verdicts and (with `reference`) the humans'. A `tie` where `allow_ties` is false, an order
    other than AB/BA, or a repeated (item, order): 422.

    The rankings' work, rankings x `n_resamples` x comparison cells x systems squared, is bounded by
    `ANNOPLAN_PAIRWISE_MAX_WORK` (413 past it, checked before it starts); a large one runs in a child
    process and stops if the client disconnects, and a key may have `ANNOPLAN_COMPUTATIONS_PER_KEY`
    such at once (429 with `Retry-After` past it).
    """
    factors = pairwise_work(body)
    per_resample = max(factors["rankings"] * factors["comparison cells"] * factors["systems squared"], 1)
    work = bounded_work(
        factors,
        settings.pairwise_max_work,
        setting="pairwise_max_work",
        code="pairwise_too_large",
        advice=f"send at most {settings.pairwise_max_work // per_resample:,} resamples, or fewer systems",
    )
    try:
        return await computed(request, principal.key_id, work, pairwise_document, body)
    except ClientGone:
        return Response(status_code=499)  # nobody reads it: the client closed the connection
