"""Benchmark of using every label (issue 14): the overlap saved, the error rates that go with
it, the bias of an unweighted Neyman panel, and what the PPI estimate costs.

1. m_cert for the paired, PPI++ and Neyman estimates under the prior p_h = .85, p_j = .90,
   L = 2, eps = .05 (check values 117 / 90 / 84; PPI++ plans for .9 of the promise) and the human labels
   saved with K = 3.
2. planner.estimator_check at those m: per-rater FR (promise .025) and mirror-judge FA.
3. A Neyman panel of 84 items on corpora of 4,000 items read by validate_judge with inverse
   inclusion weights and without: bias of d_k and FR.
4. validate_judge on 20,000 items x 3 humans (shared panel of 2,000), 1,000 resamples:
   estimator="ppi" against the paired reference (ratio), and inclusion weights against it.

Run: ``OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/all_items.py [trials]`` (default 400).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from planner.decision import validate_judge
from planner.estimator_check import estimator_check
from planner.neyman import m_cert_by_estimator, neyman_allocation, prior_variances
from planner.xi_moments import prior_moments

P_H, P_J, EPS = 0.85, 0.90, 0.05


def corpus(rng: np.random.Generator, n: int, n_secondaries: int = 1) -> np.ndarray:
    """Columns: primary, secondaries..., judge (two labels, symmetric noise)."""
    truth = rng.integers(0, 2, n)
    accuracies = [P_H] * (1 + n_secondaries) + [P_J]
    return np.column_stack([np.where(rng.random(n) < p, truth, 1 - truth) for p in accuracies])


def neyman_bias(trials: int) -> None:
    sds = prior_variances(P_H, P_J, n_labels=2).stratum_sd
    rng = np.random.default_rng(7)
    err = np.empty((trials, 2))
    rejected = np.zeros(2)
    for t in range(trials):
        codes = corpus(rng, 4000)
        truth = np.mean(codes[:, 2] == codes[:, 0]) - np.mean(codes[:, 1] == codes[:, 0])
        agree = codes[:, 2] == codes[:, 0]
        strata = [np.flatnonzero(~agree), np.flatnonzero(agree)]
        take = neyman_allocation([s.size for s in strata], sds, 84)
        mask = np.zeros(4000, dtype=bool)
        prob = np.empty(4000)
        for s, k in zip(strata, take, strict=True):
            mask[rng.choice(s, k, replace=False)] = True
            prob[s] = k / s.size
        codes[~mask, 1] = -1
        for col, inclusion in enumerate((prob, None)):
            r = validate_judge(
                codes, judge=2, humans=[0, 1], n_labels=2, n_resamples=1, rng=t, inclusion=inclusion
            ).raters[1]
            err[t, col] = r.d - truth
            rejected[col] += not r.won
    for col, name in enumerate(("weighted", "unweighted")):
        se = err[:, col].std() / np.sqrt(trials)
        print(f"  {name:10s}  bias {err[:, col].mean():+.4f} (SE {se:.4f})  FR {rejected[col] / trials:.3f}")


def timing() -> None:
    rng = np.random.default_rng(3)
    codes = corpus(rng, 20_000, n_secondaries=2)
    panel = rng.choice(20_000, 2000, replace=False)
    off = np.setdiff1d(np.arange(20_000), panel)
    codes[off, 1:3] = -1
    prob = np.where(codes[:, 3] == codes[:, 0], 0.08, 0.15)
    runs = {
        "paired (reference)": {},
        "ppi": {"estimator": "ppi", "primary": 0},
        "paired, weighted": {"inclusion": prob},
    }
    base = None
    for name, extra in runs.items():
        best = np.inf
        for _ in range(3):
            start = time.perf_counter()
            validate_judge(codes, judge=3, humans=[0, 1, 2], n_labels=2, n_resamples=1000, rng=0, **extra)
            best = min(best, time.perf_counter() - start)
        base = base or best
        print(f"  {name:20s} {best * 1000:7.1f} ms  ({best / base:.2f}x)")


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    mu_d, _ = prior_moments(P_H, P_J, n_labels=2)
    m = m_cert_by_estimator(mu_d, prior_variances(P_H, P_J, n_labels=2), epsilon=EPS)
    print("1. m_cert and human labels saved (K = 3):")
    for name, value in m.items():
        print(f"  {name:7s} m = {value:4d}  saved {(m['paired'] - value) * 2:3d} labels")
    print("2. estimator_check (20,000 items, 4,000 trials):")
    start = time.perf_counter()
    checks = estimator_check(P_H, P_J, n_labels=2, n_items=20_000, m=dict(m), trials=4000, rng=1)
    for c in checks.values():
        print(f"  {c.estimator:7s} m = {c.m:4d}  FR {c.fr:.4f} +- {c.fr_se:.4f}  FA {c.fa:.4f} +- {c.fa_se:.4f}")
    print(f"  ({time.perf_counter() - start:.2f} s)")
    print(f"3. Neyman panel of 84 on 4,000 items, {trials} corpora:")
    neyman_bias(trials)
    print("4. validate_judge, 20,000 items x 3 humans, 1,000 resamples:")
    timing()


if __name__ == "__main__":
    main()
