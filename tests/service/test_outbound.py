"""The outbound-request policy (issue 30, items 1, 2 and 7): the red team's server-side request
attacks replayed against a loopback listener standing for the target. Nothing here connects
anywhere but 127.0.0.1: a public address a check lets through is caught by a guard on
``socket.create_connection`` before any packet leaves.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.core.outbound import non_public
from service.core.settings import Settings
from tests.conftest import ADMIN_KEY
from tests.service.test_webhooks import plan, sender_of, subscribe

SECRET = "INTERNAL-SECRET-4f1c root:x:0:0:root:/root:/bin/bash"
Answer = tuple[int, Any]  # status, JSON body (or bytes)


class Target:
    """A loopback HTTP listener: ``answer(method, path)`` gives (status, body); requests are recorded."""

    def __init__(self, answer: Callable[[str, str], Answer]):
        self.answer = answer
        self.requests: list[tuple[str, str]] = []
        target = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                target.requests.append((self.command, self.path))
                status, body = target.answer(self.command, self.path)
                raw = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                if status in (301, 302, 307, 308):
                    self.send_header("location", f"http://127.0.0.1:{target.port}/elsewhere")
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = do_DELETE = _any  # noqa: N815 (http.server's names)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Target:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def label_studio(export_status: str = "completed", project: Any = None, export: Any = None) -> Callable:
    """A Label Studio stand-in answering its export API, with the given shapes."""

    def answer(method: str, path: str) -> Answer:
        if method == "GET" and path.rstrip("/").endswith("/api/projects/7"):
            return 200, {"id": 7, "label_config": "<View/>"} if project is None else project
        if method == "POST" and path.endswith("/exports"):
            return 201, {"id": 1, "status": export_status} if export is None else export
        if method == "GET" and path.endswith("/exports/1"):
            return 200, {"id": 1, "status": export_status}
        if "/download" in path:
            return 200, []
        return 204, b""

    return answer


def app_client(settings: Settings, **update: Any) -> TestClient:
    c = TestClient(create_app(settings.model_copy(update=update)), raise_server_exceptions=False)
    c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
    return c


def sync(c: TestClient, url: str) -> Any:
    pid = c.post("/projects", json={"name": "ls", "labels": ["a", "b"]}).json()["id"]
    return c.post(f"/projects/{pid}/integrations/label-studio/sync", json={"url": url, "project": 7, "token": "t"})


# --- 1. SSRF through the Label Studio sync ----------------------------------------------------


def test_sync_refuses_a_loopback_target_by_default(settings: Settings) -> None:
    with Target(lambda m, p: (500, SECRET.encode())) as target, app_client(settings) as c:
        assert Settings().outbound_allow_private is False and Settings().label_studio_urls == []
        r = sync(c, target.url)
        assert r.status_code == 422 and r.json()["error"] == "private_target", r.text
        assert target.requests == []


def test_sync_never_echoes_the_targets_answer(settings: Settings) -> None:
    with Target(lambda m, p: (500, SECRET.encode())) as target, app_client(settings, outbound_allow_private=True) as c:
        r = sync(c, target.url)
        assert r.status_code == 502 and r.json()["error"] == "label_studio_unavailable"
        assert "answered 500" in r.json()["detail"]
        assert "SECRET" not in r.text and "root:x" not in r.text


def test_an_export_that_stays_running_is_given_up_within_the_call_cap(settings: Settings) -> None:
    with (
        Target(label_studio(export_status="running")) as target,
        app_client(settings, outbound_allow_private=True, label_studio_max_calls=5) as c,
    ):
        started = time.monotonic()
        r = sync(c, target.url)
        assert r.status_code == 502 and "more than 5 calls" in r.json()["detail"], r.text
        assert len(target.requests) == 5 and time.monotonic() - started < 20


def test_an_export_that_stays_running_is_given_up_at_the_deadline(settings: Settings) -> None:
    with (
        Target(label_studio(export_status="running")) as target,
        app_client(settings, outbound_allow_private=True, label_studio_ready_seconds=1.0) as c,
    ):
        r = sync(c, target.url)
        assert r.status_code == 502 and "'running', not completed" in r.json()["detail"], r.text
        assert len(target.requests) <= 5


def test_an_allow_listed_label_studio_may_be_private_but_its_redirects_are_not_followed(settings: Settings) -> None:
    with Target(lambda m, p: (302, b"")) as target, app_client(settings, label_studio_urls=[target.url + "/ls"]) as c:
        assert sync(c, target.url).json()["error"] == "label_studio_not_allowed"  # outside the listed path
        r = sync(c, target.url + "/ls")
        assert r.status_code == 502 and "answered 302" in r.json()["detail"], r.text
        assert target.requests == [("GET", "/ls/api/projects/7")]


# --- 7. malformed Label Studio replies and sync URLs -------------------------------------------


@pytest.mark.parametrize(
    ("shape", "reason"),
    [
        ({"project": [1, 2]}, "not a JSON object"),
        ({"project": {"id": 7, "label_config": 3}}, "not a string"),
        ({"export": {"status": "completed"}}, "no integer id"),
        ({"export": ["x"]}, "not a JSON object"),
    ],
)
def test_a_malformed_label_studio_reply_is_a_502(settings: Settings, shape: dict, reason: str) -> None:
    with Target(label_studio(**shape)) as target, app_client(settings, outbound_allow_private=True) as c:
        r = sync(c, target.url)
        assert r.status_code == 502 and reason in r.json()["detail"], r.text


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:8399.nip.io", "http://[::1]:99999", "http://"])
def test_a_malformed_sync_url_is_a_422(settings: Settings, url: str) -> None:
    with app_client(settings, outbound_allow_private=True) as c:
        r = sync(c, url)
        assert r.status_code == 422 and r.json()["error"] in ("invalid_url", "validation_error"), r.text


# --- 2. webhooks: embedded IPv4 forms, numeric hosts, rebinding, stored answers ---------------


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "100.64.0.1",
        "169.254.169.254",
        "192.0.2.1",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::127.0.0.1",  # IPv4-compatible
        "64:ff9b::7f00:1",  # NAT64 of loopback
        "64:ff9b::a9fe:a9fe",  # NAT64 of the metadata address
        "64:ff9b:1::1",  # local-use NAT64
        "2002:7f00:1::",  # 6to4 of loopback
        "2002:a9fe:a9fe::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "2001:db8::1",
        "::ffff:0:7f00:1",  # IPv4-translated
    ],
)
def test_non_public_addresses_and_their_embedded_forms_are_refused(address: str) -> None:
    assert non_public(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"])
def test_public_addresses_and_their_embedded_forms_are_allowed(address: str) -> None:
    assert non_public(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::7f00:1]/x",
        "http://[64:ff9b::a9fe:a9fe]/x",
        "http://[2002:7f00:1::]/x",
        "http://[::127.0.0.1]/x",
        "http://2130706433/x",
        "http://0x7f.1/x",
        "http://0177.0.0.1/x",
        "http://127.1/x",
    ],
)
def test_webhooks_refuse_embedded_and_numeric_forms_of_private_addresses(settings: Settings, url: str) -> None:
    with app_client(settings, webhook_sender=False) as c:
        p = c.post("/projects", json={"name": "x", "labels": ["a", "b"]}).json()["id"]
        r = c.post(f"/projects/{p}/webhooks", json={"url": url, "events": ["plan.created"]})
        assert r.status_code == 422 and r.json()["error"] in ("private_target", "invalid_url"), r.text
        assert c.get(f"/projects/{p}/webhooks").json()["items"] == []


@pytest.fixture
def project_with_raters(settings: Settings) -> Iterator[tuple[TestClient, str]]:
    with app_client(settings, webhook_sender=False, bootstrap_resamples=50) as c:
        p = c.post("/projects", json={"name": "hooks", "labels": ["pass", "fail"]}).json()["id"]
        for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human")]:
            assert c.post(f"/projects/{p}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        assert c.post(f"/projects/{p}/items", json=[{"external_id": f"i{i}"} for i in range(10)]).status_code == 200
        yield c, p


def test_a_rebinding_name_never_reaches_loopback(
    project_with_raters: tuple[TestClient, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TTL-0 name: public for the first two lookups (the checks of today's tree), loopback after."""
    c, pid = project_with_raters
    real_getaddrinfo, real_connect = socket.getaddrinfo, socket.create_connection
    lookups: list[str] = []
    dialled: list[str] = []

    with Target(lambda m, p: (200, b"ok")) as target:

        def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
            if host != "rebind.test":
                return real_getaddrinfo(host, port, *args, **kwargs)
            lookups.append(host)
            address = "93.184.215.14" if len(lookups) <= 2 else "127.0.0.1"
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

        def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
            dialled.append(address[0])
            host = address[0]
            try:
                literal = ipaddress.ip_address(host)
            except ValueError:
                literal = None
            if literal is not None and not literal.is_loopback:
                raise ConnectionRefusedError("the test lets nothing leave 127.0.0.1")
            return real_connect(address, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        monkeypatch.setattr(socket, "create_connection", create_connection)
        subscribe(c, pid, f"http://rebind.test:{target.port}/hook", ["plan.created"])
        plan(c, pid)
        sender = sender_of(c)
        for _ in range(3):
            sender.run_once()
            time.sleep(0.05)
        sender.stop()
        assert target.requests == []
        assert "rebind.test" not in dialled  # every connection went to an address the policy checked


def test_the_delivery_log_keeps_no_word_of_the_targets_answer(project_with_raters: tuple[TestClient, str]) -> None:
    c, pid = project_with_raters
    c.app.state.settings = c.app.state.settings.model_copy(
        update={"webhook_allow_private": True, "webhook_retry_window_seconds": 0}
    )
    with Target(lambda m, p: (500, SECRET.encode())) as target:
        hook = subscribe(c, pid, target.url + "/hook", ["plan.created"])
        plan(c, pid)
        sender = sender_of(c)
        for _ in range(20):
            sender.run_once()
            if target.requests:
                break
            time.sleep(0.05)
        sender.stop()
        (delivery,) = c.get(f"/projects/{pid}/webhooks/{hook['id']}/deliveries").json()["items"]
        assert delivery["last_status_code"] == 500 and delivery["last_error"] == "HTTP 500"
        assert "SECRET" not in json.dumps(delivery)


# --- 4. fair sharing: one project's syncs and plans hold only its own slots ----------------------


def test_a_second_sync_of_one_project_waits_its_turn_but_other_projects_do_not(settings: Settings) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with (
        Target(label_studio(export_status="running")) as target,
        app_client(settings, outbound_allow_private=True, label_studio_ready_seconds=3.0) as c,
    ):
        a, b = (c.post("/projects", json={"name": n, "labels": ["x", "y"]}).json()["id"] for n in "ab")
        body = {"url": target.url, "project": 7, "token": "t"}

        def sync_of(pid: str) -> Any:
            return c.post(f"/projects/{pid}/integrations/label-studio/sync", json=body)

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(sync_of, a)
            deadline = time.monotonic() + 10
            while not target.requests:  # the first sync is under way
                assert time.monotonic() < deadline
                time.sleep(0.02)
            second = sync_of(a)
            assert second.status_code == 429 and int(second.headers["retry-after"]) > 0, second.text
            assert second.json()["error"] == "too_many_in_flight"
            other = pool.submit(sync_of, b)
            assert first.result().status_code == 502 and other.result().status_code == 502  # not 429
