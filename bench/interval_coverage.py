"""Measured coverage of the coefficient intervals: percentile against BCa (issue 13 item 4).

Items get a true label (prevalence ``.9/.1`` or ``.5/.5``); three raters report it with
accuracy ``P_RATER``, else the other label (the generator is written here, not the planner's
simulator). Each trial draws ``n`` items and asks every coefficient for its nominal ``.95``
interval by the percentile bootstrap, by BCa (same resamples) and, for Cohen's kappa of the
first two raters, by the delta method; coverage is the share of defined intervals that hold
the population value (the coefficient on the exact pattern distribution). Run:
``.venv/bin/python bench/interval_coverage.py [trials]`` (default 200 trials, under 2 minutes on a
loaded 2-core machine, as ``make bench`` runs it; the figures of docs/performance.md are of 1,000
trials, about 8 minutes).
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable

import numpy as np

from planner.agreement import (
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    kappa_from_table,
    krippendorff_alpha,
    percent_agreement,
)
from planner.agreement_results import AgreementResult
from planner.rater_pairs import mean_pairwise_kappa

P_RATER, N_RATERS, LEVEL, N_RESAMPLES = 0.9, 3, 0.95, 1000

COEFFICIENTS: dict[str, Callable[[np.ndarray], AgreementResult]] = {
    "alpha": lambda c: krippendorff_alpha(c, n_labels=2),
    "fleiss": lambda c: fleiss_kappa(c, n_labels=2),
    "ac1": lambda c: gwet_ac1(c, n_labels=2),
    "po": lambda c: percent_agreement(c, n_labels=2),
    "mean kappa": lambda c: mean_pairwise_kappa(c, n_labels=2),
    "kappa": lambda c: cohen_kappa(c[:, 0], c[:, 1], n_labels=2),
}


def population(prevalence: float) -> dict[str, float]:
    """Each coefficient on the label-row distribution (10^6 items in exact proportions)."""
    rows = np.array(list(itertools.product((0, 1), repeat=N_RATERS)))
    prob = np.zeros(len(rows))
    for truth, share in ((1, prevalence), (0, 1.0 - prevalence)):
        prob += share * np.prod(np.where(rows == truth, P_RATER, 1.0 - P_RATER), axis=1)
    codes = np.repeat(rows, np.round(prob * 1e6).astype(np.int64), axis=0)
    out = {name: coefficient(codes).statistic for name, coefficient in COEFFICIENTS.items()}
    table = np.zeros((2, 2))
    np.add.at(table, (rows[:, 0], rows[:, 1]), prob)
    out["kappa"] = kappa_from_table(table, n_items=10**6).statistic
    return out


def coverage(n_items: int, prevalence: float, trials: int, seed: int) -> dict[str, dict[str, tuple[float, int]]]:
    """Per coefficient and method: (coverage, defined trials)."""
    truth_value = population(prevalence)
    rng = np.random.default_rng(seed)
    hits: dict[str, dict[str, list[bool]]] = {name: {"percentile": [], "bca": [], "delta": []} for name in COEFFICIENTS}
    for _ in range(trials):
        truth = (rng.random(n_items) < prevalence).astype(np.int64)
        right = rng.random((n_items, N_RATERS)) < P_RATER
        codes = np.where(right, truth[:, None], 1 - truth[:, None])
        seed_trial = int(rng.integers(2**62))
        for name, coefficient in COEFFICIENTS.items():
            result = coefficient(codes)
            if not result.defined:
                continue
            methods = ("percentile", "bca", "delta") if name == "kappa" else ("percentile", "bca")
            for method in methods:
                ci = result.confidence_interval(LEVEL, method=method, n_resamples=N_RESAMPLES, rng=seed_trial)
                hits[name][method].append(bool(ci.low <= truth_value[name] <= ci.high))
    return {name: {m: (float(np.mean(h)), len(h)) for m, h in by.items() if h} for name, by in hits.items()}


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(
        f"coverage of nominal {LEVEL} intervals, {trials} trials, {N_RATERS} raters of accuracy {P_RATER}, "
        f"{N_RESAMPLES} resamples; MC SE about {np.sqrt(LEVEL * (1 - LEVEL) / trials):.3f}"
    )
    print(f"{'n':>4} {'prevalence':>10} {'coefficient':>12} {'percentile':>10} {'bca':>6} {'delta':>6} {'defined':>8}")
    start = time.perf_counter()
    for n_items, prevalence in ((30, 0.1), (100, 0.1), (30, 0.5), (100, 0.5)):
        table = coverage(n_items, prevalence, trials, seed=n_items + int(prevalence * 10))
        for name, by in table.items():
            delta = f"{by['delta'][0]:6.3f}" if "delta" in by else " " * 6
            print(
                f"{n_items:4d} {prevalence:10.1f} {name:>12} {by['percentile'][0]:10.3f} {by['bca'][0]:6.3f} "
                f"{delta} {by['percentile'][1]:8d}"
            )
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
