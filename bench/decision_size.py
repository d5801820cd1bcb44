"""validate_judge at 1,000,000 items x 30 humans and rank_judges at 100,000 items x 30 humans, 20 judges.

Both used to be refused (per-pattern sums over ``_MAX_FEATURE_CELLS``); their features are
now computed for a few held-out humans at a time. Dense matrices (every human labels every
item, L = 2, raters right with probability 0.8): nearly every item is its own pattern.
200 resamples each. Each figure is printed next to the same call at a tenth of the items
(which fits in one piece), measured in the same run, with the peak RSS of the process.

Run: .venv/bin/python bench/decision_size.py
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable

import numpy as np

from planner.decision import validate_judge
from planner.ranking import rank_judges

N_HUMANS, N_LABELS, N_RESAMPLES = 30, 2, 200


def dense_codes(n_items: int, n_raters: int, rng: np.random.Generator) -> np.ndarray:
    truth = rng.integers(0, N_LABELS, size=n_items)
    noise = rng.integers(0, N_LABELS, size=(n_items, n_raters))
    return np.where(rng.random((n_items, n_raters)) < 0.8, truth[:, None], noise).astype(np.int8)


def timed(run: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def peak_rss_megabytes() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    rng = np.random.default_rng(20261130)
    humans = list(range(1, N_HUMANS + 1))
    for n_items in (100_000, 1_000_000):
        codes = dense_codes(n_items, N_HUMANS + 1, rng)
        seconds, result = timed(
            lambda c=codes: validate_judge(c, judge=0, humans=humans, n_labels=N_LABELS, n_resamples=N_RESAMPLES, rng=0)
        )
        print(
            f"validate_judge {n_items:,} x {N_HUMANS} humans: {seconds:.1f} s, "
            f"decision {result.decision}, peak RSS so far {peak_rss_megabytes():.0f} MB"
        )  # type: ignore[attr-defined]
    judges = list(range(N_HUMANS, N_HUMANS + 20))
    for n_items in (10_000, 100_000):
        codes = dense_codes(n_items, N_HUMANS + 20, rng)
        seconds, result = timed(
            lambda c=codes: rank_judges(
                c, judges=judges, humans=list(range(N_HUMANS)), n_labels=N_LABELS, n_resamples=N_RESAMPLES, rng=0
            )
        )
        print(
            f"rank_judges {n_items:,} x {N_HUMANS} humans, 20 judges: {seconds:.1f} s, "
            f"flip share {result.flip_share:.3f}, peak RSS so far {peak_rss_megabytes():.0f} MB"
        )  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
