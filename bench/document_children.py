"""A fresh reliability document's child processes: one after another vs side by side, at 10k and 1M items.

A large document's statistics run off the web worker (``service.core.offload``). Before, one child
received the compact matrix pickled through a pipe and computed the monitoring and then every
other statistic; now two children map one copy of the matrix from shared memory
(``service.matrices.shared``) and compute the monitoring and the other statistics at once
(``service.core.offload.off_worker_each``), so the request waits for the slower of the two.

Printed per size: the request's wall time both ways, and each child's CPU seconds (reported by
the child itself): the request's critical path is the sum of the two before, their maximum now
when a core is free. On a loaded machine the CPU figures are the ones to compare. Median of
``--repeats``; the 1M figures next to the 10k ones of the same run.

    .venv/bin/python bench/document_children.py [--items 1000000] [--small 10000] [--repeats 3]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from document_transfer import compact_matrix, service_matrix, sized_figures  # noqa: E402

from planner.patterns import item_patterns  # noqa: E402
from service.core.offload import off_worker, off_worker_each  # noqa: E402
from service.documents.monitoring import ArrivalOrder, judge_monitorings  # noqa: E402
from service.documents.reliability import document_statistics  # noqa: E402
from service.matrices.matrix import LabelMatrix  # noqa: E402
from service.matrices.shared import SharedMatrix  # noqa: E402
from service.schemas.projects import DecisionSettings  # noqa: E402

N_RESAMPLES = 1_000


def statistics_cpu(matrix: LabelMatrix) -> float:
    """CPU seconds of the document's statistics but the monitoring: the item patterns (the worker builds
    them) and every statistic on them (the child that computes them)."""
    start = time.process_time()
    patterns = item_patterns(matrix.codes, matrix.n_labels)
    document_statistics(patterns, matrix.raters, DecisionSettings(), scale="nominal", n_resamples=N_RESAMPLES, seed=5)
    return time.process_time() - start


def monitoring_cpu(matrix: LabelMatrix) -> float:
    """CPU seconds of the document's monitoring blocks."""
    start = time.process_time()
    judge_monitorings(
        matrix,
        matrix.columns("judge"),
        matrix.columns("primary", "human"),
        DecisionSettings(),
        None,
        None,
        ArrivalOrder(opening=0, seed=0),  # every label its own write's rank, ties in a seeded item order
    )
    return time.process_time() - start


def both_cpu(matrix: LabelMatrix) -> tuple[float, float]:
    """The old way: one child computing the monitoring, then the other statistics."""
    return monitoring_cpu(matrix), statistics_cpu(matrix)


def figures(n_items: int, repeats: int) -> dict[str, float]:
    matrix = service_matrix(n_items, np.random.default_rng(n_items))
    cells = 10**9  # always the child path, as at 1M
    runs: dict[str, list[float]] = {}

    def record(name: str, value: float) -> None:
        runs.setdefault(name, []).append(value)

    for _ in range(repeats):
        start = time.perf_counter()
        monitoring, rest = off_worker(cells, both_cpu, compact_matrix(matrix))
        record("before: one child, pickled (wall)", time.perf_counter() - start)
        record("  its CPU: monitoring + the rest", monitoring + rest)
        start = time.perf_counter()
        with SharedMatrix(matrix) as shared:
            monitoring, rest = off_worker_each(cells, (monitoring_cpu, (shared,), {}), (statistics_cpu, (shared,), {}))
        record("now: two children, shared (wall)", time.perf_counter() - start)
        record("  monitoring child CPU", monitoring)
        record("  statistics child CPU", rest)
        record("  critical path: max of the two", max(monitoring, rest))
    return {name: statistics.median(values) for name, values in runs.items()}


def main() -> None:
    args, small, big = sized_figures(__doc__.splitlines()[0], figures)
    load: Any = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(f"{args.items:,} items x 10 raters vs {args.small:,} (seconds, median of {args.repeats}; load {load})")
    for name in big:
        print(f"  {name:36s} {big[name]:7.3f}   at {args.small:,}: {small[name]:6.3f}")
    before, now = big["  its CPU: monitoring + the rest"], big["  critical path: max of the two"]
    print(f"  critical-path CPU at {args.items:,}: {before / now:.2f}x less than one child computing both")


if __name__ == "__main__":
    main()
