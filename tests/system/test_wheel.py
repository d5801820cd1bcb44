"""The built wheel is a working annoplan on its own: installed outside the repository, it migrates
a new database, makes and lists keys, and serves plans.

A copy of the source tree (without virtualenvs, build leftovers or databases) is built with
``pip wheel`` and installed into a fresh virtualenv in a temporary directory; every command then
runs there, with no ``PYTHONPATH``, so nothing can come from the checkout. The dependencies are
made visible to the new virtualenv from the running one (a ``.pth`` line) to save reinstalling
numpy and scipy; ``ANNOPLAN_WHEEL_TEST_FULL=1`` installs them from the index instead, which
also proves the wheel's declared dependencies are enough.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory

from migrations import alembic_config
from tests.conftest import ROOT
from tests.live_server import START_DEADLINE_S, free_port

# What never belongs in a build: local environments, caches, build output, data.
JUNK = (
    ".git",
    ".venv*",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    ".hypothesis",
    ".label-studio",
    "*.db",
    "*.db-*",
    "*.db.matrices",
    "out",
)
ADMIN_KEY = "ak_wheel_test_admin_key"
SQL_HEAD = (
    "import sqlite3, sys; "
    "print(sqlite3.connect(sys.argv[1]).execute('select version_num from alembic_version').fetchone()[0])"
)
FULL = os.environ.get("ANNOPLAN_WHEEL_TEST_FULL") == "1"


def _run(args: list[str | Path], *, timeout: float = 300, **kwargs: object) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{args}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    return str(done.stdout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a clean copy of the checkout."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*JUNK))
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", base / "dist", source])
    (built,) = (base / "dist").glob("annoplan-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv outside the repository with the wheel installed; its bin directory."""
    env_dir = tmp_path_factory.mktemp("venv") / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", env_dir])
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--quiet"]
    if FULL:
        _run([*pip, wheel], timeout=900)
    else:
        site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip())
        ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
        (site / "annoplan_test_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
        _run([*pip, "--no-deps", wheel])
    return env_dir / "bin"


def test_the_wheel_holds_every_package_and_its_data(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for tree in ("planner", "service", "migrations"):
        for path in (ROOT / tree).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                relative = path.relative_to(ROOT).as_posix()
                assert relative in names, f"{relative} is missing from {wheel.name}"
    assert not any(n.startswith(("tests/", "bench/", "docs/")) for n in names)


def test_an_installed_wheel_migrates_serves_and_plans(venv: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "elsewhere"  # not the repository: nothing can be imported from the checkout
    run_dir.mkdir()
    database = tmp_path / "data" / "annoplan.db"
    database.parent.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANNOPLAN_", "PYTHON"))}
    env |= {"ANNOPLAN_DATABASE_URL": f"sqlite:///{database}", "ANNOPLAN_ADMIN_KEY": ADMIN_KEY}

    where = _run(
        [venv / "python", "-c", "import service, migrations; print(service.__file__, migrations.__file__)"],
        cwd=run_dir,
        env=env,
    )
    assert all(Path(p).is_relative_to(venv.parent) for p in where.split()), where

    _run([venv / "annoplan", "migrate"], cwd=run_dir, env=env)
    head = _run(
        [venv / "python", "-c", SQL_HEAD, database],
        cwd=run_dir,
        env=env,
    )
    assert head.strip() == ScriptDirectory.from_config(alembic_config()).get_current_head()
    secret = _run([venv / "annoplan", "keys", "create", "--role", "admin", "--name", "wheel"], cwd=run_dir, env=env)
    assert "wheel" in _run([venv / "annoplan", "keys", "list"], cwd=run_dir, env=env)

    port = free_port()
    env |= {"ANNOPLAN_HOST": "127.0.0.1", "ANNOPLAN_PORT": str(port)}
    log = (tmp_path / "serve.log").open("w+")
    server = subprocess.Popen([venv / "annoplan", "serve"], cwd=run_dir, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            assert server.poll() is None, _log(log)
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, _log(log)
            time.sleep(0.2)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret.strip()}"}, timeout=60) as c:
            assert c.get("/static/dashboard.js").status_code == 200  # package data is served
            assert c.get("/docs").status_code == 200
            glossary = c.get("/glossary")  # docs/glossary.md, shipped as package data
            assert glossary.status_code == 200 and '<li id="omega">' in glossary.text
            pid = _created(c.post("/projects", json={"name": "wheel", "labels": ["ok", "toxic"]}))["id"]
            _created(c.post(f"/projects/{pid}/items", json=[{"external_id": f"q{i}"} for i in range(400)]))
            for name, kind in (("judge", "judge"), ("ann-1", "primary"), ("ann-2", "human"), ("ann-3", "human")):
                _created(c.post(f"/projects/{pid}/raters", json={"external_id": name, "kind": kind}))
            plan = _created(c.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9}))
            assert isinstance(plan["m"], int) and 0 < plan["m"] <= 400, plan
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _created(response: httpx.Response) -> dict[str, object]:
    assert response.status_code in (200, 201), f"{response.request.method} {response.request.url}: {response.text}"
    body = response.json()
    assert isinstance(body, dict)
    return body


def _log(log: object) -> str:
    assert hasattr(log, "seek") and hasattr(log, "read")
    log.seek(0)
    return "annoplan serve said:\n" + str(log.read())[-3000:]
