"""POST /plan latency at 10,000 and 1,000,000 items in the same run, against /healthz (issue 20).

A certification plan simulates every candidate design (random, strat, disjoint, seq-coverage:
1,000 trials each at the design-free recipe's overlap) and the chosen design at its own
overlap, besides the exact-lattice recipe, the all-items estimators' check and the monitoring
simulation. None of it should grow with ``n``: the check materialises only the items the
designs put in overlap, and the corpus enters as counts.

Starts the real service (uvicorn, ``tests/live_server.py``) on one database holding a project per
corpus size, built through HTTP as ``bench/million.py`` builds them (a judge and the primary on
every item, ``--secondaries`` humans on 1/8 of the items each; 9 humans by default): a SQLite file,
or with ``--postgres URL`` that PostgreSQL database, whose ``million-<n>`` projects of ``n`` items
are reused when there (a 1M build takes minutes) and kept. ``--reuse PATH`` takes the largest
project from a copy of a SQLite database ``bench/million.py``'s ``build`` filled (its project id in
``PATH.pid``). ``--reference DIR`` (a checkout of older code, e.g. ``git worktree add``) starts a
second server running that code on the same database; each plan is then timed on both, in turn,
and the ratio printed, so the old code is the reference measured in the same run.

The first POST /plan of a project on each server is reported on its own (the worker reads every
label once), then ``--repeats`` plans (``design: auto``, a new seed each) are timed for each size
in turn, with /healthz between them. A re-plan at the same ``m`` leaves the secondaries' lists as
they are, so a second series (``lists drawn``) asks for ``design: disjoint`` at an ``m`` 10 items
larger each time: every secondary's list is extended while the plan is stored, as at a project's
first plan (which ``bench/million.py`` times). Next to the wall time, the CPU seconds of the server's
process tree (its computation processes included; read from ``/proc``, Linux), which a loaded
machine inflates less than the wall time.

    .venv/bin/python bench/plan_latency.py [--repeats 5] [--sizes 10000 1000000] [--reuse m1.db]
        [--postgres URL] [--reference ../old-checkout]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from unittest.mock import patch

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from million import KEY, build, timed  # noqa: E402

from tests import live_server  # noqa: E402
from tests.live_server import LiveServer, migrate  # noqa: E402

PRIOR = {"p_h": 0.85, "p_j": 0.90}
DESIGNS: dict[str, set[str]] = {}
"""Designs of the plans made, by project."""


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


def plan_seconds(
    c: httpx.Client, server: LiveServer, pid: str, seed: int, extra: dict[str, object] | None = None
) -> tuple[float, float]:
    """Wall and server CPU seconds of one POST /plan (``extra``: more of the request body)."""
    assert server.proc is not None
    cpu = tree_cpu(server.proc.pid)

    def post() -> httpx.Response:
        response = c.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": seed, **(extra or {})})
        if response.status_code == 201:
            DESIGNS.setdefault(pid, set()).add(response.json()["design"])
        return response

    wall = timed(post)
    return wall, tree_cpu(server.proc.pid) - cpu


def started(url: str, code: Path | None) -> LiveServer:
    """A server on ``url`` running this checkout's code, or ``code``'s (another checkout)."""
    server = LiveServer(url, KEY)
    if code is None:
        return server.start()
    server.env["PYTHONPATH"] = str(code)
    with patch.object(live_server, "ROOT", code):  # ``python -m`` puts its working directory first
        return server.start()


def kept_projects(c: httpx.Client, sizes: list[int]) -> dict[int, str]:
    """The ``million-<n>`` projects of ``n`` items already in the database, by size."""
    rows = c.get("/projects", params={"limit": 200}).json()["items"]
    return {p["n_items"]: p["id"] for p in rows if p["n_items"] in sizes and p["name"] == f"million-{p['n_items']}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--overlap", type=float, default=1 / 8)
    parser.add_argument("--reuse", type=Path, help="a copy of a SQLite database holding the largest project")
    parser.add_argument("--postgres", help="this PostgreSQL database instead of a SQLite file (projects kept)")
    parser.add_argument("--reference", type=Path, help="a checkout of older code, run beside this one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as servers:
        path = Path(tmp) / "bench.db"
        projects: dict[int, str] = {}
        if args.reuse and not args.postgres:
            shutil.copy(args.reuse, path)
            projects[max(args.sizes)] = args.reuse.with_name(args.reuse.name + ".pid").read_text().strip()
        url = args.postgres or f"sqlite:///{path}"
        migrate(url)
        codes = {"new": None, **({"reference": args.reference.resolve()} if args.reference else {})}
        running: dict[str, LiveServer] = {}
        for name, code in codes.items():
            running[name] = started(url, code)
            servers.callback(running[name].stop)
        clients = {name: servers.enter_context(server.client(timeout=3600)) for name, server in running.items()}
        c = clients["new"]
        if args.postgres:
            projects.update(kept_projects(c, args.sizes))
        for n_items in args.sizes:
            if n_items not in projects:
                projects[n_items] = build(c, n_items, args.overlap, np.random.default_rng(n_items))[0]
        first = {
            (name, n): plan_seconds(clients[name], running[name], pid, 0)[0]
            for name in running
            for n, pid in projects.items()
        }
        plans: dict[tuple[str, int], list[tuple[float, float]]] = {(name, n): [] for name in running for n in projects}
        drawn: dict[tuple[str, int], list[tuple[float, float]]] = {(name, n): [] for name in running for n in projects}
        health: list[float] = []
        m = {n: c.get(f"/projects/{pid}/plan").json()["m"] for n, pid in projects.items()}
        for seed in range(1, args.repeats + 1):
            for n, pid in projects.items():
                for name in running:
                    health += [timed(lambda: c.get("/healthz")) for _ in range(10)]
                    plans[name, n].append(plan_seconds(clients[name], running[name], pid, seed))
            for n, pid in projects.items():
                for name in running:
                    m[n] += 10
                    extra = {"design": "disjoint", "m": m[n]}
                    drawn[name, n].append(plan_seconds(clients[name], running[name], pid, seed, extra))
        floor = float(np.median(health))
        small = np.median(plans["new", min(projects)], axis=0)
        database = "PostgreSQL" if args.postgres else "SQLite"
        print(
            f"POST /plan, {database}, 9 humans, design auto; /healthz p50 {floor * 1e3:.1f} ms; load average "
            f"{os.getloadavg()[0]:.1f} (same run)"
        )
        for n, pid in projects.items():
            for name in running:
                wall, cpu = np.median(plans[name, n], axis=0)
                print(
                    f"{name:>9s} n={n:>9,}  p50 {wall:6.2f} s wall, {cpu:5.2f} s CPU  "
                    f"max {max(w for w, _ in plans[name, n]):6.2f} s  "
                    f"({wall / small[0]:4.2f}x / {cpu / small[1]:4.2f}x the new {min(projects):,}-item p50, "
                    f"{wall / floor:5.0f}x /healthz)  first {first[name, n]:6.1f} s{versus(plans, name, n)}"
                )
                wall, cpu = np.median(drawn[name, n], axis=0)
                print(
                    f"{'':>9s} lists drawn (disjoint, m + 10 each): p50 {wall:6.2f} s wall, {cpu:5.2f} s CPU"
                    f"{versus(drawn, name, n)}"
                )
            print(f"{'':>9s} (designs chosen or asked: {', '.join(sorted(DESIGNS.get(pid, ())))})")


def versus(times: dict[tuple[str, int], list[tuple[float, float]]], name: str, n: int) -> str:
    """The new code's p50 wall and CPU as ratios of the reference's, when there is one."""
    if name != "new" or ("reference", n) not in times:
        return ""
    wall, cpu = np.median(times["new", n], axis=0)
    ref_wall, ref_cpu = np.median(times["reference", n], axis=0)
    return f"  {wall / ref_wall:4.2f}x / {cpu / ref_cpu:4.2f}x the reference"


if __name__ == "__main__":
    main()
