"""Alt-test recipes on the Random and Seq-Coverage designs (issue 29 item 3; docs/method.md §4 item 5, §5).

The served overlap (the judge-level recipe, then the plan check's raise, as a plan does) is checked by a
generator and decision written here: a corpus of ``n`` items with the primary and the judge on every
item, the secondaries' subsets drawn as the design draws them (Random: independent uniform subsets;
Seq-Coverage at K = 3: the first secondary proportional to the primary's labels, the second proportional
per primary label and then across "the first secondary has it or not"), and the alt-test of Calderon et
al. per held-out human (pool: the other humans on the item; t-test of W_h - W_f against epsilon, at least
30 items, Benjamini-Yekutieli at q, pass with at least half the humans rejected). The good judge's FR is
kept at m and over [m, 1.3 m] with the Monte Carlo error inside the promise, and broken at m/1.15.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student

from planner.plan_check import raised_check
from planner.recipes import certify_recipe
from planner.xi_moments import advantage_moments, xi_lattice
from tests.planner.promise_bounds import broken, kept

EPSILON, Q, PROMISE = 0.2, 0.05, 0.025


def _largest_remainder(sizes: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Items per stratum ``(T, S)``: ``total * size / sum`` floored, the rest to the largest remainders."""
    share = total[:, None] * sizes / np.maximum(sizes.sum(axis=1, keepdims=True), 1)
    quota = np.floor(share).astype(np.int64)
    short = (total - quota.sum(axis=1)).astype(np.int64)
    order = np.argsort(-(share - quota), axis=1, kind="stable")
    bonus = np.arange(sizes.shape[1])[None, :] < short[:, None]
    np.put_along_axis(quota, order, np.take_along_axis(quota, order, axis=1) + bonus, axis=1)
    return quota


