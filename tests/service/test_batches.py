"""Batches (issue 6): leases of a rater's planned items under parallel requests, lease expiry,
release, batch status and who may ask for what."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.core.settings import Settings
from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer

N_ITEMS = 200
M = 60


def setup_project(c: Any, *, n_items: int = N_ITEMS, humans: tuple[str, ...] = ("h2", "h3")) -> str:
    """A binary project with a judge, a primary ``prim`` and secondaries ``humans``; no labels."""
    r = c.post("/projects", json={"name": "batches", "labels": ["pass", "fail"]})
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), *((h, "human") for h in humans)]:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}"} for i in range(n_items)]
    assert c.post(f"/projects/{pid}/items", json=items).status_code == 200
    return pid


def plan(c: Any, pid: str, **extra: Any) -> dict:
    body = {"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 7, **extra}
    r = c.post(f"/projects/{pid}/plan", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def new_key(c: Any, pid: str, role: str, rater: str | None = None) -> str:
    r = c.post(f"/projects/{pid}/keys", json={"role": role, **({"rater": rater} if rater else {})})
    assert r.status_code == 201, r.text
    return r.json()["key"]


def label(c: Any, pid: str, rater: str, items: list[str], batch: str | None = None, value: str = "pass") -> None:
    rows = [{"item": i, "rater": rater, "value": value, **({"batch": batch} if batch else {})} for i in items]
    r = c.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == len(items)


def batch(c: Any, pid: str, rater: str | None, size: int) -> dict:
    r = c.post(f"/projects/{pid}/batches", json={"size": size, **({"rater": rater} if rater else {})})
    assert r.status_code == 200, r.text
    return r.json()


def labeled_items(c: Any, pid: str, rater: str) -> list[str]:
    rows = c.get(f"/projects/{pid}/labels", params={"rater": rater, "limit": 1000}).json()
    assert rows["next_cursor"] is None
    return [row["item"] for row in rows["items"]]


# --- parallel requests against a real server --------------------------------------------------


def drain(server: LiveServer, pid: str, key: str, rater: str, held: list[dict], stop: threading.Event) -> list[str]:
    """Label the batches ``held``, then fetch and label batches until the rater's list is done."""
    issued: list[str] = []
    with server.client(key) as c:
        for b in held:
            label(c, pid, rater, b["items"], b["id"])
        deadline = time.monotonic() + 60
        while not stop.is_set() and time.monotonic() < deadline:
            b = batch(c, pid, rater, 25)
            if b["done"]:
                return issued
            if not b["items"]:  # the rest is leased to a parallel drainer of the same rater
                time.sleep(0.02)
                continue
            issued += b["items"]
            label(c, pid, rater, b["items"], b["id"])
    raise AssertionError(f"{rater}'s list was not done in time")


def test_parallel_requests_on_a_live_server(database_url):
    """One server start (slow) for both parallel scenarios below, with two worker processes."""
    with LiveServer(database_url, ADMIN_KEY, workers=2) as server:
        parallel_batches_never_issue_an_item_twice_and_lose_none(server)
        label_writes_and_batch_requests_for_one_rater_in_parallel(server)


