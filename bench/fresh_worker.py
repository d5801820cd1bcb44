"""A fresh api worker's first /reliability against a warm one's, on PostgreSQL (issue 32).

Through HTTP against real servers over one PostgreSQL, on a project of ``--items`` items built by
``bench/million.py``'s ``build`` (a judge and the primary on every item, 8 secondaries on 1/8 each):

- an api server that runs no jobs (PostgreSQL's default) and a job worker beside it (``annoplan
  worker``); the api's first document reads every label, and the worker's snapshot turn saves the
  matrix into the ``matrix_snapshots`` table;
- 1,000 judge corrections, then the **warm** figure: the same api's fresh /reliability (its kept
  matrix brought up to date by the 1,000 events; the statistics computed);
- the **fresh** figure: a new api server's first /reliability of the project at the same label_seq
  (the worker's newest snapshot plus the events since: those it is behind, at most a fiftieth of the
  matrix's cells as the snapshot turn leaves it, and the 1,000; then the same statistics), and the same
  for a new server with
  snapshots off (``ANNOPLAN_MATRIX_SNAPSHOT_DIR=``: every label read, as before issue 32). A new
  server first answers one /reliability of a small project of its own (15,000 items, large enough to
  be computed in a child process): a starting process's one-time costs (its child processes' imports,
  seconds on a loaded machine, whatever the project) are in that request, printed apart, not in the
  figure the snapshot is for.

Wall time of the request and the server's CPU (its threads and its ended child computations) for each,
and the ratios to the warm one, all measured in the same run.

    .venv/bin/python bench/fresh_worker.py --postgres URL [--items 1000000] [--reuse]
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
from service.data.models import CurrentLabel, Item, MatrixSnapshot, Project, Rater  # noqa: E402
from service.matrices.store import SNAPSHOT_EVERY  # noqa: E402
from tests.live_server import LiveServer, LiveWorker, migrate, wipe_postgres  # noqa: E402

QUIET = {"api_runs_jobs": "false", "webhook_sender": "false"}
WARM_UP_ITEMS = 15_000
"""A new server's first request is of a project this large (60,000 cells: computed in a child process)."""


def snapshot_caught_up(url: str, pid: str, cells: int, timeout: float) -> tuple[int, int]:
    """Wait until the project's newest snapshot is no longer due (at most a fiftieth of its cells behind, as
    the worker's snapshot turn leaves it); its label_seq and the project's."""
    engine = make_engine(url)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                seq = int(conn.scalar(select(Project.label_seq).where(Project.id == pid)) or 0)
                newest = conn.scalar(select(func.max(MatrixSnapshot.label_seq)).where(MatrixSnapshot.project_id == pid))
            if newest is not None and seq - newest <= cells // SNAPSHOT_EVERY:
                return int(newest), seq
            time.sleep(0.5)
    finally:
        engine.dispose()
    raise RuntimeError(f"no snapshot of {pid} within {timeout:.0f} s")


def reused(url: str, n_items: int) -> tuple[str, np.ndarray, str]:
    """The projects an earlier run built on ``url`` (by their names), and the judge's current labels."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            pid = conn.scalar(select(Project.id).where(Project.name == f"million-{n_items}"))
            small = conn.scalar(select(Project.id).where(Project.name == f"million-{WARM_UP_ITEMS}"))
            rows = conn.execute(
                select(Item.external_id, CurrentLabel.value)
                .join(Item, Item.id == CurrentLabel.item_id)
                .join(Rater, Rater.id == CurrentLabel.rater_id)
                .where(CurrentLabel.project_id == pid, Rater.external_id == "judge")
            ).all()
    finally:
        engine.dispose()
    judge = np.zeros(n_items, dtype=bool)
    for external_id, value in rows:
        judge[int(external_id[1:])] = value == "pass"
    assert pid is not None and small is not None and len(rows) == n_items
    return pid, judge, small


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
    parser.add_argument("--reuse", action="store_true", help="the projects an earlier run built there, not new ones")
    args = parser.parse_args()
    url = args.postgres
    if not args.reuse:
        wipe_postgres(url)
    migrate(url)
    rng = np.random.default_rng(args.items)
    out: dict[str, tuple[float, float]] = {}
    with LiveServer(url, million.KEY, **QUIET) as warm, LiveWorker(url, matrix_snapshot_seconds=1, **QUIET):
        with warm.client() as c:
            c.timeout = 3600
            t0 = time.perf_counter()
            if args.reuse:
                pid, judge, small = reused(url, args.items)
            else:
                pid, judge = million.build(c, args.items, 1 / million.SECONDARIES, rng)
                print(f"built {args.items:,} items in {time.perf_counter() - t0:.0f} s", flush=True)
                small, _ = million.build(c, WARM_UP_ITEMS, 1 / million.SECONDARIES, rng)
            out["warm api's first read (every label)"] = first_reliability(warm, pid)
            cells = args.items * (2 + million.SECONDARIES)
            snapshot, seq = snapshot_caught_up(url, pid, cells, timeout=1800)
            print(f"the worker's newest snapshot: label_seq {snapshot:,} of {seq:,}", flush=True)
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
    print(
        f"[PostgreSQL] first /reliability at {args.items:,} items, label_seq {seq:,}, newest snapshot at "
        f"{snapshot:,} (x = ratio to the warm api)"
    )
    for name, (wall, cpu) in out.items():
        print(f"  {name:44s} wall {wall:7.2f} s ({wall / base_wall:5.2f}x)   CPU {cpu:7.2f} s ({cpu / base_cpu:5.2f}x)")


if __name__ == "__main__":
    main()
