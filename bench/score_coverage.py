"""Coverage of the numeric-rating intervals at n = 50 (docs/method.md §2b): ICC(2,1) F interval, Lin's z,
interval alpha's jackknife-z interval.

ICC(2,1): two-way random model ``x_ij = item_i + rater_j + error_ij`` with item variance 1, error
variance .6 and the rater variance and number of raters below; CCC: bivariate normal, means 0 / .3,
SDs 1 / 1.2, correlation .8; interval alpha: the one-way model (item variance 1, error .6, no rater
effect: alpha = 1/1.6) with the raters and share of missing ratings below. Prints the
share of nominal .95 intervals that cover the true value and its Monte Carlo SE.

Run: .venv/bin/python bench/score_coverage.py [trials]
"""

from __future__ import annotations

import sys

import numpy as np

from planner.icc import intraclass_correlation
from planner.scores import concordance_correlation, interval_alpha

N_ITEMS = 50
SETTINGS = ((3, 0.0), (3, 0.05), (3, 0.3), (5, 0.3), (10, 0.3), (2, 0.0))
ALPHA_SETTINGS = ((2, 0.0), (3, 0.0), (5, 0.3))


def icc_coverage(n_raters: int, rater_var: float, trials: int, rng: np.random.Generator) -> float:
    truth = 1.0 / (1.0 + rater_var + 0.6)
    covered = 0
    for _ in range(trials):
        ratings = (
            rng.normal(size=(N_ITEMS, 1))
            + rng.normal(scale=np.sqrt(rater_var), size=(1, n_raters))
            + rng.normal(scale=np.sqrt(0.6), size=(N_ITEMS, n_raters))
        )
        interval = intraclass_correlation(ratings, "2,1").confidence_interval()
        covered += interval.low <= truth <= interval.high
    return covered / trials


def ccc_coverage(trials: int, rng: np.random.Generator) -> float:
    covariance = np.array([[1.0, 0.96], [0.96, 1.44]])
    truth = 1.92 / 2.53
    covered = 0
    for _ in range(trials):
        a, b = rng.multivariate_normal([0.0, 0.3], covariance, size=N_ITEMS).T
        interval = concordance_correlation(a, b).confidence_interval()
        covered += interval.low <= truth <= interval.high
    return covered / trials


def alpha_coverage(n_raters: int, missing: float, trials: int, rng: np.random.Generator) -> float:
    covered = 0
    for _ in range(trials):
        ratings = rng.normal(size=(N_ITEMS, 1)) + rng.normal(scale=np.sqrt(0.6), size=(N_ITEMS, n_raters))
        ratings[rng.random(ratings.shape) < missing] = np.nan
        interval = interval_alpha(ratings).confidence_interval()
        covered += interval.low <= 1 / 1.6 <= interval.high
    return covered / trials


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rng = np.random.default_rng(20261201)
    se = np.sqrt(0.95 * 0.05 / trials)
    print(f"n = {N_ITEMS}, {trials} trials, Monte Carlo SE about {se:.3f}")
    for n_raters, rater_var in SETTINGS:
        share = rater_var / (1.6 + rater_var)
        coverage = icc_coverage(n_raters, rater_var, trials, rng)
        print(f"ICC(2,1)  raters {n_raters:2d}  rater variance share {share:.2f}: {coverage:.3f}")
    print(f"CCC (Lin z)  rho_c {1.92 / 2.53:.3f}: {ccc_coverage(trials, rng):.3f}")
    for n_raters, missing in ALPHA_SETTINGS:
        coverage = alpha_coverage(n_raters, missing, trials, rng)
        print(f"interval alpha  raters {n_raters:2d}  missing {missing:.1f}: {coverage:.3f}")


if __name__ == "__main__":
    main()
