"""A fresh api worker's first /reliability against a warm one's, on PostgreSQL (issue 32).

Through HTTP against real servers over one PostgreSQL, on a project of ``--items`` items built by
``bench/million.py``'s ``build`` (a judge and the primary on every item, 8 secondaries on 1/8 each):

- an api server that runs no jobs (PostgreSQL's default) and a job worker beside it (``annoplan
  worker``); the api's first document reads every label, and the worker's snapshot turn saves the
  matrix into the ``matrix_snapshots`` table;
- 1,000 judge corrections, then the **warm** figure: the same api's fresh /reliability (its kept
  matrix brought up to date by the 1,000 events; the statistics computed);
- the **fresh** figure: a new api server's first /reliability of the project at the same label_seq
  (the snapshot plus the 1,000 events, then the same statistics), and the same for a new server with
  snapshots off (``ANNOPLAN_MATRIX_SNAPSHOT_DIR=``: every label read, as before issue 32). A new
  server first answers one /reliability of a small project of its own (15,000 items, large enough to
  be computed in a child process): a starting process's one-time costs (its child processes' imports,
  seconds on a loaded machine, whatever the project) are in that request, printed apart, not in the
  figure the snapshot is for.

Wall time of the request and the server's CPU (its threads and its ended child computations) for each,
and the ratios to the warm one, all measured in the same run.

    .venv/bin/python bench/fresh_worker.py --postgres URL [--items 1000000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import million  # noqa: E402

from service.core.db import make_engine  # noqa: E402
from service.data.models import MatrixSnapshot, Project  # noqa: E402
from tests.live_server import LiveServer, LiveWorker, migrate, wipe_postgres  # noqa: E402

QUIET = {"api_runs_jobs": "false", "webhook_sender": "false"}
WARM_UP_ITEMS = 15_000
"""A new server's first request is of a project this large (60,000 cells: computed in a child process)."""


def snapshot_at(url: str, pid: str, timeout: float) -> int:
    """Wait until the project's newest snapshot is at its label_seq; that label_seq."""
    engine = make_engine(url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                seq = conn.scalar(select(Project.label_seq).where(Project.id == pid))
                newest = conn.scalar(select(func.max(MatrixSnapshot.label_seq)).where(MatrixSnapshot.project_id == pid))
            if newest is not None and newest == seq:
                return int(seq)
            time.sleep(0.5)
    finally:
        engine.dispose()
    raise RuntimeError(f"no snapshot of {pid} at its label_seq within {timeout:.0f} s")


def first_reliability(server: LiveServer, pid: str) -> tuple[float, float]:
    """Wall seconds and server CPU seconds of one GET /reliability."""
    with server.client() as c:
        c.timeout = 3600
        cpu = million.server_cpu(server)
        wall = million.timed(lambda: c.get(f"/projects/{pid}/reliability"))
        return wall, million.server_cpu(server) - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="an (empty) PostgreSQL database: everything in it is dropped")
    parser.add_argument("--items", type=int, default=1_000_000)
    args = parser.parse_args()
    url = args.postgres
    wipe_postgres(url)
    migrate(url)
    rng = np.random.default_rng(args.items)
    out: dict[str, tuple[float, float]] = {}
    with LiveServer(url, million.KEY, **QUIET) as warm, LiveWorker(url, matrix_snapshot_seconds=1, **QUIET):
        with warm.client() as c:
            c.timeout = 3600
            t0 = time.perf_counter()
            pid, judge = million.build(c, args.items, 1 / million.SECONDARIES, rng)
            print(f"built {args.items:,} items in {time.perf_counter() - t0:.0f} s", flush=True)
            small, _ = million.build(c, WARM_UP_ITEMS, 1 / million.SECONDARIES, rng)
            out["warm api's first read (every label)"] = first_reliability(warm, pid)
            snapshot_at(url, pid, timeout=1800)
            million.write_1000(c, pid, judge, rng)
        out["warm api, after 1,000 corrections"] = first_reliability(warm, pid)
        seq = int(warm.client().get(f"/projects/{pid}").json()["label_seq"])
        with LiveServer(url, million.KEY, **QUIET) as fresh:
            out["fresh api: its process's first request"] = first_reliability(fresh, small)
            out["fresh api: snapshot + 1,000 events"] = first_reliability(fresh, pid)
        with LiveServer(url, million.KEY, matrix_snapshot_dir="", **QUIET) as unsnapshotted:
            out["snapshots off: its process's first request"] = first_reliability(unsnapshotted, small)
            out["fresh api, snapshots off"] = first_reliability(unsnapshotted, pid)
    base_wall, base_cpu = out["warm api, after 1,000 corrections"]
    print(f"[PostgreSQL] first /reliability at {args.items:,} items, label_seq {seq:,} (x = ratio to the warm api)")
    for name, (wall, cpu) in out.items():
        print(f"  {name:44s} wall {wall:7.2f} s ({wall / base_wall:5.2f}x)   CPU {cpu:7.2f} s ({cpu / base_cpu:5.2f}x)")


if __name__ == "__main__":
    main()