def parallel_batches_never_issue_an_item_twice_and_lose_none(server: LiveServer) -> None:
    """32 simultaneous requests (12 for h2 by its annotator key, 12 for the primary and 8 for h3
    by a PM key), then parallel draining: every planned item is issued exactly once per rater."""
    with server.client() as admin:
        pid = setup_project(admin)
        assert plan(admin, pid, m=M)["m"] == M
        keys = {"h2": new_key(admin, pid, "annotator", "h2"), "pm": new_key(admin, pid, "pm")}
        wave = ["h2"] * 12 + ["prim"] * 12 + ["h3"] * 8
        barrier = threading.Barrier(len(wave))

        def request(rater: str) -> dict:
            with server.client(keys["h2"] if rater == "h2" else keys["pm"]) as c:
                body = {"size": 5} if rater == "h2" else {"size": 5, "rater": rater}
                barrier.wait()
                r = c.post(f"/projects/{pid}/batches", json=body)
            assert r.status_code == 200, r.text
            return r.json()

        with ThreadPoolExecutor(len(wave)) as pool:
            first = list(pool.map(request, wave))
        by_rater: dict[str, list[dict]] = {"h2": [], "h3": [], "prim": []}
        for b in first:
            assert len(b["items"]) == 5 and b["id"] and not b["done"], b
            by_rater[b["rater"]].append(b)
        for rater, batches in by_rater.items():
            items = [i for b in batches for i in b["items"]]
            assert len(set(items)) == len(items), f"{rater}: an item was leased twice"
        assert [len(v) for v in by_rater.values()] == [12, 8, 12]
        # h2's 60 planned items are all leased now: nothing left to hand out, and not done
        rest = batch(admin, pid, "h2", 5)
        assert rest["items"] == [] and rest["done"] is False and rest["remaining"] == M

        stop = threading.Event()
        jobs = [
            ("h2", keys["h2"], by_rater["h2"]),
            ("h2", keys["h2"], []),
            ("h3", keys["pm"], by_rater["h3"]),
            ("h3", keys["pm"], []),
            ("prim", keys["pm"], by_rater["prim"]),
            ("prim", keys["pm"], []),
        ]  # two drainers on the primary's cursor too
        with ThreadPoolExecutor(len(jobs)) as pool:
            futures = [pool.submit(drain, server, pid, key, rater, held, stop) for rater, key, held in jobs]
            try:
                drained = [f.result() for f in futures]
            finally:
                stop.set()
        issued: dict[str, Counter] = {r: Counter(i for b in by_rater[r] for i in b["items"]) for r in by_rater}
        for (rater, _, _), items in zip(jobs, drained, strict=True):
            issued[rater].update(items)
        assert all(n == 1 for counts in issued.values() for n in counts.values()), "an item was issued twice"
        assert len(issued["h2"]) == len(issued["h3"]) == M
        assert set(issued["h2"]) == set(issued["h3"])  # strat: one shared panel
        assert set(issued["prim"]) == {f"i{i}" for i in range(N_ITEMS)}
        for rater in ("h2", "h3", "prim"):
            assert sorted(labeled_items(admin, pid, rater)) == sorted(issued[rater])
            end = batch(admin, pid, rater, 5)
            assert end == {**end, "items": [], "done": True, "remaining": 0}


def label_writes_and_batch_requests_for_one_rater_in_parallel(server: LiveServer) -> None:
    """An annotation tool that posts labels for one batch while fetching the next one.

    Regression (PostgreSQL): the rater lock of a batch request and the project lock of a label
    write were both FOR UPDATE, which conflicts with the KEY SHARE locks of foreign-key checks,
    so the two deadlocked (fixed by locking FOR NO KEY UPDATE)."""
    with server.client() as admin:
        n_items, rounds = 400, 15
        pid = setup_project(admin, n_items=n_items)
        plan(admin, pid, m=M)
        failures: list[str] = []

        def fetch(k: int) -> None:
            with server.client() as c:
                for _ in range(rounds):
                    r = c.post(f"/projects/{pid}/batches", json={"rater": "prim", "size": 2})
                    if r.status_code != 200:
                        failures.append(r.text)

        def write(k: int) -> None:
            with server.client() as c:
                for n in range(rounds):
                    rows = [{"item": f"i{k * 100 + n * 6 + j}", "rater": "prim", "value": "pass"} for j in range(6)]
                    r = c.post(f"/projects/{pid}/labels", json=rows)
                    if r.status_code != 200:
                        failures.append(r.text)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda f: f[0](f[1]), [(fetch, k) for k in range(4)] + [(write, k) for k in range(4)]))
        assert failures == []
        assert batch(admin, pid, "prim", 5)["remaining"] == n_items - 4 * rounds * 6  # every label counted once


# --- leases, release, status and access (in-process client with a 2 s lease) -------------------


@pytest.fixture
def short_lease(database_url: str) -> Iterator[TestClient]:
    """An admin client of an app whose leases last two seconds and batches hold at most 50 items."""
    settings = Settings(database_url=database_url, admin_key=ADMIN_KEY, lease_seconds=2, max_batch_size=50)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


def test_expired_lease_returns_unlabeled_items_and_status_tracks_labels(short_lease):
    c = short_lease
    pid = setup_project(c)
    plan(c, pid, m=M)
    a = batch(c, pid, "h2", 5)
    label(c, pid, "h2", a["items"][:2], a["id"])
    status = c.get(f"/projects/{pid}/batches/{a['id']}").json()
    assert status["labeled"] == 2 and status["unlabeled"] == a["items"][2:]
    assert status["items"] == a["items"] and not status["expired"] and not status["released"]
    b = batch(c, pid, "h2", 5)  # while a's lease holds, b gets other items
    assert not set(a["items"]) & set(b["items"])
    time.sleep(2.1)
    assert c.get(f"/projects/{pid}/batches/{a['id']}").json()["expired"] is True
    again = batch(c, pid, "h2", 8)
    # a's and b's unlabeled items are back (the earliest of the list); a's labeled items never return
    assert sorted(again["items"]) == sorted(a["items"][2:] + b["items"])
    assert again["remaining"] == M - 2


