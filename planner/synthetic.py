"""The simulator's generator: synthetic dense label codes from per-rater accuracies (docs/method.md §6)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from planner.simulation_inputs import label_count, positive_int, prevalence_shares


def synthetic_codes(
    n_items: int,
    *,
    n_labels: int,
    accuracies: Sequence[float],
    prevalence: Sequence[float] | None = None,
    clusters: int | None = None,
    cluster_difficulty: float = 0.5,
    trials: int = 1,
    rng: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Synthetic dense label codes, shape ``(trials, n_items, n_raters)`` (docs/method.md §6, generator).

    True labels ``t_i ~ prevalence`` (uniform by default); rater ``r`` reports ``t_i`` with
    probability ``accuracies[r]``, otherwise a uniformly chosen other label (symmetric
    noise channel). With ``clusters = G``, items form ``G`` contiguous blocks in corpus
    order; each block draws a difficulty ``d ~ U(0, cluster_difficulty)`` per trial that
    pulls every rater's accuracy toward chance: ``1/L + (p - 1/L)(1 - d)``.

    >>> codes = synthetic_codes(4, n_labels=3, accuracies=[1.0, 1.0], trials=2, rng=0)
    >>> codes.shape, bool((codes[..., 0] == codes[..., 1]).all())
    ((2, 4, 2), True)
    """
    n_items = positive_int(n_items, "n_items")
    trials = positive_int(trials, "trials")
    n_labels = label_count(n_labels)
    acc = np.asarray(accuracies, dtype=float)
    if acc.ndim != 1 or acc.size == 0 or np.any((acc < 0) | (acc > 1)):
        raise ValueError("accuracies must be a non-empty list of probabilities in [0, 1]")
    share = prevalence_shares(prevalence, n_labels)
    gen = np.random.default_rng(rng)
    uniform = gen.random((trials, n_items))
    truth = np.minimum(np.searchsorted(np.cumsum(share), uniform, side="right"), n_labels - 1)
    p = np.broadcast_to(acc, (trials, n_items, acc.size))
    if clusters is not None:
        clusters = positive_int(clusters, "clusters")
        if clusters > n_items:
            raise ValueError(f"clusters must be at most n_items={n_items}, got {clusters}")
        if not 0.0 <= cluster_difficulty <= 1.0:
            raise ValueError(f"cluster_difficulty must be in [0, 1], got {cluster_difficulty!r}")
        sizes = [len(b) for b in np.array_split(np.arange(n_items), clusters)]
        block = np.repeat(np.arange(clusters), sizes)
        difficulty = gen.uniform(0.0, cluster_difficulty, (trials, clusters))[:, block]
        p = 1.0 / n_labels + (p - 1.0 / n_labels) * (1.0 - difficulty)[..., None]
    correct = gen.random(p.shape) < p
    shift = 1 + gen.integers(0, n_labels - 1, p.shape, dtype=np.int16)
    return np.where(correct, truth[..., None], (truth[..., None] + shift) % n_labels)
