"""Pull sync (issue 17): `POST .../integrations/label-studio/sync` and `annoplan sync label-studio`
against a stand-in Label Studio on loopback that serves its REST export API (project, snapshot
export create/poll/download/delete) from the real 1.23.2 snapshot in tests/fixtures.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Header, HTTPException
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.cli import app as cli
from tests.live_server import InThreadApp, LiveServer, free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "label_studio_1_23_2"
LABELS = ["Positive", "Negative", "Neutral"]
TOKEN = "ls-secret-token-123"
ADMIN = "ak_test_admin_key"


class FakeLabelStudio(InThreadApp):
    """Label Studio's export API for one project (id 7), its tasks mutable by the test."""

    def __init__(self) -> None:
        self.tasks: list[dict] = json.loads((FIXTURES / "snapshot-full-predictions.json").read_text())
        first = (FIXTURES / "webhooks.ndjson").read_text().splitlines()[0]
        self.label_config = json.loads(first)["project"]["label_config"]
        self.exports: dict[int, dict] = {}
        self.calls: list[str] = []
        api = FastAPI()

        def authorised(authorization: str | None) -> None:
            if authorization != f"Token {TOKEN}":
                raise HTTPException(401, "Authentication credentials were not provided.")

        @api.get("/api/projects/{pid}")
        def project(pid: int, authorization: str | None = Header(None)) -> dict:
            authorised(authorization)
            self.calls.append("project")
            return {"id": pid, "label_config": self.label_config}

        @api.post("/api/projects/{pid}/exports")
        def create(pid: int, body: dict, authorization: str | None = Header(None)) -> dict:
            authorised(authorization)
            assert body["serialization_options"]["predictions"] == {"only_id": False}
            eid = len(self.exports) + 1
            self.exports[eid] = {"id": eid, "status": "in_progress", "tasks": copy.deepcopy(self.tasks)}
            self.calls.append("create")
            return {"id": eid, "status": "in_progress"}

        @api.get("/api/projects/{pid}/exports/{eid}")
        def status(pid: int, eid: int, authorization: str | None = Header(None)) -> dict:
            authorised(authorization)
            self.exports[eid]["status"] = "completed"  # ready at the first poll
            return {"id": eid, "status": "completed"}

        @api.get("/api/projects/{pid}/exports/{eid}/download")
        def download(pid: int, eid: int, exportType: str, authorization: str | None = Header(None)) -> list:
            authorised(authorization)
            assert exportType == "JSON" and self.exports[eid]["status"] == "completed"
            return self.exports[eid]["tasks"]

        @api.delete("/api/projects/{pid}/exports/{eid}", status_code=204)
        def remove(pid: int, eid: int, authorization: str | None = Header(None)) -> None:
            authorised(authorization)
            self.calls.append("delete")
            del self.exports[eid]

        super().__init__(api)


@pytest.fixture
def settings(settings: Any) -> Any:
    """The stand-in Label Studio is on loopback: this module allows private targets explicitly."""
    return settings.model_copy(update={"outbound_allow_private": True})


@pytest.fixture
def label_studio() -> Iterator[FakeLabelStudio]:
    with FakeLabelStudio() as ls:
        yield ls


def new_project(client: TestClient) -> str:
    return client.post("/projects", json={"name": "synced", "labels": LABELS}).json()["id"]


def sync(client: TestClient, pid: str, ls: FakeLabelStudio, **extra: Any) -> Any:
    return client.post(
        f"/projects/{pid}/integrations/label-studio/sync", json={"url": ls.url, "project": 7, "token": TOKEN, **extra}
    )


def current(client: TestClient, pid: str) -> dict[tuple[str, str], str]:
    rows = client.get(f"/projects/{pid}/labels", params={"limit": 1000}).json()["items"]
    return {(r["item"], r["rater"]): r["value"] for r in rows}


def expected(tasks: list[dict]) -> dict[tuple[str, str], str]:
    """Independent reading: one `sentiment` choice that is a label, per annotation or prediction."""
    out = {}
    for t in tasks:
        for a in t["annotations"]:
            choices = [r["value"]["choices"] for r in a["result"] if r["from_name"] == "sentiment"]
            if not a["was_cancelled"] and choices and len(choices[0]) == 1 and choices[0][0] in LABELS:
                out[(str(t["id"]), f"ls-user-{a['completed_by']['id']}")] = choices[0][0]
        for p in t["predictions"]:
            choices = [r["value"]["choices"] for r in p["result"] if r["from_name"] == "sentiment"]
            if choices and len(choices[0]) == 1 and choices[0][0] in LABELS:
                out[(str(t["id"]), p["model_version"])] = choices[0][0]
    return out


def test_sync_reconciles_then_is_idempotent(client: TestClient, label_studio: FakeLabelStudio) -> None:
    pid = new_project(client)
    r = sync(client, pid, label_studio)
    assert r.status_code == 200, r.text
    first = r.json()
    want = expected(label_studio.tasks)
    assert current(client, pid) == want
    assert (first["tasks"], first["format"], first["from_name"]) == (52, "snapshot", "sentiment")
    assert first["changes"] == {"added": len(want), "updated": 0, "unchanged": 0, "retracted": 0}
    judges = {c["external_id"] for c in first["raters_created"] if c["kind"] == "judge"}
    assert {"gpt-4o-judge", "small-judge"} <= judges
    assert label_studio.calls == ["project", "create", "delete"] and label_studio.exports == {}
    second = sync(client, pid, label_studio).json()
    assert second["changes"] == {"added": 0, "updated": 0, "unchanged": len(want), "retracted": 0}
    assert second["labels"]["label_seq"] == first["labels"]["label_seq"]
    assert TOKEN not in r.text


