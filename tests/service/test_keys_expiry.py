"""API keys that expire (issue 30 item 8): ``expires_at`` on create (REST and CLI), 401 ``key_expired`` from that
moment on, listed by ``GET /keys`` and ``annoplan keys list``, and the last *working* admin key kept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from typer.testing import CliRunner

from service.cli import app
from service.data import keys as keys_module
from service.data.models import ApiKey

runner = CliRunner()


def _later(**delta: float) -> datetime:
    return datetime.now(UTC) + timedelta(**delta)


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def test_a_key_works_until_its_expiry_then_is_401_key_expired(
    client: TestClient, project: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = project["id"]
    expiry = _later(hours=1).replace(microsecond=0)
    made = client.post(f"/projects/{pid}/keys", json={"role": "viewer", "expires_at": expiry.isoformat()})
    assert made.status_code == 201, made.text
    assert datetime.fromisoformat(made.json()["expires_at"]) == expiry
    assert client.get(f"/projects/{pid}/reliability", headers=_bearer(made.json()["key"])).status_code == 200

    # One second past the expiry, as the server's clock sees it.
    monkeypatch.setattr(keys_module, "utcnow", lambda: expiry + timedelta(seconds=1))
    r = client.get(f"/projects/{pid}/reliability", headers=_bearer(made.json()["key"]))
    assert r.status_code == 401 and r.json()["error"] == "key_expired", r.text
    assert r.headers["www-authenticate"] == "Bearer"
    assert expiry.isoformat() in r.json()["detail"]
    # A key without an expiry, and an unknown key, are unaffected by the clock.
    assert client.get(f"/projects/{pid}").status_code == 200
    assert client.get("/projects", headers=_bearer("ak_nope")).json()["error"] == "unauthorized"


def test_exactly_at_the_expiry_the_key_is_refused(
    client: TestClient, project: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    expiry = _later(minutes=5)
    made = client.post(f"/projects/{project['id']}/keys", json={"role": "pm", "expires_at": expiry.isoformat()}).json()
    monkeypatch.setattr(keys_module, "utcnow", lambda: expiry - timedelta(microseconds=1))
    assert client.get("/projects", headers=_bearer(made["key"])).status_code == 200
    monkeypatch.setattr(keys_module, "utcnow", lambda: expiry)
    assert client.get("/projects", headers=_bearer(made["key"])).json()["error"] == "key_expired"


@pytest.mark.parametrize(
    "expires_at",
    [
        (datetime.now(UTC) - timedelta(seconds=5)).isoformat(),  # past
        _later(days=1).replace(tzinfo=None).isoformat(),  # no timezone
        "next tuesday",
    ],
)
def test_a_past_naive_or_unreadable_expiry_is_422_and_writes_no_key(
    client: TestClient, project: dict, engine: Engine, expires_at: str
) -> None:
    with engine.connect() as conn:
        before = conn.scalar(select(func.count()).select_from(ApiKey))
    r = client.post(f"/projects/{project['id']}/keys", json={"role": "viewer", "expires_at": expires_at})
    assert r.status_code == 422, r.text
    assert "expires_at" in r.text
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(ApiKey)) == before


def test_keys_list_shows_expiry_and_keeps_expired_keys_until_revoked(
    client: TestClient, project: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    expiry = _later(hours=2).replace(microsecond=0)
    made = client.post(
        f"/projects/{project['id']}/keys", json={"role": "viewer", "expires_at": expiry.isoformat()}
    ).json()
    forever = client.post(f"/projects/{project['id']}/keys", json={"role": "viewer"}).json()
    assert forever["expires_at"] is None
    monkeypatch.setattr(keys_module, "utcnow", lambda: expiry + timedelta(days=1))
    listed = {k["id"]: k for k in client.get("/keys").json()}
    assert datetime.fromisoformat(listed[made["id"]]["expires_at"]) == expiry
    assert listed[forever["id"]]["expires_at"] is None
    assert client.delete(f"/keys/{made['id']}").status_code == 204  # an expired key can be revoked
    assert made["id"] not in {k["id"] for k in client.get("/keys").json()}


def test_an_expired_admin_key_does_not_count_as_the_last_working_one(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from service.core.db import session_scope
    from service.data.keys import create_key

    expiry = _later(hours=1)
    with session_scope(client.app.state.sessions, write=True) as session:
        expiring, _ = create_key(session, role="admin", name="expiring", expires_at=expiry)
        expiring_id = expiring.id
    (mine,) = [k for k in client.get("/keys").json() if k["role"] == "admin" and k["id"] != expiring_id]
    monkeypatch.setattr(keys_module, "utcnow", lambda: expiry + timedelta(seconds=1))
    # Before the expiry two admins work and either could go; after it, only `mine` works.
    r = client.delete(f"/keys/{mine['id']}")
    assert r.status_code == 409 and r.json()["error"] == "last_admin_key", r.text
    assert client.delete(f"/keys/{expiring_id}").status_code == 204


def test_keys_create_on_the_command_line_takes_an_expiry(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from service.core.settings import get_settings

    monkeypatch.setenv("ANNOPLAN_DATABASE_URL", database_url)
    get_settings.cache_clear()
    try:
        expiry = _later(days=30).replace(microsecond=0)
        made = runner.invoke(app, ["keys", "create", "--role", "admin", "--expires-at", expiry.isoformat()])
        assert made.exit_code == 0, made.output
        listed = runner.invoke(app, ["keys", "list"])
        assert expiry.isoformat(timespec="seconds") in listed.output, listed.output
        for bad, says in [
            ((datetime.now(UTC) - timedelta(minutes=1)).isoformat(), "future"),
            (expiry.replace(tzinfo=None).isoformat(), "timezone"),
            ("soon", "ISO 8601"),
        ]:
            refused = runner.invoke(app, ["keys", "create", "--role", "admin", "--expires-at", bad])
            assert refused.exit_code != 0 and says in refused.output, refused.output
    finally:
        get_settings.cache_clear()
