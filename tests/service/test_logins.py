"""Dashboard logins (issue 31): the cookie holds a random login token, never the key; it is stored
hashed, expires, and ends at logout (a CSRF-safe POST) or when its key is revoked; a copied cookie is
not a Bearer key."""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from http.cookies import SimpleCookie

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from service.core.db import session_scope
from service.core.settings import Settings
from service.data.models import Login, utcnow
from tests.conftest import ADMIN_KEY

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def _log_in(client: TestClient, key: str) -> tuple[str, SimpleCookie]:
    """Post the login form with ``key``; the landing page and the login cookie as sent."""
    token = re.search(r'name="csrf" value="([^"]+)"', client.get("/login").text).group(1)
    r = client.post("/login", content=f"key={key}&csrf={token}", headers=FORM, follow_redirects=False)
    assert r.status_code == 303, r.text
    sent = SimpleCookie()
    for header in r.headers.get_list("set-cookie"):
        sent.load(header)
    return r.headers["location"], sent


def _logout_token(page: str) -> str:
    form = page[page.index('<form id="logout"') :].split("</form>")[0]
    return re.search(r'name="csrf" value="([^"]+)"', form).group(1)


def test_the_cookie_is_a_hashed_random_login_token_not_the_key(client: TestClient) -> None:
    del client.headers["Authorization"]
    landing, sent = _log_in(client, ADMIN_KEY)
    token = sent["annoplan_login"].value
    assert landing == "/dashboard" and token != ADMIN_KEY and ADMIN_KEY not in str(sent)
    assert "annoplan_key" not in sent  # the old cookie that held the key is never set
    assert sent["annoplan_login"]["httponly"] and sent["annoplan_login"]["samesite"] == "strict"
    assert int(sent["annoplan_login"]["max-age"]) == client.app.state.settings.login_max_age_seconds
    with session_scope(client.app.state.sessions) as session:
        (row,) = session.scalars(select(Login)).all()
        assert row.token_hash == hashlib.sha256(b"login." + token.encode()).hexdigest()  # only its hash is kept
        assert token not in {row.id, row.token_hash, row.key_id}
        assert row.expires_at - row.created_at == timedelta(seconds=client.app.state.settings.login_max_age_seconds)
    assert client.get("/dashboard").status_code == 200  # the cookie logs the browser in


def test_a_copied_cookie_is_not_a_bearer_key(client: TestClient, project: dict) -> None:
    del client.headers["Authorization"]
    _, sent = _log_in(client, ADMIN_KEY)
    token = sent["annoplan_login"].value
    client.cookies.clear()
    bearer = {"Authorization": f"Bearer {token}"}
    for r in (
        client.get("/projects", headers=bearer),
        client.patch(f"/projects/{project['id']}", json={"name": "x"}, headers=bearer),
    ):
        assert r.status_code == 401, r.text
    # As a cookie it reads (GET only) and never writes.
    client.cookies.set("annoplan_login", token)
    assert client.get(f"/projects/{project['id']}/reliability").status_code == 200
    assert client.patch(f"/projects/{project['id']}", json={"name": "by cookie"}).status_code == 401
    # A key put where the login token goes is not a login.
    client.cookies.set("annoplan_login", ADMIN_KEY)
    assert client.get("/projects").status_code == 401
    assert client.get("/dashboard", follow_redirects=False).headers["location"] == "/login"


def test_logout_revokes_the_login_and_a_copy_of_its_cookie(client: TestClient, project: dict) -> None:
    del client.headers["Authorization"]
    _log_in(client, ADMIN_KEY)
    token = client.cookies["annoplan_login"]
    page = client.get(f"/projects/{project['id']}/dashboard").text
    csrf = _logout_token(page)
    assert token not in page and csrf not in token
    # Without the page's token, or from another origin, the logout is refused and the login stays.
    for body, headers in [
        ("", {}),
        ("csrf=forged", {}),
        (f"csrf={csrf}", {"Origin": "http://evil.test"}),
        (f"csrf={csrf}", {"Sec-Fetch-Site": "cross-site"}),
    ]:
        r = client.post("/logout", content=body, headers={**FORM, **headers}, follow_redirects=False)
        assert r.status_code == 403, (body, headers)
    assert client.get("/dashboard").status_code == 200
    r = client.post("/logout", content=f"csrf={csrf}", headers=FORM, follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/login")
    assert 'annoplan_login=""' in r.headers["set-cookie"] and "Max-Age=0" in r.headers["set-cookie"]
    with session_scope(client.app.state.sessions) as session:
        assert session.scalar(select(Login.revoked_at)) is not None
    client.cookies.set("annoplan_login", token)  # a copy kept from before the logout
    assert client.get("/dashboard", follow_redirects=False).headers["location"] == "/login"
    assert client.get(f"/projects/{project['id']}/reliability").status_code == 401
    # Logging out again, or with no login, just goes to the form.
    client.cookies.clear()
    assert client.post("/logout", content="", headers=FORM, follow_redirects=False).status_code == 303


def test_an_expired_login_is_refused(client: TestClient, project: dict) -> None:
    del client.headers["Authorization"]
    _log_in(client, ADMIN_KEY)
    assert client.get("/dashboard").status_code == 200
    with session_scope(client.app.state.sessions, write=True) as session:
        session.execute(update(Login).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert client.get("/dashboard", follow_redirects=False).headers["location"] == "/login"
    r = client.get(f"/projects/{project['id']}/reliability")
    assert r.status_code == 401 and "expired" in r.json()["detail"]
    _log_in(client, ADMIN_KEY)  # a new login deletes the expired row
    with session_scope(client.app.state.sessions) as session:
        assert len(session.scalars(select(Login)).all()) == 1


def test_revoking_the_key_ends_its_logins(client: TestClient, project: dict) -> None:
    created = client.post(f"/projects/{project['id']}/keys", json={"role": "viewer"}).json()
    admin = client.headers.pop("Authorization")
    landing, _ = _log_in(client, created["key"])
    assert landing == f"/projects/{project['id']}/dashboard"
    assert client.get(landing).status_code == 200
    revoke = client.delete(f"/projects/{project['id']}/keys/{created['id']}", headers={"Authorization": admin})
    assert revoke.status_code == 204
    assert client.get(landing, follow_redirects=False).headers["location"] == "/login"


def test_a_page_opened_with_a_bearer_key_has_no_logout_form(client: TestClient, project: dict) -> None:
    assert '<form id="logout"' not in client.get(f"/projects/{project['id']}/dashboard").text
    assert '<form id="logout"' not in client.get("/dashboard").text


def test_over_https_the_login_cookie_is_host_prefixed_and_secure(settings: Settings) -> None:
    from service.app import create_app

    with TestClient(create_app(settings), base_url="https://testserver") as c:
        _, sent = _log_in(c, ADMIN_KEY)
        cookie = sent["__Host-annoplan_login"]
        assert cookie["secure"] and cookie["path"] == "/" and not cookie["domain"]
        assert "annoplan_login" not in sent
        page = c.get("/dashboard")
        assert page.status_code == 200
        r = c.post("/logout", content=f"csrf={_logout_token(page.text)}", headers=FORM, follow_redirects=False)
        assert r.status_code == 303 and "__Host-annoplan_login=" in r.headers["set-cookie"]
        assert c.get("/dashboard", follow_redirects=False).headers["location"] == "/login"
