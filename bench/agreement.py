"""Benchmark planner.agreement on the issue-3 matrix: prints times, ratio to `krippendorff`, peak memory.

n = 100,000 items, 10 raters (judge and primary label every item, 8 secondaries a random
10% each), L = 5. Times are the median of several repeats (time.perf_counter). Targets:
nominal alpha >= 10x faster than krippendorff.alpha and < 10 ms; the full table < 100 ms;
a 1,000-resample alpha bootstrap < 1 s; no array of size n x L x L or n x R x R.

Numeric ratings (issue 33, ``scores``): the six ICCs with their intervals and Lin's CCC on a
100,000 x 5 float matrix, next to ``pingouin.intraclass_corr`` on the same matrix (a test-only
dependency; skipped when it is not installed).

Run: .venv/bin/python bench/agreement.py [scores]   (``scores``: only the numeric-rating timings)
"""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
from collections.abc import Callable

import krippendorff
import numpy as np

from planner.agreement import fleiss_kappa, gwet_ac1, krippendorff_alpha, percent_agreement
from planner.icc import intraclass_correlations
from planner.rater_pairs import pairwise, summary_table
from planner.scores import concordance_correlation

N_ITEMS, N_SECONDARY, N_LABELS, SECONDARY_RATE = 100_000, 8, 5, 0.10


def bench_matrix(rng: np.random.Generator) -> np.ndarray:
    """Codes ``(N_ITEMS, 10)``: judge, primary, 8 secondaries; raters right with prob. 0.8."""
    truth = rng.choice(N_LABELS, size=N_ITEMS, p=[0.4, 0.25, 0.15, 0.12, 0.08])
    n_raters = 2 + N_SECONDARY
    noise = rng.integers(0, N_LABELS, size=(N_ITEMS, n_raters))
    codes = np.where(rng.random((N_ITEMS, n_raters)) < 0.8, truth[:, None], noise)
    codes[:, 2:][rng.random((N_ITEMS, N_SECONDARY)) >= SECONDARY_RATE] = -1
    return codes


def seconds(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and minimum wall time of ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times)), float(np.min(times))


def peak_megabytes(run: Callable[[], object]) -> float:
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def full_table(codes: np.ndarray) -> None:
    percent_agreement(codes, n_labels=N_LABELS)
    pairwise(codes, n_labels=N_LABELS)
    for level in ("nominal", "ordinal", "interval"):
        krippendorff_alpha(codes, n_labels=N_LABELS, level_of_measurement=level)
    gwet_ac1(codes, n_labels=N_LABELS)
    fleiss_kappa(codes[:, :2], n_labels=N_LABELS)  # judge + primary: every row complete


