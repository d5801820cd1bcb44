"""Where a worker's resident memory is at a million items (issue 37; docs/operations.md, a worker's memory).

Runs the app in this process (``TestClient``) on a copy of a SQLite project ``bench/million.py --save-fixture``
kept (``--fixture``, its ``.pid`` and ``.judge.npy`` beside it), or on one of ``--items`` built here, and makes
``bench/million.py``'s requests: the first document and dashboard, three rounds of 1,000 labels (corrections,
additions, the additions corrected) with their documents, the dashboard until fresh, the report, a plan and a
batch. Then it prints the process's VmRSS, what it held before reading any project (the interpreter and the
modules), the arrays reachable from the worker's caches (each buffer once) by owner, their sum and the
remainder, and VmRSS after one more ``malloc_trim`` (what the allocator still held free).

    .venv/bin/python bench/worker_memory.py --fixture /tmp/m1/m1.db
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bench.million as million  # noqa: E402
from service.core.allocator import returned_free_pages  # noqa: E402
from tests.live_server import migrate  # noqa: E402

MiB = 2**20


def resident_mib() -> float:
    """This process's VmRSS in MiB."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS"))
    return int(line.split()[1]) / 1024


def owned_arrays(root: object) -> dict[str, int]:
    """Bytes of the arrays reachable from ``root`` by owner (the cache's name and the array's field), each
    buffer counted once (a view is its base's)."""
    out: dict[str, int] = defaultdict(int)
    seen: set[int] = set()
    visited: set[int] = set()
    stack: list[tuple[Any, str, str]] = [(root, "", "")]
    while stack:
        obj, owner, field = stack.pop()
        if id(obj) in visited or isinstance(obj, (str, bytes, int, float, type, type(None))):
            continue
        visited.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            key = id(base if base.base is None else base.base)
            if key not in seen:
                seen.add(key)
                out[f"{owner} :: {field}"] += base.nbytes if base.base is None else obj.nbytes
            continue
        if isinstance(obj, dict):
            items = [(k, v) for k, v in obj.items()]
            for k, v in items:
                stack.append((v, owner or str(k), field if owner else ""))
            continue
        fields = getattr(obj, "__dict__", None)
        if fields is not None:
            for name, value in list(fields.items()):
                stack.append((value, owner, name))
            continue
        for value in gc.get_referents(obj):
            stack.append((value, owner, field))
    return dict(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fixture", help="a SQLite project bench/million.py --save-fixture kept")
    parser.add_argument("--items", type=int, default=10_000, help="without --fixture: build this many items")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        database = f"{tmp}/worker_memory.db"
        if args.fixture:
            shutil.copy(args.fixture, database)
        migrate(f"sqlite:///{database}")
        os.environ["ANNOPLAN_DATABASE_URL"] = f"sqlite:///{database}"
        os.environ["ANNOPLAN_ADMIN_KEY"] = million.KEY
        from fastapi.testclient import TestClient

        from service.app import create_app

        app = create_app()
        with TestClient(app, headers={"Authorization": f"Bearer {million.KEY}"}) as c:
            c.timeout = 3600
            modules = resident_mib()
            rng = np.random.default_rng(args.items)
            if args.fixture:
                pid, judge = Path(args.fixture + ".pid").read_text().strip(), np.load(args.fixture + ".judge.npy")
            else:
                pid, judge = million.build(c, args.items, 1 / million.SECONDARIES, rng)
            c.post(f"/projects/{pid}/raters", json={"external_id": "late", "kind": "human"}).raise_for_status()
            reads = [f"/projects/{pid}/reliability", f"/projects/{pid}/dashboard"]
            for path in reads:
                c.get(path).raise_for_status()
            million.until_replayed(c, pid)
            million.write_1000(c, pid, judge, rng)
            for path in (*reads, f"/projects/{pid}/ranking"):
                c.get(path).raise_for_status()
            added = million.add_1000(c, pid, rng)
            c.get(reads[0]).raise_for_status()
            million.correct_added(c, pid, added)
            c.get(reads[0]).raise_for_status()
            million.write_1000(c, pid, judge, rng)
            million.until_fresh(c, pid)
            c.get(f"/projects/{pid}/report").raise_for_status()
            c.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9}).raise_for_status()
            c.post(f"/projects/{pid}/batches", json={"rater": "h0", "size": 50}).raise_for_status()
            app.state.documents.settle()
            gc.collect()
            rss = resident_mib()
            arrays = owned_arrays(app.state.sessions.kw["info"])
            held = sum(arrays.values()) / MiB
            print(f"worker VmRSS {rss:.1f} MiB; before any project was read {modules:.1f} MiB")
            for owner, size in sorted(arrays.items(), key=lambda kv: -kv[1]):
                print(f"  {size / MiB:8.2f} MiB  {owner}")
            rest = rss - modules - held
            print(f"arrays {held:.1f} MiB; modules + arrays {modules + held:.1f} MiB; the rest {rest:.1f} MiB")
            returned_free_pages()
            print(f"VmRSS after one more malloc_trim {resident_mib():.1f} MiB")


if __name__ == "__main__":
    main()