def test_release_returns_unlabeled_items_early(short_lease, database_url):
    c = short_lease
    pid = setup_project(c)
    plan(c, pid, m=M)
    # a long lease this time: only the release can return the items
    settings = Settings(database_url=database_url, admin_key=ADMIN_KEY)
    with TestClient(create_app(settings), raise_server_exceptions=False) as long:
        long.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        a = batch(long, pid, "h2", 5)
        label(long, pid, "h2", a["items"][:1], a["id"])
        other = batch(long, pid, "h2", 5)
        assert not set(a["items"]) & set(other["items"])
        r = long.post(f"/projects/{pid}/batches/{a['id']}/release")
        assert r.status_code == 200, r.text
        assert r.json()["released"] is True and r.json()["labeled"] == 1 and r.json()["unlabeled"] == a["items"][1:]
        again = batch(long, pid, "h2", 4)
        assert sorted(again["items"]) == sorted(a["items"][1:])  # earliest in list order: a's released items
        assert long.post(f"/projects/{pid}/batches/{a['id']}/release").status_code == 200  # releasing twice is harmless
        assert not set(batch(long, pid, "h2", 50)["items"]) & set(again["items"] + other["items"])


def test_an_annotator_sees_only_its_own_batches(short_lease):
    c = short_lease
    pid = setup_project(c)
    plan(c, pid, m=M)
    h2, h3 = new_key(c, pid, "annotator", "h2"), new_key(c, pid, "annotator", "h3")
    c.headers["Authorization"] = f"Bearer {h2}"
    mine = batch(c, pid, None, 5)  # the rater is implied by the key
    assert mine["rater"] == "h2"
    assert c.get(f"/projects/{pid}/batches/{mine['id']}").status_code == 200
    r = c.post(f"/projects/{pid}/batches", json={"size": 5, "rater": "h3"})  # another rater's list
    assert r.status_code in (403, 404), r.text
    c.headers["Authorization"] = f"Bearer {h3}"
    for r in (c.get(f"/projects/{pid}/batches/{mine['id']}"), c.post(f"/projects/{pid}/batches/{mine['id']}/release")):
        assert r.status_code == 404 and r.json()["error"] == "not_found", r.text
    assert c.get(f"/projects/{pid}/batches/b_doesnotexist").status_code == 404
    c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
    assert c.get(f"/projects/{pid}/batches/{mine['id']}").json()["released"] is False  # h3 released nothing
    leased = batch(c, pid, "h3", 50)["items"] + batch(c, pid, "h3", 50)["items"]
    assert len(leased) == M  # the refused request leased nothing of h3's list


@pytest.mark.parametrize(
    ("body", "role", "code"),
    [
        ({"size": 5}, "pm", "invalid"),  # a PM must name the rater
        ({"size": 5, "rater": "judge"}, "pm", "invalid"),  # judges label everything themselves
        ({"size": 5, "rater": "nobody"}, "pm", "invalid"),
        ({"size": 51, "rater": "h2"}, "pm", "batch_too_large"),  # over max_batch_size=50
        ({"size": 0, "rater": "h2"}, "pm", None),
    ],
)
def test_bad_batch_requests_are_422(short_lease, body, role, code):
    c = short_lease
    pid = setup_project(c)
    plan(c, pid, m=M)
    c.headers["Authorization"] = f"Bearer {new_key(c, pid, role)}"
    r = c.post(f"/projects/{pid}/batches", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"]
    if code:
        assert r.json()["error"] == code


def test_default_batch_limit_is_1000(client, project):
    pid = project["id"]
    plan(client, pid, m=10)
    r = client.post(f"/projects/{pid}/batches", json={"size": 1001, "rater": "prim"})
    assert r.status_code == 422 and r.json()["error"] == "batch_too_large"
    assert len(batch(client, pid, "prim", 1000)["items"]) == 20  # the whole corpus of 20


def test_batches_need_a_plan(client, project):
    r = client.post(f"/projects/{project['id']}/batches", json={"size": 5, "rater": "h2"})
    assert r.status_code == 409 and r.json()["error"] == "no_plan", r.text


def test_idempotency_key_replays_a_batch(client, project):
    pid = project["id"]
    plan(client, pid, m=10)
    headers = {"Idempotency-Key": "batch-1"}
    first = client.post(f"/projects/{pid}/batches", json={"size": 3, "rater": "h2"}, headers=headers)
    again = client.post(f"/projects/{pid}/batches", json={"size": 3, "rater": "h2"}, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert not set(batch(client, pid, "h2", 10)["items"]) & set(first.json()["items"])  # leased once
