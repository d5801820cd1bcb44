"""Engine and session factory: SQLite (WAL, foreign keys, busy timeout) or PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext

import anyio
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

# Execution option marking a unit of work that will write: on SQLite it takes the write lock
# at BEGIN, so concurrent writers queue on the busy timeout instead of failing mid-transaction.
WRITE_OPTION = "annoplan_write"


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite connections get WAL, foreign keys and a busy timeout."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    # Pools cover the server's worker threads, so no request ever waits for a connection
    # while another holds a lock it needs.
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=40)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=10, max_overflow=60)

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        # Let SQLAlchemy issue BEGIN itself so that BEGIN IMMEDIATE takes the write lock up front.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    # SQLite allows one writer at a time. Writers of this process queue on a lock that hands
    # over at once, rather than on SQLite's busy handler, which polls with growing sleeps.
    writer = threading.Lock()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn) -> None:  # type: ignore[no-untyped-def]
        if not conn.get_execution_options().get(WRITE_OPTION):
            conn.exec_driver_sql("BEGIN")
            return
        writer.acquire()
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            writer.release()
            raise
        conn.info["holds_writer_lock"] = True

    @event.listens_for(engine, "commit")
    @event.listens_for(engine, "rollback")
    def _sqlite_end(conn) -> None:  # type: ignore[no-untyped-def]
        if conn.info.pop("holds_writer_lock", False):
            writer.release()

    return engine


def writer_turn(engine: Engine) -> AbstractAsyncContextManager[object]:
    """What a request that loads its project for writing holds until its route returns: on SQLite
    a FIFO lock of the event loop, one such writer per process at a time; nothing on PostgreSQL
    (row locks order its writers).

    A request waits for it without holding a pool thread; waiting on the engine's writer lock
    instead would hold one, and enough waiters would take every thread the lock's holder needs
    to finish its request (a deadlock).
    """
    return anyio.Lock() if engine.dialect.name == "sqlite" else nullcontext()


def make_sessionmaker(engine: Engine, info: dict[str, object] | None = None) -> sessionmaker[Session]:
    """Sessions that keep loaded objects usable after commit, carrying ``info`` (a worker's caches:
    ``service.documents.sessions``)."""
    return sessionmaker(engine, expire_on_commit=False, info=info or {})


@contextmanager
def session_scope(factory: sessionmaker[Session], *, write: bool = False) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error.

    A write unit begins (and on SQLite takes the write lock) at its first statement, not
    before, so the lock is held only while the work runs.
    """
    bind = factory.kw["bind"]
    with factory(bind=bind.execution_options(**{WRITE_OPTION: True})) if write else factory() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
