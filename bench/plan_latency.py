"""POST /plan latency at 10,000 and 1,000,000 items in the same run, against /healthz (issue 20).

A certification plan simulates every candidate design (random, strat, disjoint, seq-coverage:
1,000 trials each at the design-free recipe's overlap) and the chosen design at its own
overlap, besides the exact-lattice recipe, the all-items estimators' check and the monitoring
simulation. None of it should grow with ``n``: the check materialises only the items the
designs put in overlap, and the corpus enters as counts.

Starts the real service (uvicorn, ``tests/live_server.py``) on one SQLite file holding a
project per corpus size, built through HTTP as ``bench/million.py`` builds them (a judge and the
primary on every item, ``--secondaries`` humans on 1/8 of the items each; 9 humans by default).
``--reuse PATH`` takes the largest project from a copy of a database ``bench/million.py``'s
``build`` filled (its project id in ``PATH.pid``), to skip the build. The first POST /plan of a
project is reported on its own (the worker reads every label once), then ``--repeats`` plans
(``design: auto``, a new seed each) are timed for each size in turn, with /healthz between them.
Next to the wall time, the CPU seconds of the server's process tree (its computation processes
included; read from ``/proc``, Linux), which a loaded machine inflates less than the wall time.

    .venv/bin/python bench/plan_latency.py [--repeats 5] [--sizes 10000 1000000] [--reuse m1.db]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from million import KEY, build, timed  # noqa: E402

from tests.live_server import LiveServer, migrate  # noqa: E402

PRIOR = {"p_h": 0.85, "p_j": 0.90}


def tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and its live descendants, with what their ended children used."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        proc = Path(f"/proc/{todo.pop()}")
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            children = [int(c) for t in (proc / "task").iterdir() for c in (t / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += sum(int(f) for f in fields[11:15]) / ticks  # utime, stime, cutime, cstime
        todo += children
    return total


def plan_seconds(c: httpx.Client, server: LiveServer, pid: str, seed: int) -> tuple[float, float]:
    """Wall and server CPU seconds of one POST /plan."""
    assert server.proc is not None
    cpu = tree_cpu(server.proc.pid)
    wall = timed(lambda: c.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": seed}))
    return wall, tree_cpu(server.proc.pid) - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--overlap", type=float, default=1 / 8)
    parser.add_argument("--reuse", type=Path, help="a copy of a database holding the largest project")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        projects: dict[int, str] = {}
        if args.reuse:
            shutil.copy(args.reuse, path)
            projects[max(args.sizes)] = args.reuse.with_name(args.reuse.name + ".pid").read_text().strip()
        url = f"sqlite:///{path}"
        migrate(url)
        with LiveServer(url, KEY) as server, server.client() as c:
            c.timeout = 3600
            for n_items in args.sizes:
                if n_items not in projects:
                    projects[n_items] = build(c, n_items, args.overlap, np.random.default_rng(n_items))[0]
            first = {n: plan_seconds(c, server, pid, 0)[0] for n, pid in projects.items()}
            plans: dict[int, list[tuple[float, float]]] = {n: [] for n in projects}
            health: list[float] = []
            for seed in range(1, args.repeats + 1):
                for n, pid in projects.items():
                    health += [timed(lambda: c.get("/healthz")) for _ in range(10)]
                    plans[n].append(plan_seconds(c, server, pid, seed))
            floor = float(np.median(health))
            small = np.median(plans[min(projects)], axis=0)
            print(f"POST /plan, 9 humans, design auto; /healthz p50 {floor * 1e3:.1f} ms (same run)")
            for n, pid in projects.items():
                plan = c.get(f"/projects/{pid}/plan").json()
                raised = (plan.get("check") or {}).get("raised_from")
                wall, cpu = np.median(plans[n], axis=0)
                print(
                    f"n={n:>9,}  p50 {wall:6.2f} s wall, {cpu:5.2f} s CPU  max {max(w for w, _ in plans[n]):6.2f} s  "
                    f"({wall / small[0]:4.2f}x / {cpu / small[1]:4.2f}x the {min(projects):,}-item p50, "
                    f"{wall / floor:5.0f}x /healthz)  first {first[n]:6.1f} s  "
                    f"(design {plan['design']}, m {plan['m']}, raised_from {raised})"
                )


if __name__ == "__main__":
    main()
