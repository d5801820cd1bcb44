"""Observation masks of every design over simulated trials, drawn as the served lists are (docs/method.md §5)."""

from __future__ import annotations

import numpy as np

from planner.designs import proportional_allocation, stratified_masks, stratum_sizes, uniform_masks
from planner.seq_designs import (
    batched_modal_strata,
    coverage_strata,
)


def design_masks(design: str, humans: np.ndarray, m: int, *, n_labels: int, rng: np.random.Generator) -> np.ndarray:
    """Observation masks ``(K, T, n_items)`` of a design over ``T`` trials (docs/method.md §5).

    ``humans`` holds every human's labels, rater-major ``(K, T, n_items)``, row 0 the
    primary, who sees every item. Secondaries ``1..K-1`` get ``m`` items each, drawn by the
    same selection steps (and the same random draws, in the same order) as the served
    designs ``random_subsets``, ``depth_first``, ``shared_panel``, ``strat``, ``disjoint``,
    ``seq_refined`` and ``seq_coverage`` (the Seq designs configure each secondary from
    the labels of the primary and the secondaries before it).
    """
    n_humans, trials, n_items = humans.shape
    mask = np.zeros(humans.shape, dtype=bool)
    mask[0] = True
    if design == "depth-first":
        mask[1:, :, :m] = True
    elif design == "shared-panel":
        mask[1:] = uniform_masks(rng.random((trials, n_items)), m)
    elif design == "strat":
        sizes = stratum_sizes(humans[0], n_labels)
        key = rng.random((trials, n_items))
        mask[1:] = stratified_masks(humans[0], proportional_allocation(sizes, m), key)
    elif design == "random":
        for k in range(1, n_humans):
            mask[k] = uniform_masks(rng.random((trials, n_items)), m)
    elif design == "disjoint":
        quota = proportional_allocation(stratum_sizes(humans[0], n_labels), m)
        for k in range(1, n_humans):
            coverage = mask[1:].sum(axis=0)
            mask[k] = stratified_masks(humans[0], quota, rng.random((trials, n_items)), coverage)
    else:
        for k in range(1, n_humans):
            modal = batched_modal_strata(humans, mask, n_labels=n_labels)
            if design == "seq-coverage":
                strata, quota = coverage_strata(modal, mask[1:k], m, n_labels=n_labels)
            else:
                strata, quota = modal, proportional_allocation(stratum_sizes(modal, n_labels + 1), m)
            mask[k] = stratified_masks(strata, quota, rng.random((trials, n_items)))
    return mask
