"""Label ingestion throughput through HTTP (issue 2).

Starts the real service (uvicorn) on a fresh SQLite file — and on PostgreSQL when
``--postgres URL`` is given — and prints labels per second for
(a) one bulk POST of 100,000 labels, and
(b) 10 concurrent clients each posting 100 batches of 1,000 labels.

    python bench/ingest.py [--postgres postgresql+psycopg://user@host:port/db] [--items 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, migrate, wipe_postgres  # noqa: E402

KEY = "ak_bench_admin"


def run(url: str, n_items: int, label: str) -> None:
    migrate(url)
    with LiveServer(url, KEY) as server:
        base = server.base_url
        c = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=600)
        pid = c.post("/projects", json={"name": "bench", "labels": ["a", "b", "c"]}).json()["id"]
        raters = ["judge"] + [f"h{k}" for k in range(10)]
        for r in raters:
            c.post(f"/projects/{pid}/raters", json={"external_id": r, "kind": "judge" if r == "judge" else "human"})
        items = [{"external_id": f"it{i}"} for i in range(n_items)]
        c.post(f"/projects/{pid}/items", json=items).raise_for_status()
        values = ["a", "b", "c"]

        bulk = [{"item": f"it{i}", "rater": "judge", "value": values[i % 3]} for i in range(n_items)]
        t0 = time.perf_counter()
        r = c.post(f"/projects/{pid}/labels", json=bulk)
        dt_a = time.perf_counter() - t0
        r.raise_for_status()
        assert r.json()["accepted"] == n_items, r.json()
        print(f"[{label}] (a) one POST of {n_items:,} labels: {dt_a:.2f} s -> {n_items / dt_a:,.0f} labels/s")

        per_batch = 1_000
        batches_per_client = n_items // per_batch

        def client_run(k: int) -> int:
            cc = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=600)
            done = 0
            for b in range(batches_per_client):
                rows = [
                    {"item": f"it{i}", "rater": f"h{k}", "value": values[(i + k) % 3]}
                    for i in range(b * per_batch, (b + 1) * per_batch)
                ]
                resp = cc.post(f"/projects/{pid}/labels", json=rows)
                resp.raise_for_status()
                done += resp.json()["accepted"]
            return done

        t0 = time.perf_counter()
        with ThreadPoolExecutor(10) as pool:
            total = sum(pool.map(client_run, range(10)))
        dt_b = time.perf_counter() - t0
        print(
            f"[{label}] (b) 10 clients x {batches_per_client} POSTs of {per_batch:,}: {total:,} labels in "
            f"{dt_b:.2f} s -> {total / dt_b:,.0f} labels/s"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--postgres", help="PostgreSQL URL (its public schema is wiped)")
    ap.add_argument("--items", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(f"sqlite:///{tmp}/bench.db", args.items, "sqlite")
    if args.postgres:
        wipe_postgres(args.postgres)
        run(args.postgres, args.items, "postgresql")
    print("target: (a) >= 50,000 labels/s on SQLite")


if __name__ == "__main__":
    main()
