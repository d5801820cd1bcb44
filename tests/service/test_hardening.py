"""Regression tests of the outside attack (issue 16), in process: each failed before its fix."""

from __future__ import annotations

import base64
import csv
import hashlib
import html
import io
import re
import unicodedata
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from fastapi.testclient import TestClient
from httpx import Response
from hypothesis import given
from hypothesis import strategies as st

from service.core.csv_safety import restored_cell, safe_cell
from service.core.errors import ECHO_CHARS
from tests.conftest import ADMIN_KEY


def small_planned_project(client: TestClient, n_items: int = 3) -> str:
    """The README's quickstart shape: a judge, a primary, one secondary, a few items, a prior plan."""
    pid = client.post("/projects", json={"name": "small", "labels": ["pass", "fail"]}).json()["id"]
    for ext, kind in [("judge", "judge"), ("a1", "primary"), ("a2", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}"} for i in range(n_items)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    assert client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9}).status_code == 201
    return pid


# --- 3. dashboard of small projects ---------------------------------------------------------


@pytest.mark.parametrize("n_items", [1, 3, 24])
def test_dashboard_of_a_small_planned_project_renders(client: TestClient, n_items: int) -> None:
    pid = small_planned_project(client, n_items)
    r = client.get(f"/projects/{pid}/dashboard")
    assert r.status_code == 200, r.text
    assert 'id="overlap-curve"' in r.text


# --- 7. non-finite numbers ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e308"])
def test_agreement_refuses_non_finite_interval_values(client: TestClient, value: str) -> None:
    body = f'{{"labels": ["a", "b"], "scale": "interval", "values": [{value}, 1], "matrix": [["a", "b"], ["a", "a"]]}}'
    r = client.post("/agreement", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["fields"][0]["loc"] == ["body", "values", 0]


def test_non_finite_numbers_are_refused_in_every_request_body(client: TestClient) -> None:
    body = '{"name": "x", "labels": ["a", "b"], "decision": {"epsilon": NaN}}'
    r = client.post("/projects", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text


# --- 13. echoed values are truncated ----------------------------------------------------------


def _assert_short_echo(detail: str, long_value: str) -> None:
    assert long_value[: ECHO_CHARS + 10] not in detail
    assert len(detail) < 3 * ECHO_CHARS + 200, detail


def test_errors_echo_at_most_a_hundred_characters_of_an_input(client: TestClient, project: dict) -> None:
    pid = project["id"]
    long_value = "x" * 5000
    r = client.get(f"/projects/{long_value}")
    assert r.status_code == 404
    _assert_short_echo(r.json()["detail"], long_value)
    assert "5,002 characters" in r.json()["detail"]  # the repr's length, quotes included
    r = client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "judge", "value": long_value}])
    assert r.status_code == 422
    _assert_short_echo(r.json()["detail"], long_value)
    r = client.get(f"/projects/{pid}/labels", params={"rater": long_value})
    assert r.status_code == 422
    _assert_short_echo(r.json()["detail"], long_value)
    r = client.post("/agreement", json={"labels": ["a", "b"], "matrix": [[long_value, "a"]]})
    assert r.status_code == 422
    _assert_short_echo(r.json()["detail"], long_value)
    assert all(len(f["value"]) < 2 * ECHO_CHARS for f in r.json()["fields"])


def test_validation_errors_cut_long_field_names(client: TestClient, project: dict) -> None:
    long_key = "k" * 5000
    r = client.post(f"/projects/{project['id']}/raters", json={"external_id": "z", "kind": "human", long_key: 1})
    assert r.status_code == 422
    body = r.text
    assert long_key[: ECHO_CHARS + 10] not in body


# --- 2. HTML injection, security headers, login CSRF ------------------------------------------

XSS = "<img src=x onerror=alert(1)>"


def login_token(client: TestClient) -> str:
    """The CSRF token of a freshly loaded login form (its cookie stays in the client)."""
    page = client.get("/login")
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def test_dashboard_error_page_escapes_the_project_id(client: TestClient) -> None:
    r = client.get(f"/projects/{quote(XSS)}/dashboard")
    assert r.status_code == 404
    assert XSS not in r.text
    assert html.escape(XSS) in r.text


