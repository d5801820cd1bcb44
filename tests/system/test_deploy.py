"""The deployment files say what docs/operations.md promises, checked without Docker (no image can be
pulled here): the Dockerfile builds a wheel and installs it as a non-root user with a healthcheck,
the build context is an allowlist, compose runs PostgreSQL, a one-shot migration that refuses a
placeholder admin key, several API workers and a job worker, each with a healthcheck; the healthcheck
commands and the key check run here as they would in the containers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ADMIN_KEY, ROOT
from tests.live_server import LiveServer, free_port

yaml = pytest.importorskip("yaml")


def stages() -> list[list[tuple[str, str]]]:
    """The Dockerfile's stages, each a list of (INSTRUCTION, arguments) with continuations joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    found: list[list[tuple[str, str]]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        word, _, rest = line.strip().partition(" ")
        if word.upper() == "FROM":
            found.append([])
        assert found, "the Dockerfile starts with FROM"
        found[-1].append((word.upper(), rest.strip()))
    return found


def compose() -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "compose.yaml").read_text())
    assert isinstance(document, dict)
    return document


def test_the_image_installs_the_wheel_as_a_non_root_user_with_a_healthcheck() -> None:
    build, final = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    assert any(i == "RUN" and "pip wheel" in a for i, a in build)
    final_words = [i for i, _ in final]
    assert "COPY" not in final_words, "the final stage copies no source tree"
    (install,) = [a for i, a in final if i == "RUN" and "pip install" in a]
    assert "--no-index" in install and "from=build" in install and " annoplan" in install
    (user,) = [a for i, a in final if i == "USER"]
    assert user not in ("root", "0")
    assert "HEALTHCHECK" in final_words
    (cmd,) = [a for i, a in final if i == "CMD"]
    assert json.loads(cmd) == ["annoplan", "serve"]


def test_the_build_context_is_an_allowlist_of_what_the_build_copies() -> None:
    lines = [x.strip() for x in (ROOT / ".dockerignore").read_text().splitlines()]
    rules = [x for x in lines if x and not x.startswith("#")]
    assert rules[0] == "*", "everything is excluded first: .git, virtualenvs, databases, snapshots"
    allowed = {x[1:].rstrip("/") for x in rules if x.startswith("!")}
    copied = set()
    for instruction, args in stages()[0]:
        if instruction == "COPY":
            copied |= set(args.split()[:-1])
    assert copied and copied <= allowed, copied - allowed
    assert all((ROOT / name).exists() for name in allowed)


def _healthcheck(port: int, *, dockerfile: bool) -> int:
    if dockerfile:
        (check,) = [a for i, a in stages()[-1] if i == "HEALTHCHECK"]
        command = json.loads(check[check.index("CMD") + 3 :].strip())
    else:
        command = compose()["services"]["api"]["healthcheck"]["test"][1:]
        command = [c.replace("127.0.0.1:8000", f"127.0.0.1:{port}") for c in command]
    assert command[0] == "python"
    env = {**os.environ, "ANNOPLAN_PORT": str(port)}
    return subprocess.run([sys.executable, *command[1:]], env=env, capture_output=True, timeout=60).returncode


@pytest.mark.parametrize("dockerfile", [True, False], ids=["Dockerfile", "compose"])
def test_the_healthchecks_pass_on_a_live_server_and_fail_without_one(
    template_url: str, tmp_path: Path, dockerfile: bool
) -> None:
    from tests.conftest import fresh_database

    with LiveServer(fresh_database(template_url, tmp_path), ADMIN_KEY) as server:
        assert _healthcheck(server.port, dockerfile=dockerfile) == 0
    assert _healthcheck(free_port(), dockerfile=dockerfile) != 0


