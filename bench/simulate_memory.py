"""Peak memory of ``simulate`` at 200,000 items x 300 trials (K = 4 humans, one judge).

One-shot, that run held a (300, 200000, 5) int64 code array (2.4 GB) plus float draws of the
same shape and raised MemoryError; trials now go in chunks of ``_TRIAL_CELLS`` trials x items
x raters. Prints the peak resident set size (``resource.getrusage``) of the process next to
the reference measured in the same run: the peak after importing and a 2,000-item run.
Target: peak RSS < 1 GB.

Run: .venv/bin/python bench/simulate_memory.py
"""

from __future__ import annotations

import resource
import time

from planner.simulate import simulate

SETTINGS = dict(n_humans=4, n_labels=2, p_h=0.85, p_j=0.85, rho=0.2, design="random", rng=0)


def peak_rss_megabytes() -> float:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    simulate(n_items=2_000, trials=300, **SETTINGS)  # type: ignore[arg-type]
    reference = peak_rss_megabytes()
    start = time.perf_counter()
    result = simulate(n_items=200_000, trials=300, **SETTINGS)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    peak = peak_rss_megabytes()
    cell = result.cells[0]
    print(
        f"simulate 200,000 items x 300 trials: peak RSS {peak:.0f} MB "
        f"({peak / reference:.1f}x the {reference:.0f} MB after a 2,000-item run; target < 1,024 MB), "
        f"{elapsed:.0f} s; bias {cell.bias:.5f}, reliability {cell.reliability:.3f}"
    )


if __name__ == "__main__":
    main()
