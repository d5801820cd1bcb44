"""Label ingest with outbound webhooks listening, against the same server without them (issue 15).

Starts the real service on a fresh SQLite file (or PostgreSQL with ``--postgres URL``, its
public schema wiped), builds a project of ``--items`` items with a judge and three humans,
and streams ``--writes`` label writes of ``--rows`` rows each:

1. with no webhook (the reference);
2. with a ``decision.changed`` webhook whose sender re-reads the decision as labels arrive
   (at most every ``ANNOPLAN_WEBHOOK_DECISION_SECONDS``), delivering to a local receiver.

It prints the write latency p50 / p99 of both, their ratio, and how many decision.changed
events the receiver got (the judge turns bad halfway, so the decision flips at least once).
The server runs the job queue itself (``ANNOPLAN_API_RUNS_JOBS=1``, as the embedded default
does), so its sender computes the reliability document in the server process (at most every
``ANNOPLAN_WEBHOOK_DECISION_SECONDS`` per project): in a short stream one computation
overlaps a large share of the writes, so the ratio shrinks as the stream grows longer.

    .venv/bin/python bench/webhooks.py [--postgres URL] [--items 20000] [--writes 200] [--rows 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, migrate, wipe_postgres
from tests.webhook_receiver import Receiver

KEY = "ak_bench_admin"
RATERS = [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]


def project(c, n_items: int) -> str:  # noqa: ANN001 (an httpx client)
    pid = c.post("/projects", json={"name": "bench", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in RATERS:
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)]).raise_for_status()
    return pid


def stream(c, pid: str, n_items: int, writes: int, rows: int, rng: np.random.Generator) -> list[float]:  # noqa: ANN001
    """Write latencies of ``writes`` label posts of ``rows`` rows: random items, each labeled by all four
    raters (so humans overlap), the judge right on all of them for the first half and wrong on half after."""
    latencies = []
    for w in range(writes):
        body = []
        for i in rng.choice(n_items, size=rows // len(RATERS), replace=False):
            truth = "pass" if i % 3 else "fail"
            flipped = "fail" if truth == "pass" else "pass"
            for rater, _ in RATERS:
                wrong = rater == "judge" and w >= writes // 2 and i % 2 == 0
                body.append({"item": f"i{i}", "rater": rater, "value": flipped if wrong else truth})
        t0 = time.perf_counter()
        c.post(f"/projects/{pid}/labels", json=body).raise_for_status()
        latencies.append(time.perf_counter() - t0)
    return latencies


def run(url: str, args: argparse.Namespace, *, listen: bool) -> tuple[list[float], int]:
    with (
        Receiver() as receiver,
        LiveServer(url, KEY, webhook_allow_private=1, webhook_poll_seconds=0.5, api_runs_jobs=1) as server,
    ):
        with server.client() as c:
            pid = project(c, args.items)
            if listen:
                c.post(
                    f"/projects/{pid}/webhooks", json={"url": receiver.url, "events": ["decision.changed"]}
                ).raise_for_status()
            latencies = stream(c, pid, args.items, args.writes, args.rows, np.random.default_rng(1))
            time.sleep(8 if listen else 0)  # let the sender catch up with the last label_seq
        return latencies, len(receiver.received)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", help="PostgreSQL URL (its public schema is wiped)")
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--rows", type=int, default=200)
    args = parser.parse_args()
    results = {}
    for listen in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            url = args.postgres or f"sqlite:///{tmp}/bench.db"
            if args.postgres:
                wipe_postgres(url)
            migrate(url)
            results[listen] = run(url, args, listen=listen)
    base, hooked = results[False][0], results[True][0]
    p50 = [float(np.percentile(x, 50)) * 1e3 for x in (base, hooked)]
    p99 = [float(np.percentile(x, 99)) * 1e3 for x in (base, hooked)]
    print(f"label writes of {args.rows} rows, {args.writes} writes, {args.items:,} items")
    print(f"  no webhook (reference): p50 {p50[0]:7.1f} ms   p99 {p99[0]:7.1f} ms")
    print(
        f"  decision.changed hook : p50 {p50[1]:7.1f} ms   p99 {p99[1]:7.1f} ms   "
        f"ratio p50 {p50[1] / p50[0]:.2f}x  p99 {p99[1] / p99[0]:.2f}x"
    )
    print(f"  decision.changed events delivered: {results[True][1]}")


if __name__ == "__main__":
    main()
