"""The reliability document's statistics other than monitoring, at 10,000 and 1,000,000 items x 10 raters.

The matrix is the lead's profile of ``/reliability`` at 1M: binary labels, the judge and the
primary on every item, 8 secondaries on 1/8 of the items each. Pieces, each as CPU seconds
(``time.process_time``, steadier than wall time on a shared machine) with the 1M / 10k ratio
measured in the same run:

- ``patterns``: the one pass over the matrix (``item_patterns`` of the int8 codes);
- ``validation``: ``validate_judge``, 1,000 resamples, on the shared patterns;
- ``coefficients``: ``summary_table`` of the humans, 1,000 resamples, on ``patterns.select``;
- ``pilot``: ``pilot_moments``, 200 resamples (the document's ``recipe_now``), on the patterns;
- ``shared total``: the four above; ``dense total``: the three statistics each handed the
  int64 matrix (what a caller without the patterns pays: three passes and an int64 copy).

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/document_stats.py`` (multithreaded BLAS
on a loaded machine spends more CPU than the products).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from planner.agreement import summary_table
from planner.decision import validate_judge
from planner.patterns import ItemPatterns, item_patterns
from planner.recipes import pilot_moments

N_RATERS, N_RESAMPLES, PILOT_RESAMPLES = 10, 1000, 200
JUDGE, HUMANS = 0, list(range(1, N_RATERS))


def profile_codes(n_items: int, rng: np.random.Generator) -> np.ndarray:
    """Judge (accuracy .9) and primary (.85) on every item, 8 secondaries (.85) on 1/8 each; int8."""
    truth = rng.random(n_items) < 0.7
    codes = np.full((n_items, N_RATERS), -1, dtype=np.int8)
    for k in range(N_RATERS):
        on = np.arange(n_items) if k < 2 else np.flatnonzero(rng.random(n_items) < 1 / 8)
        right = rng.random(on.size) < (0.9 if k == 0 else 0.85)
        codes[on, k] = np.where(truth[on] == right, 0, 1)
    return codes


def cpu(run: Callable[[], object], repeats: int = 2) -> float:
    """Least CPU seconds of ``repeats`` calls."""
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return float(best)


def pieces(codes: np.ndarray) -> dict[str, float]:
    patterns = item_patterns(codes, 2)

    def validation(source: np.ndarray | ItemPatterns) -> object:
        return validate_judge(source, judge=JUDGE, humans=HUMANS, n_labels=2, n_resamples=N_RESAMPLES, rng=5)

    def coefficients(source: np.ndarray | ItemPatterns) -> object:
        return summary_table(source, n_labels=2, n_resamples=N_RESAMPLES, rng=5)

    def pilot(source: np.ndarray | ItemPatterns) -> object:
        return pilot_moments(source, judge=JUDGE, humans=HUMANS, n_labels=2, n_resamples=PILOT_RESAMPLES, rng=0)

    times = {
        "patterns": cpu(lambda: item_patterns(codes, 2)),
        "validation": cpu(lambda: validation(patterns)),
        "coefficients": cpu(lambda: coefficients(patterns.select(HUMANS))),
        "pilot": cpu(lambda: pilot(patterns)),
    }
    times["shared total"] = sum(times.values())
    dense = codes.astype(np.int64)
    times["dense total"] = cpu(lambda: (validation(dense), coefficients(dense[:, HUMANS]), pilot(dense)), 1)
    return times


def main() -> None:
    rng = np.random.default_rng(0)
    small, large = pieces(profile_codes(10_000, rng)), pieces(profile_codes(1_000_000, rng))
    n_patterns = item_patterns(profile_codes(1_000_000, rng), 2).counts.size
    print(f"1M x {N_RATERS} raters: {n_patterns} distinct rows; CPU seconds, least of 2")
    print(f"{'piece':<14} {'10k':>8} {'1M':>8} {'1M/10k':>7}")
    for name in small:
        print(f"{name:<14} {small[name]:8.3f} {large[name]:8.3f} {large[name] / max(small[name], 1e-9):7.1f}")


if __name__ == "__main__":
    main()
