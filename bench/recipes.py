"""Benchmark of the plan's planner work at 100,000 items (issue 13): recipe and designs.

The exact-lattice recipe (m-fold convolution and monotone envelope) against the normal-form
``m_cert`` it replaces, for easy and hard judges and shared or disjoint pools; then every
design's lists for 3 secondaries at the recommended overlap. The service's plan request adds
reading the label matrix and writing the assignments. Run: ``.venv/bin/python bench/recipes.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from planner.designs import disjoint, random_subsets, seq_coverage, shared_panel, strat
from planner.recipes import certify_recipe, m_cert, xi_lattice

N_ITEMS, N_HUMANS = 100_000, 4


def best_of(runs: int, call: Callable[[], object]) -> float:
    """Fastest wall time of ``runs`` calls, in seconds."""
    best = np.inf
    for _ in range(runs):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return float(best)


def main() -> None:
    print(f"recipes at n = {N_ITEMS:,} items (p_h = .85, L = 2, eps = .05, alpha_sig = .05)")
    for p_j, pool_size in ((0.90, 1), (0.90, 3), (0.81, 1), (0.805, 3)):
        lattice = xi_lattice(0.85, p_j, n_labels=2, pool_size=pool_size)
        mu, var = lattice.mu_d, lattice.variance

        def exact(mu: float = mu, var: float = var, lattice: object = lattice, s: int = pool_size) -> object:
            return certify_recipe(mu, var, n_items=N_ITEMS, n_humans=N_HUMANS, pool_size=s, lattice=lattice)

        def normal(mu: float = mu, var: float = var) -> object:
            return m_cert(mu, var)

        m = exact().m  # type: ignore[attr-defined]
        t_exact, t_normal = best_of(3, exact), best_of(3, normal)
        print(
            f"  p_j={p_j:<5} s={pool_size}: m={m:>5} (normal form {normal()!s:>5})  exact recipe "
            f"{t_exact * 1e3:7.1f} ms = {t_exact / t_normal:,.0f}x the normal-form m_cert ({t_normal * 1e6:.0f} us)"
        )
    rng = np.random.default_rng(13)
    primary = (rng.random(N_ITEMS) < 0.3).astype(np.int64)
    raters = ["r2", "r3", "r4"]
    m = 1_200
    designs = {
        "random": lambda: random_subsets(N_ITEMS, m, raters=raters, strata=primary, rng=1),
        "shared-panel": lambda: shared_panel(N_ITEMS, m, raters=raters, strata=primary, rng=1),
        "strat": lambda: strat(primary, m, raters=raters, rng=1),
        "disjoint": lambda: disjoint(primary, m, raters=raters, rng=1),
        "seq-coverage": lambda: seq_coverage(primary[:, None], m, primary=0, raters=raters, n_labels=2, rng=1),
    }
    reference = best_of(3, lambda: rng.permutation(N_ITEMS))
    print(
        f"design lists, 3 secondaries x m = {m:,} of {N_ITEMS:,} items "
        f"(reference: one permutation of the items, {reference * 1e3:.1f} ms)"
    )
    for name, call in designs.items():
        t = best_of(3, call)
        print(f"  {name:<13} {t * 1e3:7.1f} ms = {t / reference:5.1f}x the reference (plan target < 2 s)")


if __name__ == "__main__":
    main()
