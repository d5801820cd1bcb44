"""Benchmark of planner.versions.drift_detection (issue 34): false alarms and detection delay.

1. False alarms: runs of ``horizon`` labels whose agreement with the primary stays exactly at the
   baseline (the least favourable null), the share of runs with any alarm against the bound
   ``alpha``, with its Monte Carlo SE.
2. Delay: the agreement drops by ``drop`` at label 0; the median, 90th percentile and largest
   number of labels to the alarm, next to ``log(horizon/alpha) / KL(p1 || p0)``.
3. The anchor panel (Connor 1987) for the same drop, by the discordance ``psi``.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/drift.py [--runs 1000]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package, not bench/service.py

from planner.versions import anchor_panel_size, drift_detection  # noqa: E402

HORIZON, ALPHA = 10_000, 0.05


def _kl(p1: float, p0: float) -> float:
    return p1 * math.log(p1 / p0) + (1 - p1) * math.log((1 - p1) / (1 - p0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs per cell (default 1000)")
    runs = parser.parse_args().runs
    rng = np.random.Generator(np.random.MT19937(2026))
    print(f"horizon {HORIZON}, alpha {ALPHA}, {runs} runs per cell")
    print("baseline  drop  false-alarm (SE)   delay median  p90   max   log(A)/KL   seconds")
    for baseline in (0.7, 0.8, 0.9):
        for drop in (0.05, 0.1):
            start = time.perf_counter()
            null = (rng.random((runs, HORIZON)) < baseline).astype(np.int8)
            false = float(np.mean(drift_detection(null, baseline=baseline, drop=drop, horizon=HORIZON).alarm_at >= 0))
            drifted = (rng.random((runs, HORIZON)) < baseline - drop).astype(np.int8)
            alarm = drift_detection(drifted, baseline=baseline, drop=drop, horizon=HORIZON).alarm_at
            found = alarm[alarm >= 0]
            median, p90 = np.percentile(found, [50, 90]) if found.size else (math.nan, math.nan)
            expected = math.log(HORIZON / ALPHA) / _kl(baseline - drop, baseline)
            se = math.sqrt(max(false * (1 - false), 1e-12) / runs)
            print(
                f"{baseline:8.2f}  {drop:4.2f}  {false:.4f} ({se:.4f})   {median:12.0f}  {p90:5.0f}  "
                f"{found.max() if found.size else -1:5d}  {expected:9.0f}   {time.perf_counter() - start:.1f}"
                f"  missed {int(np.sum(alarm < 0))}"
            )
    print("\nanchor panel (alpha .05, power .8) by discordance psi, drop .05 and .10")
    for psi in (0.1, 0.2, 0.3):
        print(f"psi {psi:.1f}: {anchor_panel_size(0.05, psi)}, {anchor_panel_size(0.1, psi)}")


if __name__ == "__main__":
    main()
