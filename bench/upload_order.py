"""Upload order (issue 28 item 3, docs/method.md §8.2): a file sorted by a feature the judge's accuracy
depends on, read in file order and in the service's arrival order.

The judge is right ``p_good`` of the time below the median feature and ``p_bad`` above it, on the margin
overall (``E[xi] = (2 p_h - 1)(p_j - p_h) = -epsilon`` at ``p_h = .8``, ``epsilon = .05``); ``K`` humans
label every item; every label is in one bulk write sorted by the feature, read at the first look. File
order dates each label by its ``label_seq`` (the order before ranks); the service reads the write as one
arrival in the project's seeded item order (``service.documents.monitoring.judge_monitorings``). Printed:
the share of runs passed at some prefix (a false pass: at most alpha = .05 is promised), with its Monte
Carlo SE. The last two columns: the same file uploaded item by item (each item's labels one write) while
someone looks after the first 20 items, so the opening holds those and every later item is its own arrival,
in the file's order; read by its writes alone (``looked at 20``: what the service did before planned lists
were read in list order), and with every secondary holding a planned list of all items in a random order
drawn before any label, read in list order (``lists``: the service's rule, ``planner.list_arrival``). The
``judge late`` columns: every human's labels in one write, looked at (the opening), then the judge's labels
item by item in the file's order, read by those writes (``by writes``: what planned lists gave before a listed
item waited for the judge's label) and by the service's rule with every secondary holding a list (``lists``).

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/upload_order.py [runs]`` (default 1000).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.sequential import monitor_judge
from service.documents.monitoring import ArrivalOrder, judge_monitorings  # noqa: E402
from service.matrices.matrix import LabelMatrix, RaterColumn  # noqa: E402
from service.schemas.projects import DecisionSettings  # noqa: E402

P_H, EPSILON, ALPHA = 0.8, 0.05, 0.05


def sorted_file(rng: np.random.Generator, n: int, k: int, spread: float) -> LabelMatrix:
    """A judge on the margin overall, ``spread`` better on one half of a feature and worse on the other, and
    ``k`` humans, in a file sorted by the feature (``label_seq`` row after row)."""
    p_margin = P_H - EPSILON / (2 * P_H - 1)
    feature = np.sort(rng.random(n))
    truth = rng.integers(0, 2, n)
    p = np.column_stack([np.where(feature < 0.5, p_margin + spread, p_margin - spread), np.full((n, k), P_H)])
    raw = np.where(rng.random((n, k + 1)) < p, truth[:, None], 1 - truth[:, None])
    order = (np.arange(n)[:, None] * (k + 1) + np.arange(k + 1) + 1).astype(np.int64)
    raters = [RaterColumn(1, "judge", "judge")] + [
        RaterColumn(2 + j, f"h{j}", "primary" if j == 0 else "human") for j in range(k)
    ]
    return LabelMatrix(raw, np.arange(n), raters, 2, int(order.max()), "default", order)


def main(runs: int) -> None:
    print(f"false pass of a margin judge, file sorted by a feature ({runs} runs per cell, alpha {ALPHA})")
    kinds = ("file order", "service order", "looked at 20", "lists", "judge late by writes", "judge late lists")
    print(f"{'K':>2} {'n':>5} {'spread':>6} " + " ".join(f"{kind:>20}" for kind in kinds))
    rng = np.random.default_rng(2026)
    for k, n, spread in ((3, 200, 0.25), (3, 400, 0.15), (5, 400, 0.25)):
        passed = dict.fromkeys(kinds, 0)
        for run in range(runs):
            matrix = sorted_file(rng, n, k, spread)
            humans = list(range(1, k + 1))
            file = monitor_judge(matrix.codes, judge=0, humans=humans, n_labels=2, order=matrix.order, alpha=ALPHA)
            passed["file order"] += file.decision == "pass"
            arrival = ArrivalOrder(opening=matrix.label_seq, seed=run)
            [block] = judge_monitorings(matrix, [0], humans, DecisionSettings(), None, None, arrival)
            passed["service order"] += block is not None and block["decision"] == "pass"
            by_item = dataclasses.replace(
                matrix, order=np.repeat((k + 1) * (np.arange(n) + 1), k + 1).reshape(n, k + 1)
            )
            looked = ArrivalOrder(opening=(k + 1) * 20, seed=run)  # a look after the first 20 items' writes
            [block] = judge_monitorings(by_item, [0], humans, DecisionSettings(), None, None, looked)
            passed["looked at 20"] += block is not None and block["decision"] == "pass"
            lists = tuple((h, rng.permutation(n), -1) for h in humans[1:])  # the secondaries' lists, before any label
            listed = ArrivalOrder(opening=(k + 1) * 20, seed=run, lists=lists)
            [block] = judge_monitorings(by_item, [0], humans, DecisionSettings(), None, None, listed)
            passed["lists"] += block is not None and block["decision"] == "pass"
            judge_late = np.ones((n, k + 1), dtype=np.int64)  # the humans' one write, looked at: the opening
            judge_late[:, 0] = 2 + np.arange(n)  # then the judge's labels item by item in file order
            late = dataclasses.replace(matrix, order=judge_late, label_seq=n + 1)
            by_writes = monitor_judge(late.codes, judge=0, humans=humans, n_labels=2, order=judge_late, alpha=ALPHA)
            passed["judge late by writes"] += by_writes.decision == "pass"
            lists = tuple((h, rng.permutation(n), -1) for h in humans[1:])
            [block] = judge_monitorings(
                late, [0], humans, DecisionSettings(), None, None, ArrivalOrder(opening=1, seed=run, lists=lists)
            )
            passed["judge late lists"] += block is not None and block["decision"] == "pass"
        cells = []
        for kind in kinds:
            rate = passed[kind] / runs
            cells.append(f"{rate:.3f} +- {math.sqrt(max(rate * (1 - rate), 1e-9) / runs):.3f}")
        print(f"{k:>2} {n:>5} {spread:>6} " + " ".join(f"{cell:>20}" for cell in cells))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
