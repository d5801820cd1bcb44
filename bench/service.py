"""Service latency under a realistic project (issue 6, Performance).

Starts the real service (uvicorn, ``tests/live_server.py``) on a fresh SQLite file — and on
PostgreSQL with ``--postgres URL`` (its public schema is wiped) — and builds one project:
100,000 items, 10 raters (judge, primary, 8 secondaries), judge and primary labels for every
item (binary, symmetric noise channel: p_j = .90, p_h = .85), and a certification plan from
those priors. Then it prints, next to the same run's ``/healthz`` latency as a floor:

- batch requests (several hundred, round-robin over the 8 secondaries): p50 / p99;
  the primary's first batch is shown on its own (its list is read through a cursor, never built);
- cached reliability GET (the document already computed): p50 / p99, full body and 304;
- a 1,000-label write (125 items x 8 secondaries) and the time from its start to the first
  reliability GET that includes it: a fresh document computed with the server's
  ``bootstrap_resamples`` (default 1,000).

Targets: batch p99 <= 50 ms, cached reliability p99 <= 20 ms, fresh document <= 1 s.
``/healthz`` is also timed between the measured requests, so a busy machine shows in the floor.
``--profile`` then times the parts of the reliability document and of a batch request
in this process, on the same database, to show where the time goes.

    .venv/bin/python bench/service.py [--postgres URL] [--items 100000] [--profile]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.core.db import make_engine
from tests.live_server import LiveServer, migrate, wipe_postgres

KEY = "ak_bench_admin"
LABELS = ["pass", "fail"]
SECONDARIES = [f"h{k}" for k in range(1, 9)]
P_H, P_J = 0.85, 0.90


def ms(seconds: list[float] | np.ndarray, q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1e3, q))


def timed(call: Callable[[], httpx.Response], expect: int = 200) -> float:
    t0 = time.perf_counter()
    r = call()
    dt = time.perf_counter() - t0
    if r.status_code != expect:
        raise RuntimeError(f"{r.status_code}: {r.text[:300]}")
    return dt


def noisy(rng: np.random.Generator, truth: np.ndarray, accuracy: float) -> np.ndarray:
    return np.where(rng.random(truth.size) < accuracy, truth, 1 - truth)


def build_project(c: httpx.Client, n_items: int, rng: np.random.Generator) -> tuple[str, np.ndarray]:
    """The project of the module docstring; returns its id and the true labels."""
    t0 = time.perf_counter()
    pid = c.post("/projects", json={"name": "bench", "labels": LABELS}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), *((h, "human") for h in SECONDARIES)]:
        c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"it{i}"} for i in range(n_items)]).raise_for_status()
    truth = (rng.random(n_items) < 0.35).astype(np.int64)
    for ext, accuracy in (("judge", P_J), ("prim", P_H)):
        values = noisy(rng, truth, accuracy)
        rows = [{"item": f"it{i}", "rater": ext, "value": LABELS[v]} for i, v in enumerate(values)]
        c.post(f"/projects/{pid}/labels", json=rows).raise_for_status()
    r = c.post(f"/projects/{pid}/plan", json={"p_h": P_H, "p_j": P_J, "seed": 1})
    r.raise_for_status()
    plan = r.json()
    print(
        f"  setup: {n_items:,} items, {2 * n_items:,} labels, plan m={plan['m']} design={plan['design']} "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    return pid, truth


def run(url: str, n_items: int, n_batches: int, label: str, profile: bool) -> None:
    print(f"[{label}]")
    migrate(url)
    rng = np.random.default_rng(0)
    with LiveServer(url, KEY) as server, server.client() as c:
        pid, truth = build_project(c, n_items, rng)
        health = [timed(lambda: c.get("/healthz")) for _ in range(200)]
        floor = ms(health, 50)
        print(f"  /healthz (floor)               p50 {floor:7.1f} ms   p99 {ms(health, 99):7.1f} ms")

        first_primary = timed(lambda: c.post(f"/projects/{pid}/batches", json={"rater": "prim", "size": 10}))
        primary = [
            timed(lambda: c.post(f"/projects/{pid}/batches", json={"rater": "prim", "size": 10})) for _ in range(20)
        ]
        times, floor_during = [], []  # /healthz interleaved: the floor at the same moments
        for k in range(n_batches):
            body = {"rater": SECONDARIES[k % len(SECONDARIES)], "size": 2}
            times.append(timed(lambda body=body: c.post(f"/projects/{pid}/batches", json=body)))
            floor_during.append(timed(lambda: c.get("/healthz")))
        print(
            f"  batch, {n_batches} over 8 raters     p50 {ms(times, 50):7.1f} ms   p99 {ms(times, 99):7.1f} ms"
            f"   (target p99 <= 50 ms; /healthz meanwhile p50 {ms(floor_during, 50):.1f}, "
            f"p99 {ms(floor_during, 99):.1f} ms)"
        )
        print(
            f"  batch, primary (all labeled)   p50 {ms(primary, 50):7.1f} ms   p99 {ms(primary, 99):7.1f} ms"
            f"   first: {first_primary * 1e3:.0f} ms"
        )

        path = f"/projects/{pid}/reliability"
        first_doc = timed(lambda: c.get(path))
        etag = c.get(path).headers["etag"]
        cached, not_modified, floor_during = [], [], []
        for _ in range(200):
            cached.append(timed(lambda: c.get(path)))
            not_modified.append(timed(lambda: c.get(path, headers={"If-None-Match": etag}), 304))
            floor_during.append(timed(lambda: c.get("/healthz")))
        print(
            f"  reliability, cached body       p50 {ms(cached, 50):7.1f} ms   p99 {ms(cached, 99):7.1f} ms"
            f"   (target p99 <= 20 ms; /healthz meanwhile p50 {ms(floor_during, 50):.1f}, "
            f"p99 {ms(floor_during, 99):.1f} ms)"
        )
        print(
            f"  reliability, 304               p50 {ms(not_modified, 50):7.1f} ms   "
            f"p99 {ms(not_modified, 99):7.1f} ms"
            f"   (first document, before human overlap: {first_doc:.2f} s)"
        )

        for round_ in range(3):
            start = round_ * 125
            chunk = range(start, start + 125)
            rows = [
                {"item": f"it{i}", "rater": h, "value": LABELS[v]}
                for h in SECONDARIES
                for i, v in zip(chunk, noisy(rng, truth[start : start + 125], P_H), strict=True)
            ]
            t0 = time.perf_counter()
            w = c.post(f"/projects/{pid}/labels", json=rows)
            w.raise_for_status()
            write = time.perf_counter() - t0
            stale = 0  # GETs answered from before the write (must stay 0: commits precede responses)
            while c.get(path).json()["label_seq"] < w.json()["label_seq"]:
                stale += 1
            total = time.perf_counter() - t0
            print(
                f"  1,000-label write {write * 1e3:6.0f} ms, fresh document at {total:5.2f} s   "
                f"(target <= 1 s; {125 * (round_ + 1)} overlap items; {stale} stale GETs first)"
            )
        rows = [{"item": f"it{i}", "rater": "h1", "value": LABELS[1 - truth[i]]} for i in range(1000)]
        c.post(f"/projects/{pid}/labels", json=rows).raise_for_status()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: server.client().get(path).raise_for_status(), range(4)))
        print(
            f"  4 dashboards polling at once after a write: all answered in {time.perf_counter() - t0:.2f} s "
            "(one computes the document, the others wait for it)"
        )
        if profile:
            profile_parts(url, pid)


def profile_parts(url: str, pid: str) -> None:
    """Time the parts of the reliability document and of a batch request in-process."""
    from sqlalchemy import func, select

    from planner.decision import validate_judge
    from planner.patterns import item_patterns
    from planner.rater_pairs import summary_table
    from service.core.db import session_scope
    from service.data.models import Assignment, CurrentLabel, Project, Rater
    from service.documents.reliability import _recipe_now, plan_progress, reliability_document
    from service.documents.sessions import worker_sessionmaker
    from service.matrices.matrix import load_matrix
    from service.planning.plans import current_plan
    from service.schemas.projects import DecisionSettings

    engine = make_engine(url)
    factory = worker_sessionmaker(engine)
    with session_scope(factory) as s:
        project = s.get(Project, pid)
        decision = DecisionSettings(**project.decision)
        parts: dict[str, float] = {}

        def clock(name: str, f: Callable[[], object]) -> object:
            t0 = time.perf_counter()
            out = f()
            parts[name] = time.perf_counter() - t0
            return out

        m = clock("load_matrix", lambda: load_matrix(s, project, project.criteria[0]))
        judges, humans = m.columns("judge"), m.columns("primary", "human")
        codes = clock("matrix.codes", lambda: m.codes)
        clock(
            "validate_judge",
            lambda: validate_judge(
                codes, judge=judges[0], humans=humans, n_labels=m.n_labels, n_resamples=1000, rng=project.label_seq
            ),
        )
        clock(
            "summary_table",
            lambda: summary_table(
                codes[:, humans], n_labels=m.n_labels, scale=project.scale, n_resamples=1000, rng=project.label_seq
            ),
        )
        patterns = clock("item_patterns", lambda: item_patterns(codes, m.n_labels))
        clock("recipe_now", lambda: _recipe_now(patterns, judges[0], humans, decision, 0, 200))
        clock("plan_progress", lambda: plan_progress(s, project, current_plan(s, pid)))
        clock("whole document", lambda: reliability_document(s, project, project.criteria[0], n_resamples=1000))
        print("  profile, reliability document: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in parts.items()))

        parts.clear()
        prim = s.scalar(select(Rater.id).where(Rater.project_id == pid, Rater.kind == "primary"))
        labeled = (
            select(CurrentLabel.item_id)
            .where(CurrentLabel.rater_id == Assignment.rater_id, CurrentLabel.item_id == Assignment.item_id)
            .exists()
        )
        clock("count rows held", lambda: s.scalar(select(func.count()).where(Assignment.rater_id == prim)))
        clock("count rows open", lambda: s.scalar(select(func.count()).where(Assignment.rater_id == prim, ~labeled)))
        print("  profile, primary batch queries: " + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in parts.items()))
    engine.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--postgres", help="PostgreSQL URL (its public schema is wiped)")
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=400, help="batch requests over the secondaries")
    ap.add_argument("--profile", action="store_true", help="time the parts in-process afterwards")
    ap.add_argument("--skip-sqlite", action="store_true")
    ap.add_argument("--sqlite-path", help="keep the SQLite database at this (new) path instead of a temporary file")
    args = ap.parse_args()
    if args.sqlite_path:
        run(f"sqlite:///{Path(args.sqlite_path).resolve()}", args.items, args.batches, "sqlite", args.profile)
    elif not args.skip_sqlite:
        with tempfile.TemporaryDirectory() as tmp:
            run(f"sqlite:///{tmp}/bench.db", args.items, args.batches, "sqlite", args.profile)
    if args.postgres:
        wipe_postgres(args.postgres)
        run(args.postgres, args.items, args.batches, "postgresql", args.profile)
    print("targets: batch p99 <= 50 ms; cached reliability p99 <= 20 ms; fresh document <= 1 s")


if __name__ == "__main__":
    main()
