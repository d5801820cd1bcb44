"""Fair sharing (issue 30): project B's ``POST /batches`` latency alone, then while project A floods the server.

Starts the real service (uvicorn, ``tests/live_server.py``) on a fresh SQLite file, or with ``--postgres URL``
on that PostgreSQL database (wiped first). Project A (``--items-a`` items) and project B (``--items-b``) each
get a judge, the primary and two humans labelling every item, a plan, and an annotator key for one human.
B's annotator then asks for ``--requests`` batches of 5 items one after the other (each released at once,
unmeasured) alone (the baseline) and as many while ``--flood`` threads of A's pm keep asking for plans with
a new seed each (every one a fresh computation; past ``ANNOPLAN_PLANS_PER_PROJECT`` a 429, after which the
thread asks again in ``--retry`` s, ignoring ``Retry-After``) and ``--flood-labels`` more threads keep writing
A's labels (1,000 per request), all in a process of their own so that they do not share the measuring
client's interpreter. The two phases alternate in ``--rounds`` rounds (the flood paused, then on): on a shared
machine a baseline measured once, before the flood, met other load than the flood did, and its p99 (the third
slowest of 300) moved with it, so the ratio held in one run of three. A baseline starts once none of A's plan
requests is in flight (one begun at most 2 s after the flood paused met A's last plans still computing on a
loaded machine: its p50 5x and its p99 2x those of a drained one); a flooded phase ``--settle`` s after the
flood's first plan request. ``--plans-share N`` gives project A and its key N plans in flight at once
(ANNOPLAN_PLANS_PER_PROJECT and _PER_KEY; the service's 2 when absent): at the flood's size it is the service
without fair sharing of plans.
Printed: B's p50 / p99 in both phases and their ratios (the goal: p99 within 3x of the baseline), A's answers
by status, the seconds the measured phases took and the load average.

    .venv/bin/python bench/fairness.py [--requests 300] [--flood 12] [--retry 0.05] [--flood-labels 0]
        [--rounds 10] [--settle 0.5] [--items-a 20000] [--items-b 400] [--workers 1] [--plans-share N]
        [--postgres URL]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer, migrate, wipe_postgres  # noqa: E402

KEY = "ak_bench_fairness_admin"
PANEL = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
PLAN = {"p_h": 0.85, "p_j": 0.9, "design": "strat", "m": 60}


def build(c: httpx.Client, name: str, n_items: int, seed: int) -> tuple[str, str]:
    """A labelled, planned project of ``n_items``; its id and an annotator key of its human ``h2``."""
    pid = c.post("/projects", json={"name": name, "labels": ["pass", "fail"], "order_seed": seed}).json()["id"]
    for ext, kind in PANEL:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [f"i{i}" for i in range(n_items)]
    for start in range(0, n_items, 10_000):
        chunk = [{"external_id": i} for i in items[start : start + 10_000]]
        assert c.post(f"/projects/{pid}/items", json=chunk).status_code == 200
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < 0.7
    rows = [
        {"item": item, "rater": ext, "value": "pass" if truth[k] != (rng.random() < 0.1) else "fail"}
        for ext in ("judge", "prim")
        for k, item in enumerate(items)
    ]
    for start in range(0, len(rows), 50_000):
        assert c.post(f"/projects/{pid}/labels", json=rows[start : start + 50_000]).status_code == 200
    assert c.post(f"/projects/{pid}/plan", json={**PLAN, "seed": seed}).status_code == 201
    key = c.post(f"/projects/{pid}/keys", json={"role": "annotator", "rater": "h2"}).json()["key"]
    return pid, key


def batch_latencies(base: str, pid: str, key: str, n: int) -> list[float]:
    """Wall seconds of ``n`` sequential ``POST /batches`` (each batch released right after, unmeasured)."""
    out = []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.post(f"/projects/{pid}/batches", json={"size": 5})
            out.append(time.perf_counter() - t0)
            assert r.status_code == 200, r.text
            if r.json()["id"]:
                c.post(f"/projects/{pid}/batches/{r.json()['id']}/release")
    return out


def flood(
    base: str,
    pid: str,
    on: Event,
    stop: Event,
    retry: float,
    seeds: Iterator[int],
    statuses: list[int],
    in_flight: Synchronized[int],
) -> None:
    """A's pm asking for fresh plans while ``on``, until ``stop``; after a 429, again in ``retry`` s (not
    Retry-After's). ``in_flight`` counts the flood's plan requests sent and not yet answered."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as c:
        while not stop.is_set():
            if not on.wait(0.1):
                continue
            with in_flight.get_lock():
                in_flight.value += 1
            try:
                r = c.post(f"/projects/{pid}/plan", json={**PLAN, "seed": next(seeds)})
            finally:
                with in_flight.get_lock():
                    in_flight.value -= 1
            statuses.append(r.status_code)
            if r.status_code == 429:
                time.sleep(retry)


