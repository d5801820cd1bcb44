"""The decision watcher's CPU per change with one job worker and with two, on PostgreSQL (issue 32).

4 api processes that run no jobs and M job workers (M = 1, then 2, in the same run) over one
PostgreSQL, each time on a new project with a ``decision.changed`` webhook: ``--labels`` labels
(4 raters) written in writes of ``--rows``, each moving the project's label_seq (a change). Measured
per M: the job workers' CPU (their threads and their ended child computations) from the first write
until the watcher has recorded the last one, divided by the writes (each worker's own polling, its
queue claims and its sender's rounds every ``webhook_poll_seconds``, is in it whether or not labels
arrive); and the decisions read and
recorded (the watcher's counters on its periodic row). With the watcher a periodic turn of the
deployment, two workers read as many decisions as one: the decision documents computed per change do
not grow with the workers (before, each worker's sender re-read every change).

    .venv/bin/python bench/decision_watch.py --postgres URL [--labels 100000] [--rows 5000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx
from sqlalchemy import select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import million  # noqa: E402

from service.core.db import make_engine  # noqa: E402
from service.data.jobs import PERIODIC  # noqa: E402
from service.data.models import DecisionWatch, Job, Project  # noqa: E402
from service.webhooks.watch import DECISION_WATCH  # noqa: E402
from tests.live_server import LiveServer, LiveWorker, migrate, wipe_postgres  # noqa: E402
from tests.webhook_receiver import Receiver  # noqa: E402

RATERS = ("judge", "prim", "h2", "h3")
QUEUE = {
    "api_runs_jobs": "false",
    "webhook_allow_private": 1,
    "webhook_poll_seconds": 0.2,
    "webhook_decision_seconds": 1.0,
    "bootstrap_resamples": 200,
    "matrix_snapshot_dir": "",  # no snapshot turns: the workers' only work beyond polling is the watcher's
}


def watched(url: str, pid: str) -> tuple[dict[str, int], int | None, int]:
    """The watcher's counters (summed over the deployment), the label_seq it last recorded, the project's."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            payload = conn.scalar(select(Job.payload).where(Job.kind == PERIODIC, Job.key == DECISION_WATCH))
            seen = conn.scalar(select(DecisionWatch.label_seq).where(DecisionWatch.project_id == pid))
            seq = conn.scalar(select(Project.label_seq).where(Project.id == pid))
            return dict(payload or {}), seen, int(seq or 0)
    finally:
        engine.dispose()


def ingest(url: str, api: LiveServer, receiver: Receiver, n_workers: int, labels: int, rows: int) -> dict[str, float]:
    """One project's ingest watched by ``n_workers`` job workers; its figures."""
    items = labels // len(RATERS)
    with api.client() as c:
        c.timeout = httpx.Timeout(600)
        pid = c.post("/projects", json={"name": f"watch-{n_workers}", "labels": ["pass", "fail"]}).json()["id"]
        assert c.patch(f"/projects/{pid}", json={"decision": {"monitoring": "fixed"}}).is_success
        for ext, kind in zip(RATERS, ("judge", "primary", "human", "human"), strict=True):
            c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
        c.post(
            f"/projects/{pid}/webhooks", json={"url": receiver.url, "events": ["decision.changed"]}
        ).raise_for_status()
        c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(items)]).raise_for_status()
        body = [
            {"item": f"i{i}", "rater": r, "value": "pass" if (i % 5) or r == "judge" else "fail"}
            for i in range(items)
            for r in RATERS
        ]
        before = watched(url, pid)[0]
        workers = [LiveWorker(url, **QUEUE).start() for _ in range(n_workers)]
        try:
            while c.get("/healthz/queue").json()["workers"] < n_workers:
                time.sleep(0.2)
            time.sleep(2.0)  # the workers' start (imports, first rounds) is not the watcher's work
            cpu = sum(million.server_cpu(w) for w in workers)
            writes = 0
            for k in range(0, len(body), rows):
                c.post(f"/projects/{pid}/labels", json=body[k : k + rows]).raise_for_status()
                writes += 1
            deadline = time.monotonic() + 600
            while (state := watched(url, pid))[1] != state[2]:
                assert time.monotonic() < deadline, "the watcher did not catch up"
                time.sleep(0.2)
            spent = sum(million.server_cpu(w) for w in workers) - cpu
        finally:
            for w in workers:
                w.stop()
    counters = state[0]
    read = counters.get("decisions_read", 0) - before.get("decisions_read", 0)
    recorded = counters.get("decisions_recorded", 0) - before.get("decisions_recorded", 0)
    return {
        "writes": writes,
        "read": read,
        "recorded": recorded,
        "cpu per change": spent / writes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="an (empty) PostgreSQL database: everything in it is dropped")
    parser.add_argument("--labels", type=int, default=100_000)
    parser.add_argument("--rows", type=int, default=5_000)
    args = parser.parse_args()
    wipe_postgres(args.postgres)
    migrate(args.postgres)
    with Receiver() as receiver, LiveServer(args.postgres, million.KEY, workers=4, **QUEUE) as api:
        one, two = (ingest(args.postgres, api, receiver, m, args.labels, args.rows) for m in (1, 2))
    print(f"[PostgreSQL] decision watcher, {args.labels:,} labels in writes of {args.rows:,}, 4 api processes")
    for m, figures in ((1, one), (2, two)):
        print(
            f"  {m} job worker{'s' if m > 1 else ' '}: {figures['writes']:.0f} writes, {figures['read']:.0f} decisions "
            f"read, {figures['recorded']:.0f} recorded; workers' CPU per change {figures['cpu per change']:.3f} s"
        )
    print(f"  2 workers / 1 worker, CPU per change: {two['cpu per change'] / one['cpu per change']:.2f}x")


if __name__ == "__main__":
    main()
