"""``annoplan serve``, ``worker`` and ``migrate``: run the service on the configured database."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass

from service.cli.common import migrated_engine


def serve() -> None:
    """Migrate the configured database and start the API, and a job worker beside it on PostgreSQL.

    On SQLite (the default) the API process runs the job queue itself; when it does not
    (ANNOPLAN_API_RUNS_JOBS, or PostgreSQL), a worker process is started and stopped with it.
    Example: ANNOPLAN_PORT=9000 annoplan serve
    """
    import signal
    import subprocess

    from service.__main__ import main
    from service.core.settings import api_runs_jobs, get_settings

    migrate()
    beside = None
    if not api_runs_jobs(get_settings()):
        beside = subprocess.Popen([sys.executable, "-m", "service", "worker"])

        # uvicorn stops on SIGTERM, then raises it again under the handler it found: this one, which
        # unwinds to the `finally` below (the default handler would end the process and leave the worker)
        def stopped(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, stopped)
    try:
        main()
    finally:
        if beside is not None:
            beside.terminate()
            try:
                beside.wait(timeout=30)
            except subprocess.TimeoutExpired:
                beside.kill()
                beside.wait()


def worker(
    check: Annotated[
        bool, typer.Option("--check", help="Run nothing: exit 0 when a job worker of this host is live, else 1.")
    ] = False,
) -> None:
    """Run a job worker on the configured database: it claims and runs queued simulations, serves nothing.

    Run one or more beside api processes that leave the queue to workers (docs/operations.md);
    `--check` is a worker container's healthcheck (its heartbeat in the database, within its lease).
    Example: ANNOPLAN_DATABASE_URL=postgresql+psycopg://u:p@db/annoplan annoplan worker
    """
    if check:
        from service.worker import check_worker

        raise typer.Exit(check_worker())
    migrated_engine().dispose()
    from service.worker import run_worker

    run_worker()


def migrate() -> None:
    """Upgrade the configured database (ANNOPLAN_DATABASE_URL) to the newest schema.

    Example: ANNOPLAN_DATABASE_URL=postgresql+psycopg://u:p@localhost/annoplan annoplan migrate
    """
    from alembic import command

    from migrations import alembic_config

    command.upgrade(alembic_config(), "head")
