"""The outage sweep (issue 30): with the database unreachable, every operation of the OpenAPI document,
called as admin with its example body, answers without a 5xx other than 503, and every 503 carries
``Retry-After``; when the database is back the service answers again by itself."""

from __future__ import annotations

import re
from typing import Any

from fastapi.testclient import TestClient

from service.core.db import make_engine
from service.documents.sessions import worker_sessionmaker
from service.schemas.examples import REQUEST_EXAMPLES

UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:9/annoplan?connect_timeout=2"
"""Nothing listens on port 9 (discard) here: each connection is refused at once."""
NEEDS_NO_DATABASE = {
    ("get", "/livez"),
    ("get", "/login"),
    ("post", "/login"),  # refused for its missing CSRF token before any table is read
    ("post", "/logout"),
    ("get", "/glossary"),  # public, from the packaged docs/glossary.md
}
"""Operations answered without reading a table (as usual during an outage): the rest, the stateless
computations too (their key is looked up), are a 503."""


def _operations(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    spec = client.get("/openapi.json").json()
    return [(method, path, op) for path, ops in spec["paths"].items() for method, op in ops.items()]


def _call(client: TestClient, method: str, path: str, op: dict[str, Any], pid: str) -> Any:
    url = re.sub(r"\{[a-z_]+\}", lambda m: pid if m.group(0) == "{pid}" else "x1", path)
    kw: dict[str, Any] = {}
    if "requestBody" in op:
        kw["json"] = REQUEST_EXAMPLES.get((method, path), {})
    return client.request(method.upper(), url, **kw)


def test_every_operation_is_a_503_with_retry_after_or_unaffected_during_an_outage(
    client: TestClient, project: dict
) -> None:
    app: Any = client.app
    app.state.database.probe_seconds = 0  # /healthz probes at once (2 s after the failure by default)
    operations = _operations(client)
    good = app.state.engine, app.state.sessions
    app.state.engine = make_engine(UNREACHABLE)
    app.state.sessions = worker_sessionmaker(app.state.engine)
    answers: dict[tuple[str, str], Any] = {}
    try:
        for method, path, op in operations:
            answers[(method, path)] = _call(client, method, path, op, project["id"])
    finally:
        app.state.engine.dispose()
        app.state.engine, app.state.sessions = good
    statuses = {key: r.status_code for key, r in answers.items()}
    assert len(statuses) >= 60
    assert [key for key, status in statuses.items() if status >= 500 and status != 503] == []
    unavailable = {key for key, status in statuses.items() if status == 503}
    assert all(int(answers[key].headers["retry-after"]) > 0 for key in unavailable)
    assert unavailable == set(statuses) - NEEDS_NO_DATABASE - {
        key for key in statuses if key[1].startswith(("/docs", "/redoc", "/openapi"))
    }, "an operation that reads the database answered otherwise than 503"
    # back: the project answers again, and healthz says so without any write of ours
    assert client.get(f"/projects/{project['id']}").status_code == 200
    assert client.get("/healthz").json()["database"] == "ok"
