"""A starting worker's first label matrix, with and without a snapshot (issue 20).

In process, on a project of ``--items`` items built by ``bench/million.py``'s ``build`` (a judge
and the primary on every item, 8 secondaries on 1/8 each; ``--db`` takes a copy of a database
built so, with its ``.pid`` and ``.judge.npy`` files beside it) and on one of ``--small`` items
(default 10,000) built in the same run:

- the full read of a worker that has no matrix (every current label, as without snapshots);
- saving a snapshot of that matrix (its size on disk);
- after a write of 1,000 labels through the service: the kept matrix brought up to date (the
  delta path of a running worker), and a new worker's first matrix from the snapshot plus the
  1,000 events after it (checked equal to the kept one).

Each figure is printed next to the same figure at ``--small`` items (the ratio).

    .venv/bin/python bench/matrix_start.py [--db /path/copy-of-1M.db | --items N] [--small 10000]
        [--postgres URL]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import million  # noqa: E402

from service.core.db import make_engine, session_scope  # noqa: E402
from service.data.models import Project  # noqa: E402
from service.documents.sessions import worker_sessionmaker  # noqa: E402
from service.matrices.matrix import LabelMatrix  # noqa: E402
from service.matrices.snapshots import history_mark, write_snapshot  # noqa: E402
from service.matrices.store import MatrixStore  # noqa: E402
from tests.live_server import LiveServer, migrate, wipe_postgres  # noqa: E402


def built(url: str, n_items: int) -> tuple[str, np.ndarray]:
    """A fresh project of ``n_items`` items on ``url`` (through HTTP) and its judge's labels."""
    migrate(url)
    with LiveServer(url, million.KEY) as server, server.client() as c:
        c.timeout = 3600
        return million.build(c, n_items, 1 / million.SECONDARIES, np.random.default_rng(n_items))


def figures(url: str, pid: str, judge: np.ndarray, snapshots: Path) -> dict[str, float]:
    engine = make_engine(url)
    sessions = worker_sessionmaker(engine)
    out: dict[str, float] = {}

    def first(store: MatrixStore, name: str) -> LabelMatrix:
        with session_scope(sessions) as session:
            project = session.get(Project, pid)
            assert project is not None
            t0 = time.perf_counter()
            matrix = store.matrix(session, project, "default")
            out[name] = time.perf_counter() - t0
        return matrix

    running = MatrixStore()
    matrix = first(running, "full read (no snapshot)")
    with session_scope(sessions) as session:
        project = session.get(Project, pid)
        assert project is not None
        mark = history_mark(session, project, matrix.label_seq)
    t0 = time.perf_counter()
    write_snapshot(snapshots, pid, matrix, ("pass", "fail"), mark)
    out["save a snapshot"] = time.perf_counter() - t0
    out["snapshot size (MB)"] = sum(p.stat().st_size for p in (snapshots / pid).iterdir()) / 1e6
    with LiveServer(url, million.KEY) as server, server.client() as c:
        million.write_1000(c, pid, judge, np.random.default_rng(1))
    kept = first(running, "kept matrix after 1,000 labels")
    started = first(MatrixStore(snapshots=snapshots), "new worker: snapshot + 1,000 events")
    for a, b in [(kept.raw, started.raw), (kept.order, started.order), (kept.item_ids, started.item_ids)]:
        np.testing.assert_array_equal(a, b)
    assert kept.label_seq == started.label_seq and kept.raters == started.raters
    engine.dispose()
    return out


def run(label: str, small: dict[str, float], big: dict[str, float], sizes: tuple[int, int]) -> None:
    print(f"[{label}] first label matrix at {sizes[1]:,} items vs {sizes[0]:,} (seconds; x = ratio to {sizes[0]:,})")
    for name in big:
        print(f"  {name:38s} {big[name]:8.3f}   at {sizes[0]:,}: {small[name]:7.3f}  ({big[name] / small[name]:,.1f}x)")
    print(
        f"  full read / snapshot start at {sizes[1]:,}: "
        f"{big['full read (no snapshot)'] / big['new worker: snapshot + 1,000 events']:,.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a SQLite database built by million.build (copied, not written)")
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--postgres", help="on this (empty) PostgreSQL database instead of SQLite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.postgres:
            wipe_postgres(args.postgres)
            urls = (args.postgres, args.postgres)
        else:
            urls = (f"sqlite:///{root}/small.db", f"sqlite:///{root}/big.db")
        small = built(urls[0], args.small)
        if args.db and not args.postgres:
            for suffix in ("", "-wal"):
                if Path(f"{args.db}{suffix}").exists():
                    shutil.copyfile(f"{args.db}{suffix}", f"{root}/big.db{suffix}")
            big = (Path(f"{args.db}.pid").read_text().strip(), np.load(f"{args.db}.judge.npy"))
            migrate(urls[1])
            n_items = int(np.load(f"{args.db}.judge.npy").size)
        else:
            big = built(urls[1], args.items)
            n_items = args.items
        projects = zip(urls, (small, big), strict=True)
        results = [figures(url, *project, root / f"snapshots-{k}") for k, (url, project) in enumerate(projects)]
        run("PostgreSQL" if args.postgres else "SQLite", *results, (args.small, n_items))


if __name__ == "__main__":
    main()
