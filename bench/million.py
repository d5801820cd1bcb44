"""Reads at a million items: fresh documents after a write, report, dashboard, plan (issue 20).

Starts the real service (uvicorn, ``tests/live_server.py``) on a fresh SQLite file, and on
PostgreSQL with ``--postgres URL``, and builds through HTTP a project of ``--items`` items
(default 1,000,000) and 10 raters: a judge and the primary label every item, 8 secondaries
``--overlap`` of it each (default 1/8: ~3M labels in all). The same is built at ``--small``
items (default 10,000) in the same run, and each figure is printed next to its 10k figure and
``/healthz`` (p50 of 20) as the floor:

- the first document (the worker reads every current label once) and the first dashboard
  (the pool-score history before its first stored point replayed once): one-time costs;
- after a write of 1,000 labels, the fresh ``/reliability`` (the worker applies the 1,000
  events to its kept matrix) and the CPU seconds it cost the server (its threads and the child
  computations: on a loaded machine the figure to compare), then the dashboard (document
  cached), ``/ranking``;
- after 1,000 labels added (a human registered before the first document labels 1,000 new items;
  additions continue the kept monitoring, corrections run it again from the mark before the first rank
  they change: the first write's corrections of labels in hand at the first look from the start): the
  fresh ``/reliability`` and its server CPU; then those 1,000 labels corrected (late in the monitor's
  sequences): the same;
- after another 1,000-label write: the dashboard (the fresh document if ready within the
  dashboard's wait, else the newest computed one, marked, while the fresh one is computed in
  the background: whether it did, and how long until the page is fresh), the report as JSON
  and as HTML;
- plan creation (certification from priors).

``--fixture m1.db`` copies a project built before by this script's ``build`` (its ``.pid`` and
``.judge.npy`` beside it) for the large size instead of building it through HTTP;
``--reads-only`` leaves out the report and the plan.

    .venv/bin/python bench/million.py [--items 1000000] [--small 10000] [--postgres URL]
        [--fixture m1.db] [--reads-only]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, LiveWorker, migrate, wipe_postgres  # noqa: E402

KEY = "ak_bench_admin"
CHUNK = 100_000  # the default max_rows of one request
SECONDARIES = 8


def timed(call: Callable[[], httpx.Response]) -> float:
    t0 = time.perf_counter()
    r = call()
    dt = time.perf_counter() - t0
    if r.status_code not in (200, 201):
        raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return dt


def server_cpu(server: LiveServer) -> float:
    """CPU seconds run so far by the server process (all its threads: Linux schedstat) and by the child
    computations it has ended (their forkserver reaps them: its children's user + system time)."""
    assert server.proc is not None
    ns = 0
    children: list[str] = []
    for task in Path(f"/proc/{server.proc.pid}/task").iterdir():
        try:
            ns += int((task / "schedstat").read_text().split()[0])
            children += (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):  # a pool thread that just ended
            pass
    ticks = 0
    for child in children:
        try:
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime (fields 16 and 17 of stat)
    return ns / 1e9 + ticks / os.sysconf("SC_CLK_TCK")


def server_rss(server: LiveServer) -> tuple[float, float]:
    """The server process's resident memory now and at its peak, in MiB (``/proc``: VmRSS, VmHWM)."""
    assert server.proc is not None
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines() if ":" in line
    )
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def save_fixture(database: str, path: str, pid: str, judge: np.ndarray) -> None:
    """A consistent copy of the SQLite file at ``database`` (the backup API: the server is live, in WAL mode),
    its project id and judge labels beside it: what ``--fixture`` reads."""
    with sqlite3.connect(database) as source, sqlite3.connect(path) as copy:
        source.backup(copy)
    Path(path + ".pid").write_text(pid)
    np.save(path + ".judge.npy", judge)


def post_rows(c: httpx.Client, path: str, rows: list[dict[str, str]]) -> None:
    for start in range(0, len(rows), CHUNK):
        c.post(path, json=rows[start : start + CHUNK]).raise_for_status()


def build(c: httpx.Client, n_items: int, overlap: float, rng: np.random.Generator) -> tuple[str, np.ndarray]:
    """The project (a judge and the primary on every item, each secondary on ``overlap`` of them) and the
    judge's labels (True: pass)."""
    pid: str = c.post("/projects", json={"name": f"million-{n_items}", "labels": ["pass", "fail"]}).json()["id"]
    raters = [("judge", "judge"), ("prim", "primary")] + [(f"h{k}", "human") for k in range(SECONDARIES)]
    for ext, kind in raters:
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    post_rows(c, f"/projects/{pid}/items", [{"external_id": f"i{i}"} for i in range(n_items)])
    truth = rng.random(n_items) < 0.7
    for ext, _ in raters:
        accuracy = 0.9 if ext == "judge" else 0.85
        on = np.arange(n_items) if ext in ("judge", "prim") else np.flatnonzero(rng.random(n_items) < overlap)
        right = rng.random(on.size) < accuracy
        passes = truth[on] == right
        if ext == "judge":
            judge = passes.copy()
        value = np.where(passes, "pass", "fail")
        post_rows(
            c,
            f"/projects/{pid}/labels",
            [{"item": f"i{i}", "rater": ext, "value": str(v)} for i, v in zip(on, value, strict=True)],
        )
    return pid, judge


