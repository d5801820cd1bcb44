"""Per-slice certification plans: overlap sized so each slice's claim can be decided (docs/method.md §3b, §4).

A plan with ``slices: "feature:<name>"`` sizes the overlap slice by slice (the §4 recipe on the
slice's items, at its own epsilon) and draws one shared panel of that many items per slice, each
slice's items stratified by the primary's label; with a fixed budget (``m`` given) the budget is
shared across slices by Neyman allocation (``n_s`` proportional to ``N_s S_s``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
from sqlalchemy.orm import Session

from planner import Recipe, neyman_allocation, strat
from service.matrices.matrix import LabelMatrix
from service.planning.lists import primary_strata
from service.planning.strata import feature_name, feature_strata, feature_stratum_sds, feature_values
from service.schemas.plans import PlanCreate
from service.schemas.projects import DecisionSettings


def slice_strata(session: Session, matrix: LabelMatrix, by: str) -> tuple[np.ndarray, list[str]]:
    """Slice code per item (matrix order) and each slice's value as ``/reliability?by=`` names it (a string
    as itself, any other JSON value as its JSON text); 422 when the feature cannot stratify the corpus."""
    name = feature_name(by)
    assert name, by  # PlanCreate accepts only "feature:<name>"
    strata, _ = feature_strata(session, matrix, name)
    levels = sorted({v for v in feature_values(session, matrix, name)[0] if v is not None})  # feature_strata's order
    shown = [parsed if isinstance(parsed := orjson.loads(v), str) else v for v in levels]
    return strata, shown


def _needed(recipe: Recipe, n_items: int) -> int:
    """The overlap a slice's recipe asks for, at most the slice (every item when no overlap suffices)."""
    return n_items if recipe.m is None else min(int(recipe.m), n_items)


def sliced_panel(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    seed: int,
    slices: tuple[np.ndarray, list[str]],
    recipe: Callable[[int, float], Recipe],
    agree: np.ndarray | None,
) -> tuple[int, list[int], list[float], dict[str, Any]]:
    """The panel of a per-slice plan: its size, item ids in labelling order, inclusion probabilities, summary.

    ``recipe(n_items, epsilon)`` is the §4 certification recipe of a slice of ``n_items`` at ``epsilon``
    (the plan's moments and design). Without a budget each slice gets its
    recipe's overlap; with one (``body.m``) the budget is split by Neyman allocation over the slices'
    ``S_s`` (prior or pilot, as a Neyman plan's feature strata). Inside a slice the items are drawn by
    Strat over the primary's labels; the slices are interleaved so every prefix of the list covers each
    slice in proportion to its quota. An item's inclusion probability is the share drawn of its
    (slice, primary label) cell.
    """
    codes, values = slices
    sizes = np.bincount(codes, minlength=len(values))
    recipes = [recipe(int(n), _epsilon(decision, v)) for n, v in zip(sizes, values, strict=True)]
    needed = np.array([_needed(r, int(n)) for r, n in zip(recipes, sizes, strict=True)], dtype=np.int64)
    if body.m is None:
        quota, allocation, sds = needed, "the recipe per slice", None
    else:
        sds, _ = feature_stratum_sds(body, matrix, codes, agree)
        quota = neyman_allocation(sizes, sds, min(body.m, int(sizes.sum())), min_per_stratum=2)
        allocation = "neyman across slices (a fixed budget m)"
    primary = primary_strata(matrix)
    cells = codes * (matrix.n_labels + 1) + primary  # (slice, primary label or none)
    chosen: list[np.ndarray] = []
    keys: list[np.ndarray] = []
    for s in range(len(values)):  # a draw per slice: a handful of slices, each vectorised
        rows = np.flatnonzero(codes == s)
        if quota[s] == 0:
            continue
        within = strat(primary[rows], int(quota[s]), raters=["slice"], rng=np.random.default_rng([seed, s]))["slice"]
        chosen.append(rows[within])
        keys.append((np.arange(within.size) + 0.5) / within.size)
    picked = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    order = np.argsort(np.concatenate(keys), kind="stable") if keys else picked
    panel = picked[order]
    drawn = np.bincount(cells[panel], minlength=int(cells.max()) + 1)
    inclusion = drawn[cells[panel]] / np.bincount(cells)[cells[panel]]
    summary = {
        "feature": feature_name(body.slices or ""),
        "allocation": allocation,
        "note": "each slice's m is its one-look recipe's (§4, not simulated); the check and monitoring blocks are "
        "of the overall decision",
        "slices": [
            {
                "value": values[s],
                "n_items": int(sizes[s]),
                "epsilon": _epsilon(decision, values[s]),
                "m_needed": int(needed[s]),
                "recipe_feasible": bool(recipes[s].feasible),
                "m": int(quota[s]),
                "decidable": bool(quota[s] >= needed[s] and recipes[s].feasible),
                **({} if sds is None else {"sd": float(sds[s])}),
            }
            for s in range(len(values))
        ],
    }
    return int(panel.size), matrix.item_ids[panel].tolist(), inclusion.tolist(), summary


def _epsilon(decision: DecisionSettings, value: str) -> float:
    """The slice's epsilon: ``slice_epsilon[value]``, else the decision's."""
    return float((decision.slice_epsilon or {}).get(value, decision.resolved_epsilon()))