def test_sync_recovers_missed_updates_skips_and_deletions(client: TestClient, label_studio: FakeLabelStudio) -> None:
    pid = new_project(client)
    assert sync(client, pid, label_studio).status_code == 200
    tasks = label_studio.tasks
    tasks[0]["annotations"][0]["result"][0]["value"]["choices"] = ["Neutral"]  # task 1, user 2: Positive -> Neutral
    tasks[1]["annotations"][0].update(was_cancelled=True, result=[])  # task 2, user 2: skipped now
    del tasks[2]["annotations"][0]  # task 3's first annotation deleted
    tasks[3]["predictions"] = []  # task 4's predictions deleted
    body = sync(client, pid, label_studio).json()
    want = expected(tasks)
    assert current(client, pid) == want
    before = expected(json.loads((FIXTURES / "snapshot-full-predictions.json").read_text()))
    retracted = set(before) - set(want)
    assert (str(tasks[1]["id"]), "ls-user-2") in retracted
    assert body["changes"]["updated"] == 1 and body["changes"]["retracted"] == len(retracted)
    history = client.get(f"/projects/{pid}/labels", params={"history": "true", "limit": 1000}).json()["items"]
    assert {(h["item"], h["rater"]) for h in history if h["retracted"]} == retracted


def test_sync_failures_are_502_and_write_nothing(client: TestClient, label_studio: FakeLabelStudio) -> None:
    pid = new_project(client)
    r = sync(client, pid, label_studio, token="wrong")
    assert r.status_code == 502 and r.json()["error"] == "label_studio_unavailable"
    assert "refused the token (401)" in r.json()["detail"] and "wrong" not in r.text
    r = client.post(
        f"/projects/{pid}/integrations/label-studio/sync",
        json={"url": f"http://127.0.0.1:{free_port()}", "project": 7, "token": TOKEN},
    )
    assert r.status_code == 502 and "could not be reached" in r.json()["detail"]
    r = sync(client, pid, label_studio, url="ftp://x")
    assert r.status_code == 422
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0


def test_sync_calls_only_allowed_label_studios(settings: Any, label_studio: FakeLabelStudio) -> None:
    from service.app import create_app

    allowed = settings.model_copy(update={"label_studio_urls": [label_studio.url]})
    with TestClient(create_app(allowed), headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        pid = new_project(client)
        other = f"http://127.0.0.1:{label_studio.port + 1}"
        r = sync(client, pid, label_studio, url=other)
        assert r.status_code == 422 and r.json()["error"] == "label_studio_not_allowed"
        assert label_studio.calls == []
        assert sync(client, pid, label_studio, url=label_studio.url + "/").status_code == 200


def test_cli_sync_prints_what_changed(database_url: str, label_studio: FakeLabelStudio) -> None:
    runner = CliRunner()
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as c:
        pid = c.post("/projects", json={"name": "cli", "labels": LABELS}).json()["id"]
        args = [
            "sync",
            "label-studio",
            "--project",
            pid,
            "--ls-project",
            "7",
            "--ls-url",
            label_studio.url,
            "--url",
            server.base_url,
        ]
        result = runner.invoke(cli, args, env={"ANNOPLAN_KEY": ADMIN, "LABEL_STUDIO_TOKEN": TOKEN})
        assert result.exit_code == 0, result.output
        n = len(expected(label_studio.tasks))
        assert f"52 tasks (sentiment): {n} added, 0 updated, 0 retracted, 0 unchanged" in result.output
        assert "52 tasks were new to annoplan and became items" in result.output  # an empty project
        again = runner.invoke(cli, args, env={"ANNOPLAN_KEY": ADMIN, "LABEL_STUDIO_TOKEN": TOKEN})
        assert f"0 added, 0 updated, 0 retracted, {n} unchanged" in again.output
        assert "new to annoplan" not in again.output
        bad = runner.invoke(cli, args, env={"ANNOPLAN_KEY": ADMIN, "LABEL_STUDIO_TOKEN": "nope"})
        assert bad.exit_code == 1 and "label_studio_unavailable" in bad.output


def test_concurrent_webhooks_for_one_new_task_and_user_all_record(database_url: str) -> None:
    """Racing deliveries that create the same item and rater: every one recorded, none sent to
    the inbox by the race, no 500 (SQLite here; PostgreSQL with ANNOPLAN_TEST_DATABASE_URL)."""
    from concurrent.futures import ThreadPoolExecutor

    template = json.loads((FIXTURES / "webhooks.ndjson").read_text().splitlines()[0])
    with LiveServer(database_url, ADMIN) as server, server.client() as c:
        pid = c.post("/projects", json={"name": "race", "labels": LABELS}).json()["id"]

        def deliver(n: int) -> tuple[int, dict]:
            payload = copy.deepcopy(template)
            task = 500 + n % 3  # three tasks, each delivered by several threads at once
            payload["task"]["id"] = payload["annotation"]["task"] = task
            payload["annotation"].update(id=7000 + n, completed_by=n % 4)
            payload["annotation"]["result"][0]["value"]["choices"] = [LABELS[n % 3]]
            with server.client() as own:
                r = own.post(
                    f"/projects/{pid}/webhooks/label-studio", json=payload, headers={"X-Annoplan-Secret": ADMIN}
                )
            return r.status_code, r.json()

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(deliver, range(12)))
        assert all(status == 200 and "issue" not in body for status, body in results), results
        rows = c.get(f"/projects/{pid}/labels", params={"limit": 1000}).json()["items"]
        assert {(r["item"], r["rater"], r["value"]) for r in rows} == {
            (str(500 + n % 3), f"ls-user-{n % 4}", LABELS[n % 3]) for n in range(12)
        }
        assert c.get(f"/projects/{pid}/integrations/label-studio/issues").json()["items"] == []
