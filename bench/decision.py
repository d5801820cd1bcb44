"""Benchmark of planner.decision (issue 4): validate_judge and rank_judges at scale.

100,000 items, 9 humans (primary labels every item, 8 secondaries label a random 10%),
3 labels, judges from the symmetric noise channel (docs/method.md §6). Targets:
validate_judge with 1,000 resamples < 1 s; rank_judges for 10 judges < 3 s.
Run: ``.venv/bin/python bench/decision.py``. On a machine shared with other busy
processes, multi-threaded OpenBLAS threads spin against them and wall time balloons;
``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/decision.py`` shows the work itself.
"""

from __future__ import annotations

import time

import numpy as np

from planner.decision import validate_judge
from planner.ranking import rank_judges

N_ITEMS, N_SECONDARY, N_LABELS, OVERLAP = 100_000, 8, 3, 0.10


def noisy(truth: np.ndarray, accuracy: float, rng: np.random.Generator) -> np.ndarray:
    """Symmetric noise channel: the true label with prob. ``accuracy``, else another one."""
    shift = rng.integers(1, N_LABELS, size=truth.size)
    return np.where(rng.random(truth.size) < accuracy, truth, (truth + shift) % N_LABELS)


def annotation_matrix(rng: np.random.Generator, n_judges: int) -> np.ndarray:
    """Columns: primary, 8 secondaries (10% each, rest missing), then the judges."""
    truth = rng.integers(0, N_LABELS, size=N_ITEMS)
    humans = [noisy(truth, 0.85, rng)]
    for _ in range(N_SECONDARY):
        labels = noisy(truth, 0.85, rng)
        labels[rng.random(N_ITEMS) >= OVERLAP] = -1
        humans.append(labels)
    judges = [noisy(truth, a, rng) for a in np.linspace(0.80, 0.90, n_judges)]
    return np.column_stack(humans + judges)


def best_of(runs: int, call) -> tuple[float, float]:
    """Fastest wall time of ``runs`` calls and the CPU time of that call, in seconds.

    CPU time (all threads) is printed too because the machine may be shared: wall time
    above CPU time means the process waited for a core.
    """
    best = (np.inf, np.inf)
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        call()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def main() -> None:
    rng = np.random.default_rng(20261129)
    codes = annotation_matrix(rng, n_judges=10)
    humans = list(range(1 + N_SECONDARY))
    judges = list(range(1 + N_SECONDARY, codes.shape[1]))
    print(f"data: {N_ITEMS} items, {len(humans)} humans (8 at {OVERLAP:.0%}), {N_LABELS} labels")
    for rule in ("margin", "alt-test"):
        options = {"humans": humans, "n_labels": N_LABELS, "rule": rule, "n_resamples": 1000}
        result = validate_judge(codes, judge=judges[-1], rng=1, **options)
        wall, cpu = best_of(3, lambda options=options: validate_judge(codes, judge=judges[-1], rng=1, **options))
        print(
            f"validate_judge rule={rule:8s} 1000 resamples: {wall:.3f} s wall, {cpu:.3f} s CPU "
            f"(target < 1 s); "
            f"decision={result.decision} omega={result.omega:.3f} "
            f"p_opposite={result.p_opposite:.3f}"
        )
    for rule in ("margin", "alt-test"):
        options = {"humans": humans, "n_labels": N_LABELS, "rule": rule, "n_resamples": 1000}
        ranking = rank_judges(codes, judges=judges, rng=1, **options)
        wall, cpu = best_of(2, lambda options=options: rank_judges(codes, judges=judges, rng=1, **options))
        print(
            f"rank_judges rule={rule:8s} 10 judges, 1000 resamples: {wall:.3f} s wall, "
            f"{cpu:.3f} s CPU (target < 3 s); top={ranking.order[0]} "
            f"flip_share={ranking.flip_share:.3f}"
        )


if __name__ == "__main__":
    main()
