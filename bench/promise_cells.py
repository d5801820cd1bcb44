"""The recipe cells a seconds-sized test cannot confirm (issue 29; docs/method.md §4, items 4-5).

Each served ``m`` is re-simulated by the tests' own generators (not the planner's) with many more
trials, in seeded chunks, at every overlap of ``[m, 1.3 m]`` (every fifth for alpha); each rate is shown with its
one-sided exact 2-SE bounds (``tests/planner/promise_bounds.py``) and its status: kept (upper bound within
.025), broken (lower bound above it) or unresolved. Cells: the alt-test recipe at ``n = 300``, ``K = 3``,
``p_h = .85``, ``p_j = .9`` on Random and on Seq-Coverage (served 42 items), Krippendorff's alpha at
``L = 2``, ``p_h = .85``, ``p_j = .9``, two held-in labels per item (a shared panel of three humans), and the
shared panel's alt-test recipe (``K = 3``, the same channel) at every overlap of ``[m, 1.3 m]`` and at the
normal form's ``m`` it replaces (``--panel`` runs it alone, ``--cells`` the others alone); PPI++'s advisory ``m``
(docs/method.md §9, the same channel, ``n = 50,000``) at every overlap from the normal form's 86 to ``1.3 m``, and
the numeric margin recipe of §4b at ``m`` by ``validate_scores`` beside the exact rate over ``[m, 1.3 m]``
(``--advisory`` runs these two alone); §4b's score ranking plan from a 400-item pilot (``--ranking``: the fixed-m
rates at the true variance, the smallest m that keeps .05 over ``[m, 1.3 m]``, and the plan over fresh pilots at the
plain alpha and at ``SCORE_RANK_SHARE``, 5,000 trials per fixed m and 2,000 runs per plan times ``chunks``).
Run: ``.venv/bin/python -m bench.promise_cells [chunks] [--panel | --cells | --advisory]`` (20,000 trials per
alt-test and PPI++ rate, 40,000 per alpha rate, 5,000 per shared-panel rate and 1,000 per numeric rate times
``chunks``, default 10; minutes of CPU per chunk count).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the tests' generators are imported from the repository, not an installed package

from planner.ratio_moments import RatioPrior, ratio_moments
from planner.recipes import certify_recipe, rank_recipe
from planner.score_ranking import SCORE_RANK_SHARE, score_rank_variance
from planner.score_recipes import score_recipe
from planner.xi_moments import advantage_moments, xi_lattice
from tests.planner.promise_bounds import broken, kept, lower_bound, upper_bound
from tests.planner.test_alt_test_designs import alt_test_false_rejection
from tests.planner.test_neyman import ppi_false_rejection
from tests.planner.test_ratio_recipe import simulated_margins
from tests.planner.test_recipes import alt_test_false_rejection as panel_false_rejection
from tests.planner.test_score_ranking import HIGH, LOW, disjoint_margin, plug_in_misorders, score_panel, true_margin
from tests.planner.test_score_recipes import exact_secondary_fr, population_moments, secondary_fr, step_law

P_H, P_J, PROMISE = 0.85, 0.90, 0.025


def status(rate: float, trials: int, promise: float = PROMISE) -> str:
    """Kept, broken or unresolved with the Monte Carlo error inside the promise."""
    return "kept" if kept(rate, trials, promise) else "broken" if broken(rate, trials, promise) else "unresolved"


def show(cell: str, m: object, size: object, rate: float, trials: int, promise: float = PROMISE) -> None:
    low, high, state = lower_bound(rate, trials), upper_bound(rate, trials), status(rate, trials, promise)
    print(f"| {cell} | {m} | {size} | {trials:,} | {rate:.4f} | {low:.4f} | {high:.4f} | {state} |")


def probes(m: int, step: int = 1) -> list[int]:
    """Every ``step``-th overlap of ``[m, 1.3 m]``, and ``1.3 m``."""
    top = math.ceil(1.3 * m)
    return sorted({*range(m, top + 1, step), top})


def alt_test_cells(chunks: int) -> None:
    n, k = 300, 3
    mu, var = advantage_moments(*xi_lattice(P_H, P_J, n_labels=2).advantage)
    m = int(certify_recipe(mu, var, n_items=n, n_humans=k, rule="alt-test").m or 0)
    for design in ("random", "seq-coverage"):
        for size in probes(m):
            rates = [
                alt_test_false_rejection(design, n, k, size, 20_000, (29, size, c), P_H, P_J) for c in range(chunks)
            ]
            show(f"alt-test, {design}, n 300", m, size, float(np.mean(rates)), 20_000 * chunks)


def alpha_cell(chunks: int) -> None:
    mu, var = ratio_moments(P_H, P_J, n_labels=2, coefficient="alpha", pool_size=2)
    prior = RatioPrior(P_H, P_J, 2, "alpha", None, 2)
    m = int(certify_recipe(mu, var, n_items=5000, n_humans=3, coefficient="alpha", pool_size=2, lattice=prior).m or 0)
    shares = np.full(2, 0.5)
    for size in probes(m, 5):
        lost = 0.0
        for c in range(chunks):
            d = simulated_margins(
                10_000 * size + c, 40_000, size, p_h=P_H, p_j=P_J, prevalence=shares, pool_size=2, coefficient="alpha"
            )
            lost += float(np.mean(d[np.isfinite(d)] < -0.05 - 1e-12))
        show("alpha, L 2, s 2", m, size, lost / chunks, 40_000 * chunks)


def panel_cell(chunks: int) -> None:
    mu, var = advantage_moments(*xi_lattice(P_H, P_J, n_labels=2, pool_size=2).advantage)
    m = int(certify_recipe(mu, var, n_items=10_000, n_humans=3, rule="alt-test", pool_size=2).m or 0)
    normal = int(certify_recipe(mu, var, n_items=10_000, n_humans=3, rule="alt-test", power=0.975, pool_size=2).m or 0)
    for size in [*range(normal, m), *range(m, math.ceil(1.3 * m) + 1)]:
        rate = np.mean([panel_false_rejection(size, 10_000, seed=1000 * size + c) for c in range(max(1, chunks // 2))])
        show(
            "alt-test, shared panel" + (" (normal form)" if size < m else ""),
            m,
            size,
            float(rate),
            10_000 * max(1, chunks // 2),
        )


def ppi_cell(chunks: int) -> None:
    m = int(certify_recipe(0.035, 0.218775, n_items=50_000, n_humans=3, estimator="ppi", judge_agreement=0.78).m or 0)
    for size in range(86, math.ceil(1.3 * m) + 1):
        rate = np.mean([ppi_false_rejection(size, 20_000, (29, size, c)) for c in range(chunks)])
        show("PPI++ advisory" + (" (normal form)" if size < m else ""), m, size, float(rate), 20_000 * chunks)


def score_cell(chunks: int) -> None:
    mu_d, sigma0_sq = population_moments(np.random.default_rng(7), 400_000)
    m = int(score_recipe(mu_d, sigma0_sq, n_items=10_000, n_humans=3, rule="margin", steps=4).m or 0)
    law = step_law()
    rate = np.mean([secondary_fr(m, 1000, np.random.default_rng((29, c)))[0] for c in range(chunks)])
    show("numeric margin, validate_scores", m, m, float(rate), 2000 * chunks)  # two secondaries per trial
    for size in range(m - 1, math.ceil(1.3 * m) + 1):
        exact = exact_secondary_fr(law, size)
        status = "kept" if exact <= PROMISE else "broken"
        print(f"| numeric margin, exact | {m} | {size} | - | {exact:.4f} | - | - | {status} |")


def ranking_cells(chunks: int) -> None:
    """§4b's score ranking plan from a 400-item pilot against its promise .05 (two judges, K = 3; the test's
    generator): the fixed-m rate at the true variance over every overlap near it (every fifth above), so the
    smallest m that keeps .05 over [m, 1.3 m], and the plan's rate over fresh pilots at the plain alpha and at
    ``SCORE_RANK_SHARE``, with its mean m against that smallest m."""
    for rule in ("margin", "alt-test"):
        delta_min = true_margin(rule)
        variance = score_rank_variance(
            score_panel((400_000,), np.random.default_rng(29)), [0, 1], [2, 3, 4], rule=rule, value_range=(LOW, HIGH)
        )
        m0 = int(rank_recipe(variance, delta_min, n_items=10**6, n_humans=3, n_judges=2).m or 0)
        low, high = math.floor(0.9 * m0), math.ceil(1.15 * m0)
        sizes = sorted({*range(low, high + 1), *range(high, math.ceil(1.3 * high) + 1, 5)})
        held = {}
        for size in sizes:
            rng = np.random.default_rng((29, size))
            rate = np.mean(
                [np.mean(disjoint_margin(score_panel((5000, 2 * size), rng), rule) <= 0) for _ in range(chunks)]
            )
            held[size] = kept(float(rate), 5000 * chunks, 0.05)
            show(f"ranking {rule}, true variance", m0, size, float(rate), 5000 * chunks, 0.05)
        smallest = min(s for s in sizes if all(held[t] for t in sizes if s <= t <= 1.3 * s))
        print(f"| ranking {rule}: smallest m keeping .05 over [m, 1.3 m] | {smallest} | | | | | | |")
        for share in (1.0, SCORE_RANK_SHARE):
            rate, planned = plug_in_misorders(rule, 2000 * chunks, np.random.default_rng((29, 4)), alpha_share=share)
            served = f"{planned.mean():.1f} ({np.percentile(planned, 5):.0f}-{np.percentile(planned, 95):.0f})"
            over = f"{planned.mean() / smallest - 1:+.1%}"
            show(f"ranking {rule}, pilot, share {share}, {over} vs smallest", served, "m", rate, 2000 * chunks, 0.05)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    chunks = int(args[0]) if args else 10
    start = time.process_time()
    print("| cell | served m | overlap | trials | FR | lower 2-SE bound | upper 2-SE bound | status |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    if "--ranking" in sys.argv:
        ranking_cells(chunks)
        print(f"CPU {time.process_time() - start:.0f} s")
        return
    if "--advisory" in sys.argv:
        ppi_cell(chunks)
        score_cell(chunks)
        print(f"CPU {time.process_time() - start:.0f} s")
        return
    if "--panel" not in sys.argv:
        alt_test_cells(chunks)
        alpha_cell(chunks)
    if "--cells" not in sys.argv:
        panel_cell(chunks)
    print(f"CPU {time.process_time() - start:.0f} s")


if __name__ == "__main__":
    main()
