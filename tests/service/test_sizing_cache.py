"""The monitor's sizing is memoised by its full parameter tuple in the planning layer
(``service.planning.monitoring_costs._sizing``): equal arguments read the same sizing back, and any
argument that differs (seed, design, settings) is simulated afresh (docs/performance.md)."""

from __future__ import annotations

import numpy as np

from planner.monitor_sizing import size_for_monitor
from planner.plan_check import mirror_accuracy
from planner.trial_decisions import DecisionRule
from service.planning.monitoring_costs import _sizing, plan_monitoring
from service.schemas.projects import DecisionSettings

ARGS = dict(n_labels=2, n_humans=3, n_items=60, design="random", m_fixed=10)


def test_a_repeated_sizing_is_read_back_and_equals_a_fresh_simulation():
    _sizing.cache_clear()
    first = plan_monitoring(DecisionSettings(), (0.85, 0.9), seed=4, **ARGS)
    assert _sizing.cache_info().misses == 1 and _sizing.cache_info().hits == 0
    again = plan_monitoring(DecisionSettings(), (0.85, 0.9), seed=4, **ARGS)
    assert _sizing.cache_info().hits == 1 and again == first
    p_bad = mirror_accuracy(0.85, 0.9, n_labels=2, rule=DecisionRule("margin", 0.05, 0.5, 0.05), pool_size=1)
    fresh = size_for_monitor(
        0.85, 0.9, n_labels=2, n_humans=3, n_items=60, start=10, design="random", p_j_bad=p_bad, rng=4
    )
    assert first["m_anytime"] == fresh.m and first["fa"] == fresh.fa and first["fr"] == fresh.fr
    assert first["curve"] == [{"m": k, "pass": r} for k, r in fresh.curve]


def test_a_sizing_differing_in_any_argument_is_simulated_afresh():
    _sizing.cache_clear()
    base = plan_monitoring(DecisionSettings(), (0.85, 0.9), seed=4, **ARGS)
    other_seed = plan_monitoring(DecisionSettings(), (0.85, 0.9), seed=5, **ARGS)
    panel = plan_monitoring(DecisionSettings(), (0.85, 0.9), seed=4, **{**ARGS, "design": "strat"})
    power = plan_monitoring(DecisionSettings(power=0.9), (0.85, 0.9), seed=4, **ARGS)
    assert _sizing.cache_info().misses == 4 and _sizing.cache_info().hits == 0
    curves = [np.array([c["pass"] for c in b["curve"]]) for b in (base, other_seed, panel, power)]
    assert not np.array_equal(curves[0], curves[1]) or base["fa"] != other_seed["fa"]  # another stream
    assert power["power"] == 0.9 and base["power"] == 0.8