def main() -> None:
    codes = bench_matrix(np.random.default_rng(20261129))
    reliability = np.where(codes < 0, np.nan, codes).T.astype(float)
    ours_alpha = krippendorff_alpha(codes, n_labels=N_LABELS)
    theirs_alpha = krippendorff.alpha(reliability, level_of_measurement="nominal", value_domain=np.arange(N_LABELS))
    assert abs(ours_alpha.statistic - theirs_alpha) < 1e-9, (ours_alpha.statistic, theirs_alpha)

    ours = seconds(lambda: krippendorff_alpha(codes, n_labels=N_LABELS), 31)
    theirs = seconds(
        lambda: krippendorff.alpha(reliability, level_of_measurement="nominal", value_domain=np.arange(N_LABELS)),
        5,
    )
    table = seconds(lambda: full_table(codes), 15)
    boot = seconds(lambda: ours_alpha.confidence_interval(n_resamples=1000, rng=1), 7)
    summary = seconds(lambda: summary_table(codes, n_labels=N_LABELS, n_resamples=1000, rng=1), 3)

    def show(name: str, timing: tuple[float, float], note: str) -> None:
        print(f"{name:<18} median {timing[0] * 1e3:8.2f} ms   min {timing[1] * 1e3:8.2f} ms   {note}")

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (shared machines inflate medians)")
    print(
        f"matrix: {N_ITEMS:,} items x {codes.shape[1]} raters, L={N_LABELS}, "
        f"{int((codes >= 0).sum()):,} labels; nominal alpha {ours_alpha.statistic:.6f} "
        f"(krippendorff.alpha {theirs_alpha:.6f})"
    )
    show("alpha (ours)", ours, "target < 10 ms")
    show("alpha (krippendorff)", theirs, f"ratio {theirs[0] / ours[0]:.1f}x on medians (target >= 10x)")
    show("full table", table, "p_o, 45-pair kappa, alpha x3, AC1, Fleiss (judge+primary); target < 100 ms")
    show("alpha bootstrap", boot, "1,000 item resamples; target < 1 s")
    show("summary_table", summary, "po, mean kappa, alpha, AC1 with 1,000-resample intervals each")
    peaks = {
        "alpha": lambda: krippendorff_alpha(codes, n_labels=N_LABELS),
        "full table": lambda: full_table(codes),
        "alpha bootstrap": lambda: ours_alpha.confidence_interval(rng=1),
        "summary_table": lambda: summary_table(codes, n_labels=N_LABELS, rng=1),
    }
    print("peak memory (tracemalloc): " + ", ".join(f"{k} {peak_megabytes(v):.1f} MB" for k, v in peaks.items()))
    print(
        f"for scale: codes {codes.nbytes / 2**20:.1f} MB; an n x L x L float array "
        f"{N_ITEMS * N_LABELS**2 * 8 / 2**20:.1f} MB, n x R x R {N_ITEMS * codes.shape[1] ** 2 * 8 / 2**20:.1f} MB"
    )


N_SCORE_ITEMS, N_SCORE_RATERS = 100_000, 5


def all_iccs(ratings: np.ndarray) -> None:
    for result in intraclass_correlations(ratings).values():
        result.confidence_interval()


def score_timings() -> None:
    """ICC (six forms with intervals) and CCC at 1e5 x 5, next to pingouin's ICC."""
    rng = np.random.default_rng(20261201)
    ratings = (
        rng.normal(size=(N_SCORE_ITEMS, 1))
        + rng.normal(scale=0.3, size=(1, N_SCORE_RATERS))
        + rng.normal(scale=0.8, size=(N_SCORE_ITEMS, N_SCORE_RATERS))
    )
    icc = seconds(lambda: all_iccs(ratings), 11)
    ccc = seconds(lambda: concordance_correlation(ratings[:, 0], ratings[:, 1]).confidence_interval(), 11)
    print(f"numeric ratings: {N_SCORE_ITEMS:,} items x {N_SCORE_RATERS} raters (floats)")
    print(f"ICC x6 + intervals (ours)  median {icc[0] * 1e3:8.2f} ms   min {icc[1] * 1e3:8.2f} ms")
    print(f"CCC + interval (ours)      median {ccc[0] * 1e3:8.2f} ms   min {ccc[1] * 1e3:8.2f} ms   (no pingouin peer)")
    try:
        import pandas as pd
        import pingouin
    except ImportError:
        print("pingouin not installed: no peer timing")
        return
    long = pd.DataFrame(
        {
            "item": np.repeat(np.arange(N_SCORE_ITEMS), N_SCORE_RATERS),
            "rater": np.tile(np.arange(N_SCORE_RATERS), N_SCORE_ITEMS),
            "score": ratings.ravel(),
        }
    )
    theirs = seconds(lambda: pingouin.intraclass_corr(long, targets="item", raters="rater", ratings="score"), 3)
    print(
        f"ICC x6 (pingouin)          median {theirs[0] * 1e3:8.2f} ms   min {theirs[1] * 1e3:8.2f} ms   "
        f"ratio {theirs[0] / icc[0]:.0f}x on medians"
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["scores"]:
        score_timings()
    else:
        main()
        score_timings()
