"""Issue 32: the row job queue (service/data/jobs.py) on SQLite and PostgreSQL.

Claims, leases, a takeover once a lease runs out, attempts and backoff are checked against the
rows read behind the queue's back; claimers racing on engines of their own (separate pools,
so separate SQLite writer locks too) never both get one job.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from service.core.db import make_engine, make_sessionmaker, session_scope
from service.data import jobs
from service.data.models import Job, utcnow


def queued(engine, n: int, kind: str = "test", max_attempts: int = 3) -> list[int]:
    with Session(engine) as session, session.begin():
        return [jobs.enqueue(session, kind, f"k{i}", {"i": i}, max_attempts=max_attempts).id for i in range(n)]


def row(engine, job_id: int) -> Job:
    with Session(engine, expire_on_commit=False) as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def expire(engine, job_id: int) -> None:
    """The lease ran out (the holder died): as if ``lease_until`` were a second ago."""
    with Session(engine) as session, session.begin():
        session.execute(update(Job).where(Job.id == job_id).values(lease_until=utcnow() - timedelta(seconds=1)))


def test_a_claim_leases_a_due_job_once_and_counts_an_attempt(engine):
    sessions = make_sessionmaker(engine)
    (job_id,) = queued(engine, 1)
    (held,) = jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30)
    assert (held.id, held.key, held.payload, held.attempts, held.exhausted) == (job_id, "k0", {"i": 0}, 1, False)
    stored = row(engine, job_id)
    assert stored.state == "running" and stored.lease_owner == "w1" and stored.lease_token == held.token
    assert timedelta(seconds=29) < stored.lease_until - utcnow() <= timedelta(seconds=30)
    # held: nobody else gets it, nor does another kind's claimer see it
    assert jobs.claim(sessions, ["test"], owner="w2", lease_seconds=30) == []
    assert jobs.claim(sessions, ["other"], owner="w2", lease_seconds=30) == []
    with session_scope(sessions, write=True) as session:
        assert jobs.finish(session, held, result={"ok": 1})
    stored = row(engine, job_id)
    assert stored.state == "done" and stored.result == {"ok": 1} and stored.lease_token is None
    assert stored.finished_at is not None
    assert jobs.claim(sessions, ["test"], owner="w2", lease_seconds=30) == []


def test_a_job_not_due_yet_waits(engine):
    sessions = make_sessionmaker(engine)
    with Session(engine) as session, session.begin():
        jobs.enqueue(session, "test", "later", {}, run_after=utcnow() + timedelta(seconds=60))
    assert jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30) == []


def test_an_expired_lease_is_taken_over_and_the_old_holder_is_fenced(engine):
    sessions = make_sessionmaker(engine)
    (job_id,) = queued(engine, 1)
    (first,) = jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30)
    assert jobs.renew(sessions, [first], lease_seconds=30) == {job_id}
    expire(engine, job_id)
    (second,) = jobs.claim(sessions, ["test"], owner="w2", lease_seconds=30)
    assert second.id == job_id and second.attempts == 2 and second.token != first.token
    assert row(engine, job_id).lease_owner == "w2"
    # the first holder comes back: its renewal and its outcome change nothing
    assert jobs.renew(sessions, [first], lease_seconds=30) == set()
    with session_scope(sessions, write=True) as session:
        assert not jobs.finish(session, first, result={"from": "w1"})
        assert not jobs.fail(session, first, "w1 failed")
        assert session.scalar(select(jobs.held("test", "k0", first.token))) is False
        assert session.scalar(select(jobs.held("test", "k0", second.token))) is True
    assert row(engine, job_id).state == "running"
    with session_scope(sessions, write=True) as session:
        assert jobs.finish(session, second, result={"from": "w2"})
    assert row(engine, job_id).result == {"from": "w2"}


def test_a_job_whose_workers_keep_dying_is_failed_after_its_attempts(engine):
    sessions = make_sessionmaker(engine)
    (job_id,) = queued(engine, 1, max_attempts=2)
    seen = []
    for attempt in (1, 2):
        (held,) = jobs.claim(sessions, ["test"], owner=f"w{attempt}", lease_seconds=30)
        assert held.attempts == attempt
        expire(engine, job_id)
    (spent,) = jobs.claim(
        sessions, ["test"], owner="w3", lease_seconds=30, on_exhausted=lambda s, js: seen.extend(j.key for j in js)
    )
    assert spent.exhausted and spent.attempts == 2 and seen == ["k0"]
    stored = row(engine, job_id)
    assert stored.state == "failed" and stored.error == jobs.EXHAUSTED_ERROR.format(attempts=2)
    assert stored.lease_token is None
    assert jobs.claim(sessions, ["test"], owner="w3", lease_seconds=30) == []


def test_a_failure_that_may_pass_is_retried_after_a_backoff_then_failed(engine):
    sessions = make_sessionmaker(engine)
    (job_id,) = queued(engine, 1, max_attempts=2)
    (held,) = jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30)
    before = utcnow()
    with session_scope(sessions, write=True) as session:
        assert jobs.retry_or_fail(session, held, "pool died", base=10, cap=100) == "queued"
    stored = row(engine, job_id)
    assert stored.state == "queued" and stored.error == "pool died" and stored.lease_token is None
    assert timedelta(seconds=9.9) < stored.run_after - before < timedelta(seconds=11)
    assert jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30) == []  # backing off
    with Session(engine) as session, session.begin():
        session.execute(update(Job).where(Job.id == job_id).values(run_after=utcnow()))
    (again,) = jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30)
    assert again.attempts == 2
    with session_scope(sessions, write=True) as session:
        assert jobs.retry_or_fail(session, again, "pool died again", base=10, cap=100) == "failed"
        assert jobs.retry_or_fail(session, again, "too late", base=10, cap=100) is None
    assert row(engine, job_id).state == "failed"


def test_backoff_doubles_from_its_base_up_to_its_cap():
    # hand-computed: 5, 10, 20, 40, then the cap of 60
    assert [jobs.backoff_seconds(a, base=5, cap=60) for a in range(1, 7)] == [5, 10, 20, 40, 60, 60]


@given(st.integers(min_value=1, max_value=10_000), st.floats(0.01, 100), st.floats(0.01, 10_000))
def test_backoff_never_shrinks_and_stays_within_its_cap(attempts, base, cap):
    now, after = (
        jobs.backoff_seconds(attempts, base=base, cap=cap),
        jobs.backoff_seconds(attempts + 1, base=base, cap=cap),
    )
    assert 0 < now <= after <= max(cap, base) and now <= cap


def test_a_release_gives_the_job_back_without_spending_an_attempt(engine):
    sessions = make_sessionmaker(engine)
    (job_id,) = queued(engine, 1)
    (held,) = jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30)
    with session_scope(sessions, write=True) as session:
        assert jobs.release(session, held)
    stored = row(engine, job_id)
    assert stored.state == "queued" and stored.attempts == 0
    assert jobs.claim(sessions, ["test"], owner="w2", lease_seconds=30)[0].attempts == 1


def test_a_cancel_fails_the_job_whoever_holds_it(engine):
    sessions = make_sessionmaker(engine)
    first, second = queued(engine, 2)
    held = jobs.claim(sessions, ["test"], owner="w1", lease_seconds=30, limit=1)[0]
    with session_scope(sessions, write=True) as session:
        assert jobs.cancel(session, "test", "k0", "cancelled")
        assert jobs.cancel(session, "test", "k1", "cancelled")
        assert not jobs.cancel(session, "test", "k1", "cancelled")
    assert jobs.renew(sessions, [held], lease_seconds=30) == set()
    assert {row(engine, i).state for i in (first, second)} == {"failed"}
    assert jobs.claim(sessions, ["test"], owner="w2", lease_seconds=30) == []


def test_claimers_racing_never_both_get_a_job(database_url):
    """Four claimers on engines of their own take 60 jobs one or three at a time: each job once."""
    n_jobs, claimers = 60, 4
    setup = make_engine(database_url)
    queued(setup, n_jobs)
    setup.dispose()
    start = threading.Barrier(claimers)
    got: list[list[int]] = [[] for _ in range(claimers)]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        engine = make_engine(database_url)
        sessions = make_sessionmaker(engine)
        try:
            start.wait()
            while True:
                claimed = jobs.claim(sessions, ["test"], owner=f"w{k}", lease_seconds=60, limit=1 + 2 * (k % 2))
                if not claimed:
                    return
                got[k].extend(c.id for c in claimed)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    counts = Counter(i for ids in got for i in ids)
    assert len(counts) == n_jobs and max(counts.values()) == 1
    assert sum(1 for ids in got if ids) >= 2, "the race never happened: one claimer took everything"


def test_a_periodic_task_takes_one_turn_per_period_and_a_dead_holder_is_taken_over(engine):
    sessions = make_sessionmaker(engine)
    turn = jobs.claim_period(sessions, "tick", period_seconds=60, owner="w1", lease_seconds=30)
    assert turn is not None and turn.attempts == 1
    stored = row(engine, turn.id)
    assert stored.kind == jobs.PERIODIC and stored.state == "running" and stored.lease_owner == "w1"
    assert timedelta(seconds=59) < stored.run_after - utcnow() <= timedelta(seconds=60)
    assert jobs.claim_period(sessions, "tick", period_seconds=60, owner="w2", lease_seconds=30) is None
    assert jobs.end_period(sessions, turn) and row(engine, turn.id).state == "queued"
    assert jobs.claim_period(sessions, "tick", period_seconds=60, owner="w2", lease_seconds=30) is None  # not over
    assert jobs.claim_period(sessions, "other", period_seconds=60, owner="w2", lease_seconds=30) is not None
    with Session(engine) as session, session.begin():  # the period over
        session.execute(update(Job).where(Job.id == turn.id).values(run_after=utcnow()))
    held = jobs.claim_period(sessions, "tick", period_seconds=60, owner="w2", lease_seconds=30)
    assert held is not None and held.attempts == 2
    # w2 dies holding its turn: with the period over, nobody may run it until its lease runs out
    with Session(engine) as session, session.begin():
        session.execute(update(Job).where(Job.id == turn.id).values(run_after=utcnow()))
    assert jobs.claim_period(sessions, "tick", period_seconds=60, owner="w3", lease_seconds=30) is None
    expire(engine, turn.id)
    taken = jobs.claim_period(sessions, "tick", period_seconds=60, owner="w3", lease_seconds=30)
    assert taken is not None and row(engine, turn.id).lease_owner == "w3"
    assert not jobs.end_period(sessions, held)  # the dead holder's hand-back changes nothing


def test_periodic_claimers_racing_take_one_turn_per_period_between_them(database_url):
    """Four processes' claimers for 2.4 s with a 0.4 s period: about 6 turns in all, not 6 each."""
    claimers, period, seconds = 4, 0.4, 2.4
    setup = make_engine(database_url)
    jobs.claim_period(make_sessionmaker(setup), "race", period_seconds=0, owner="setup", lease_seconds=1)
    with Session(setup) as session, session.begin():  # the row exists, its turn handed back and due
        session.execute(update(Job).where(Job.key == "race").values(state="queued", lease_token=None))
    setup.dispose()
    start = threading.Barrier(claimers)
    turns: list[tuple[float, float]] = []  # each turn's claim happened between these two instants
    tries = Counter()
    errors: list[BaseException] = []

    def work(k: int) -> None:
        engine = make_engine(database_url)
        sessions = make_sessionmaker(engine)
        try:
            start.wait()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                tries[k] += 1
                before = time.monotonic()
                turn = jobs.claim_period(sessions, "race", period_seconds=period, owner=f"w{k}", lease_seconds=30)
                if turn is not None:
                    turns.append((before, time.monotonic()))
                    assert jobs.end_period(sessions, turn)
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert sum(tries.values()) > 10 * len(turns), tries  # everyone kept asking
    assert round(seconds / period) - 2 <= len(turns) <= round(seconds / period) + 1, turns
    turns.sort()
    # never two turns in one period: each claim ended at least a period after the one before began
    assert all(later[1] - earlier[0] >= 0.99 * period for earlier, later in zip(turns, turns[1:])), turns
