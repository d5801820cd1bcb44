"""Stateless pairwise judges: position consistency, accuracy in both orders, Bradley-Terry (docs/method.md §13)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter

from service.core.errors import error_responses
from service.deps import PrincipalDep
from service.documents.pairwise import pairwise_document
from service.schemas.pairwise import PairwiseBody, PairwiseRead

router = APIRouter(tags=["pairwise"])


@router.post("/pairwise", response_model=PairwiseRead, responses=error_responses(401, 413, 422))
async def post_pairwise(body: PairwiseBody, _principal: PrincipalDep) -> PairwiseRead:
    """A pairwise (A/B) judge's verdicts, analysed (any key; nothing is stored).

    Each verdict names the item's answer it prefers (`A`, `B` or `tie`, in the item's own answer
    names) and the order the answers were shown (`AB` or `BA`), so an item can hold both orders.
    Returns position consistency (same verdict in both orders) and position bias (flips that
    favour the first or the second position, with an exact binomial test); with `reference` (the
    human majority per item), the accuracy with each order and in both; with `systems`, the
    systems' win rates and Bradley-Terry strengths with bootstrap intervals, from the judge's
    verdicts and (with `reference`) the humans'. A `tie` where `allow_ties` is false, an order
    other than AB/BA, or a repeated (item, order): 422.
    """
    return await asyncio.to_thread(pairwise_document, body)
