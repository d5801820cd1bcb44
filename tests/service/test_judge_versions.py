"""Judge versions (issue 34): a version labels as a judge rater of its own; two versions compared on
shared items against the primary; a judge watched for drift; bad input 422 with nothing written."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient
from standardwebhooks import Webhook as Verifier
from statsmodels.stats.contingency_tables import mcnemar

from planner.versions import anchor_panel_size
from service.app import create_app
from service.core.settings import Settings
from service.documents import versions as versions_documents
from service.webhooks.sender import WebhookSender
from tests.conftest import ADMIN_KEY
from tests.webhook_receiver import Receiver

LABELS = ["pass", "fail"]


def _project(c: TestClient, n_items: int) -> str:
    pid = c.post("/projects", json={"name": "versions", "labels": LABELS}).json()["id"]
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)])
    for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human")):
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    return pid


def _label(c: TestClient, pid: str, rater: str, codes: np.ndarray) -> None:
    rows = [{"item": f"i{i}", "rater": rater, "value": LABELS[v]} for i, v in enumerate(codes) if v >= 0]
    assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200


def test_versions_are_judge_raters_and_compare_on_shared_items(client: TestClient) -> None:
    n = 120
    pid = _project(client, n)
    made = client.post(
        f"/projects/{pid}/raters/judge/versions", json={"name": "v1", "model": "m-1", "prompt_digest": "sha256:aa"}
    )
    assert made.status_code == 201, made.text
    assert made.json()["rater"] == "judge@v1" and made.json()["judge"] == "judge"
    assert client.post(f"/projects/{pid}/raters/judge/versions", json={"name": "v2"}).status_code == 201
    kinds = {r["external_id"]: r["kind"] for r in client.get(f"/projects/{pid}/raters").json()["items"]}
    assert kinds["judge@v1"] == kinds["judge@v2"] == "judge"

    rng = np.random.default_rng(4)
    primary = rng.integers(0, 2, n)
    old = np.where(rng.random(n) < 0.95, primary, 1 - primary)
    new = np.where(rng.random(n) < 0.6, primary, 1 - primary)
    new[:10] = -1  # v2 has not labelled ten items: they are not shared
    _label(client, pid, "prim", primary)
    _label(client, pid, "h2", np.where(rng.random(n) < 0.85, primary, 1 - primary))
    _label(client, pid, "judge@v1", old)
    _label(client, pid, "judge@v2", new)

    listed = client.get(f"/projects/{pid}/raters/judge/versions").json()["items"]
    assert [(v["name"], v["n_labels"]) for v in listed] == [("v1", n), ("v2", n - 10)]

    r = client.get(f"/projects/{pid}/raters/judge/versions/compare", params={"old": "v1", "new": "v2"})
    assert r.status_code == 200, r.text
    body = r.json()
    keep = new >= 0
    right_old, right_new = old[keep] == primary[keep], new[keep] == primary[keep]
    b, c = int(np.sum(right_old & ~right_new)), int(np.sum(~right_old & right_new))
    assert (body["n_items"], body["lost"], body["gained"]) == (n - 10, b, c)
    assert body["old_agreement"] == right_old.mean() and body["new_agreement"] == right_new.mean()
    assert body["change"] == (c - b) / (n - 10)
    assert body["flip_rate"] == np.mean(old[keep] != new[keep])
    table = [[int(np.sum(right_old & right_new)), b], [c, int(np.sum(~right_old & ~right_new))]]
    assert body["chi_square"] == mcnemar(table, exact=False, correction=False).statistic
    assert math.isclose(body["mcnemar_p"], mcnemar(table, exact=True).pvalue)
    low, high = body["change_ci"]
    assert low <= body["change"] <= high
    # on the shared items, against the primary and h2: the old version passes, the new one no longer does
    assert (body["old_decision"], body["new_decision"]) == ("pass", "reject")
    psi = (b + c) / (n - 10)
    assert body["anchor_panel"] == {
        "drop": 0.05,
        "power": 0.8,
        "discordance": psi,
        "n_items": anchor_panel_size(0.05, psi),
    }

    # /reliability holds the same comparison (its seed is the label_seq) beside each version's own decision
    doc = client.get(f"/projects/{pid}/reliability").json()
    seq = doc["label_seq"]
    pairs = [(v["old"], v["new"]) for v in doc["versions"]]
    assert pairs == [("judge", "judge@v1"), ("judge@v1", "judge@v2")]
    again = client.get(f"/projects/{pid}/raters/judge/versions/compare", params={"old": "v1", "new": "v2", "seed": seq})
    assert doc["versions"][1] == again.json()
    assert (doc["versions"][1]["lost"], doc["versions"][1]["new_decision"]) == (b, "reject")
    assert doc["versions"][0]["n_items"] == 0 and doc["versions"][0]["reason"]  # the judge itself labelled nothing
    assert {"judge@v1", "judge@v2"} <= {j["judge"] for j in doc["judges"]}


def test_reliability_compares_the_newest_versions_within_its_work_bound(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _project(client, 40)
    for name in ("v1", "v2", "v3"):
        assert client.post(f"/projects/{pid}/raters/judge/versions", json={"name": name}).status_code == 201
    monkeypatch.setattr(versions_documents, "MAX_VERSION_ITEMS", 80)  # two pairs of 40 items
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert [(v["old"], v["new"]) for v in doc["versions"]] == [("judge@v1", "judge@v2"), ("judge@v2", "judge@v3")]
    monkeypatch.setattr(versions_documents, "MAX_VERSION_ITEMS", 10)  # not one pair: the newest still is
    client.post(f"/projects/{pid}/raters", json={"external_id": "h3", "kind": "human"})  # a new document
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert [(v["old"], v["new"]) for v in doc["versions"]] == [("judge@v2", "judge@v3")]


def test_version_bad_input_is_422_or_409_and_writes_nothing(client: TestClient) -> None:
    pid = _project(client, 5)
    assert "versions" not in client.get(f"/projects/{pid}/reliability").json()  # no version: no block
    for rid in ("prim", "h2"):  # a version of a non-judge rater
        r = client.post(f"/projects/{pid}/raters/{rid}/versions", json={"name": "v1"})
        assert r.status_code == 422, r.text
    assert client.post(f"/projects/{pid}/raters/judge/versions", json={"name": "v1"}).status_code == 201
    assert client.post(f"/projects/{pid}/raters/judge@v1/versions", json={"name": "x"}).status_code == 422
    assert client.post(f"/projects/{pid}/raters/judge/versions", json={"name": "v1"}).status_code == 409
    assert client.post(f"/projects/{pid}/raters/judge/versions", json={"name": "bad name"}).status_code == 422
    assert client.post(f"/projects/{pid}/raters/nobody/versions", json={"name": "v9"}).status_code == 404
    raters = [r["external_id"] for r in client.get(f"/projects/{pid}/raters").json()["items"]]
    assert sorted(raters) == ["h2", "judge", "judge@v1", "prim"]
    compare = f"/projects/{pid}/raters/judge/versions/compare"
    assert client.get(compare, params={"old": "v1", "new": "v7"}).status_code == 404
    assert client.get(compare, params={"old": "v1"}).status_code == 422
    undefined = client.get(compare, params={"old": "judge", "new": "v1"}).json()
    assert undefined["n_items"] == 0 and undefined["change"] is None and undefined["reason"]
    assert undefined["new_decision"] is None and undefined["anchor_panel"] is None
    drift = f"/projects/{pid}/raters/judge/drift"
    assert client.get(drift, params={"baseline": 0.5, "drop": 0.6}).status_code == 422
    assert client.get(drift, params={"baseline": 1.5}).status_code == 422
    assert client.get(f"/projects/{pid}/raters/prim/drift", params={"baseline": 0.8}).status_code == 422


def test_drift_alarms_on_a_judge_that_got_worse_in_arrival_order(client: TestClient) -> None:
    n = 400
    pid = _project(client, n)
    rng = np.random.default_rng(9)
    primary = rng.integers(0, 2, n)
    _label(client, pid, "prim", primary)
    steady = np.where(rng.random(n) < 0.9, primary, 1 - primary)
    worse = np.where(rng.random(n) < 0.5, primary, 1 - primary)
    # the first 200 items labelled while good, then the rest after a silent change
    first, later = steady.copy(), worse.copy()
    first[200:], later[:200] = -1, -1
    _label(client, pid, "judge", first)
    before = client.get(f"/projects/{pid}/raters/judge/drift", params={"baseline": 0.9, "drop": 0.3, "horizon": 400})
    assert before.status_code == 200, before.text
    assert before.json()["n_labels"] == 200 and not before.json()["drifted"]
    _label(client, pid, "judge", later)
    after = client.get(f"/projects/{pid}/raters/judge/drift", params={"baseline": 0.9, "drop": 0.3, "horizon": 400})
    body = after.json()
    assert body["n_labels"] == n and body["drifted"] and body["threshold"] == 400 / 0.05
    # the alarm is raised by one of the later pairs (their labels came after the primary's and the first 200)
    assert body["alarm_label_seq"] > n + 200


def test_a_watched_judge_that_drifts_is_announced_once(settings: Settings) -> None:
    quiet = settings.model_copy(
        update={"webhook_sender": False, "webhook_allow_private": True, "webhook_watch_seconds": 0}
    )
    with TestClient(create_app(quiet), raise_server_exceptions=False) as c, Receiver() as receiver:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        n = 300
        pid = _project(c, n)
        hook = c.post(f"/projects/{pid}/webhooks", json={"url": receiver.url, "events": ["judge.drifted"]}).json()
        watch = {"baseline": 0.9, "drop": 0.3, "horizon": 300}
        assert c.put(f"/projects/{pid}/raters/prim/drift-watch", json=watch).status_code == 422  # not a judge
        assert c.put(f"/projects/{pid}/raters/judge/drift-watch", json={**watch, "drop": 0.95}).status_code == 422
        set_watch = c.put(f"/projects/{pid}/raters/judge/drift-watch", json=watch)
        assert set_watch.status_code == 200 and set_watch.json()["alarm_label_seq"] is None
        app = c.app
        sender = WebhookSender(app.state.sessions, app.state.settings, app.state.documents)
        rng = np.random.default_rng(2)
        primary = rng.integers(0, 2, n)
        _label(c, pid, "prim", primary)
        good = np.where(rng.random(n) < 0.95, primary, 1 - primary)
        good[150:] = -1
        _label(c, pid, "judge", good)
        sender.run_once()
        time.sleep(0.2)
        assert receiver.received == []  # agreeing at the baseline: no alarm
        bad = 1 - primary
        bad[:150] = -1
        _label(c, pid, "judge", bad)
        for _ in range(50):
            sender.run_once()
            if receiver.received:
                break
            time.sleep(0.02)
        (got,) = receiver.wait_for(1, timeout=2)
        event = Verifier(hook["secret"]).verify(got.body, got.headers)
        assert event["type"] == "judge.drifted" and event["data"]["judge"] == "judge"
        assert event["data"]["drifted"] and event["data"]["alarm_label_seq"] > n + 150
        sender.run_once()
        time.sleep(0.2)
        assert len(receiver.received) == 1  # announced once
        page = c.get(f"/projects/{pid}/dashboard").text
        panel = page[page.index("<h2>Drift watches</h2>") :]
        assert f"drifted at label_seq {event['data']['alarm_label_seq']}" in panel[: panel.index("</table>")]
