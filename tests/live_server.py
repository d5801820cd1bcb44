"""A real annoplan server in a subprocess (uvicorn), for concurrency, crash and soak tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Self

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
# How long a server may take to answer /healthz after start: generous by default, since a
# loaded 2-core machine can take tens of seconds to import the app; override from the environment.
START_DEADLINE_S = float(os.environ.get("ANNOPLAN_TEST_START_DEADLINE", "120"))


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class InThreadApp:
    """An ASGI app (a stand-in for a tool we call out to) served by uvicorn on loopback in a daemon
    thread; ``url`` is its base URL, ``port`` its port. Use as a context manager."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))

    def __enter__(self) -> Self:
        threading.Thread(target=self.server.run, daemon=True).start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, f"the stand-in at {self.url} did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True


class LiveServer:
    """``uvicorn service.app:create_app`` on ``database_url`` (already migrated), on loopback,
    with ``workers`` processes.

    Use as a context manager; ``kill()`` sends SIGKILL (a crash), ``start()`` starts again
    on the same port and database.
    """

    def __init__(
        self, database_url: str, admin_key: str, *, workers: int = 1, as_deployed: bool = False, **settings: object
    ):
        """``as_deployed``: start it as ``annoplan serve`` does (``python -m service``: its uvicorn options,
        host, port and workers from the environment) instead of with this harness's uvicorn command line."""
        self.database_url = database_url
        self.as_deployed = as_deployed
        self.workers = workers
        self.admin_key = admin_key
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "ANNOPLAN_DATABASE_URL": database_url,
            "ANNOPLAN_ADMIN_KEY": admin_key,
            **{f"ANNOPLAN_{k.upper()}": str(v) for k, v in settings.items()},
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LiveServer:
        env = self.env
        if self.as_deployed:
            command = [sys.executable, "-m", "service"]
            env = {**env, "ANNOPLAN_HOST": "127.0.0.1", "ANNOPLAN_PORT": str(self.port)}
            env["ANNOPLAN_WORKERS"] = str(self.workers)
        else:
            command = [
                sys.executable,
                "-m",
                "uvicorn",
                "service.app:create_app",
                "--factory",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--no-server-header",
                "--log-level",
                "warning",
                *(["--workers", str(self.workers)] if self.workers > 1 else []),
            ]
        self.proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL if self.as_deployed else None
        )
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"annoplan server did not start within {START_DEADLINE_S:.0f} s")

    def client(self, key: str | None = None, **kwargs: object) -> httpx.Client:
        """An HTTP client of this server authenticated with ``key`` (default: admin)."""
        return httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {key or self.admin_key}"},
            **{"timeout": 60, **kwargs},
        )

    def kill(self) -> None:
        """SIGKILL: the server dies with no chance to clean up."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LiveWorker:
    """``python -m service worker`` on ``database_url`` in a process group of its own (standing for a host).

    ``kill()`` sends SIGKILL to the whole group (the worker and its pool: a host lost), ``stop()``
    SIGTERM to the worker (a clean stop).
    """

    def __init__(self, database_url: str, **settings: object) -> None:
        self.env = {
            **os.environ,
            "ANNOPLAN_DATABASE_URL": database_url,
            **{f"ANNOPLAN_{k.upper()}": str(v) for k, v in settings.items()},
        }
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> LiveWorker:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service", "worker"], cwd=ROOT, env=self.env, start_new_session=True
        )
        return self

    def kill(self) -> None:
        """SIGKILL to the worker's process group: nothing in it cleans up."""
        if self.proc is not None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self.proc = None

    def __enter__(self) -> LiveWorker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def migrate(database_url: str) -> None:
    """Bring the database at ``database_url`` to the head migration (as ``annoplan migrate`` does)."""
    subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "ANNOPLAN_DATABASE_URL": database_url},
    )


def wipe_postgres(database_url: str) -> None:
    """Drop everything in the database's public schema (benchmarks start from nothing)."""
    from sqlalchemy import text

    from service.core.db import make_engine

    engine = make_engine(database_url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
