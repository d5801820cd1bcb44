"""The report at a million items (issue 20): its statistics in process at 10k and 1M in the same run.

The project of ``bench/million.py`` (a judge and the primary label every item, 8 secondaries
1/8 of it each, binary labels), built as a label matrix in memory at ``--small`` and
``--items`` items, with 1 criterion (micro) and with 3 criteria (micro and item level).
Timed: what a report computes after reading the matrix, i.e. the judges' and primary's codes
taken from it (``criterion_pairs``) and every statistic of the report (``judge_reports``:
summaries, sharp bounds, the 1,000-resample cluster bootstraps). With ``--live URL
--project PID`` also ``GET /report`` (JSON and HTML) on a LiveServer over that existing
database, next to ``/healthz`` p50: the first request reads every label once (a one-time cost
per worker), the next ones are the figure. ``--abstain P``: the judge and the primary each answer
CANNOT_ASSESS on a share P of the items (about 2P of the pairs abstained), which the sharp bounds
allocate; the bounds themselves are timed alone too.

    .venv/bin/python bench/report_scale.py [--items 1000000] [--small 10000] [--abstain 0.015]
        [--live URL --project PID]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner.bounds import sharp_bounds  # noqa: E402
from planner.verdicts import BINARY_METRICS  # noqa: E402
from service.matrices.matrix import LabelMatrix, RaterColumn  # noqa: E402
from service.reporting.report import ReportOptions, criterion_pairs, judge_reports  # noqa: E402

SECONDARIES = 8
LABELS = ["pass", "fail"]
REPEATS = 3


def matrix(n_items: int, criterion: str, rng: np.random.Generator, abstain: float = 0.0) -> LabelMatrix:
    """Codes as bench/million.py builds them: judge accuracy .9, humans .85, truth 70% pass;
    the judge and the primary answer CANNOT_ASSESS (code 2) on a share ``abstain`` each."""
    truth = rng.random(n_items) < 0.7
    raw = np.full((n_items, 2 + SECONDARIES), -1, dtype=np.int64)
    for k in range(raw.shape[1]):
        on = np.arange(n_items) if k < 2 else np.flatnonzero(rng.random(n_items) < 1 / SECONDARIES)
        right = rng.random(on.size) < (0.9 if k == 0 else 0.85)
        raw[on, k] = np.where(truth[on] == right, 0, 1)
        if k < 2:
            raw[rng.random(n_items) < abstain, k] = len(LABELS)
    order = np.where(raw >= 0, np.arange(raw.size).reshape(raw.shape), -1)
    raters = [RaterColumn(1, "judge", "judge"), RaterColumn(2, "prim", "primary")]
    raters += [RaterColumn(3 + k, f"h{k}", "human") for k in range(SECONDARIES)]
    return LabelMatrix(
        raw=raw,
        item_ids=np.arange(n_items) + 1,
        raters=raters,
        n_labels=2,
        label_seq=1,
        criterion=criterion,
        order=order,
    )


def report_seconds(matrices: list[LabelMatrix], aggregation: str) -> float:
    """Best of REPEATS: the codes taken from the matrices and every statistic of the report."""
    options = ReportOptions(positive="pass", aggregation=aggregation)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        pairs = [criterion_pairs(m) for m in matrices]
        judge_reports(pairs, ["judge"], "prim", LABELS, options)
        times.append(time.perf_counter() - t0)
    return min(times)


def bounds_seconds(m: LabelMatrix) -> tuple[float, int]:
    """Best of REPEATS: the sharp bounds of the judge's table alone, and its abstained pairs."""
    pairs = criterion_pairs(m)
    table = np.zeros((4, 4), dtype=np.int64)
    np.add.at(table, (pairs.human, pairs.judges[:, 0]), 1)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        sharp_bounds(table, BINARY_METRICS)
        times.append(time.perf_counter() - t0)
    return min(times), int(table.sum() - table[:2, :2].sum())


def in_process(sizes: tuple[int, int], abstain: float) -> None:
    cases = [("1 criterion, micro", 1, "micro"), ("3 criteria, micro", 3, "micro"), ("3 criteria, item", 3, "item")]
    print(
        f"report statistics in process, {sizes[1]:,} vs {sizes[0]:,} items, CANNOT_ASSESS share {abstain} "
        f"for the judge and the primary each (best of {REPEATS}, seconds)"
    )
    if abstain:
        figures = [bounds_seconds(matrix(n, "c0", np.random.default_rng(n), abstain)) for n in sizes]
        (small, small_abstained), (big, big_abstained) = figures
        print(
            f"  {'sharp bounds alone':22s} {big:7.3f}   at {sizes[0]:,}: {small:6.3f}   ({big / small:5.1f}x; "
            f"abstained pairs {big_abstained:,} vs {small_abstained:,})"
        )
    for name, n_criteria, aggregation in cases:
        figures = []
        for n in sizes:
            rng = np.random.default_rng(n)
            matrices = [matrix(n, f"c{c}", rng, abstain) for c in range(n_criteria)]
            figures.append(report_seconds(matrices, aggregation))
        small, big = figures
        print(
            f"  {name:22s} {big:7.3f}   at {sizes[0]:,}: {small:6.3f}   ({big / small:5.1f}x for "
            f"{sizes[1] // sizes[0]}x the items)"
        )


def live(url: str, pid: str) -> None:
    import httpx

    from tests.live_server import LiveServer, migrate

    def timed(c: httpx.Client, path: str, **params: str) -> float:
        t0 = time.perf_counter()
        c.get(path, params=params).raise_for_status()
        return time.perf_counter() - t0

    migrate(url)
    with LiveServer(url, "ak_bench_admin") as server, server.client() as c:
        c.timeout = 3600
        floor = statistics.median(timed(c, "/healthz") for _ in range(20))
        first = timed(c, f"/projects/{pid}/report")
        json_s = statistics.median(timed(c, f"/projects/{pid}/report") for _ in range(REPEATS))
        html_s = statistics.median(timed(c, f"/projects/{pid}/report", format="html") for _ in range(REPEATS))
    print(f"GET /report on {url} (p50 of {REPEATS}; /healthz p50 {floor * 1000:.1f} ms)")
    print(f"  first (the worker reads every label) {first:8.3f}")
    print(f"  json {json_s:.3f} ({json_s / floor:,.0f}x /healthz)   html {html_s:.3f} ({html_s / floor:,.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--abstain", type=float, default=0.0, help="CANNOT_ASSESS share of the judge and the primary")
    parser.add_argument("--live", help="database URL of an existing project (e.g. one bench/million.py built)")
    parser.add_argument("--project", help="its project id (with --live)")
    args = parser.parse_args()
    in_process((args.small, args.items), args.abstain)
    if args.live:
        live(args.live, args.project)


if __name__ == "__main__":
    main()
