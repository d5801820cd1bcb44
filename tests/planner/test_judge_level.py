"""The judge-level margin promise (issue 29 item 8): ``m_margin_judge`` is the smallest overlap per secondary
at which a judge as good as the prior says falls below the omega threshold (the fixed rule's rejections, before
the bootstrap's agreement is asked) at most alpha/2 of the time, on disjoint secondaries. Checked against an
independent generator of label matrices decided by ``validate_judge``; at half that overlap the rate fails."""

from __future__ import annotations

import numpy as np
import pytest

from planner.alt_test_recipes import lost_humans, m_margin_judge, margin_judge_rates
from planner.decision import validate_judge
from planner.recipes import certify_recipe
from planner.xi_moments import xi_lattice
from tests.planner.promise_bounds import broken, kept

RUNS = 500


def _omega_of_a_disjoint_project(rng: np.random.Generator, p_h: float, p_j: float, n_humans: int, m: int) -> float:
    """omega of the fixed rule on a fresh project: judge and primary on every item, each of the
    ``n_humans - 1`` secondaries on its own ``m`` items, labels from the symmetric noise channel (L = 2)."""
    n = (n_humans - 1) * m
    truth = rng.integers(0, 2, n)

    def rater(p: float) -> np.ndarray:
        return np.where(rng.random(n) < p, truth, 1 - truth)

    columns = [rater(p_j), rater(p_h)]
    for k in range(n_humans - 1):
        column = np.full(n, -1)
        column[k * m : (k + 1) * m] = rater(p_h)[k * m : (k + 1) * m]
        columns.append(column)
    codes = np.column_stack(columns)
    humans = list(range(1, n_humans + 1))
    return validate_judge(codes, judge=0, humans=humans, n_labels=2, n_resamples=10, rng=rng).omega


@pytest.mark.parametrize(("p_h", "p_j", "n_humans"), [(0.85, 0.9, 3), (0.8, 0.8, 5)])
def test_the_judge_level_m_keeps_alpha_over_2_and_half_of_it_does_not(p_h, p_j, n_humans):
    lattice = xi_lattice(p_h, p_j, n_labels=2)
    per_rater = certify_recipe(lattice.mu_d, lattice.variance, n_items=10**6, n_humans=n_humans, lattice=lattice).m
    m = m_margin_judge(lattice, int(per_rater), n_humans=n_humans)
    assert 1 < m < per_rater  # cheaper than the per-rater promise
    rng = np.random.default_rng(1)
    for overlap, runs in ((m, 3 * RUNS), (m // 2, RUNS)):  # at m: enough runs to put the MC error inside
        below = float(
            np.mean([_omega_of_a_disjoint_project(rng, p_h, p_j, n_humans, overlap) < 0.5 for _ in range(runs)])
        )
        if overlap == m:
            assert kept(below, runs, 0.025), (overlap, below)
        else:
            assert broken(below, runs, 0.025), (overlap, below)


def test_judge_level_rates_fall_with_m_and_refuse_shared_panels():
    lattice = xi_lattice(0.85, 0.9, n_labels=2)
    rates = margin_judge_rates(200, lattice, n_humans=3, at=[20, 60, 200])
    assert rates[19] > rates[59] > rates[199] and np.isnan(rates[30])
    with pytest.raises(ValueError, match="pool_size"):
        margin_judge_rates(10, xi_lattice(0.85, 0.9, n_labels=2, pool_size=2), n_humans=3)
    with pytest.raises(ValueError, match="n_humans"):
        margin_judge_rates(10, lattice, n_humans=1)


def test_the_rates_count_of_lost_humans_is_validate_judges_run_by_run():
    """``lost_humans``, which the rate counts with, decides each run as ``validate_judge`` does: on generated
    projects the humans it finds lost from the block counts are as many as validate_judge reports lost."""
    rng = np.random.default_rng(4)
    n_humans, m = 4, 40
    for _ in range(60):
        n = (n_humans - 1) * m
        truth = rng.integers(0, 2, n)
        judge, primary = (np.where(rng.random(n) < p, truth, 1 - truth) for p in (0.8, 0.85))
        columns, counts = [judge, primary], np.zeros((3, n_humans - 1))
        for k in range(n_humans - 1):
            block = slice(k * m, (k + 1) * m)
            own = np.where(rng.random(m) < 0.85, truth[block], 1 - truth[block])
            column = np.full(n, -1)
            column[block] = own
            columns.append(column)
            j, p = judge[block], primary[block]
            counts[:, k] = [
                np.sum((j == p) & (own != p)),
                np.sum((j == own) & (p != own)),
                np.sum((p == own) & (j != p)),
            ]
        v = validate_judge(np.column_stack(columns), judge=0, humans=[1, 2, 3, 4], n_labels=2, n_resamples=10, rng=0)
        assert int(lost_humans(counts, m, epsilon=0.05)) == sum(not r.won for r in v.raters)
