"""What monitoring costs and saves under a plan, simulated from the priors (docs/method.md §8)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from planner import optional_float
from planner.sequential import simulate_monitoring
from service.schemas import DecisionSettings


def plan_monitoring(
    decision: DecisionSettings,
    moments: dict[str, Any],
    *,
    n_labels: int,
    n_humans: int,
    m: int,
    n_items: int,
) -> dict[str, Any]:
    """What monitoring costs and saves under this plan, simulated from the priors (docs §8).

    Next to the fixed-sample ``m``: the expected overlap at which the anytime decision comes,
    the overlap by which 90% of trials are decided (the monitoring budget), and the
    pass/reject rates of the anytime decision, of the fixed rule read once at ``m`` and of the
    fixed rule read every 20 items.
    """
    mode = decision.resolved_monitoring()
    if decision.coefficient != "po":
        return {
            "mode": mode,
            "simulated": False,
            "reason": f"{decision.coefficient} is monitored fixed-sample only (docs/method.md §8)",
        }
    if moments.get("source") != "prior":
        return {
            "mode": mode,
            "simulated": False,
            "reason": "simulated from priors (p_h, p_j); plan with source 'prior' to see it",
        }
    horizon = max(1, min(5 * m, n_items))
    n_trials = int(np.clip(200_000 // horizon, 20, 200))
    sim = simulate_monitoring(
        moments["p_h"],
        moments["p_j"],
        n_labels=n_labels,
        n_humans=n_humans,
        m=m,
        rule=decision.rule,
        epsilon=decision.resolved_epsilon(),
        alpha=decision.alpha_sig,
        q=decision.q,
        omega_threshold=decision.omega_threshold,
        multiplicity=decision.multiplicity,
        horizon=horizon,
        n_trials=n_trials,
        rng=0,
    )
    budget = sim.stop_quantile_90 if np.isfinite(sim.stop_quantile_90) else horizon
    rates = {
        name: {"pass": r.p_pass, "reject": r.p_reject}
        for name, r in (
            ("anytime", sim.anytime),
            ("fixed_once", sim.fixed_once),
            ("fixed_every_look", sim.fixed_peeking),
        )
    }
    out: dict[str, Any] = {
        "mode": mode,
        "simulated": True,
        "m_cert": m,
        "expected_stop": optional_float(sim.expected_stop),
        "stop_ratio": optional_float(sim.expected_stop / m),
        "budget": int(math.ceil(budget)),
        "horizon": sim.horizon,
        "look_every": sim.look_every,
        "n_trials": sim.n_trials,
        "mc_se_max": 0.5 / math.sqrt(sim.n_trials),
        "rates": rates,
    }
    if decision.rule == "margin":
        wrong = "reject" if moments["mu_d"] >= -decision.resolved_epsilon() else "pass"
        out["wrong_decision"] = wrong
        out["wrong_rate"] = {name: r[wrong] for name, r in rates.items()}
    return out