def test_compose_runs_postgres_a_migration_and_several_workers_with_healthchecks() -> None:
    services = compose()["services"]
    assert set(services) >= {"db", "migrate", "api"}
    assert services["db"]["image"].startswith("postgres:") and "healthcheck" in services["db"]
    api = services["api"]
    assert api["depends_on"] == {
        "db": {"condition": "service_healthy"},
        "migrate": {"condition": "service_completed_successfully"},
    }
    workers = re.fullmatch(r"\$\{ANNOPLAN_WORKERS:-(\d+)\}", api["environment"]["ANNOPLAN_WORKERS"])
    assert workers and int(workers.group(1)) > 1
    assert api["environment"]["ANNOPLAN_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert all(p.startswith("127.0.0.1:") for p in api["ports"]), "published on loopback: a proxy serves the rest"
    assert api["restart"] == "unless-stopped" and services["migrate"]["restart"] == "no"
    # the api leaves the job queue to the worker service (PostgreSQL's default), which waits for the schema too
    worker = services["worker"]
    assert worker["command"] == ["python", "-m", "service", "worker"] and worker["depends_on"] == api["depends_on"]
    assert "ANNOPLAN_API_RUNS_JOBS" not in api["environment"] and worker["restart"] == "unless-stopped"
    assert worker["healthcheck"]["test"] == ["CMD", "python", "-m", "service", "worker", "--check"]
    # the matrix snapshots are in the database (PostgreSQL's default), not in a volume every host must mount
    assert all("ANNOPLAN_MATRIX_SNAPSHOT_DIR" not in services[name].get("environment", {}) for name in services)
    # unset or empty: `docker compose` itself refuses (${VAR:?message}), for every service that reads it
    for name in ("migrate", "api", "worker"):
        assert services[name]["environment"]["ANNOPLAN_ADMIN_KEY"].startswith("${ANNOPLAN_ADMIN_KEY:?")


def _key_check(key: str | None) -> subprocess.CompletedProcess[str]:
    """compose's migrate command as its shell runs it ($$ is compose's escape of $), migrating nothing."""
    command = compose()["services"]["migrate"]["command"]
    assert command[:2] == ["sh", "-c"]
    script = command[2].replace("$$", "$").replace("exec annoplan migrate", "echo would migrate")
    env = {k: v for k, v in os.environ.items() if k != "ANNOPLAN_ADMIN_KEY"}
    if key is not None:
        env["ANNOPLAN_ADMIN_KEY"] = key
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    "key", ["change-me-admin-key", "my-admin-key", "placeholder-placeholder-placeholder", "short-but-random-7f3a", ""]
)
def test_compose_refuses_a_placeholder_admin_key(key: str) -> None:
    done = _key_check(key)
    assert done.returncode == 64 and "ANNOPLAN_ADMIN_KEY" in done.stderr and "would migrate" not in done.stdout


def test_compose_migrates_with_a_real_admin_key() -> None:
    done = _key_check("k" + "7f3a9c" * 6)
    assert done.returncode == 0 and done.stdout.strip() == "would migrate", done.stderr


def test_serve_passes_workers_and_trusted_proxies_to_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    import service.__main__ as entry
    from service.core.settings import get_settings

    seen: dict[str, Any] = {}
    monkeypatch.setattr(entry.uvicorn, "run", lambda app, **kw: seen.update(app=app, **kw))
    monkeypatch.setenv("ANNOPLAN_WORKERS", "3")
    monkeypatch.setenv("ANNOPLAN_FORWARDED_ALLOW_IPS", "10.0.0.2")
    get_settings.cache_clear()
    try:
        entry.main()
    finally:
        get_settings.cache_clear()
    assert seen["app"] == "service.app:create_app" and seen["factory"] is True
    assert (seen["workers"], seen["proxy_headers"], seen["forwarded_allow_ips"]) == (3, True, "10.0.0.2")


def test_make_label_studio_listens_on_loopback_only(tmp_path: Path) -> None:
    """Label Studio binds ``--internal-host`` (its default is 0.0.0.0); ``--host`` only names its URL."""
    done = subprocess.run(
        ["make", "-n", "label-studio", f"LS_VENV={tmp_path / 'ls'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    start = re.sub(r"\\\n\s*", " ", done.stdout)
    (command,) = [line for line in start.splitlines() if "label-studio start" in line]
    assert "--internal-host 127.0.0.1" in command
    assert not re.search(r"--host (?!http)", command), "--host takes a URL, and binds nothing"


def _worker_check(database_url: str) -> int:
    """compose's worker healthcheck, run here as the worker's container would run it."""
    command = compose()["services"]["worker"]["healthcheck"]["test"]
    assert command[:2] == ["CMD", "python"]
    env = {**os.environ, "ANNOPLAN_DATABASE_URL": database_url}
    return subprocess.run([sys.executable, *command[2:]], env=env, capture_output=True, timeout=120).returncode


def test_the_worker_healthcheck_passes_while_a_worker_of_its_host_beats(database_url: str) -> None:
    """Not the image's HTTP check (the worker serves nothing): its heartbeat row, live only while it runs,
    and only a worker on this host counts."""
    import threading

    from service.core.db import make_engine, make_sessionmaker
    from service.core.settings import Settings
    from service.data import jobs
    from service.worker import check_worker, run_worker

    settings = Settings(database_url=database_url, admin_key=ADMIN_KEY, webhook_sender=False)
    engine = make_engine(database_url)
    try:
        jobs.beat(make_sessionmaker(engine), "another-host:1:worker", lease_seconds=600)
    finally:
        engine.dispose()
    assert _worker_check(database_url) == 1, "another host's worker is not this container's"
    stop = threading.Event()
    running = threading.Thread(target=run_worker, args=(settings,), kwargs={"stop": stop})
    running.start()
    try:
        deadline = time.monotonic() + 60
        while check_worker(settings) != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _worker_check(database_url) == 0
    finally:
        stop.set()
        running.join(timeout=60)
    assert check_worker(settings) == 1, "a stopped worker removes its heartbeat"
