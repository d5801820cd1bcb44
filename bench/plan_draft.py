"""A plan's computation in process (``service.planning.plans.plan_draft``) at 10,000 and 1,000,000 items (issue 20).

What POST /plan computes in its child process, without the server: the recipes, the four design
checks, the estimator check and the monitoring simulation, on a label matrix like
``bench/million.py``'s (a judge and the primary on every item, 8 secondaries on 1/8 of the items
each; the primary's labels 70/30). Three requests: ``design: auto`` (Random or Disjoint is chosen
here), ``design: strat`` (a shared panel, which plans its monitoring at its own overlap) and
``design: disjoint`` at ``m`` 130 (``bench/plan_latency.py``'s "lists drawn" plans: its own check). CPU
seconds (``time.process_time``: both check threads) and wall per draft, the median of
``--repeats`` seeds; with ``--reference DIR`` the same drafts with an older tree's code, in a
child process of the same run, and the ratios.

    .venv/bin/python bench/plan_draft.py [--repeats 3] [--reference ../old-checkout]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
# bench/service.py would shadow the service package; the tree whose code runs comes first on PYTHONPATH
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH] + [str(BENCH.parent)]

from bench.reference_tree import add_reference_options, reference_figures  # noqa: E402

SIZES = (10_000, 1_000_000)
REQUESTS: dict[str, dict[str, Any]] = {
    "auto": {},
    "strat": {"design": "strat"},
    "m=130": {"design": "disjoint", "m": 130},
}
REPEATS = 3


def matrix(n_items: int) -> Any:
    """The drafted codes (int16) of ``n_items`` items: judge (0.9), primary (0.85) on every item, 8
    secondaries (0.85) on 1/8 of the items each."""
    from service.matrices.matrix import LabelMatrix, RaterColumn

    rng = np.random.default_rng(0)
    truth = rng.random(n_items) < 0.7
    raw = np.full((n_items, 10), -1, dtype=np.int16)
    for k in range(10):
        on = np.arange(n_items) if k < 2 else np.flatnonzero(rng.random(n_items) < 1 / 8)
        right = rng.random(on.size) < (0.9 if k == 0 else 0.85)
        raw[on, k] = np.where(truth[on] == right, 0, 1)
    raters = [RaterColumn(1, "judge", "judge"), RaterColumn(2, "prim", "primary")]
    raters += [RaterColumn(3 + k, f"h{k}", "human") for k in range(8)]
    return LabelMatrix(
        raw=raw,
        item_ids=np.arange(n_items),
        raters=raters,
        n_labels=2,
        label_seq=5,
        criterion="default",
        order=np.empty((0, 0), dtype=np.int64),
    )


def drafts_seconds(repeats: int = REPEATS) -> dict[str, list[float]]:
    """Per size and request, the median CPU and wall seconds of ``repeats`` drafts (seeds 1..repeats)."""
    from service.planning.plans import plan_draft
    from service.schemas.plans import PlanCreate
    from service.schemas.projects import DecisionSettings

    out: dict[str, list[float]] = {}
    for n_items in SIZES:
        labels = matrix(n_items)
        for name, extra in REQUESTS.items():
            cpu, wall = [], []
            for seed in range(1, repeats + 1):
                body = PlanCreate(p_h=0.85, p_j=0.9, seed=seed, **extra)
                c0, t0 = time.process_time(), time.perf_counter()
                draft = plan_draft(body, DecisionSettings(), labels, seed, None, n_resamples=1000)
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - t0)
            out[f"{n_items:,} {name} ({draft.design})"] = [statistics.median(cpu), statistics.median(wall)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    add_reference_options(parser)
    args = parser.parse_args()
    reference = reference_figures(__file__, args, drafts_seconds)
    figures = drafts_seconds(args.repeats)
    print("plan_draft in process, 9 humans, CPU / wall seconds (median of the seeds)")
    for label, (cpu, wall) in figures.items():
        line = f"  {label:<28s} {cpu:5.2f} s CPU  {wall:5.2f} s wall"
        if reference is not None:
            old_cpu, old_wall = reference[label]
            line += f"   reference {old_cpu:5.2f} / {old_wall:5.2f} s: {cpu / old_cpu:4.2f}x / {wall / old_wall:4.2f}x"
        print(line)


if __name__ == "__main__":
    main()
