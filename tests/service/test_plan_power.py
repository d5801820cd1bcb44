"""The plan's m, as POST /plan stores it, passes a good judge in at least 80% of projects followed batch by batch
(issue 28 Must show, docs/method.md §8.1): the m comes through the API, the projects from the test's own generator
of the service's order (tests/planner/test_monitor_sizing.py: the primary's and the judge's labels in hand, each
secondary's uniform list in random order, the secondaries one item each in turn), the decision from the monitor."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.factories import create_project
from tests.planner.test_monitor_sizing import N_ITEMS, _accuracy_for, _decided_at

TRIALS = 150


@pytest.mark.parametrize("p_h", [0.8, 0.9])
def test_the_plans_m_passes_a_good_judge_in_80_percent_of_followed_projects(client: TestClient, p_h: float) -> None:
    p_j = _accuracy_for(0.03, p_h)  # d = +.03
    humans = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
    pid = create_project(client, raters=humans, items=[f"i{k}" for k in range(N_ITEMS)])
    plan = client.post(f"/projects/{pid}/plan", json={"p_h": p_h, "p_j": p_j, "design": "random", "seed": 5})
    assert plan.status_code == 201, plan.text
    recipe = plan.json()["recipe"]
    m = plan.json()["m"]
    assert m == recipe["m_anytime"] > recipe["m_fixed"] and recipe["monitoring"]["power_at_m"] >= 0.8
    at, outcome = _decided_at(p_h, p_j, 3, m, TRIALS, seed=int(100 * p_h))
    passed = np.array([o == "pass" for o in outcome])
    se = math.sqrt(0.8 * 0.2 / TRIALS)
    assert passed.mean() >= 0.8 - 2 * se, (m, passed.mean())
    # not vacuous: by half the plan's m clearly fewer runs are passed
    assert np.mean(passed & (at <= m // 2)) < 0.8 - 2 * se, (m, np.mean(passed & (at <= m // 2)))