def write_1000(c: httpx.Client, pid: str, judge: np.ndarray, rng: np.random.Generator) -> None:
    """1,000 of the judge's labels flipped (corrections: 1,000 new events); ``judge`` follows them."""
    items = rng.choice(judge.size, size=1_000, replace=False)
    judge[items] = ~judge[items]
    rows = [{"item": f"i{i}", "rater": "judge", "value": "pass" if judge[i] else "fail"} for i in items]
    r = c.post(f"/projects/{pid}/labels", json=rows)
    r.raise_for_status()
    assert r.json()["accepted"] == 1_000, r.json()


def add_1000(c: httpx.Client, pid: str, rng: np.random.Generator) -> list[dict[str, str]]:
    """1,000 labels added (no correction): the rater ``late``, registered before the first document, on
    1,000 items it has not labelled yet; the rows posted."""
    n_items = int(c.get(f"/projects/{pid}").json()["n_items"])
    items = rng.choice(n_items, size=1_000, replace=False)
    rows = [{"item": f"i{i}", "rater": "late", "value": "pass" if rng.random() < 0.7 else "fail"} for i in items]
    r = c.post(f"/projects/{pid}/labels", json=rows)
    r.raise_for_status()
    assert r.json()["accepted"] == 1_000, r.json()
    return rows


def correct_added(c: httpx.Client, pid: str, rows: list[dict[str, str]]) -> None:
    """The 1,000 labels ``add_1000`` posted, each flipped: corrections late in the monitor's sequences."""
    flipped = [row | {"value": "fail" if row["value"] == "pass" else "pass"} for row in rows]
    r = c.post(f"/projects/{pid}/labels", json=flipped)
    r.raise_for_status()
    assert r.json()["accepted"] == 1_000, r.json()


def dashboard(c: httpx.Client, pid: str) -> tuple[float, bool]:
    """Seconds for the project's dashboard page, and whether it showed an older document (refreshing)."""
    t0 = time.perf_counter()
    r = c.get(f"/projects/{pid}/dashboard")
    dt = time.perf_counter() - t0
    if r.status_code != 200:
        raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return dt, 'id="freshness"' in r.text


def until_fresh(c: httpx.Client, pid: str) -> float:
    """Seconds until the dashboard shows the document at the project's label_seq (polled as its page does)."""
    t0 = time.perf_counter()
    while dashboard(c, pid)[1]:
        time.sleep(0.2)
    return time.perf_counter() - t0


def until_replayed(c: httpx.Client, pid: str) -> float:
    """Seconds until the pool-score history before the first document is replayed (job-queue work)."""
    t0 = time.perf_counter()
    while 'id="history-rebuilding"' in c.get(f"/projects/{pid}/dashboard").text:
        time.sleep(0.5)
    return time.perf_counter() - t0


def figures(
    server: LiveServer,
    n_items: int,
    overlap: float,
    *,
    fixture: str | None,
    reads_only: bool,
    save: tuple[str, str] | None = None,
) -> dict[str, float]:
    rng = np.random.default_rng(n_items)
    out: dict[str, float] = {}
    with server.client() as c:
        c.timeout = 3600
        t0 = time.perf_counter()
        if fixture:
            pid, judge = Path(fixture + ".pid").read_text().strip(), np.load(fixture + ".judge.npy")
        else:
            pid, judge = build(c, n_items, overlap, rng)
            out["build (s)"] = time.perf_counter() - t0
            if save is not None:
                save_fixture(*save, pid, judge)
        c.post(f"/projects/{pid}/raters", json={"external_id": "late", "kind": "human"}).raise_for_status()
        out["healthz p50"] = statistics.median(timed(lambda: c.get("/healthz")) for _ in range(20))
        out["first document (one-time)"] = timed(lambda: c.get(f"/projects/{pid}/reliability"))
        out["first dashboard (one-time)"] = timed(lambda: c.get(f"/projects/{pid}/dashboard"))
        out["  its history replay (background)"] = until_replayed(c, pid)
        write_1000(c, pid, judge, rng)
        cpu = server_cpu(server)
        out["reliability after 1,000 labels"] = timed(lambda: c.get(f"/projects/{pid}/reliability"))
        out["  its server CPU (worker + children)"] = server_cpu(server) - cpu
        out["dashboard, document cached"] = dashboard(c, pid)[0]
        out["ranking after the write"] = timed(lambda: c.get(f"/projects/{pid}/ranking"))
        added = add_1000(c, pid, rng)
        cpu = server_cpu(server)
        out["reliability after 1,000 added"] = timed(lambda: c.get(f"/projects/{pid}/reliability"))
        out["  its server CPU (added)"] = server_cpu(server) - cpu
        correct_added(c, pid, added)
        cpu = server_cpu(server)
        out["reliability, the added corrected"] = timed(lambda: c.get(f"/projects/{pid}/reliability"))
        out["  its server CPU (late corrections)"] = server_cpu(server) - cpu
        write_1000(c, pid, judge, rng)
        out["dashboard after 1,000 labels"], out["  it showed an older document"] = dashboard(c, pid)
        out["  then until the page is fresh"] = until_fresh(c, pid)
        if not reads_only:
            out["report json"] = timed(lambda: c.get(f"/projects/{pid}/report"))
            out["report html"] = timed(lambda: c.get(f"/projects/{pid}/report", params={"format": "html"}))
            out["plan creation"] = timed(lambda: c.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9}))
            batch = {"rater": "h0", "size": 50}
            out["batch"] = timed(lambda: c.post(f"/projects/{pid}/batches", json=batch))
        out["worker RSS (MiB)"], out["  its peak (MiB)"] = server_rss(server)
    return out