def flood_process(
    base: str,
    pid: str,
    n_items: int,
    plans: int,
    labels: int,
    retry: float,
    on: Event,
    stop: Event,
    answers: Queue,
    in_flight: Synchronized[int],
) -> None:
    """The flood's threads, in a process of their own: the client measuring B keeps its own interpreter."""
    seeds = itertools.count(1000)
    statuses: tuple[list[int], list[int]] = ([], [])
    threads = [
        threading.Thread(target=flood, args=(base, pid, on, stop, retry, seeds, statuses[0], in_flight))
        for _ in range(plans)
    ]
    threads += [
        threading.Thread(target=label_flood, args=(base, pid, n_items, on, stop, statuses[1])) for _ in range(labels)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    answers.put(statuses)


def label_flood(base: str, pid: str, n_items: int, on: Event, stop: Event, statuses: list[int]) -> None:
    """A's pm rewriting 1,000 labels of its human ``h3`` per request (alternating values) while ``on``,
    until ``stop``."""
    k = 0
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as c:
        while not stop.is_set():
            if not on.wait(0.1):
                continue
            value = "pass" if (k // max(n_items // 1000, 1)) % 2 else "fail"
            start = (k * 1000) % n_items
            rows = [{"item": f"i{i}", "rater": "h3", "value": value} for i in range(start, min(start + 1000, n_items))]
            statuses.append(c.post(f"/projects/{pid}/labels", json=rows).status_code)
            k += 1


def quantiles(seconds: list[float]) -> tuple[float, float]:
    ms = np.asarray(seconds) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=10, help="alternations of the two phases")
    parser.add_argument("--settle", type=float, default=0.5, help="seconds from the flood's start to measuring")
    parser.add_argument("--flood", type=int, default=12)
    parser.add_argument("--flood-labels", type=int, default=0)
    parser.add_argument(
        "--retry", type=float, default=0.05, help="seconds a refused flood thread waits (Retry-After: 5)"
    )
    parser.add_argument("--items-a", type=int, default=20_000)
    parser.add_argument("--items-b", type=int, default=400)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--plans-share", type=int, help="plans project A and its key may have in flight at once")
    parser.add_argument("--postgres", help="a PostgreSQL URL (its public schema is wiped)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.postgres or f"sqlite:///{Path(tmp) / 'fairness.db'}"
        if args.postgres:
            wipe_postgres(url)
        migrate(url)
        share = {} if args.plans_share is None else {"plans_per_project": args.plans_share}
        if args.plans_share is not None:
            share["plans_per_key"] = args.plans_share
        with LiveServer(url, KEY, workers=args.workers, **share) as server:
            with server.client(timeout=600) as c:
                pid_a, _ = build(c, "A", args.items_a, 1)
                pid_b, key_b = build(c, "B", args.items_b, 2)
            batch_latencies(server.base_url, pid_b, key_b, 20)  # warm: B's matrix and lists in the worker
            spawn = multiprocessing.get_context("spawn")
            on, stop, answers, in_flight = spawn.Event(), spawn.Event(), spawn.Queue(), spawn.Value("i", 0)
            flooder = spawn.Process(
                target=flood_process,
                args=(
                    server.base_url,
                    pid_a,
                    args.items_a,
                    args.flood,
                    args.flood_labels,
                    args.retry,
                    on,
                    stop,
                    answers,
                    in_flight,
                ),
            )
            flooder.start()
            alone: list[float] = []
            flooded: list[float] = []
            per_round = max(args.requests // args.rounds, 1)
            started = time.monotonic()
            for _ in range(args.rounds):
                on.clear()
                while in_flight.value:  # the plans in flight done
                    time.sleep(0.02)
                alone += batch_latencies(server.base_url, pid_b, key_b, per_round)
                on.set()
                while not in_flight.value:  # the flood asking
                    time.sleep(0.02)
                time.sleep(args.settle)  # the flood under way
                flooded += batch_latencies(server.base_url, pid_b, key_b, per_round)
            measured = time.monotonic() - started
            load = os.getloadavg()[0]
            stop.set()
            plans, writes = answers.get()
            flooder.join()
    (a50, a99), (f50, f99) = quantiles(alone), quantiles(flooded)
    print(f"database: {'PostgreSQL' if args.postgres else 'SQLite'}, workers {args.workers}, {os.cpu_count()} cores")
    print(f"B POST /batches alone:       p50 {a50:7.1f} ms  p99 {a99:7.1f} ms  ({len(alone)} requests)")
    print(f"B POST /batches under flood: p50 {f50:7.1f} ms  p99 {f99:7.1f} ms")
    print(f"ratio under flood / alone:   p50 {f50 / a50:5.2f}x   p99 {f99 / a99:5.2f}x   (goal: p99 <= 3x)")
    print(f"A's plans: {dict(collections.Counter(plans))}; A's label writes: {dict(collections.Counter(writes))}")
    print(f"plans in flight per project and key: {args.plans_share or 'the service default'}")
    print(f"measured phases: {measured:.1f} s; load average (1 min) at the end of the flood: {load:.1f}")


if __name__ == "__main__":
    main()
