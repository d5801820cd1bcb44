"""CPU of one label write in process: ``write_labels`` of 100,000 new labels (a new rater on the first
100,000 items of the database's largest project), rolled back, repeated; the server's CPU (this
process) and the PostgreSQL backend's (/proc), so two schemas or trees can be compared on one copy.

    PYTHONPATH=. .venv/bin/python bench/label_write_cpu.py postgresql+psycopg://...  [--repeat 3]

Run it with one tree, migrate the database (``alembic downgrade/upgrade``), run it with the other:
the figures of one run sit side by side, whatever the machine's load does to the wall clock.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from sqlalchemy import select, text
from sqlalchemy.orm import Session

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.core.db import make_engine
from service.data.keys import Principal
from service.data.labels import write_labels
from service.data.models import Item, Project, Rater
from service.schemas.keys import Role

ROWS = 100_000


def backend_cpu(pid: int) -> float:
    """CPU seconds the PostgreSQL backend ``pid`` has run (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("url", nargs="?", help="a PostgreSQL URL whose largest project has at least 100,000 items")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not args.url:  # `make bench` runs every script: this one needs a database filled beforehand
        print("label_write_cpu: skipped, needs a PostgreSQL URL whose largest project has 100,000 items")
        return
    engine = make_engine(args.url)
    with Session(engine) as s:
        project = max(s.scalars(select(Project)), key=lambda p: p.item_count)
        items = s.scalars(
            select(Item.external_id).where(Item.project_id == project.id).order_by(Item.id).limit(ROWS)
        ).all()
    admin = Principal(key_id="bench", role=Role.ADMIN, project_id=None, rater_id=None)
    print(f"{project.id}: {project.item_count:,} items, label_seq {project.label_seq:,}")
    for _ in range(args.repeat):
        with Session(engine) as s:
            rater = Rater(project_id=project.id, external_id=f"bench-{time.time_ns()}", kind="human")
            s.add(rater)
            s.flush()
            rows = [
                {"item": e, "rater": rater.external_id, "value": project.labels[0] if k % 3 else project.labels[-1]}
                for k, e in enumerate(items)
            ]
            pid = s.execute(text("SELECT pg_backend_pid()")).scalar_one()
            b0, c0, t0 = backend_cpu(pid), time.process_time(), time.perf_counter()
            written = write_labels(s, s.get_one(Project, project.id), admin, rows).accepted
            b1, c1, t1 = backend_cpu(pid), time.process_time(), time.perf_counter()
            s.rollback()
        print(
            f"  {written:,} labels: server CPU {c1 - c0:.2f} s, database backend CPU {b1 - b0:.2f} s, "
            f"wall {t1 - t0:.2f} s (load average {os.getloadavg()[0]:.1f})",
            flush=True,
        )


if __name__ == "__main__":
    main()
