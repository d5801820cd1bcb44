"""Issue 30 item 8, replayed: a SIGKILLed worker leaves no computing child behind, the deployed server sends
no ``Server`` header, and a malformed JSON body is the same documented 422 ``malformed_body`` on every route
that takes a body."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from fastapi.testclient import TestClient

from service.app import MALFORMED_BODY
from tests.conftest import ADMIN_KEY, ROOT
from tests.live_server import LiveServer

# --- a computing child dies with its worker ----------------------------------------------------------


def _write_pid_and_sleep(path: str) -> None:
    """Computes for a long time (sleeps), after writing its pid to ``path`` so the test can watch it."""
    Path(path).write_text(str(os.getpid()))
    time.sleep(120)


# A web worker in miniature: one simulation-pool job and one forkserver computation, both long, started
# the ways the service starts them; it waits for the computation, as a request does.
WORKER = """
import sys
from service.core.offload import OFF_WORKER_CELLS, off_worker
from service.core.settings import Settings
from service.simulations.jobs import SimulationRunner
from tests.service.test_attacks_hardening import _write_pid_and_sleep

settings = Settings(database_url="sqlite://", simulation_workers=1)
SimulationRunner(None, settings, owner="test")._executor().submit(_write_pid_and_sleep, sys.argv[1])
off_worker(OFF_WORKER_CELLS, _write_pid_and_sleep, sys.argv[2])
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _pid_in(path: Path, deadline: float) -> int:
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"no child wrote {path.name}"
        time.sleep(0.05)
    return int(path.read_text())


def test_children_computing_for_a_sigkilled_worker_end_with_it(tmp_path: Path) -> None:
    pool_pid, forked_pid = tmp_path / "pool", tmp_path / "forked"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(pool_pid), str(forked_pid)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 120  # a loaded machine imports the planner slowly
        children = [_pid_in(pool_pid, deadline), _pid_in(forked_pid, deadline)]
        time.sleep(0.5)
        assert all(map(_alive, children)) and worker.poll() is None  # computing while the worker waits
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        deadline = time.monotonic() + 10
        while any(map(_alive, children)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in children if _alive(pid)] == [], "a child outlived its SIGKILLed worker"
    finally:
        worker.kill()
        worker.wait()
        for pid in (int(p.read_text()) for p in (pool_pid, forked_pid) if p.exists() and p.read_text()):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# --- no Server header -------------------------------------------------------------------------------


def test_the_server_as_deployed_sends_no_server_header(database_url: str) -> None:
    """``annoplan serve`` starts uvicorn through ``python -m service``: no ``Server: uvicorn`` on any answer."""
    with LiveServer(database_url, ADMIN_KEY, as_deployed=True) as server:
        answers = [
            httpx.get(f"{server.base_url}/healthz"),
            httpx.get(f"{server.base_url}/projects"),  # 401
            httpx.get(f"{server.base_url}/nowhere"),  # 404
            httpx.post(f"{server.base_url}/agreement", content=b"{", headers={"Authorization": f"Bearer {ADMIN_KEY}"}),
        ]
    assert [r.status_code for r in answers] == [200, 401, 404, 422]
    assert [r.headers.get("server") for r in answers] == [None] * 4


# --- malformed JSON: one documented 422 -------------------------------------------------------------

MALFORMED = b'{"name": "a", '


def _body_operations(client: TestClient) -> list[tuple[str, str, dict]]:
    paths = client.get("/openapi.json").json()["paths"]
    return [(method, path, op) for path, ops in paths.items() for method, op in ops.items() if "requestBody" in op]


def test_a_malformed_json_body_is_422_malformed_body_on_every_route_that_takes_a_body(
    client: TestClient, project: dict
) -> None:
    operations = _body_operations(client)
    assert len(operations) >= 15  # every write of the API
    answers = {}
    for method, path, _ in operations:
        url = path.format(pid=project["id"], rid="h2", wid="w_x", did="1", bid="b_x", kid="k_x", sim_id="s_x")
        r = client.request(method.upper(), url, content=MALFORMED, headers={"Content-Type": "application/json"})
        answers[f"{method} {path}"] = (r.status_code, r.json().get("error"), "not valid JSON" in r.json()["detail"])
    assert {op: a for op, a in answers.items() if a != (422, "malformed_body", True)} == {}


def test_every_operation_that_takes_a_body_documents_the_malformed_body_422(client: TestClient) -> None:
    for method, path, operation in _body_operations(client):
        documented = operation["responses"].get("422")
        assert documented is not None, f"{method} {path} documents no 422"
        assert documented["description"] == MALFORMED_BODY and "`malformed_body`" in MALFORMED_BODY
        content = documented["content"]["application/json"]
        assert content["schema"] == {"$ref": "#/components/schemas/ErrorBody"}, f"{method} {path}"
        assert content["examples"]["malformed_body"]["value"]["error"] == "malformed_body"