def run(
    url: str,
    label: str,
    sizes: tuple[int, int],
    overlap: float,
    *,
    fixture: str | None = None,
    reads_only: bool = False,
    save_fixture_to: str | None = None,
) -> None:
    results = []
    for n in sizes:
        big = n == sizes[1]
        with tempfile.TemporaryDirectory() as tmp:
            at = url
            if big and fixture:  # a copy of a project built before (bench/million.py's build), not the original
                at = f"sqlite:///{tmp}/fixture.db"
                shutil.copy(fixture, at.removeprefix("sqlite:///"))
            migrate(at)
            save = (at.removeprefix("sqlite:///"), save_fixture_to) if big and save_fixture_to and not fixture else None
            # on PostgreSQL the api runs no jobs: a job worker beside it replays the dashboard's history
            with LiveServer(at, KEY) as server, LiveWorker(at) if at.startswith("postgresql") else nullcontext():
                results.append(
                    figures(server, n, overlap, fixture=fixture if big else None, reads_only=reads_only, save=save)
                )
        if url.startswith("postgresql"):
            wipe_postgres(url)
    small, big_figures = results
    print(f"[{label}] {sizes[1]:,} items vs {sizes[0]:,} (seconds; x = ratio to the same run's /healthz p50)")
    floor = big_figures["healthz p50"]
    for name in small:
        if name not in big_figures:
            continue
        if name.startswith("  it showed"):
            print(
                f"  {name:34s} {'yes' if big_figures[name] else 'no':>8s}   at {sizes[0]:,}: "
                f"{'yes' if small[name] else 'no'}"
            )
            continue
        if "MiB" in name:
            ratio = big_figures[name] / small[name]
            print(f"  {name:34s} {big_figures[name]:8.0f}   at {sizes[0]:,}: {small[name]:7.0f}  ({ratio:.2f}x)")
            continue
        if "CPU" in name:
            ratio = big_figures[name] / small[name] if small[name] else float("nan")
            print(f"  {name:34s} {big_figures[name]:8.3f}   at {sizes[0]:,}: {small[name]:7.3f}  ({ratio:.2f}x)")
            continue
        extra = "" if name == "build (s)" else f"  ({big_figures[name] / floor:,.1f}x /healthz)"
        print(f"  {name:34s} {big_figures[name]:8.3f}   at {sizes[0]:,}: {small[name]:7.3f}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--overlap", type=float, default=1 / SECONDARIES)
    parser.add_argument("--postgres", help="also on this (empty) PostgreSQL database")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument(
        "--fixture",
        help="a SQLite file built by this script's build (with .pid and .judge.npy "
        "beside it) to copy for the large size instead of building it through HTTP",
    )
    parser.add_argument("--save-fixture", help="SQLite: save the large project as built (for --fixture) at this path")
    parser.add_argument("--reads-only", action="store_true", help="documents and dashboard, no report or plan")
    args = parser.parse_args()
    sizes = (args.small, args.items)
    if not args.skip_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            run(
                f"sqlite:///{tmp}/bench.db",
                "SQLite",
                sizes,
                args.overlap,
                fixture=args.fixture,
                reads_only=args.reads_only,
                save_fixture_to=args.save_fixture,
            )
    if args.postgres:
        wipe_postgres(args.postgres)
        run(args.postgres, "PostgreSQL", sizes, args.overlap, reads_only=args.reads_only)


if __name__ == "__main__":
    main()