def _stratified(strata: np.ndarray, quota: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Mask ``(T, n)`` taking ``quota[t, s]`` items uniformly from stratum ``s`` of each trial."""
    trials, n = strata.shape
    order = np.argsort(strata + rng.random((trials, n)), axis=1)  # by stratum, uniformly within it
    ordered = np.take_along_axis(strata, order, axis=1)
    counts = np.stack([(strata == s).sum(axis=1) for s in range(quota.shape[1])], axis=1)
    offsets = np.cumsum(counts, axis=1) - counts  # where each stratum starts in the sorted row
    rank = np.arange(n)[None, :] - np.take_along_axis(offsets, ordered, axis=1)
    chosen = rank < np.take_along_axis(quota, ordered, axis=1)
    mask = np.zeros((trials, n), dtype=bool)
    np.put_along_axis(mask, order, chosen, axis=1)
    return mask


def _secondary_masks(design: str, primary: np.ndarray, k: int, m: int, rng: np.random.Generator) -> list:
    trials, n = primary.shape
    if design == "random":
        masks = []
        for _ in range(k - 1):
            mask = np.zeros((trials, n), dtype=bool)
            np.put_along_axis(mask, np.argpartition(rng.random((trials, n)), m, axis=1)[:, :m], True, axis=1)
            masks.append(mask)
        return masks
    assert design == "seq-coverage" and k == 3
    totals = np.full(trials, m)
    sizes = np.stack([(primary == label).sum(axis=1) for label in (0, 1)], axis=1)
    first = _stratified(primary, _largest_remainder(sizes, totals), rng)
    # strata: primary label (the modal label in hand, ties to the primary's) x whether the first has the item
    strata = primary * 2 + first
    per_label = _largest_remainder(sizes, totals)
    counts = np.stack([(strata == s).sum(axis=1) for s in range(4)], axis=1)
    quota = np.concatenate([_largest_remainder(counts[:, 2 * a : 2 * a + 2], per_label[:, a]) for a in (0, 1)], 1)
    return [first, _stratified(strata, quota, rng)]


def alt_test_false_rejection(design: str, n: int, k: int, m: int, trials: int, seed: int, p_h: float, p_j: float):
    """Share of trials in which the good judge fails the alt-test on ``design`` (binary labels)."""
    rng = np.random.Generator(np.random.Philox(seed))
    truth = rng.integers(0, 2, size=(trials, n), dtype=np.int8)
    primary = np.where(rng.random((trials, n)) < p_h, truth, 1 - truth)
    secondaries = _secondary_masks(design, primary, k, m, rng)
    # only the items some secondary labels enter the decision: keep those columns, first in each row
    kept_columns = np.argsort(~np.logical_or.reduce(secondaries), axis=1, kind="stable")[:, : (k - 1) * m]
    truth, primary = (np.take_along_axis(a, kept_columns, axis=1) for a in (truth, primary))
    secondaries = [np.take_along_axis(a, kept_columns, axis=1) for a in secondaries]

    def labels(p: float) -> np.ndarray:
        return np.where(rng.random(truth.shape) < p, truth, 1 - truth)

    judge = labels(p_j)
    masks = [np.logical_or.reduce(secondaries), *secondaries]  # the primary's items in any overlap
    humans = [primary] + [labels(p_h) for _ in range(k - 1)]
    p_values = []
    for h in range(k):
        pool = [o for o in range(k) if o != h]
        size = sum(masks[o].astype(float) for o in pool)
        usable = masks[h] & (size > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            s_f = sum((judge == humans[o]) * masks[o] for o in pool) / size
            s_h = sum((humans[h] == humans[o]) * masks[o] for o in pool) / size
        diff = np.where(usable, (s_h >= s_f).astype(float) - (s_f >= s_h), 0.0)
        count = usable.sum(axis=1)
        mean = diff.sum(axis=1) / count
        sd = np.sqrt(np.maximum((diff**2).sum(axis=1) - count * mean**2, 0) / (count - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            p = student.cdf((mean - EPSILON) / (sd / np.sqrt(count)), count - 1)
        assert np.all(count >= 30)  # every human is tested
        p_values.append(np.where(sd == 0, np.where(mean < EPSILON, 0.0, 1.0), p))
    ordered = np.sort(np.column_stack(p_values), axis=1)
    bound = np.arange(1, k + 1) * Q / (k * np.sum(1.0 / np.arange(1, k + 1)))
    below = ordered <= bound
    rejected = np.where(below.any(axis=1), k - np.argmax(below[:, ::-1], axis=1), 0)
    return float(np.mean(rejected < 0.5 * k))


def test_the_generator_is_disjoint_when_the_corpus_is_large_and_draws_the_design_quotas():
    """Seq-Coverage's second secondary shares round(m^2/n)-ish items with the first, split by label."""
    rng = np.random.default_rng(3)
    primary = rng.integers(0, 2, size=(50, 300))
    first, second = _secondary_masks("seq-coverage", primary, 3, 42, rng)
    assert np.all(first.sum(axis=1) == 42) and np.all(second.sum(axis=1) == 42)
    shared = (first & second).sum(axis=1)
    assert np.all(np.abs(shared - 42 * 42 / 300) <= 2)  # within a rounding per label
    random_pair = _secondary_masks("random", primary, 3, 42, rng)
    assert np.all([mask.sum(axis=1) == 42 for mask in random_pair])
    assert np.std((random_pair[0] & random_pair[1]).sum(axis=1)) > 1  # hypergeometric, not fixed


@pytest.mark.parametrize(
    ("design", "n"), [("random", 1000), ("seq-coverage", 1000), ("random", 300), ("seq-coverage", 300)]
)
def test_alt_test_recipe_on_random_and_seq_coverage_keeps_its_promise(design, n):
    """At n = 1,000 the secondaries share ~2 items and FR at m (~.020) is kept with 20,000 trials; at n = 300
    they share ~6 and FR at m is .0229-.0230 (60,000 trials): below the promise, but too close for a
    simulation in seconds to confirm with its error inside, so there m is shown not broken, and kept
    above it (bench/promise_cells.py confirms it: .0228 and .0230 over 200,000 trials, every overlap of
    [m, 1.3 m] kept); m/1.15 breaks the promise at both sizes (the recipe is within 15% of the smallest m)."""
    p_h, p_j, k = 0.85, 0.90, 3
    mu, var = advantage_moments(*xi_lattice(p_h, p_j, n_labels=2).advantage)
    recipe = certify_recipe(mu, var, n_items=n, n_humans=k, rule="alt-test")
    check = raised_check(
        design, m=int(recipe.m), n_items=n, n_humans=k, n_labels=2, p_h=p_h, p_j=p_j, rule="alt-test", rng=0
    )
    m = check.m  # the served overlap
    assert m == recipe.m == 42  # not raised: the check does not find the recipe broken
    at_m = np.mean([alt_test_false_rejection(design, n, k, m, 5000, (1, c), p_h, p_j) for c in range(4)])
    if n >= 1000:
        assert kept(float(at_m), 20_000, PROMISE), (m, at_m)
    else:
        assert not broken(float(at_m), 20_000, PROMISE) and at_m <= PROMISE, (m, at_m)
    sizes = (((m + math.ceil(1.3 * m)) // 2, 2), (math.ceil(1.3 * m), 3)) if n >= 1000 else ((math.ceil(1.3 * m), 3),)
    for size, seed in sizes:
        assert kept(alt_test_false_rejection(design, n, k, size, 4000, seed, p_h, p_j), 4000, PROMISE), size
    assert broken(alt_test_false_rejection(design, n, k, math.floor(m / 1.15), 4000, 4, p_h, p_j), 4000, PROMISE)