def test_html_pages_forbid_inline_script_and_framing(client: TestClient, project: dict) -> None:
    pid = project["id"]
    pages = [
        client.get("/login"),
        client.get(f"/projects/{pid}/dashboard"),
        client.get(f"/projects/{quote(XSS)}/dashboard"),
        client.get(f"/projects/{pid}/report?format=html"),
    ]
    for page in pages:
        assert page.headers["content-type"].startswith("text/html"), page.text[:200]
        csp = page.headers["content-security-policy"]
        script_src = re.search(r"script-src ([^;]*)", csp).group(1).split()
        assert "'unsafe-inline'" not in script_src and "'self'" in script_src
        assert "frame-ancestors 'none'" in csp
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["x-content-type-options"] == "nosniff"
        assert "<script>" not in page.text  # scripts are loaded from this origin only
    assert client.get("/healthz").headers["x-content-type-options"] == "nosniff"


def test_dashboard_script_is_served_from_the_package(client: TestClient, project: dict) -> None:
    page = client.get(f"/projects/{project['id']}/dashboard").text
    src = re.search(r'<script src="([^"]+)"></script>', page).group(1)
    r = client.get(src)
    assert r.status_code == 200 and "If-None-Match" in r.text
    assert r.headers["content-type"].startswith(("text/javascript", "application/javascript"))


