"""PostgreSQL's planner statistics of the large tables brought up to date as soon as a bulk write ends.

After an import of hundreds of thousands of labels, PostgreSQL plans queries with the statistics of
the rows before it until autovacuum's next round (it looks once a minute): a rater whose labels all
arrived since looks as if it had none, and the batch queries' "not labeled yet" anti-joins then read
all of that rater's labels for each candidate item, seconds instead of milliseconds (docs/operations.md).
Each PostgreSQL worker runs a :class:`StatisticsKeeper`; one of them per round for the whole deployment
(a periodic turn of the job queue, :func:`service.data.jobs.claim_period`, which also carries what
the last round saw) analyzes such a table once the writes to it pause: ANALYZE reads a fixed sample
of rows (a fraction of a second at millions of rows), so it is due after a fixed number of rows
written, not a fraction of the table (autovacuum's rule, under which one rater's 100,000 new labels in
a table of 3 million would stay unseen)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import Engine, text

from service.core.background import PollingThread
from service.core.db import make_sessionmaker
from service.data import jobs

TABLES = ("label_events", "current_labels", "items")
"""The tables that grow with a project's size."""
MIN_ROWS = 10_000
"""Rows written since a table's last analysis that make its statistics stale (fewer are left to autovacuum)."""
MAX_WAIT_SECONDS = 30.0
"""How long a stale table waits for its writes to pause before it is analyzed anyway."""
POLL_SECONDS = 2.0
TURN = "table-statistics"
"""The periodic task's name on the job queue."""

log = logging.getLogger("annoplan.table_statistics")


@dataclass(frozen=True)
class Staleness:
    """A table's rows written since its last analysis, and since when it has been stale (Unix s)."""

    modified: int
    since: float


def tables_to_analyze(
    modified: dict[str, int], stale: dict[str, Staleness], now: float
) -> tuple[list[str], dict[str, Staleness]]:
    """The tables to analyze now and the stale ones left waiting, from each table's rows written since
    its last analysis and the stale tables of the previous round: a stale table is analyzed once a round
    finds no new writes to it, or after ``MAX_WAIT_SECONDS`` of writes."""
    due, waiting = [], {}
    for table, rows in modified.items():
        if rows < MIN_ROWS:
            continue
        before = stale.get(table)
        if before is not None and (before.modified == rows or now - before.since >= MAX_WAIT_SECONDS):
            due.append(table)
        else:
            waiting[table] = Staleness(rows, before.since if before else now)
    return due, waiting


class StatisticsKeeper(PollingThread):
    """A PostgreSQL worker's thread analyzing :data:`TABLES` whose statistics a bulk write made stale."""

    thread_name = "annoplan-table-statistics"

    def __init__(self, engine: Engine, *, poll_seconds: float = POLL_SECONDS) -> None:
        super().__init__(poll_seconds=poll_seconds, stop_seconds=10.0, log=log)
        self.engine = engine
        self.sessions = make_sessionmaker(engine)
        self.owner = jobs.worker_name("table-statistics")

    def modified(self) -> dict[str, int]:
        """Each table's rows written since its last analysis, as PostgreSQL's statistics count them (a
        connection reports its writes within seconds of its transaction)."""
        names = ", ".join(f"to_regclass('{table}')" for table in TABLES)
        with self.engine.connect() as conn:
            rows = conn.execute(
                text(f"SELECT relname, n_mod_since_analyze FROM pg_stat_user_tables WHERE relid IN ({names})")
            ).all()
        return {name: int(count) for name, count in rows}

    def run_once(self) -> list[str]:
        """On this process's turn of the round, analyze the tables due (:func:`tables_to_analyze`); their names."""
        turn = jobs.claim_period(
            self.sessions, TURN, period_seconds=self.poll_seconds, owner=self.owner, lease_seconds=60.0
        )
        if turn is None:
            return []
        before = {table: Staleness(*seen) for table, seen in turn.payload.get("stale", {}).items()}
        due: list[str] = []
        stale = before
        try:
            due, stale = tables_to_analyze(self.modified(), before, time.time())
            if due:
                # Outside a transaction: each table is analyzed in its own, holding one table's lock at a time.
                with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                    for table in due:
                        conn.execute(text(f"ANALYZE {table}"))
                log.info("analyzed %s after a bulk write", ", ".join(due))
        finally:
            payload = {"stale": {table: [s.modified, s.since] for table, s in stale.items()}}
            jobs.end_period(self.sessions, turn, payload=payload)
        return due
