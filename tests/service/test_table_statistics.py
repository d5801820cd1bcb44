"""The label tables' planner statistics on PostgreSQL, brought up to date once a bulk write pauses
(``service.data.table_statistics``): without it a rater whose labels all arrived since the last analysis
looks label-less to the planner, and its batch queries read all its labels per item for a minute."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text, update

from service.data import table_statistics
from service.data.models import Job, utcnow
from service.data.table_statistics import MAX_WAIT_SECONDS, MIN_ROWS, Staleness, StatisticsKeeper, tables_to_analyze
from tests.conftest import PG_URL


def test_a_table_is_analyzed_once_its_writes_pause() -> None:
    due, stale = tables_to_analyze({"label_events": MIN_ROWS, "items": MIN_ROWS - 1}, {}, now=0.0)
    assert due == [] and stale == {"label_events": Staleness(MIN_ROWS, 0.0)}  # items: too few, left to autovacuum
    due, stale = tables_to_analyze({"label_events": 3 * MIN_ROWS}, stale, now=2.0)
    assert due == [] and stale == {"label_events": Staleness(3 * MIN_ROWS, 0.0)}  # still written: wait, since 0
    due, stale = tables_to_analyze({"label_events": 3 * MIN_ROWS}, stale, now=4.0)
    assert due == ["label_events"] and stale == {}


def test_a_table_written_without_pause_is_analyzed_after_the_longest_wait() -> None:
    stale = {"current_labels": Staleness(MIN_ROWS, 0.0)}
    due, stale = tables_to_analyze({"current_labels": 2 * MIN_ROWS}, stale, now=MAX_WAIT_SECONDS - 1)
    assert due == []
    due, stale = tables_to_analyze({"current_labels": 3 * MIN_ROWS}, stale, now=MAX_WAIT_SECONDS)
    assert due == ["current_labels"] and stale == {}


def last_analyzed(engine: Engine, table: str) -> datetime | None:
    with engine.connect() as conn:
        return conn.scalar(
            text("SELECT last_analyze FROM pg_stat_user_tables WHERE relid = to_regclass(:t)"), {"t": table}
        )


@pytest.mark.skipif(not PG_URL, reason="PostgreSQL's planner statistics")
def test_the_server_analyzes_the_label_tables_after_a_bulk_write(
    client: TestClient, project: dict, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_statistics, "MIN_ROWS", 10)  # the fixture's 40 labels make a bulk write
    with engine.connect() as conn:
        start = conn.scalar(text("SELECT now()"))
    rows = [{"item": f"i{i}", "rater": rater, "value": "pass"} for i in range(20) for rater in ("judge", "prim")]
    assert client.post(f"/projects/{project['id']}/labels", json=rows).status_code == 200
    deadline = time.monotonic() + 60  # writes are reported within ~10 s, then a round without writes (slow under load)
    while time.monotonic() < deadline:
        analyzed = {t: last_analyzed(engine, t) for t in ("label_events", "current_labels")}
        if all(at is not None and at >= start for at in analyzed.values()):
            return
        time.sleep(0.5)
    pytest.fail(f"the label tables were not analyzed after the write: last analyzed {analyzed}")


def test_keepers_of_several_processes_take_one_turn_per_round_and_share_what_they_saw(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32: three keepers (three processes) look three times in one round: one reads the
    statistics; the next round's keeper, another one, carries on from what it saw (the table
    is analyzed once its writes paused, as a single keeper would)."""
    keepers = [StatisticsKeeper(engine, poll_seconds=3600) for _ in range(3)]
    reads: list[int] = []
    for k, keeper in enumerate(keepers):
        monkeypatch.setattr(keeper, "modified", lambda k=k: reads.append(k) or {"label_events": 3 * MIN_ROWS})
    analyzed = [keeper.run_once() for _ in range(3) for keeper in keepers]
    assert len(reads) == 1 and analyzed == [[]] * 9  # one turn in the round: the table stale, waiting
    with engine.begin() as conn:  # the round over
        conn.execute(update(Job).where(Job.key == table_statistics.TURN).values(run_after=utcnow()))
    first = reads[0]
    other = keepers[(first + 1) % 3]
    assert other.run_once() == ["label_events"]  # no new writes since the other keeper's round
    assert len(reads) == 2 and reads[1] != first
