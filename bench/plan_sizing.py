"""The monitor's sizing of a plan, batched against the per-run reference, in the same process.

``planner.monitor_sizing.monitor_runs`` decides its runs a batch at a time (one padded array pass,
``_batch_decisions``); the reference below is what it did before: one
``planner.sequential.monitor_judge`` call per run on the same panels (same stream). For each case
(the prior plan of ``tests/service/test_plans.py``: ``p_h`` .85, ``p_j`` .90, binary, 400 runs, the
mirror judge's runs included) it checks that both give the same runs, then prints the best of
``--repeats`` wall times and their ratio, and the cost of a sizing read back from the planning layer's
memo (``service.planning.monitoring_costs._sizing``).

    .venv/bin/python bench/plan_sizing.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from unittest.mock import patch

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner import monitor_sizing
from planner.monitor_sizing import MonitorRuns, service_order_panel, size_for_monitor
from planner.sequential import monitor_judge

CASES = [  # (design order, humans, items, one-look m)
    ("random", 3, 200, 120),
    ("panel", 3, 200, 120),
    ("disjoint", 4, 3_000, 120),
    ("panel", 5, 3_000, 100),
]


def per_run_reference(p_h: float, p_j: float, **kw: object) -> MonitorRuns:
    """``monitor_runs`` as it was: the panels drawn in the same order, one ``monitor_judge`` call each."""
    n_humans, horizon, n_trials = int(kw["n_humans"]), int(kw["horizon"]), int(kw["n_trials"])  # type: ignore[call-overload]
    gen = np.random.default_rng(kw["rng"])  # type: ignore[arg-type]
    at, decision = np.full(n_trials, np.inf), np.full(n_trials, "continue", dtype=object)
    for trial in range(n_trials):
        codes, order, base = service_order_panel(
            gen,
            p_h=p_h,
            p_j=p_j,
            n_labels=int(kw["n_labels"]),  # type: ignore[call-overload]
            n_humans=n_humans,
            per_secondary=horizon,
            design=str(kw["design"]),
            n_items=int(kw["n_items"] or (n_humans - 1) * horizon),  # type: ignore[call-overload]
        )
        mon = monitor_judge(
            codes,
            judge=n_humans,
            humans=list(range(n_humans)),
            n_labels=int(kw["n_labels"]),  # type: ignore[call-overload]
            order=order,
            rule=str(kw["rule"]),
            epsilon=kw["epsilon"],  # type: ignore[arg-type]
            alpha=float(kw["alpha"]),  # type: ignore[arg-type]
            omega_threshold=float(kw["omega_threshold"]),  # type: ignore[arg-type]
            multiplicity=str(kw["multiplicity"]),
        )
        if mon.decided_at is not None and mon.decision in ("pass", "reject"):
            at[trial] = (mon.decided_at - base) // (n_humans - 1) + 1 if mon.decided_at >= base else 1
            decision[trial] = mon.decision
    return MonitorRuns(horizon, at, decision.astype(str))


def best(repeats: int, call: Callable[[], object]) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print("design   K  items  m1 | batched s | per-run s | ratio | same runs")
    for design, n_humans, n_items, start in CASES:

        def sizing(
            design: str = design, n_humans: int = n_humans, n_items: int = n_items, start: int = start
        ) -> object:
            return size_for_monitor(
                0.85,
                0.90,
                n_labels=2,
                n_humans=n_humans,
                n_items=n_items,
                start=start,
                design=design,
                p_j_bad=0.8,
                rng=5,
            )

        fast, new = best(args.repeats, sizing)
        with patch.object(monitor_sizing, "monitor_runs", per_run_reference):
            slow, old = best(args.repeats, sizing)
        same = all(
            np.array_equal(new.runs.at, old.runs.at) and getattr(new, f) == getattr(old, f)  # type: ignore[attr-defined]
            for f in ("m", "budget", "fa", "fr", "curve")
        )
        print(
            f"{design:8} {n_humans}  {n_items:5}  {start:3} | {fast:9.3f} | {slow:9.3f} | {slow / fast:5.1f} | {same}"
        )
    from service.planning.monitoring_costs import plan_monitoring
    from service.schemas.projects import DecisionSettings

    kw = dict(n_labels=2, n_humans=3, n_items=200, design="random", m_fixed=120, seed=5)
    first, _ = best(1, lambda: plan_monitoring(DecisionSettings(), (0.85, 0.9), **kw))  # type: ignore[arg-type]
    again, _ = best(args.repeats, lambda: plan_monitoring(DecisionSettings(), (0.85, 0.9), **kw))  # type: ignore[arg-type]
    print(f"plan_monitoring, random, 200 items: simulated {first:.3f} s, read back from the memo {again * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
