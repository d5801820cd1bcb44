"""Dashboard latency against the reliability document it draws (issue 18).

Starts the real service (uvicorn, ``tests/live_server.py``) on a fresh SQLite file and builds
the CLI's demo project with ``--items`` items (default 5,000): a judge, a primary and three
secondaries (judge accuracy .90, humans .85), a certification plan from those priors and every planned
batch labelled.
Then it prints, each next to the same run's reference:

- after a correction, the reliability GET (the document computed with the server's
  ``bootstrap_resamples``) and the dashboard GET after it (the document cached; the pool-score
  history computed, and on the first visit the plan's overlap curve): the dashboard's extra
  cost on a change of labels;
- warm GETs (p50 of 30): the dashboard page, the projects index and a chart's CSV, against
  the cached reliability GET and ``/healthz`` as the floor.

    .venv/bin/python bench/dashboard.py [--items 5000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner

from service.cli import app as cli
from tests.live_server import LiveServer, migrate

KEY = "ak_bench_admin"


def timed(call: Callable[[], httpx.Response]) -> float:
    t0 = time.perf_counter()
    r = call()
    dt = time.perf_counter() - t0
    if r.status_code != 200:
        raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return dt


def build(url: str, n_items: int) -> str:
    """The CLI's demo project: a judge, a primary and three secondaries, every planned batch labelled."""
    result = CliRunner().invoke(cli, ["demo", "--url", url, "--key", KEY, "--n-items", str(n_items)])
    if result.exit_code != 0:
        raise RuntimeError(result.output)
    return result.output.split()[1].rstrip(":")


def relabel(c: httpx.Client, pid: str) -> None:
    """A correction, so the label sequence moves on and the next documents are computed afresh."""
    for value in ("pass", "fail"):
        row = {"item": "item-00000", "rater": "judge", "value": value}
        c.post(f"/projects/{pid}/labels", json=[row]).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=5_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        migrate(url)
        with LiveServer(url, KEY) as server, server.client() as c:
            pid = build(server.base_url, args.items)
            relabel(c, pid)
            fresh_doc = timed(lambda: c.get(f"/projects/{pid}/reliability"))
            first_page = timed(lambda: c.get(f"/projects/{pid}/dashboard"))
            relabel(c, pid)
            fresh_doc_2 = timed(lambda: c.get(f"/projects/{pid}/reliability"))
            next_page = timed(lambda: c.get(f"/projects/{pid}/dashboard"))
            warm = {
                "/healthz (floor)": lambda: c.get("/healthz"),
                "cached reliability (reference)": lambda: c.get(f"/projects/{pid}/reliability"),
                "dashboard page": lambda: c.get(f"/projects/{pid}/dashboard"),
                "projects index": lambda: c.get("/dashboard"),
                "chart CSV (margins-1)": lambda: c.get(f"/projects/{pid}/dashboard/charts/margins-1.csv"),
            }
            p50 = {name: float(np.median([timed(call) for _ in range(30)])) for name, call in warm.items()}
    reference = p50["cached reliability (reference)"]
    print(f"demo project of {args.items} items, every planned batch labelled")
    print(f"fresh reliability document: {fresh_doc * 1e3:8.1f} ms (reference)")
    print(
        f"first dashboard after it:   {first_page * 1e3:8.1f} ms  = {first_page / fresh_doc:.2f} x the document "
        "(history and the plan's overlap curve computed)"
    )
    print(
        f"after a correction: document {fresh_doc_2 * 1e3:.1f} ms, then the dashboard {next_page * 1e3:.1f} ms "
        f"= {next_page / fresh_doc_2:.2f} x (history recomputed, curve cached by plan)"
    )
    for name, value in p50.items():
        print(f"warm p50 {name:<32} {value * 1e3:7.1f} ms  = {value / reference:.2f} x cached reliability")


if __name__ == "__main__":
    main()
