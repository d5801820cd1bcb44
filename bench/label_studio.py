"""Label Studio deliveries against their 1 s budget (issue 17).

Label Studio drops a webhook delivery that is not answered within 1 s and never retries, so
the webhook path must stay far below that. Starts the real service (uvicorn) on a fresh
SQLite file — or on PostgreSQL with ``--postgres URL`` (its public schema is wiped) — and
prints, next to the same run's ``/healthz`` latency as a floor (timed between the measured
requests, so a busy machine shows in it):

- webhook deliveries of new annotations (the recorded 1.23.2 payload, a new task and user
  each time, so each creates an item and a rater): p50 / p99 / max;
- corrections (ANNOTATION_UPDATED of the same annotations) and deletions: p50 / p99;
- the import of the recorded 52-task snapshot (annotations and predictions), and its
  idempotent re-import.

    .venv/bin/python bench/label_studio.py [--postgres URL] [--deliveries 300]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, migrate, wipe_postgres

KEY = "ak_bench_admin"
FIXTURES = ROOT / "tests" / "fixtures" / "label_studio_1_23_2"
LABELS = ["Positive", "Negative", "Neutral"]


def ms(seconds: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1e3, q))


def timed(c: httpx.Client, method: str, url: str, **kwargs: object) -> float:
    t0 = time.perf_counter()
    r = c.request(method, url, **kwargs)
    dt = time.perf_counter() - t0
    if r.status_code != 200 or "issue" in r.text[:200]:
        raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return dt


def run(database_url: str, deliveries: int) -> None:
    template = json.loads((FIXTURES / "webhooks.ndjson").read_text().splitlines()[0])
    snapshot = json.loads((FIXTURES / "snapshot-full-predictions.json").read_text())
    secret = {"X-Annoplan-Secret": KEY}
    with LiveServer(database_url, KEY) as server, server.client() as c:
        pid = c.post("/projects", json={"name": "bench ls", "labels": LABELS}).json()["id"]
        hook = f"/projects/{pid}/webhooks/label-studio"
        timed(c, "POST", hook, json={"action": "PROJECT_UPDATED"}, headers=secret)  # warm the path
        floor: list[float] = []
        created: list[float] = []
        updated: list[float] = []
        deleted: list[float] = []
        for n in range(deliveries):
            payload = copy.deepcopy(template)
            payload["task"]["id"] = payload["annotation"]["task"] = 10_000 + n
            payload["annotation"].update(id=20_000 + n, completed_by=100 + n % 50)
            created.append(timed(c, "POST", hook, json=payload, headers=secret))
            floor.append(timed(c, "GET", "/healthz"))
            payload["action"] = "ANNOTATION_UPDATED"
            payload["annotation"]["result"][0]["value"]["choices"] = ["Negative"]
            updated.append(timed(c, "POST", hook, json=payload, headers=secret))
            if n % 3 == 0:
                deleted.append(
                    timed(
                        c,
                        "POST",
                        hook,
                        headers=secret,
                        json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 20_000 + n}]},
                    )
                )
        fresh = c.post("/projects", json={"name": "bench import", "labels": LABELS}).json()["id"]
        first = timed(c, "POST", f"/projects/{fresh}/import/label-studio", json=snapshot)
        again = timed(c, "POST", f"/projects/{fresh}/import/label-studio", json=snapshot)
    print(f"/healthz floor: p50 {ms(floor, 50):.1f} ms, p99 {ms(floor, 99):.1f} ms")
    for name, xs in (("created", created), ("updated", updated), ("deleted", deleted)):
        print(
            f"webhook {name:8s} ({len(xs)}): p50 {ms(xs, 50):.1f} ms ({ms(xs, 50) / ms(floor, 50):.1f}x floor), "
            f"p99 {ms(xs, 99):.1f} ms, max {max(xs) * 1e3:.1f} ms  (Label Studio's budget: 1,000 ms)"
        )
    print(f"import of the 52-task snapshot: {first * 1e3:.0f} ms; idempotent re-import {again * 1e3:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="a PostgreSQL URL (its public schema is wiped)")
    parser.add_argument("--deliveries", type=int, default=300)
    args = parser.parse_args()
    if args.postgres:
        wipe_postgres(args.postgres)
        migrate(args.postgres)
        run(args.postgres, args.deliveries)
        return
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        migrate(url)
        run(url, args.deliveries)


if __name__ == "__main__":
    main()
