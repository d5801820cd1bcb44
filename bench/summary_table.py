"""Benchmark summary_table (1,000 resamples) at 100,000 items x 50 raters, and the report's pattern step.

Matrices (L = 2, raters right with probability 0.8): "service" — the judge and the primary
label every item and one of 48 secondaries labels each (3 labels per item, as the service's
primary-plus-overlap designs); "10% overlap" — each secondary labels a random 10% (about
7 labels per item, nearly every item its own pattern). The reference is the same call at
10,000 items, measured in the same run, and with ``--reference DIR`` (a checkout or
``git archive`` of an older tree) the same calls with that tree's ``planner`` in a child
process, also in the same run (CPU seconds: steadier than wall time on a shared machine).
Target: <= 2 s at 100,000 x 50.
The report's ``cluster_bootstrap`` groups items by their per-item cell counts: ``distinct_rows``
against ``np.unique(rows, axis=0)`` (the same patterns, in the same order).

Run: OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/summary_table.py [--reference DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
# run as a file, bench/ is first on sys.path (and its service.py would shadow the service package):
# drop it and append the repository, so that `bench` imports and a --reference tree on PYTHONPATH comes first
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH] + [str(BENCH.parent)]

from bench.reference_tree import add_reference_options, reference_figures
from planner.rater_pairs import summary_table
from planner.resampling import distinct_rows

N_RATERS, N_LABELS = 50, 2


def service_matrix(n_items: int, rng: np.random.Generator) -> np.ndarray:
    """Judge and primary on every item, one random secondary per item."""
    codes = _noisy_codes(n_items, rng)
    keep = np.zeros((n_items, N_RATERS), dtype=bool)
    keep[:, :2] = True
    keep[np.arange(n_items), rng.integers(2, N_RATERS, size=n_items)] = True
    return np.where(keep, codes, -1)


def overlap_matrix(n_items: int, rng: np.random.Generator) -> np.ndarray:
    """Judge and primary on every item, each secondary on a random 10%."""
    codes = _noisy_codes(n_items, rng)
    codes[:, 2:][rng.random((n_items, N_RATERS - 2)) >= 0.10] = -1
    return codes


def _noisy_codes(n_items: int, rng: np.random.Generator) -> np.ndarray:
    truth = rng.integers(0, N_LABELS, size=n_items)
    noise = rng.integers(0, N_LABELS, size=(n_items, N_RATERS))
    return np.where(rng.random((n_items, N_RATERS)) < 0.8, truth[:, None], noise)


def seconds(run: Callable[[], object], repeats: int = 1) -> float:
    """Minimum wall time of ``repeats`` runs."""
    return min(wall_and_cpu(run)[0] for _ in range(repeats))


def wall_and_cpu(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (CPU: this process, every thread)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


MATRICES = (("service", service_matrix), ("10% overlap", overlap_matrix))


def tables_cpu() -> dict[str, list[float]]:
    """CPU seconds of summary_table at 10,000 and 100,000 items x 50, per matrix (any tree's API)."""
    rng = np.random.default_rng(20261130)
    out = {}
    for name, build in MATRICES:
        sizes = build(10_000, rng), build(100_000, rng)
        out[name] = [
            wall_and_cpu(lambda c=c: summary_table(c, n_labels=N_LABELS, n_resamples=1000, rng=0))[1] for c in sizes
        ]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_reference_options(parser)
    args = parser.parse_args()
    reference = reference_figures(__file__, args, tables_cpu)
    ours = tables_cpu()
    for name, _ in MATRICES:
        (small, large), line = ours[name], f"summary_table, 1,000 resamples, {name}, CPU s"
        line += f": 10,000 x 50 {small:.2f}; 100,000 x 50 {large:.2f} ({large / small:.1f}x the 10k figure"
        if reference is not None:
            line += f"; reference {reference[name][1]:.2f}, {reference[name][1] / large:.1f}x ours"
        print(line + "; target <= 2 s)")
    rng = np.random.default_rng(20261130)
    cells = rng.integers(0, 3, size=(100_000, 16))  # per-item cell counts, 2 labels: (L+2)^2 cells
    for label, rows in (("report cells 100,000 x 16", cells), ("codes 100,000 x 50", overlap_matrix(100_000, rng))):
        ours = seconds(lambda r=rows: distinct_rows(r), 3)
        numpy_unique = seconds(lambda r=rows: np.unique(r, axis=0, return_counts=True), 3)
        print(
            f"distinct patterns of {label}: {ours * 1e3:.0f} ms, "
            f"{numpy_unique / ours:.1f}x faster than np.unique(axis=0) ({numpy_unique * 1e3:.0f} ms)"
        )


if __name__ == "__main__":
    main()
