"""Benchmark of the served confidence sequence and of the decision's bets (issue 28 item 6).

1. Width at n = 120 of the band ``monitor_judge`` serves per human (the predictable plug-in
   empirical-Bernstein sequence, docs/method.md §8) next to the normal mixture it replaced (tuned at
   the budget, here 2 x 120) and the hedged-capital sequence, on the same differences: K = 2 humans
   and a judge from the symmetric noise channel, L = 2, row order; mean over ``runs`` panels.
2. The decision's e-processes: the shipped predictable plug-in bets (tuned at log(K/alpha)) against
   growth-optimal plug-in bets (aGRAPA: ``lambda = (mu - m0)/(sigma^2 + (mu - m0)^2)``, clipped to
   the same caps, one-sided per process), both valid at every look. Pass / reject rate
   of ``simulate_monitoring`` (read at every look) for a good judge (p_j = p_h + .03), one
   as good as the humans, one on the margin (false pass) and one below it; K in {2, 3, 5}; by 2 m
   and 5 m overlap (m = 150).
   The aGRAPA column swaps the bets in by replacing ``planner.sequential.running_e_processes`` for
   the run (a measurement, not a shipped option).

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/sequences.py [runs]`` (default 100).
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace

import numpy as np

import planner.confidence_sequences as cs
import planner.sequential as seq
from planner.confidence_sequences import confidence_sequence
from planner.monitor_simulation import simulate_monitoring
from planner.sequential import monitor_judge

ALPHA = 0.05
EPSILON = 0.05


def _panel(rng: np.random.Generator, n: int, accuracies: list[float]) -> np.ndarray:
    truth = rng.integers(0, 2, n)
    return np.column_stack([np.where(rng.random(n) < p, truth, 1 - truth) for p in accuracies])


def widths(runs: int) -> None:
    print("1. band width at n = 120 (mean over runs), K = 2, L = 2")
    print(f"{'p_h':>5} {'p_j':>5} {'served EB':>10} {'mixture':>8} {'hedged':>7} {'mix/EB':>7}")
    rng = np.random.default_rng(1)
    for p_h, p_j in ((0.8, 0.85), (0.85, 0.85), (0.9, 0.92), (0.7, 0.75)):
        served, mixture, hedged = [], [], []
        for _ in range(runs):
            codes = _panel(rng, 120, [p_h, p_h, p_j])
            mon = monitor_judge(codes, judge=2, humans=[0, 1], n_labels=2, alpha=ALPHA, budget=240)
            r = mon.raters[0]
            served.append(r.upper[119] - r.lower[119])
            xi = (codes[:, 2] == codes[:, 1]).astype(float) - (codes[:, 0] == codes[:, 1])
            mix = confidence_sequence(xi, alpha=ALPHA, method="normal-mixture", v_opt=240)
            bet = confidence_sequence(xi, alpha=ALPHA, method="betting", grid_size=400)
            mixture.append(mix.upper[-1] - mix.lower[-1])
            hedged.append(bet.upper[-1] - bet.lower[-1])
        s, m, h = (float(np.mean(v)) for v in (served, mixture, hedged))
        print(f"{p_h:5.2f} {p_j:5.2f} {s:10.3f} {m:8.3f} {h:7.3f} {m / s:7.2f}")


def _agrapa(
    y: np.ndarray, null_mean: float, log_inv_a: float, weights: np.ndarray | None, start: cs.Running
) -> tuple[np.ndarray, np.ndarray, cs.Running]:
    """The decision's e-processes with growth-optimal plug-in bets (same caps, same sums kept)."""
    if weights is not None:
        y = null_mean + weights * (y - null_mean)
    _, sums, devs, sigma2 = cs._running_bets(y, log_inv_a, start)
    t = np.arange(start.n + 1, start.n + y.size + 1, dtype=float)
    mu = (0.5 + sums) / (t + 1.0)
    first = 0.5 if start.y_sum is None else (0.5 + start.y_sum) / (start.n + 1.0)
    gap = np.concatenate([[first], mu[:-1]]) - null_mean
    kelly = gap / (np.concatenate([[start.sigma2], sigma2[:-1]]) + gap * gap)
    up = np.clip(kelly, 0.0, cs._BET_CAP / null_mean)
    down = np.clip(-kelly, 0.0, cs._BET_CAP / (1.0 - null_mean))
    excess = y - null_mean
    won = cs.accumulated(np.add, np.log1p(up * excess), start.won)
    lost = cs.accumulated(np.add, np.log1p(-down * excess), start.lost)
    if y.size == 0:
        return won, lost, start
    end = replace(
        start,
        n=start.n + y.size,
        y_sum=float(sums[-1]),
        dev_sum=float(devs[-1]),
        sigma2=float(sigma2[-1]),
        won=float(won[-1]),
        lost=float(lost[-1]),
    )
    return won, lost, end


def bets(runs: int) -> None:
    print(f"\n2. decision bets, p_h = .85, L = 2, epsilon = {EPSILON}, m = 150, {runs} runs per cell")
    print("   pass (reject) rate by 2 m and by 5 m overlap, shipped PrPl bets / aGRAPA bets")
    p_h = 0.85
    margin = p_h - EPSILON / (2 * p_h - 1)  # E[xi] = (p_j - p_h)(2 p_h - 1) = -epsilon
    shipped = seq.running_e_processes
    for k in (2, 3, 5):
        for name, p_j in (("good", p_h + 0.03), ("equal", p_h), ("margin", margin), ("bad", margin - 0.05)):
            cells = []
            for horizon in (300, 750):
                for swap in (shipped, _agrapa):
                    seq.running_e_processes = swap  # type: ignore[assignment]
                    try:
                        r = simulate_monitoring(
                            p_h, p_j, n_labels=2, n_humans=k, m=150, horizon=horizon, n_trials=runs, rng=10 + k
                        )
                    finally:
                        seq.running_e_processes = shipped
                    cells.append(f"{r.anytime.p_pass:.2f} ({r.anytime.p_reject:.2f})")
            print(f"K={k} {name:>6} p_j={p_j:.3f}  2m: {cells[0]} / {cells[1]}   5m: {cells[2]} / {cells[3]}")
    print(f"(MC SE of a rate near alpha: {math.sqrt(ALPHA * (1 - ALPHA) / runs):.3f})")


if __name__ == "__main__":
    n_runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    widths(n_runs)
    bets(n_runs)
