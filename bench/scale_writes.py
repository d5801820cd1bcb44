"""Writes and batches at a million items (issue 20), next to 10,000 items in the same run.

Starts the real service (uvicorn, ``tests/live_server.py``) on a fresh SQLite file — and on
PostgreSQL with ``--postgres URL`` (its public schema is wiped) — and builds two projects of
10 raters (judge, primary, 8 secondaries), binary labels: 10,000 items and ``--items`` (default
1,000,000). Each gets judge labels for every item, primary labels for the first 90% (so its
cursor has a tenth of the corpus ahead) and each secondary an eighth of the corpus: about 2.9
labels per item, ~2.9M at a million. Items and labels go up in POSTs of 100,000 rows (the
default ``max_rows``). Then a certification plan from priors under ``seq-coverage`` (a secondary's list
is drawn at its first batch, from the labels in hand then), and for each project it prints:

- item upload and label ingest rates (rows per second of POST time), and the label ingest rate per
  second of the server's CPU time (/proc; on a shared machine the wall rate follows the load, the
  CPU rate much less), on PostgreSQL also per second of the server's and its backends' CPU (the
  wall rate of an idle machine: each POST waits for the database);
- batch requests: the primary's first (its cursor passes the labeled 90%), the slowest of the
  secondaries' first (each draws its list), then p50 / p99 of the primary's and of the
  secondaries' (round-robin, their first requests included), and of every batch request, each
  batch labeled before the next, and
  the server process's CPU per request (all its threads; on SQLite this includes the database,
  on PostgreSQL not): on a loaded machine the wall clock is mostly waiting for a core, the CPU
  is what the request costs; the three slowest requests are listed;
- storage per label: label_events + current_labels with their indexes, over the labels written;

next to ``/healthz`` p50 / p99 (the floor) measured in the same run, and the load average.
Targets: every batch request p99 <= 50 ms; ingest >= 50,000 labels/s at a million items.

    .venv/bin/python bench/scale_writes.py [--postgres URL] [--items 1000000] [--skip-sqlite] [--writes-only]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import orjson
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.core.db import make_engine
from tests.live_server import LiveServer, migrate, wipe_postgres

KEY = "ak_bench_admin"
LABELS = ["pass", "fail"]
SECONDARIES = [f"h{k}" for k in range(1, 9)]
POST_ROWS = 100_000
ROUNDS = 200


def ms(seconds: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1e3, q))


def timed(call: Callable[[], httpx.Response]) -> tuple[float, httpx.Response]:
    t0 = time.perf_counter()
    r = call()
    dt = time.perf_counter() - t0
    if r.status_code != 200 and r.status_code != 201:
        raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return dt, r


def post_rows(c: httpx.Client, path: str, rows: list[dict]) -> float:
    """POST ``rows`` in bodies of POST_ROWS (encoded before the clock starts); the seconds spent posting."""
    spent = 0.0
    for start in range(0, len(rows), POST_ROWS):
        body = orjson.dumps(rows[start : start + POST_ROWS])
        spent += timed(lambda body=body: c.post(path, content=body, headers={"Content-Type": "application/json"}))[0]
    return spent


def server_cpu(server: LiveServer) -> float:
    """CPU seconds the server process has run so far, summed over its threads (Linux schedstat, in
    nanoseconds: fine enough for one batch request)."""
    assert server.proc is not None
    ns = 0
    for task in Path(f"/proc/{server.proc.pid}/task").iterdir():
        try:
            ns += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a pool thread that just ended
            pass
    return ns / 1e9


def database_cpu(url: str) -> float:
    """CPU seconds PostgreSQL's backends serving ``url``'s database have run so far (/proc; 0 on SQLite,
    whose work is the server's own). The server's pooled connections live through a run."""
    if url.startswith("sqlite"):
        return 0.0
    engine = make_engine(url)
    with engine.connect() as conn:
        pids = (
            conn.execute(
                text("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
            )
            .scalars()
            .all()
        )
    engine.dispose()
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):  # a backend that just ended
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def build(c: httpx.Client, server: LiveServer, n_items: int, rng: np.random.Generator) -> tuple[str, dict[str, float]]:
    """The project of the module docstring; its id and the upload rates."""
    pid = c.post("/projects", json={"name": f"scale {n_items}", "labels": LABELS}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), *((h, "human") for h in SECONDARIES)]:
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    items_s = post_rows(c, f"/projects/{pid}/items", [{"external_id": f"it{i}"} for i in range(n_items)])
    truth = rng.random(n_items) < 0.35
    rows: list[dict] = []
    for rater, upto, accuracy in [
        ("judge", n_items, 0.9),
        ("prim", n_items * 9 // 10, 0.85),
        *((h, n_items // 8, 0.85) for h in SECONDARIES),
    ]:
        right = rng.random(upto) < accuracy
        rows += [
            {"item": f"it{i}", "rater": rater, "value": LABELS[int(t == r)]}
            for i, (t, r) in enumerate(zip(truth[:upto], right, strict=True))
        ]
    cpu, db_cpu = server_cpu(server), database_cpu(server.database_url)
    labels_s = post_rows(c, f"/projects/{pid}/labels", rows)
    labels_cpu = server_cpu(server) - cpu
    figures = {
        "items/s": n_items / items_s,
        "labels/s": len(rows) / labels_s,
        "labels": len(rows),
        "labels/cpu s": len(rows) / labels_cpu,
    }
    if db_cpu := database_cpu(server.database_url) - db_cpu:
        figures["labels/cpu s (+database)"] = len(rows) / (labels_cpu + db_cpu)
    return pid, figures


def batches(
    c: httpx.Client, pid: str, rater: str | None, size: int, server: LiveServer
) -> tuple[list[float], list[float]]:
    """ROUNDS batch requests (rater None: round-robin over the secondaries), each batch labeled after;
    their wall and server CPU seconds."""
    times, cpu = [], []
    for k in range(ROUNDS):
        who = rater or SECONDARIES[k % len(SECONDARIES)]
        cpu0 = server_cpu(server)
        dt, r = timed(lambda who=who: c.post(f"/projects/{pid}/batches", json={"rater": who, "size": size}))
        cpu.append(max(0.0, server_cpu(server) - cpu0))
        times.append(dt)
        rows = [{"item": i, "rater": who, "value": "pass", "batch": r.json()["id"]} for i in r.json()["items"]]
        if rows:
            c.post(f"/projects/{pid}/labels", json=rows).raise_for_status()
    return times, cpu


def slowest(name: str, wall: list[float], cpu: list[float]) -> str:
    """The three slowest requests of a series: index, wall ms and server CPU ms."""
    worst = np.argsort(wall)[-3:][::-1]
    return f"  {name} slowest: " + ", ".join(f"#{k} {wall[k] * 1e3:.0f} ms (CPU {cpu[k] * 1e3:.0f})" for k in worst)


def storage_per_label(url: str) -> float:
    """Bytes of label_events and current_labels with their indexes, per label event."""
    engine = make_engine(url)
    with engine.connect() as conn:
        events = conn.scalar(text("SELECT count(*) FROM label_events")) or 1
        if url.startswith("sqlite"):
            size = _sqlite_bytes(conn)
        else:
            size = conn.scalar(
                text("SELECT pg_total_relation_size('label_events') + pg_total_relation_size('current_labels')")
            )
    engine.dispose()
    return float(size) / events


def _sqlite_bytes(conn) -> int:  # type: ignore[no-untyped-def]
    """Pages of the two label tables and their indexes (SQLite's dbstat), in bytes."""
    names = [
        n
        for (n,) in conn.execute(
            text("SELECT name FROM sqlite_master WHERE tbl_name IN ('label_events', 'current_labels')")
        )
    ]
    marks = ", ".join(f"'{n}'" for n in names)
    return int(conn.scalar(text(f"SELECT sum(pgsize) FROM dbstat WHERE name IN ({marks})")) or 0)


def run(url: str, sizes: list[int], label: str, *, writes_only: bool) -> None:
    print(f"[{label}]", flush=True)
    migrate(url)
    rng = np.random.default_rng(0)
    figures: dict[int, dict[str, float]] = {}
    with LiveServer(url, KEY) as server, server.client() as c:
        c.timeout = 600
        for n in sizes:
            t0 = time.perf_counter()
            pid, f = build(c, server, n, rng)
            print(f"  built {n:,} items, {int(f['labels']):,} labels in {time.perf_counter() - t0:.0f} s", flush=True)
            figures[n] = f
            if writes_only:
                continue
            f["plan s"] = timed(
                lambda pid=pid: c.post(
                    f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "seed": 1, "design": "seq-coverage"}
                )
            )[0]
            load = os.getloadavg()[0]
            health = [timed(lambda: c.get("/healthz"))[0] for _ in range(ROUNDS)]
            cpu0 = server_cpu(server)
            first, _ = timed(lambda pid=pid: c.post(f"/projects/{pid}/batches", json={"rater": "prim", "size": 10}))
            first_cpu = server_cpu(server) - cpu0
            primary, primary_cpu = batches(c, pid, "prim", 10, server)
            secondary, secondary_cpu = batches(c, pid, None, 2, server)
            health += [timed(lambda: c.get("/healthz"))[0] for _ in range(ROUNDS)]
            print(slowest("primary", primary, primary_cpu), flush=True)
            print(slowest("secondary", secondary, secondary_cpu), flush=True)
            every = [first, *primary, *secondary]
            f |= {
                "primary first ms": first * 1e3,
                "primary first CPU ms": first_cpu * 1e3,
                "secondary first ms (max)": max(secondary[: len(SECONDARIES)]) * 1e3,
                "secondary first CPU ms (max)": max(secondary_cpu[: len(SECONDARIES)]) * 1e3,
                "every batch p50": ms(every, 50),
                "every batch p99": ms(every, 99),
                "primary p50": ms(primary, 50),
                "primary p99": ms(primary, 99),
                "primary CPU p50": ms(primary_cpu, 50),
                "primary CPU p99": ms(primary_cpu, 99),
                "secondary p50": ms(secondary, 50),
                "secondary p99": ms(secondary, 99),
                "secondary CPU p50": ms(secondary_cpu, 50),
                "secondary CPU p99": ms(secondary_cpu, 99),
                "healthz p50": ms(health, 50),
                "healthz p99": ms(health, 99),
                "load average": (load + os.getloadavg()[0]) / 2,
            }
    bytes_per_label = storage_per_label(url)
    small, big = sizes
    print(f"  {'':28}{small:>12,} items{big:>12,} items   ratio")
    for key, fmt in [
        ("items/s", ",.0f"),
        ("labels/s", ",.0f"),
        ("labels/cpu s", ",.0f"),
        ("labels/cpu s (+database)", ",.0f"),
        ("plan s", ".2f"),
        ("primary first ms", ".0f"),
        ("primary first CPU ms", ".0f"),
        ("secondary first ms (max)", ".0f"),
        ("secondary first CPU ms (max)", ".0f"),
        ("every batch p50", ".1f"),
        ("every batch p99", ".1f"),
        ("primary p50", ".1f"),
        ("primary p99", ".1f"),
        ("primary CPU p50", ".1f"),
        ("primary CPU p99", ".1f"),
        ("secondary p50", ".1f"),
        ("secondary p99", ".1f"),
        ("secondary CPU p50", ".1f"),
        ("secondary CPU p99", ".1f"),
        ("healthz p50", ".1f"),
        ("healthz p99", ".1f"),
        ("load average", ".1f"),
    ]:
        if key not in figures[big]:
            continue
        a, b = figures[small][key], figures[big][key]
        print(f"  {key:28}{a:>18{fmt}}{b:>18{fmt}}   {b / a:5.2f}x")
    print(
        f"  storage per label (label_events + current_labels, indexes included): {bytes_per_label:.0f} bytes",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--postgres", help="PostgreSQL URL (its public schema is wiped)")
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--skip-sqlite", action="store_true")
    ap.add_argument("--writes-only", action="store_true", help="uploads and storage only: no plan, no batches")
    args = ap.parse_args()
    sizes = [10_000, args.items]
    if not args.skip_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            run(f"sqlite:///{tmp}/bench.db", sizes, "sqlite", writes_only=args.writes_only)
    if args.postgres:
        wipe_postgres(args.postgres)
        run(args.postgres, sizes, "postgresql", writes_only=args.writes_only)
    print("targets: every batch request p99 <= 50 ms; ingest >= 50,000 labels/s at a million items")


if __name__ == "__main__":
    main()
