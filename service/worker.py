"""A job worker process (``annoplan worker``, ``python -m service worker``): runs the job queue's
simulations, webhook deliveries (with the watchers' turns before each round of them), dashboard
history replays and periodic turns (label-matrix snapshots, pool-score history points, on PostgreSQL table
statistics) until SIGTERM or SIGINT; it serves no requests (docs/operations.md). ``--check`` is its
container's healthcheck."""

from __future__ import annotations

import signal
import socket
import threading
from pathlib import Path
from types import FrameType

from service.core.db import make_engine, make_sessionmaker, session_scope
from service.core.settings import Settings, get_settings
from service.data.jobs import live_on_host, worker_name
from service.data.table_statistics import StatisticsKeeper
from service.documents.history_keeper import HistoryKeeper
from service.documents.history_replays import HistoryReplayer
from service.documents.reliability import DocumentCache
from service.documents.sessions import worker_sessionmaker
from service.matrices.snapshot_keeper import SnapshotKeeper
from service.matrices.snapshots import snapshot_place
from service.matrices.store import MatrixStore
from service.simulations.jobs import SimulationRunner
from service.webhooks.sender import WebhookSender


def run_worker(settings: Settings | None = None, *, stop: threading.Event | None = None) -> None:
    """Claim and run jobs until SIGTERM/SIGINT (or ``stop``), then give the jobs in flight back to the queue."""
    settings = settings or get_settings()
    stop = stop or threading.Event()

    def ask_to_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, ask_to_stop)
        signal.signal(signal.SIGINT, ask_to_stop)
    engine = make_engine(settings.database_url)
    snapshots = snapshot_place(settings.database_url, settings.matrix_snapshot_dir)
    matrices = MatrixStore(snapshots=snapshots, snapshot_min_cells=settings.matrix_snapshot_min_cells)
    sessions = worker_sessionmaker(engine, matrices)
    runner = SimulationRunner(sessions, settings, owner=worker_name("worker"))
    documents = DocumentCache()
    sender = WebhookSender(sessions, settings, documents) if settings.webhook_sender else None
    statistics = StatisticsKeeper(engine) if engine.dialect.name == "postgresql" else None
    snapshotter = SnapshotKeeper(
        sessions, matrices, poll_seconds=settings.matrix_snapshot_seconds, min_cells=settings.matrix_snapshot_min_cells
    )
    replayer = HistoryReplayer(sessions, settings, owner=runner.owner)
    historian = HistoryKeeper(sessions, poll_seconds=settings.history_point_seconds)
    print(f"annoplan: job worker {runner.owner} running simulations ({runner.slots} at once)", flush=True)
    runner.start()
    for thread in (sender, statistics, replayer, historian, snapshotter if snapshots is not None else None):
        if thread is not None:
            thread.start()
    try:
        stop.wait()
    finally:
        for thread in (snapshotter, historian, replayer, statistics, sender):
            if thread is not None:
                thread.stop()
        documents.close()
        runner.stop()
        matrices.flush()
        engine.dispose()


def check_worker(settings: Settings | None = None) -> int:
    """Exit status of the worker's healthcheck: 0 when a job worker of this host has a heartbeat within its
    lease (it renews it every third of ``ANNOPLAN_JOB_LEASE_SECONDS``), 1 when none has or the database
    does not answer."""
    settings = settings or get_settings()
    host = socket.gethostname()
    if settings.database_url.startswith("sqlite:///") and not Path(settings.database_url[10:]).exists():
        print(f"annoplan: no database at {settings.database_url[10:]}", flush=True)  # and none created
        return 1
    engine = make_engine(settings.database_url)
    try:
        with session_scope(make_sessionmaker(engine)) as session:
            live = live_on_host(session, host)
    except Exception as error:  # any database failure is an unhealthy worker, said in one line
        print(f"annoplan: cannot read the job queue: {type(error).__name__}", flush=True)
        return 1
    finally:
        engine.dispose()
    if not live:
        print(f"annoplan: no live job worker on {host}", flush=True)
        return 1
    print(f"annoplan: job worker {', '.join(live)} live", flush=True)
    return 0