def test_login_needs_the_forms_csrf_token(client: TestClient) -> None:
    del client.headers["Authorization"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    # A cross-site form post carries no token (and no SameSite=Strict cookie): refused.
    r = client.post("/login", content=f"key={ADMIN_KEY}", headers=form, follow_redirects=False)
    assert r.status_code == 403 and "annoplan_login=" not in r.headers.get("set-cookie", "")
    token = login_token(client)
    r = client.post("/login", content=f"key={ADMIN_KEY}&csrf={token}x", headers=form, follow_redirects=False)
    assert r.status_code == 403
    token = login_token(client)
    r = client.post("/login", content=f"key={ADMIN_KEY}&csrf={token}", headers=form, follow_redirects=False)
    assert r.status_code == 303 and "annoplan_login=" in r.headers["set-cookie"]


def test_a_tossed_login_csrf_cookie_is_refused(client: TestClient) -> None:
    """Issue 30: a same-site page set the CSRF cookie to a token of its choosing and posted it."""
    import time

    from service.core.middleware import new_csrf_token

    del client.headers["Authorization"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for tossed in ("attacker-chosen", new_csrf_token(b"another server's secret"), new_csrf_token(b"x")[:-1]):
        client.cookies.set("annoplan_login_csrf", tossed, path="/login")
        r = client.post("/login", content=f"key={ADMIN_KEY}&csrf={tossed}", headers=form, follow_redirects=False)
        assert r.status_code == 403 and "annoplan_login=" not in r.headers.get("set-cookie", ""), tossed
    client.cookies.clear()
    from service.core.settings import signing_secret

    old = new_csrf_token(signing_secret(client.app.state.settings), now=time.time() - 7200)
    client.cookies.set("annoplan_login_csrf", old, path="/login")
    r = client.post("/login", content=f"key={ADMIN_KEY}&csrf={old}", headers=form, follow_redirects=False)
    assert r.status_code == 403  # signed here, but two hours old
    client.cookies.clear()
    # a valid token, but the post comes from a page on another port of the host
    token = login_token(client)
    for other in ({"Origin": "http://testserver:8398"}, {"Sec-Fetch-Site": "same-site"}):
        r = client.post(
            "/login", content=f"key={ADMIN_KEY}&csrf={token}", headers={**form, **other}, follow_redirects=False
        )
        assert r.status_code == 403, other
    own = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    token = login_token(client)  # each refusal served a fresh form
    r = client.post("/login", content=f"key={ADMIN_KEY}&csrf={token}", headers={**form, **own}, follow_redirects=False)
    assert r.status_code == 303, r.text


def test_login_cookies_are_host_prefixed_and_secure_over_https(settings: object) -> None:
    from service.app import create_app

    with TestClient(create_app(settings), base_url="https://testserver") as c:
        page = c.get("/login")
        cookie = page.headers["set-cookie"]
        assert cookie.startswith("__Host-annoplan_login_csrf=") and "Secure" in cookie and "Path=/;" in cookie
        token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        r = c.post("/login", content=f"key={ADMIN_KEY}&csrf={token}", headers=form, follow_redirects=False)
        assert r.status_code == 303, r.text
        assert "__Host-annoplan_login=" in r.headers["set-cookie"] and "Secure" in r.headers["set-cookie"]
        assert c.get("/dashboard").status_code == 200  # the __Host- cookie logs the browser in


# --- 12. offline documentation ----------------------------------------------------------------


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_every_asset_from_this_server(client: TestClient, page: str) -> None:
    del client.headers["Authorization"]  # the documentation needs no key
    r = client.get(page)
    assert r.status_code == 200
    assets = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert assets, r.text
    for url in assets:
        assert url.startswith("/"), f"{page} loads {url} from another host"
        fetched = client.get(url)
        assert fetched.status_code == 200 and len(fetched.content) > 1000, url
    # The page's own inline script is allowed by its hash, nothing else inline.
    csp = r.headers["content-security-policy"]
    for script in re.findall(r"<script>(.*?)</script>", r.text, re.DOTALL):
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert "'unsafe-inline'" not in re.search(r"script-src ([^;]*)", csp).group(1)
    assert client.get("/openapi.json").status_code == 200


# --- 9. CSV formula injection -----------------------------------------------------------------

FORMULAS = ['=HYPERLINK("http://x")', "+1+cmd", "-2+3", "@SUM(A1)", "'=quoted"]  # ids: no tab or CR


def _csv_cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def _assert_no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or re.fullmatch(r"-?[0-9.]+", cell), cell


def test_label_and_report_csv_exports_neutralise_formulas(client: TestClient) -> None:
    labels = ["=1+1", "-x"]
    pid = client.post("/projects", json={"name": "csv", "labels": labels}).json()["id"]
    raters = [("judge", "judge"), ("=cmd|' /C calc'!A0", "primary"), ("@h2", "human")]
    for ext, kind in raters:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": e} for e in FORMULAS]).status_code == 200
    rows = [
        {"item": e, "rater": r, "value": labels[(i + k) % 2]}
        for i, e in enumerate(FORMULAS)
        for k, (r, _) in enumerate(raters)
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    export = _csv_cells(client.get(f"/projects/{pid}/labels", params={"format": "csv"}).text)
    _assert_no_formula(export)
    header = export[0]
    cells = {(r[header.index("item")], r[header.index("rater")], r[header.index("value")]) for r in export[1:]}
    restored = {tuple(restored_cell(c) for c in cell) for cell in cells}
    assert restored == {(r["item"], r["rater"], r["value"]) for r in rows}
    report = client.get(f"/projects/{pid}/report", params={"format": "csv"})
    assert report.status_code == 200, report.text
    table = _csv_cells(report.text)
    assert len(table) > 1
    _assert_no_formula(table)
    assert any(cell == "'=1+1" for row in table for cell in row)


@given(st.text(max_size=20))
def test_safe_cell_is_reversible_and_never_a_formula(text: str) -> None:
    cell = safe_cell(text)
    assert restored_cell(cell) == text
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or re.fullmatch(r"[+-][0-9.eE+-]+", cell)


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("=1+1", "'=1+1"),
        ("+1+cmd", "'+1+cmd"),
        ("@A1", "'@A1"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("'a", "''a"),
        ("-1", "-1"),
        ("+0.5", "+0.5"),
        ("a=1", "a=1"),
        ("", ""),
    ],
)
def test_safe_cell_check_values(value: str, written: str) -> None:
    assert safe_cell(value) == written


# --- 10. look-alike ids ----------------------------------------------------------------------


def _rater(client: TestClient, pid: str, external_id: str) -> Response:
    return client.post(f"/projects/{pid}/raters", json={"external_id": external_id, "kind": "human"})


def test_ids_are_stored_in_nfc(client: TestClient, project: dict) -> None:
    pid = project["id"]
    nfd = unicodedata.normalize("NFD", "café")
    assert nfd != "café"
    r = _rater(client, pid, nfd)
    assert r.status_code == 201 and r.json()["external_id"] == "café"
    assert _rater(client, pid, "café").status_code == 409  # the same id, typed precomposed
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": nfd}]).json()["created"] == 1
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": "café"}]).json()["unchanged"] == 1
    # Labels may name them in either form.
    r = client.post(f"/projects/{pid}/labels", json=[{"item": "café", "rater": nfd, "value": "pass"}])
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("bad", ["a\u200bb", "\ufeffa", "a\u200d", "a\u2060b", "\u202eab", " a", "a ", "a\t", "\na"])
def test_invisible_characters_and_surrounding_whitespace_are_refused(
    client: TestClient, project: dict, bad: str
) -> None:
    pid = project["id"]
    r = _rater(client, pid, bad)
    assert r.status_code == 422, r.text
    assert "ids may not" in r.json()["detail"]
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": bad}]).status_code == 422
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": "ok"}]).json()["created"] == 1


def test_an_ascii_id_is_refused_exactly_for_its_control_characters() -> None:
    """The ASCII fast path of normalized_id refuses what the category scan refuses, for every character."""
    from service.core.identifiers import normalized_id

    for code in range(128):
        value = f"a{chr(code)}b"
        invisible = unicodedata.category(chr(code)) in ("Cc", "Cf")
        try:
            assert normalized_id(value) == value and not invisible, repr(value)
        except ValueError:
            assert invisible, repr(value)


def test_nfkc_look_alikes_get_409_naming_the_existing_id(client: TestClient, project: dict) -> None:
    pid = project["id"]
    assert _rater(client, pid, "norm-a").status_code == 201
    r = _rater(client, pid, "norm-ａ")  # full-width a
    assert r.status_code == 409 and r.json()["error"] == "look_alike_id"
    assert "'norm-a'" in r.json()["detail"]
    # The other way round: the look-alike first, then the plain id.
    assert _rater(client, pid, "ｘ1").status_code == 201
    r = _rater(client, pid, "x1")
    assert r.status_code == 409 and "'ｘ1'" in r.json()["detail"]
    r = client.post(f"/projects/{pid}/items", json=[{"external_id": "i１"}])  # 'i1' exists (fixture)
    assert r.status_code == 409 and "'i1'" in r.json()["detail"], r.text
    r = client.post(f"/projects/{pid}/items", json=[{"external_id": "ﬁle"}, {"external_id": "file"}])
    assert r.status_code == 409, r.text
    assert client.get(f"/projects/{pid}/items", params={"limit": 1000}).json()["items"][-1]["external_id"] == "i19"


@pytest.mark.parametrize("look_alike", ["ann\u20102", "ann\u22122", "ann\u20132", "\u0430\u043f\u043f-2"])
def test_confusable_ids_next_to_ann_2_get_409(client: TestClient, project: dict, look_alike: str) -> None:
    """Issue 30: U+2010 hyphen, U+2212 minus, an en dash, an all-Cyrillic look-alike (UTS #39 skeleton)."""
    pid = project["id"]
    assert _rater(client, pid, "ann-2").status_code == 201
    r = _rater(client, pid, look_alike)
    assert r.status_code == 409 and r.json()["error"] == "look_alike_id", r.text
    assert "'ann-2'" in r.json()["detail"]


@pytest.mark.parametrize("mixed", ["\u0430nn-2", "p\u0430yp\u0430l", "ann\u03bf"])
def test_ids_mixing_scripts_are_refused(client: TestClient, project: dict, mixed: str) -> None:
    r = _rater(client, project["id"], mixed)
    assert r.status_code == 422 and "mix scripts" in r.text, r.text
    assert client.post(f"/projects/{project['id']}/items", json=[{"external_id": mixed}]).status_code == 422


@pytest.mark.parametrize("fine", ["user-名前", "かな-1", "Москва-2", "Ελλάδα", "café-é", "item 1"])
def test_single_script_ids_are_accepted(client: TestClient, project: dict, fine: str) -> None:
    assert _rater(client, project["id"], fine).status_code == 201


def test_migration_keys_legacy_ids_and_tolerates_legacy_look_alikes(tmp_path: Path) -> None:
    """Ids stored before 0006_id_keys get their key; of two legacy look-alikes only the first does."""
    from alembic import command
    from sqlalchemy import create_engine, text

    from tests.conftest import alembic_config

    url = f"sqlite:///{tmp_path / 'legacy.db'}"
    command.upgrade(alembic_config(url), "0002")
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO projects (id, name, labels, scale, criteria, decision, target, label_seq, "
                "item_count, allow_abstain, created_at) "
                "VALUES ('p1', 'p', '[]', 'nominal', '[]', '{}', '{}', 0, 0, 0, '2026-01-01')"
            )
        )
        for ext in ("norm-a", "norm-ａ", "plain"):
            conn.execute(
                text(
                    "INSERT INTO raters (project_id, external_id, kind, created_at) "
                    "VALUES ('p1', :e, 'human', '2026-01-01')"
                ),
                {"e": ext},
            )
    command.upgrade(alembic_config(url), "head")
    with engine.begin() as conn:
        keys = dict(conn.execute(text("SELECT external_id, external_key FROM raters")).all())
    assert keys == {"norm-a": "norm-a", "norm-ａ": None, "plain": "plain"}
    command.downgrade(alembic_config(url), "0002")
    engine.dispose()


# --- 8. admin keys listed and revoked ---------------------------------------------------------


def test_admin_keys_are_listed_and_revocable(client: TestClient, project: dict) -> None:
    from service.core.db import session_scope
    from service.data.keys import create_key

    with session_scope(client.app.state.sessions, write=True) as session:
        old_id, old_secret = (lambda kv: (kv[0].id, kv[1]))(
            create_key(session, role="admin", name="generated at first start")
        )
    viewer = client.post(f"/projects/{project['id']}/keys", json={"role": "viewer"}).json()
    listed = client.get("/keys").json()
    by_id = {k["id"]: k for k in listed}
    assert by_id[old_id]["role"] == "admin" and by_id[old_id]["name"] == "generated at first start"
    assert by_id[viewer["id"]]["project"] == project["id"]
    assert not any(secret in client.get("/keys").text for secret in (old_secret, viewer["key"]))
    assert client.get("/projects", headers={"Authorization": f"Bearer {old_secret}"}).status_code == 200
    assert client.delete(f"/keys/{old_id}").status_code == 204
    assert client.get("/projects", headers={"Authorization": f"Bearer {old_secret}"}).status_code == 401
    assert client.delete(f"/keys/{old_id}").status_code == 204  # already revoked: nothing changes
    assert old_id not in {k["id"] for k in client.get("/keys").json()}
    assert old_id in {k["id"] for k in client.get("/keys", params={"include_revoked": True}).json()}
    # Non-admins may not list or revoke keys.
    as_viewer = {"Authorization": f"Bearer {viewer['key']}"}
    assert client.get("/keys", headers=as_viewer).status_code == 403
    assert client.delete(f"/keys/{viewer['id']}", headers=as_viewer).status_code == 403
    assert client.delete("/keys/k_nope").status_code == 404


def test_the_last_working_admin_key_cannot_be_revoked(client: TestClient) -> None:
    (mine,) = [k for k in client.get("/keys").json() if k["role"] == "admin"]
    r = client.delete(f"/keys/{mine['id']}")
    assert r.status_code == 409 and r.json()["error"] == "last_admin_key"
    assert client.get("/keys").status_code == 200


# --- 6. database outages ------------------------------------------------------------------------


def _on_every_connection(client: TestClient, *pragmas: str) -> None:
    """Run SQLite ``pragmas`` on every new connection of the app's engine, from now on."""
    from sqlalchemy import event

    engine = client.app.state.engine

    def apply(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        for pragma in pragmas:
            dbapi_conn.execute(pragma)

    event.listen(engine, "connect", apply)
    engine.dispose()  # pooled connections predate the pragmas


def _assert_503(r: Response, state: str) -> None:
    assert r.status_code == 503, r.text
    assert int(r.headers["retry-after"]) > 0
    assert r.json()["error"] == "database_unavailable" and r.json()["detail"]
    health = r if r.request.url.path == "/healthz" else None
    assert health is None or health.json()["database"] == state


sqlite_only = pytest.mark.skipif(
    bool(__import__("os").environ.get("ANNOPLAN_TEST_DATABASE_URL")), reason="SQLite pragmas simulate the outage"
)


@sqlite_only
def test_disk_full_is_503_and_healthz_says_so_until_a_write_succeeds(client: TestClient, project: dict) -> None:
    pid = project["id"]
    page_count = client.app.state.engine.connect().exec_driver_sql("PRAGMA page_count").scalar()
    _on_every_connection(client, f"PRAGMA max_page_count = {page_count + 2}")
    rows = [{"external_id": f"big{i}", "text": "x" * 2000} for i in range(200)]
    _assert_503(client.post(f"/projects/{pid}/items", json=rows), "full")
    health = client.get("/healthz")
    assert health.status_code == 503 and health.json()["database"] == "full", health.text
    assert "retry-after" in health.headers
    assert client.get(f"/projects/{pid}/items", params={"limit": 1000}).json()["items"][-1]["external_id"] == "i19"
    _on_every_connection(client, "PRAGMA max_page_count = 1073741823")
    assert client.post(f"/projects/{pid}/items", json=rows).status_code == 200
    assert client.get("/healthz").json() == {"status": "ok", "database": "ok"}


@sqlite_only
def test_healthz_recovers_by_itself_after_an_outage_without_a_write(client: TestClient, project: dict) -> None:
    """Issue 30: a worker behind a readiness probe gets no writes while it is 503; its health check probes."""
    pid = project["id"]
    _on_every_connection(client, "PRAGMA query_only = ON")
    _assert_503(client.post(f"/projects/{pid}/raters", json={"external_id": "new", "kind": "human"}), "read_only")
    client.app.state.database.probe_seconds = 0  # a probe at every check (2 s apart by default)
    for path in ("/healthz", "/readyz"):  # the probe fails while the outage lasts: still 503, still read_only
        health = client.get(path)
        assert health.status_code == 503 and health.json()["database"] == "read_only", health.text
    assert client.get("/livez").json() == {"status": "alive"}
    _on_every_connection(client, "PRAGMA query_only = OFF")
    for path in ("/healthz", "/readyz"):
        assert client.get(path).json() == {"status": "ok", "database": "ok"}
    assert client.get(f"/projects/{pid}/raters").status_code == 200


def test_livez_answers_while_the_database_is_unreachable(client: TestClient) -> None:
    from service.core.db import make_engine
    from service.documents.sessions import worker_sessionmaker

    app = client.app
    good = app.state.engine, app.state.sessions
    app.state.engine = make_engine("postgresql+psycopg://postgres@127.0.0.1:9/annoplan?connect_timeout=2")
    app.state.sessions = worker_sessionmaker(app.state.engine)
    try:
        assert client.get("/livez").status_code == 200
        assert client.get("/readyz").status_code == 503
    finally:
        app.state.engine.dispose()
        app.state.engine, app.state.sessions = good


@sqlite_only
def test_read_only_database_is_503_for_writes_and_reads_still_work(client: TestClient, project: dict) -> None:
    pid = project["id"]
    _on_every_connection(client, "PRAGMA query_only = ON")
    _assert_503(client.post(f"/projects/{pid}/raters", json={"external_id": "new", "kind": "human"}), "read_only")
    _assert_503(
        client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "judge", "value": "pass"}]), "read_only"
    )
    assert client.get(f"/projects/{pid}/raters").status_code == 200
    health = client.get("/healthz")
    assert health.status_code == 503 and health.json()["database"] == "read_only", health.text


