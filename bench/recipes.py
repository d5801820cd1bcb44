"""Benchmark of the plan's planner work at 100,000 items (issue 13): recipe and designs.

The exact-lattice recipe (m-fold convolution and monotone envelope) against the normal-form
``m_cert`` it replaces, for easy and hard judges and shared or disjoint pools; then every
design's lists for 3 secondaries at the recommended overlap. The service's plan request adds
reading the label matrix and writing the assignments. Run: ``.venv/bin/python bench/recipes.py``.

``--grid`` (issue 29) prints, per cell ``(p_h, p_j, L, K, design, coefficient or rule)``, the recipe's
``m``, the simulated promised rate there (``check_design``) with its upper 2-SE bound and promise status, the
largest rate over ``[m, 1.3 m]``, the smallest probed ``m`` that holds and the over-sizing (``m`` over it).
The default grid is one channel at K = 3 (minutes); ``--grid full`` runs every channel at K = 3 and 5
with twice the trials (hours). ``--confirm`` re-runs the default grid's unresolved cells (Random's and Strat's
ratio coefficients, Strat's ``p_o``) with 40,000 trials at ``m``, ``1.07 m``, ``1.15 m`` and ``1.3 m``, adding seeded
chunks of 40,000 at ``m`` (at most 30) while its exact 2-SE bound (``tests/planner/promise_bounds.py``) is neither
kept nor broken (minutes of CPU).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the exact bounds are imported from the repository's tests, not an installed package

from planner.designs import disjoint, random_subsets, shared_panel, strat
from planner.false_rejection import m_cert
from planner.plan_check import check_design, promise_status
from planner.ratio_moments import RatioPrior, ratio_moments
from planner.recipes import certify_recipe
from planner.seq_designs import seq_coverage
from planner.xi_moments import advantage_moments, xi_lattice
from tests.planner.promise_bounds import broken, kept, upper_bound

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


GRID_CHANNELS = ((0.85, 0.90, 2), (0.90, 0.95, 3), (0.80, 0.85, 2))
GRID_TRIALS = 2000


def recipe_m(p_h: float, p_j: float, n_labels: int, k: int, design: str, what: str) -> int | None:
    """The service's recipe for the cell: the design's pool size (Strat: K - 1), prior moments, uniform shares."""
    s = k - 1 if design == "strat" else 1
    if what == "alt-test":
        mu, var = advantage_moments(*xi_lattice(p_h, p_j, n_labels=n_labels, pool_size=s).advantage)
        return certify_recipe(mu, var, n_items=N_ITEMS, n_humans=k, rule="alt-test", pool_size=s).m
    if what == "po":
        lattice = xi_lattice(p_h, p_j, n_labels=n_labels, pool_size=s)
        return certify_recipe(
            lattice.mu_d, lattice.variance, n_items=N_ITEMS, n_humans=k, pool_size=s, lattice=lattice
        ).m
    mu, var = ratio_moments(p_h, p_j, n_labels=n_labels, coefficient=what, pool_size=s)
    prior = RatioPrior(p_h, p_j, n_labels, what, None, s)  # as the service plans from priors
    return certify_recipe(mu, var, n_items=N_ITEMS, n_humans=k, coefficient=what, pool_size=s, lattice=prior).m


def _promised_rate(
    design: str,
    p_h: float,
    p_j: float,
    n_labels: int,
    k: int,
    what: str,
    size: int,
    trials: int,
    seed: object = None,
) -> tuple[float, float]:
    """The cell's promised rate at ``size`` (per held-out human under the margin rule, the judge's under the
    alt-test) by the plan check's simulation (seed ``size`` unless given), with its Monte Carlo SE."""
    check = check_design(
        design,
        n_items=N_ITEMS,
        n_humans=k,
        n_labels=n_labels,
        m=size,
        p_h=p_h,
        p_j=p_j,
        coefficient="po" if what == "alt-test" else what,
        rule="alt-test" if what == "alt-test" else "margin",
        trials=trials,
        rng=size if seed is None else seed,
    )
    return (check.rater_fr, check.rater_fr_se) if check.promised == "rater_fr" else (check.fr, check.fr_se)


GRID_STEPS = (0.6, 0.65, 0.7, 0.75, 0.8, 0.84, 0.87, 0.9, 0.93, 0.96, 1.0, 1.15, 1.3)
"""Overlaps probed, as multiples of the recipe's m: the smallest m that holds is searched below m."""


