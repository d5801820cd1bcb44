"""Benchmark planner.simulate against a naive per-trial loop (issue 5, "Performance").

Grid: 8 rho x 4 p_h x 300 trials, n = 500 items, K = 4 humans, L = 2, one judge
(p_j = .90), Random design, F = p_o, margin rule. Targets: the vectorised grid under 3 s,
and at least 10x the trials per second of the naive loop, measured in the same run.

The naive reference below is the textbook way to write the simulator: one trial at a
time, numpy inside the trial. It is a reference for speed and for the numbers, not
library code. Because it is slow, it runs a sample of trials per cell and its rate is
reported per trial.

Run: .venv/bin/python bench/simulate.py
"""

from __future__ import annotations

import time

import numpy as np

from planner.simulate import simulate

N_ITEMS, N_HUMANS, N_LABELS = 500, 4, 2
RHOS = [0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.35, 0.5]
P_HS = [0.75, 0.8, 0.85, 0.9]
P_J, EPSILON, DELTA, OMEGA_STAR = 0.90, 0.05, 0.05, 0.5
TRIALS = 300
NAIVE_TRIALS = 25  # per cell for the naive loop
REPEATS = 3


def naive_trial_codes(p_h: float, rng: np.random.Generator) -> np.ndarray:
    """One dense matrix (n, K + 1), humans then the judge, symmetric noise channel."""
    truth = rng.integers(0, N_LABELS, N_ITEMS)
    acc = np.array([p_h] * N_HUMANS + [P_J])
    correct = rng.random((N_ITEMS, acc.size)) < acc
    other = (truth[:, None] + 1 + rng.integers(0, N_LABELS - 1, (N_ITEMS, acc.size))) % N_LABELS
    return np.where(correct, truth[:, None], other)


def naive_random_mask(m: int, rng: np.random.Generator) -> np.ndarray:
    mask = np.zeros((N_ITEMS, N_HUMANS), dtype=bool)
    mask[:, 0] = True
    for k in range(1, N_HUMANS):
        mask[rng.choice(N_ITEMS, m, replace=False), k] = True
    return mask


def naive_pool_po(x: np.ndarray, humans: np.ndarray, mask: np.ndarray, k: int) -> float:
    """S_po(x; H_k) of one matrix (docs/method.md §3)."""
    pool = [j for j in range(N_HUMANS) if j != k]
    items = mask[:, k] & mask[:, pool].any(axis=1)
    if not items.any():
        return float("nan")
    seen = mask[items][:, pool]
    agree = (humans[items][:, pool] == x[items, None]) & seen
    return float(np.mean(agree.sum(axis=1) / seen.sum(axis=1)))


def naive_evaluate(codes: np.ndarray, mask: np.ndarray) -> tuple[float, bool]:
    """Human-pool score and margin decision of one matrix (docs/method.md §3)."""
    humans, judge = codes[:, :N_HUMANS], codes[:, N_HUMANS]
    own = np.array([naive_pool_po(humans[:, k], humans, mask, k) for k in range(N_HUMANS)])
    d = np.array([naive_pool_po(judge, humans, mask, k) for k in range(N_HUMANS)]) - own
    defined = np.isfinite(d)
    omega = (d[defined] >= -EPSILON - 1e-12).mean() if defined.any() else 0.0
    return float(np.nanmean(own)), bool(defined.any() and omega >= OMEGA_STAR - 1e-12)


def naive_grid(trials: int, seed: int) -> dict[tuple[float, float], tuple[float, float, float]]:
    """(p_h, rho) -> (std of sparse - dense, reliability, wrong-decision rate)."""
    rng = np.random.default_rng(seed)
    out = {}
    for p_h in P_HS:
        data = [naive_trial_codes(p_h, rng) for _ in range(trials)]
        dense = [naive_evaluate(c, np.ones((N_ITEMS, N_HUMANS), dtype=bool)) for c in data]
        for rho in RHOS:
            m = int(round(rho * N_ITEMS))
            sparse = [naive_evaluate(c, naive_random_mask(m, rng)) for c in data]
            diff = np.array([s[0] - d[0] for s, d in zip(sparse, dense)])
            wrong = np.mean([s[1] != d[1] for s, d in zip(sparse, dense)])
            out[p_h, rho] = (float(diff.std(ddof=1)), float(np.mean(np.abs(diff) <= DELTA)), float(wrong))
    return out


def main() -> None:
    cells = len(RHOS) * len(P_HS)
    simulate(
        n_items=50, n_humans=N_HUMANS, n_labels=N_LABELS, p_h=0.8, p_j=P_J, rho=0.2, design="random", trials=5, rng=0
    )  # warm-up (imports, first allocations)
    # interleaved, best of REPEATS, CPU time of this process: the 2 cores are shared, so
    # wall time mostly measures the other processes (it is printed too)
    fast_times, slow_times, fast_wall, slow_wall = [], [], [], []
    for repeat in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        result = simulate(
            n_items=N_ITEMS,
            n_humans=N_HUMANS,
            n_labels=N_LABELS,
            p_h=P_HS,
            p_j=P_J,
            rho=RHOS,
            design="random",
            coefficient="po",
            epsilon=EPSILON,
            delta=DELTA,
            trials=TRIALS,
            rng=1,
        )
        fast_times.append(time.process_time() - cpu)
        fast_wall.append(time.perf_counter() - wall)
        wall, cpu = time.perf_counter(), time.process_time()
        naive = naive_grid(NAIVE_TRIALS, seed=2 + repeat)
        slow_times.append(time.process_time() - cpu)
        slow_wall.append(time.perf_counter() - wall)
    fast, slow = min(fast_times), min(slow_times)
    fast_rate = cells * TRIALS / fast
    slow_rate = cells * NAIVE_TRIALS / slow
    print(
        f"grid {len(RHOS)} rho x {len(P_HS)} p_h x {TRIALS} trials "
        f"(n={N_ITEMS}, K={N_HUMANS}, L={N_LABELS}, p_o, random)"
    )
    print(
        f"vectorised simulate: {fast:6.2f} s CPU  {fast_rate:9.0f} trials/s  (target < 3 s; "
        f"wall {', '.join(f'{t:.2f}' for t in fast_wall)} s)"
    )
    print(
        f"naive per-trial loop: {slow:6.2f} s CPU for {NAIVE_TRIALS} trials/cell  {slow_rate:9.0f} trials/s  "
        f"(wall {', '.join(f'{t:.2f}' for t in slow_wall)} s)"
    )
    print(f"speed-up: {fast_rate / slow_rate:.1f}x  (target >= 10x)")
    print("\nsame numbers, vectorised (300 trials) vs naive (25 trials), p_h = .85:")
    print("   rho   std(vec)  std(naive)  rel(vec)  rel(naive)  wrong(vec)  wrong(naive)")
    for cell in result.cells:
        if cell.p_h == 0.85:
            std, rel, wrong = naive[0.85, cell.rho]
            print(
                f"  {cell.rho:4.2f}   {cell.std:7.4f}   {std:8.4f}   {cell.reliability:7.3f}   "
                f"{rel:8.3f}   {cell.wrong_decision:9.3f}   {wrong:10.3f}"
            )
    print(f"\nmin_rho (reliability >= .95), p_h = .85: {result.min_rho(0.05, p_h=0.85)}")


if __name__ == "__main__":
    main()
