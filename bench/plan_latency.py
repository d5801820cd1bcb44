"""POST /plan latency at 10,000 and 100,000 items, against /healthz in the same run (issue 13 item 3).

A certification plan now simulates every candidate design (random, strat, disjoint,
seq-coverage: 1,000 trials each at the design-free recipe's overlap) and the chosen design at
its own overlap (raised while its promise fails), besides the exact-lattice recipe, the
all-items estimators' check and the monitoring simulation. The check materialises only the
items the designs put in overlap, so its cost should not grow with ``n``.

Starts the real service (uvicorn, ``tests/live_server.py``) on a fresh SQLite file; per corpus
size, one project (judge, primary, two secondaries; binary labels from a symmetric noise
channel, p_h = .85, p_j = .90, 35% positive), judge and primary labels on every item, then
``--repeats`` POST /plan with ``design: auto`` (each a new plan, new seed). Prints p50 / max
of POST /plan and the p50 of /healthz timed between them. Target: POST /plan < 2 s at 100k.

    .venv/bin/python bench/plan_latency.py [--repeats 5] [--sizes 10000 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, migrate

KEY = "ak_bench_admin"
LABELS = ["pass", "fail"]
P_H, P_J = 0.85, 0.90


def timed(call: object) -> float:
    t0 = time.perf_counter()
    r = call()  # type: ignore[operator]
    dt = time.perf_counter() - t0
    if r.status_code not in (200, 201):
        raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return dt


def project(c: httpx.Client, n_items: int, rng: np.random.Generator) -> str:
    pid = str(c.post("/projects", json={"name": f"plan-{n_items}", "labels": LABELS}).json()["id"])
    for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h1", "human"), ("h2", "human")):
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"it{i}"} for i in range(n_items)]).raise_for_status()
    truth = (rng.random(n_items) < 0.35).astype(np.int64)
    for ext, accuracy in (("judge", P_J), ("prim", P_H)):
        values = np.where(rng.random(n_items) < accuracy, truth, 1 - truth)
        rows = [{"item": f"it{i}", "rater": ext, "value": LABELS[v]} for i, v in enumerate(values)]
        c.post(f"/projects/{pid}/labels", json=rows).raise_for_status()
    return pid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        migrate(url)
        with LiveServer(url, KEY) as server, server.client() as c:
            c.timeout = 120.0
            rng = np.random.default_rng(0)
            for n_items in args.sizes:
                pid = project(c, n_items, rng)
                plans, health = [], []
                for seed in range(args.repeats):
                    health += [timed(lambda: c.get("/healthz")) for _ in range(20)]
                    body = {"p_h": P_H, "p_j": P_J, "seed": seed}
                    plans.append(timed(lambda body=body, path=f"/projects/{pid}/plan": c.post(path, json=body)))
                plan = c.get(f"/projects/{pid}/plan").json()
                raised = (plan.get("check") or {}).get("raised_from")
                floor = float(np.median(health))
                p50 = float(np.median(plans))
                print(
                    f"n={n_items:>7,}  POST /plan p50 {p50 * 1e3:7.0f} ms  max {max(plans) * 1e3:7.0f} ms  "
                    f"/healthz p50 {floor * 1e3:5.1f} ms  ratio {p50 / floor:6.0f}x  "
                    f"(design {plan['design']}, m {plan['m']}, raised_from {raised})"
                )


if __name__ == "__main__":
    main()