def grid(full: bool) -> None:
    """Promised against simulated rates over the grid (issue 29): the recipe's m, the simulated rate there
    with its upper 2-SE bound and promise status, the largest rate over [m, 1.3 m], the smallest probed m from
    which every probed rate is at most the promise, and the over-sizing m / that smallest m."""
    channels = GRID_CHANNELS if full else GRID_CHANNELS[:1]
    trials = GRID_TRIALS * (2 if full else 1)
    print(
        f"recipe grid at n = {N_ITEMS:,}: promised vs simulated rate ({trials} trials per rate, the plan "
        f"check's simulation; promise .025; m probed at {', '.join(str(x) for x in GRID_STEPS)} x m)"
    )
    print("  p_h  p_j  L K design       what         m  at m  +2SE  status      max[m,1.3m] smallest  over")
    for p_h, p_j, n_labels in channels:
        for k in (3, 5) if full else (3,):
            for design in ("disjoint", "random", "seq-coverage", "strat"):
                for what in ("po", "kappa", "alpha", "ac1", "alt-test"):
                    m = recipe_m(p_h, p_j, n_labels, k, design, what)
                    if m is None:
                        continue
                    sizes = sorted({max(1, min(N_ITEMS, round(step * m))) for step in GRID_STEPS})
                    rates = {size: _promised_rate(design, p_h, p_j, n_labels, k, what, size, trials) for size in sizes}
                    rate, se = rates[m]
                    holding = [size for size in sizes if all(rates[x][0] <= 0.025 for x in sizes if x >= size)]
                    smallest = min(holding) if holding else None
                    top = max(r for x, (r, _) in rates.items() if x >= m)
                    over = f"{m / smallest:5.2f}" if smallest else "  n/a"
                    print(
                        f"  {p_h:.2f} {p_j:.2f} {n_labels} {k} {design:<12} {what:<8} {m:>5}  {rate:.3f} "
                        f"{rate + 2 * se:.3f} {promise_status(rate, se, 0.025):<11} {top:.3f}       "
                        f"{smallest if smallest else 'none':>5}  {over}"
                    )


CONFIRM_CELLS = tuple(("random", what) for what in ("kappa", "alpha", "ac1")) + tuple(
    ("strat", what) for what in ("po", "kappa", "alpha", "ac1")
)
CONFIRM_TRIALS = 40_000


def confirm() -> None:
    """The default grid's unresolved cells with more trials: each probe's rate, its exact upper 2-SE bound and
    status; at ``m`` chunks of other seeds are added until the status is kept or broken (at most 30)."""
    p_h, p_j, n_labels, k = GRID_CHANNELS[0] + (3,)
    start = time.process_time()
    print(f"unresolved grid cells at p_h {p_h}, p_j {p_j}, L {n_labels}, K {k}, n = {N_ITEMS:,}")
    print("  design       what       m  probe   trials     rate   upper  status")
    for design, what in CONFIRM_CELLS:
        m = recipe_m(p_h, p_j, n_labels, k, design, what)
        assert m is not None
        for size in sorted({m, round(1.07 * m), round(1.15 * m), round(1.3 * m)}):
            rates = [_promised_rate(design, p_h, p_j, n_labels, k, what, size, CONFIRM_TRIALS)[0]]

            def settled(rates: list[float] = rates) -> bool:
                rate, trials = float(np.mean(rates)), CONFIRM_TRIALS * len(rates)
                return kept(rate, trials, 0.025) or broken(rate, trials, 0.025)

            while size == m and not settled() and len(rates) < 30:
                seed = (7, len(rates))
                rates.append(_promised_rate(design, p_h, p_j, n_labels, k, what, m, CONFIRM_TRIALS, seed)[0])
            rate, trials = float(np.mean(rates)), CONFIRM_TRIALS * len(rates)
            status = "kept" if kept(rate, trials, 0.025) else "broken" if broken(rate, trials, 0.025) else "unresolved"
            print(
                f"  {design:<12} {what:<8} {m:>4} {size:>6} {trials:>8,}  {rate:.4f}  "
                f"{upper_bound(rate, trials):.4f}  {status}"
            )
    print(f"CPU {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    if "--confirm" in sys.argv:
        confirm()
    elif "--grid" in sys.argv:
        grid(full=sys.argv[-1] == "full")
    else:
        main()
