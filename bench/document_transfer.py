"""What a fresh reliability document pays to reach its child process, at 10k and 1M items x 10 raters.

The statistics of a large document run in a child process (``service.cancellable.off_worker``).
Before, the document sent the int64 label matrix (codes, arrival order, item ids: ~250 MB at 1M)
three times, once per statistic; now it sends one compact matrix (int8 codes, int32 arrival
order) once. Each figure is the time to hand the matrix over and get a trivial answer back
(``type``: no statistics), next to a child started with no payload (the floor) and the 10k
figure of the same run. Median of ``--repeats``.

    .venv/bin/python bench/document_transfer.py [--items 1000000] [--small 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.cancellable import off_worker  # noqa: E402
from service.matrix import LabelMatrix, RaterColumn  # noqa: E402
from service.reliability import compact_matrix  # noqa: E402

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
    matrix = LabelMatrix(raw=raw, item_ids=np.arange(n_items, dtype=np.int64), raters=raters, n_labels=2,
                         label_seq=int(order.max()), criterion="default", order=order)
    _ = matrix.codes  # kept matrices have their codes computed (and pickled with them)
    return matrix


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
        "child, no payload (floor)": median_seconds(lambda: off_worker(cells, type, None), repeats),
        "before: int64 matrix sent 3x": median_seconds(
            lambda: [off_worker(cells, type, matrix) for _ in range(3)], repeats
        ),
        "now: compact matrix sent once": median_seconds(
            lambda: off_worker(cells, type, compact_matrix(matrix)), repeats
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    small, big = figures(args.small, args.repeats), figures(args.items, args.repeats)
    floor = big["child, no payload (floor)"]
    print(f"{args.items:,} items x 10 raters vs {args.small:,} (seconds, median of {args.repeats})")
    for name in big:
        print(f"  {name:32s} {big[name]:7.3f} ({big[name] / floor:5.1f}x the floor)   at {args.small:,}: "
              f"{small[name]:6.3f}")
    before, now = big["before: int64 matrix sent 3x"], big["now: compact matrix sent once"]
    print(f"  handing the 1M matrix over: {before / now:.1f}x less time than before")


if __name__ == "__main__":
    main()
