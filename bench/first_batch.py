"""A secondary's first batch under a sequential design, in process, on ``bench/scale_writes.py``'s
1M project (issue 20: every batch request p99 <= 50 ms, the first ones included).

Reads a database that ``bench/scale_writes.py`` filled (its projects stay after a run: a SQLite file
or PostgreSQL database of your own). Per round and secondary, inside a transaction that is rolled
back: its list and batches dropped, then ``issue_batch`` for it as its first batch (the list drawn
from the worker's kept modal strata, the assignments read and the list stored); and the kept modal
strata brought up to date after ``--primary-labels`` new labels of the primary on items it had not
labeled (written in the same transaction). Prints the CPU (``time.process_time``: this process; on
PostgreSQL not its backend) and wall medians and maxima, with ``--reference DIR`` beside an older
tree's code in a child process in the same run.

    .venv/bin/python bench/first_batch.py --url URL [--project 'scale 1000000'] [--reference DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from sqlalchemy import delete, select, update

BENCH = Path(__file__).resolve().parent
# bench/service.py would shadow the service package; the tree whose code runs comes first on PYTHONPATH
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH] + [str(BENCH.parent)]

from bench.reference_tree import add_reference_options, reference_figures  # noqa: E402
from service.core.db import make_engine  # noqa: E402
from service.data.keys import Principal, Role  # noqa: E402
from service.data.labels import write_labels  # noqa: E402
from service.data.models import Assignment, Batch, CurrentLabel, Item, Project, Rater  # noqa: E402
from service.documents.sessions import worker_sessionmaker  # noqa: E402
from service.matrices.modal_strata import _updated, modal_in_hand  # noqa: E402
from service.planning.batches import issue_batch  # noqa: E402
from service.schemas.batches import BatchCreate  # noqa: E402

URL_ENV = "ANNOPLAN_FIRST_BATCH_URL"  # the child (reference) process reads the parent's options here
ADMIN = Principal("bench", Role.ADMIN, None, None)


def first_batches() -> dict[str, list[float]]:
    """Medians and maxima of CPU and wall ms: secondaries' first batches; the strata update."""
    url, name, rounds, primary_labels = os.environ[URL_ENV].split("|")
    sessions = worker_sessionmaker(make_engine(url))
    with sessions() as s:
        project = s.scalar(select(Project).where(Project.name == name))
        assert project is not None, f"no project {name!r}: run bench/scale_writes.py on this database first"
        pid = project.id
        modal_in_hand(s, project, project.criteria[0])  # the warmer's work, before the requests
        secondaries = s.execute(
            select(Rater.id, Rater.external_id).where(Rater.project_id == pid, Rater.kind == "human").order_by(Rater.id)
        ).all()
        primary = s.scalar(select(Rater.id).where(Rater.project_id == pid, Rater.kind == "primary"))
        unlabeled = s.scalars(
            select(Item.external_id)
            .where(
                Item.project_id == pid,
                ~select(CurrentLabel.item_id)
                .where(CurrentLabel.item_id == Item.id, CurrentLabel.rater_id == primary)
                .exists(),
            )
            .limit(int(primary_labels))
        ).all()
        primary_ext = s.scalar(select(Rater.external_id).where(Rater.id == primary))
    batch, strata = [], []
    for _ in range(int(rounds)):
        for rid, ext in secondaries:
            with sessions() as s:
                project = s.get(Project, pid)
                assert project is not None
                s.execute(update(Assignment).where(Assignment.rater_id == rid).values(batch_id=None))
                s.execute(delete(Batch).where(Batch.rater_id == rid))
                s.execute(delete(Assignment).where(Assignment.rater_id == rid))
                s.flush()
                c0, t0 = time.process_time(), time.perf_counter()
                issue_batch(s, project, ADMIN, BatchCreate(rater=ext, size=2), lease_seconds=600, max_size=500)
                batch.append((time.process_time() - c0, time.perf_counter() - t0))
                s.rollback()
        with sessions() as s:
            project = s.get(Project, pid)
            assert project is not None
            kept = modal_in_hand(s, project, project.criteria[0])
            rows = [{"item": i, "rater": primary_ext, "value": project.labels[k % 2]} for k, i in enumerate(unlabeled)]
            write_labels(s, project, ADMIN, rows)  # type: ignore[arg-type]
            s.flush()
            project = s.get(Project, pid, populate_existing=True)
            assert project is not None
            c0, t0 = time.process_time(), time.perf_counter()
            _updated(s, project, project.criteria[0], kept)
            strata.append((time.process_time() - c0, time.perf_counter() - t0))
            s.rollback()
    out = {}
    for label, series in [("first batch", batch), (f"strata after {len(unlabeled)} primary labels", strata)]:
        cpu, wall = [c * 1e3 for c, _ in series], [w * 1e3 for _, w in series]
        out[label] = [statistics.median(cpu), max(cpu), statistics.median(wall), max(wall)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="the database bench/scale_writes.py filled")
    parser.add_argument("--project", default="scale 1000000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--primary-labels", type=int, default=2000)
    add_reference_options(parser)
    args = parser.parse_args()
    if not args.url:  # `make bench` runs every script: this one needs a database filled beforehand
        print("first_batch: skipped, needs --url: a database bench/scale_writes.py filled")
        return
    if not args.as_reference:
        os.environ[URL_ENV] = "|".join([args.url, args.project, str(args.rounds), str(args.primary_labels)])
    reference = reference_figures(__file__, args, first_batches)
    figures = first_batches()
    print(f"{args.project}, in process, ms: CPU median / max, wall median / max")
    for label, (cpu, cpu_max, wall, wall_max) in figures.items():
        line = f"  {label:<32s} CPU {cpu:6.1f} / {cpu_max:6.1f}  wall {wall:6.1f} / {wall_max:6.1f}"
        if reference is not None:
            old = reference[label]
            line += f"   reference CPU {old[0]:6.1f} / {old[1]:6.1f}  wall {old[2]:6.1f} / {old[3]:6.1f}"
            line += f": CPU {cpu / old[0]:4.2f}x, wall {wall / old[2]:4.2f}x"
        print(line)


if __name__ == "__main__":
    main()