def test_unreachable_database_is_503_with_retry_after(client: TestClient, project: dict) -> None:
    from service.core.db import make_engine
    from service.documents.sessions import worker_sessionmaker

    app = client.app
    good = app.state.engine, app.state.sessions
    app.state.engine = make_engine("postgresql+psycopg://postgres@127.0.0.1:9/annoplan?connect_timeout=2")
    app.state.sessions = worker_sessionmaker(app.state.engine)
    try:
        _assert_503(client.get(f"/projects/{project['id']}"), "unreachable")
        _assert_503(client.post("/projects", json={"name": "x", "labels": ["a", "b"]}), "unreachable")
        health = client.get("/healthz")
        assert health.status_code == 503 and health.json()["database"] == "unreachable"
    finally:
        app.state.engine.dispose()
        app.state.engine, app.state.sessions = good
    assert client.get(f"/projects/{project['id']}").status_code == 200


# --- 4. CPU exhaustion --------------------------------------------------------------------------


def _matrix(n_items: int, n_raters: int, seed: int = 0) -> list[list[str | None]]:
    rng = np.random.default_rng(seed)
    codes = rng.integers(-1, 3, size=(n_items, n_raters))
    return [[None if c < 0 else "abc"[c] for c in row] for row in codes]


def test_agreement_work_is_bounded_for_every_key(client: TestClient, project: dict) -> None:
    annotator = client.post(f"/projects/{project['id']}/keys", json={"role": "annotator", "rater": "h2"}).json()
    body = {"labels": ["a", "b", "c"], "matrix": _matrix(1000, 10), "n_resamples": 10_000}
    for key in (ADMIN_KEY, annotator["key"]):
        r = client.post("/agreement", json=body, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 413 and r.json()["error"] == "agreement_too_large", r.text
        assert "at most 5,000 resamples" in r.json()["detail"]
    assert client.post("/agreement", json={**body, "n_resamples": 5_000}).status_code == 200


def test_large_agreement_in_a_child_process_equals_the_planner(client: TestClient) -> None:
    from planner.rater_pairs import summary_table
    from service.core.limits import INLINE_WORK

    matrix = _matrix(2000, 5, seed=3)
    body = {"labels": ["a", "b", "c"], "matrix": matrix, "n_resamples": 400, "seed": 11}
    assert 2000 * 5 * 400 > INLINE_WORK  # the child-process path
    r = client.post("/agreement", json=body)
    assert r.status_code == 200, r.text
    codes = np.array([[-1 if v is None else "abc".index(v) for v in row] for row in matrix])
    direct = summary_table(codes, n_labels=3, n_resamples=400, rng=11)
    for key, estimate in direct.items():
        got = r.json()["coefficients"][key]
        assert got["statistic"] == pytest.approx(estimate.result.statistic, abs=1e-12)
        assert got["interval"] == pytest.approx(list(estimate.interval.as_list()), abs=1e-12)


def test_dashboard_history_is_replayed_once_then_stored_as_label_seq_advances(
    client: TestClient, project: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    import service.documents.history_replays as pool_scores
    from service.documents.history_keeper import store_due_points

    pid = project["id"]
    rows = [
        {"item": f"i{i}", "rater": r, "value": "pass" if (i + k) % 3 else "fail"}
        for i in range(20)
        for k, r in enumerate(["judge", "prim", "h2"])
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    calls = []
    replay = pool_scores.pool_history
    monkeypatch.setattr(pool_scores, "pool_history", lambda *a, **k: calls.append(1) or replay(*a, **k))
    assert store_due_points(client.app.state.sessions, "")[0][0][1] == 60  # the turn queues the replay
    for _ in range(3):
        assert client.get(f"/projects/{pid}/dashboard").status_code == 200
    assert len(calls) == 1
    assert (
        client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "h3", "value": "pass"}]).status_code == 200
    )
    assert client.get(f"/projects/{pid}/dashboard").status_code == 200
    assert len(calls) == 1  # the new point is the shown document's, not replayed
    assert store_due_points(client.app.state.sessions, "")[0][0][1] == 61  # and the history turn stores it
    history = client.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text.splitlines()
    assert history[-2].startswith("60,") and history[-1].startswith("61,")
