"""Fixtures: a freshly migrated database per test (SQLite, or PostgreSQL when
``ANNOPLAN_TEST_DATABASE_URL`` is set) and an authenticated client of the real app.

Tests live in three layers, each marked by its folder: ``tests/planner`` (the pure library,
``pytest -m planner`` runs it alone without importing the service), ``tests/service`` (the
app in process) and ``tests/system`` (live servers, browsers, crashes, soaks). The service
imports below are deferred so that the planner layer never pays for them."""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from alembic.config import Config
    from fastapi.testclient import TestClient
    from sqlalchemy import Engine

    from service.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
ADMIN_KEY = "ak_test_admin_key"
PG_URL = os.environ.get("ANNOPLAN_TEST_DATABASE_URL")
if PG_URL:
    # On PostgreSQL api processes leave the job queue to `annoplan worker` processes by default; the
    # tests' apps and live servers run it themselves (tests of the split set it false explicitly).
    os.environ.setdefault("ANNOPLAN_API_RUNS_JOBS", "true")
LAYERS = ("planner", "service", "system")


def pytest_configure(config: pytest.Config) -> None:
    for layer in LAYERS:
        config.addinivalue_line("markers", f"{layer}: a test of the {layer} layer (tests/{layer})")
    config.addinivalue_line(
        "markers",
        "slow: a test that starts servers, browsers or processes (every system test); `make test-fast` skips it",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with the layer its folder names, and every system test slow."""
    for item in items:
        parts = Path(str(item.path)).relative_to(ROOT).parts
        if len(parts) > 2 and parts[0] == "tests" and parts[1] in LAYERS:
            item.add_marker(parts[1])
            if parts[1] == "system" or _starts_a_server(item):
                item.add_marker("slow")


def _starts_a_server(item: pytest.Item) -> bool:
    """Whether the test's own code starts a live server (``tests.live_server.LiveServer``)."""
    function = getattr(item, "function", None)
    try:
        return function is not None and "LiveServer(" in inspect.getsource(function)
    except (OSError, TypeError):
        return False


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` using the project's migrations."""
    from alembic.config import Config

    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", url)
    return cfg


@pytest.fixture(scope="session")
def template_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A database migrated to head once per run (SQLite file template, or the PostgreSQL DB)."""
    from alembic import command

    if PG_URL:
        command.downgrade(alembic_config(PG_URL), "base")
        command.upgrade(alembic_config(PG_URL), "head")
        return PG_URL
    path = tmp_path_factory.mktemp("template") / "template.db"
    url = f"sqlite:///{path}"
    command.upgrade(alembic_config(url), "head")
    return url


def fresh_database(template_url: str, directory: Path) -> str:
    """A fresh, migrated database: PostgreSQL emptied, or a copy of the SQLite template in ``directory``."""
    if PG_URL:
        from sqlalchemy import text

        from service.core.db import make_engine
        from service.data.models import Base

        engine = make_engine(PG_URL)
        tables = ", ".join(t.name for t in Base.metadata.sorted_tables)
        with engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
        engine.dispose()
        return PG_URL
    path = directory / "test.db"
    shutil.copyfile(template_url.removeprefix("sqlite:///"), path)
    return f"sqlite:///{path}"


@pytest.fixture
def database_url(template_url: str, tmp_path: Path) -> str:
    """A fresh, migrated database for one test."""
    return fresh_database(template_url, tmp_path)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """A second engine on the test database, to read rows behind the API's back."""
    from service.core.db import make_engine

    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def settings(database_url: str) -> Settings:
    from service.core.settings import Settings

    # Dashboards wait for the fresh document here; showing an older one meanwhile is tested on its own. The
    # app's history turn waits an hour: a test that needs pool-score points takes the turn itself
    # (tests/service/test_pool_scores.py), so no point lands at a moment the test did not choose.
    return Settings(
        database_url=database_url, admin_key=ADMIN_KEY, dashboard_wait_seconds=60, history_point_seconds=3600
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    """A client of the real app, authenticated as admin."""
    from fastapi.testclient import TestClient

    from service.app import create_app

    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


@pytest.fixture
def project(client: TestClient) -> dict:
    """A binary project with a judge, a primary and two secondary humans, and 20 items."""
    p = client.post("/projects", json={"name": "demo", "labels": ["pass", "fail"]}).json()
    pid = p["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}", "features": {"topic": "a" if i % 2 else "b"}} for i in range(20)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    return p
