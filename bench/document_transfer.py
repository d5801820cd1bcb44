"""What a fresh reliability document pays to reach its child processes, at 10k and 1M items x 10 raters.

The statistics of a large document run in child processes (``service.core.offload.off_worker_each``:
the monitoring in one, the other statistics in another). Once, the document pickled the int64
label matrix (codes, arrival order, item ids: ~250 MB at 1M) through a pipe three times, once per
statistic; then one compact matrix (int8 codes, int32 arrival order) once; now the compact matrix
is written once into shared memory (``service.matrices.shared.SharedMatrix``) and both children map
it. Each figure is the time to hand the matrix over and get a trivial answer back (``len`` of its
rows: no statistics), next to a child started with no payload (the floor) and the 10k figure of
the same run. Median of ``--repeats``.

    .venv/bin/python bench/document_transfer.py [--items 1000000] [--small 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.codes import code_type  # noqa: E402
from service.core.offload import off_worker, off_worker_each  # noqa: E402
from service.matrices.matrix import LabelMatrix, RaterColumn, rank_type  # noqa: E402
from service.matrices.shared import SharedMatrix  # noqa: E402

SECONDARIES = 8


def service_matrix(n_items: int, rng: np.random.Generator) -> LabelMatrix:
    """A judge and the primary on every item, 8 secondaries on 1/8 each: binary labels, as the service keeps them."""
    raw = np.full((n_items, 2 + SECONDARIES), -1, dtype=np.int64)
    raw[:, :2] = rng.integers(0, 2, (n_items, 2))
    for k in range(SECONDARIES):
        on = rng.random(n_items) < 1 / SECONDARIES
        raw[on, 2 + k] = rng.integers(0, 2, int(on.sum()))
    order = np.where(raw >= 0, np.arange(raw.size).reshape(raw.shape), -1)
    raters = [RaterColumn(1, "judge", "judge"), RaterColumn(2, "prim", "primary")] + [
        RaterColumn(3 + k, f"h{k}", "human") for k in range(SECONDARIES)
    ]
    for a in (raw, order):
        a.flags.writeable = False
    matrix = LabelMatrix(
        raw=raw,
        item_ids=np.arange(n_items, dtype=np.int64),
        raters=raters,
        n_labels=2,
        label_seq=int(order.max()),
        criterion="default",
        order=order,
    )
    _ = matrix.codes  # kept matrices have their codes computed (and pickled with them)
    return matrix


def compact_matrix(matrix: LabelMatrix) -> LabelMatrix:
    """``matrix`` in the compact types, as the document pickled it for its child before shared memory."""
    return dataclasses.replace(
        matrix,
        raw=matrix.raw.astype(code_type(matrix.n_labels)),
        order=matrix.order.astype(rank_type(matrix.label_seq)),
    )


def rows(matrix: LabelMatrix) -> int:
    return len(matrix.raw)


def shared_twice(matrix: LabelMatrix, cells: int) -> list[int]:
    with SharedMatrix(matrix) as shared:
        return off_worker_each(cells, (rows, (shared,), {}), (rows, (shared,), {}))


def median_seconds(call: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def figures(n_items: int, repeats: int) -> dict[str, float]:
    matrix = service_matrix(n_items, np.random.default_rng(n_items))
    cells = max(matrix.raw.size, 10**9)  # always the child path, as at 1M
    return {
        "child, no payload (floor)": median_seconds(lambda: off_worker(cells, len, ()), repeats),
        "before: int64 matrix sent 3x": median_seconds(
            lambda: [off_worker(cells, rows, matrix) for _ in range(3)], repeats
        ),
        "then: compact matrix pickled once": median_seconds(
            lambda: off_worker(cells, rows, compact_matrix(matrix)), repeats
        ),
        "now: shared, mapped by 2 children": median_seconds(lambda: shared_twice(matrix, cells), repeats),
    }


def sized_figures(
    description: str, figures_of: Callable[[int, int], dict[str, float]]
) -> tuple[argparse.Namespace, dict[str, float], dict[str, float]]:
    """The command line (``--items``, ``--small``, ``--repeats``) and ``figures_of(size, repeats)`` at
    the small size and at the large one, in that order (the 10k figure of the same run)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    return args, figures_of(args.small, args.repeats), figures_of(args.items, args.repeats)


def main() -> None:
    args, small, big = sized_figures(__doc__.splitlines()[0], figures)
    floor = big["child, no payload (floor)"]
    print(f"{args.items:,} items x 10 raters vs {args.small:,} (seconds, median of {args.repeats})")
    for name in big:
        print(
            f"  {name:32s} {big[name]:7.3f} ({big[name] / floor:5.1f}x the floor)   at {args.small:,}: "
            f"{small[name]:6.3f}"
        )
    then, now = big["then: compact matrix pickled once"], big["now: shared, mapped by 2 children"]
    print(f"  handing the 1M matrix to two children: {then / now:.1f}x less time than pickling it to one")


if __name__ == "__main__":
    main()
