"""Concurrency soak (issue 8): 50 annotator clients on loopback mix batch requests, label posts
and reliability polls against a real server for a set number of requests; then no response was
a 5xx, no (rater, item) was issued twice, and the labels stored equal the labels acknowledged.

``run_soak`` is shared with ``bench/soak.py``, which runs it at a larger count and prints the
throughput. Runs on a SQLite file, or on PostgreSQL when ``ANNOPLAN_TEST_DATABASE_URL`` is set.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer

BATCH_SIZE = 5
OK = {"batch": {200}, "label": {200}, "poll": {200, 304}}


@dataclass(frozen=True)
class SoakResult:
    """What the clients did and what the server holds afterwards."""

    requests: int
    seconds: float
    statuses: Counter  # (kind, status) -> count
    errors: list[str]  # 5xx, unexpected statuses and transport errors
    issued: list[tuple[str, str]]  # (rater, item) of every item in every issued batch
    acked_labels: int  # sum of `accepted` over acknowledged label posts
    acked_cells: set[tuple[str, str]]  # (rater, item) posted in acknowledged label posts
    stored_cells: set[tuple[str, str]]  # (rater, item) of the soak raters' current labels after the run
    label_events: int  # label events written during the run (label_seq after - before)

    @property
    def duplicates(self) -> int:
        return len(self.issued) - len(set(self.issued))

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds


@dataclass
class _Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    issued: list[tuple[str, str]] = field(default_factory=list)
    acked_labels: int = 0
    acked_cells: set[tuple[str, str]] = field(default_factory=set)

    def record(self, kind: str, response: httpx.Response) -> bool:
        with self.lock:
            self.statuses[kind, response.status_code] += 1
            if response.status_code not in OK[kind]:
                self.errors.append(f"{kind} {response.request.url.path}: {response.status_code} {response.text[:200]}")
                return False
        return True


def _setup(server: LiveServer, *, n_items: int, n_raters: int, m: int) -> tuple[str, dict[str, str], str]:
    """A project with a judge and a primary who labeled everything, ``n_raters`` secondaries, a plan;
    returns the project id, an annotator key per secondary and a viewer key."""
    raters = [f"h{k}" for k in range(n_raters)]
    with server.client() as c:
        pid = c.post("/projects", json={"name": "soak", "labels": ["pass", "fail"]}).json()["id"]
        for ext, kind in [("judge", "judge"), ("prim", "primary"), *((r, "human") for r in raters)]:
            assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        items = [f"i{i}" for i in range(n_items)]
        assert c.post(f"/projects/{pid}/items", json=[{"external_id": i} for i in items]).status_code == 200
        rng = random.Random(0)
        rows = [
            {"item": i, "rater": r, "value": rng.choice(("pass", "fail"))} for i in items for r in ("judge", "prim")
        ]
        assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
        r = c.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 1, "m": m})
        assert r.status_code == 201, r.text

        def key(body: dict) -> str:
            r = c.post(f"/projects/{pid}/keys", json=body)
            assert r.status_code == 201, r.text
            return r.json()["key"]

        return pid, {r: key({"role": "annotator", "rater": r}) for r in raters}, key({"role": "viewer"})


def _client(
    server: LiveServer,
    pid: str,
    rater: str,
    key: str,
    viewer: str,
    n_requests: int,
    seed: int,
    tally: _Tally,
    start: threading.Barrier,
) -> None:
    """One annotator: 40% batch requests, 40% label posts of a held batch, 20% reliability polls."""
    rng = random.Random(seed)
    held: list[tuple[str, list[str]]] = []
    etag = None
    annotator, dashboard = {"Authorization": f"Bearer {key}"}, {"Authorization": f"Bearer {viewer}"}
    # one connection per client, dropped after 4 s idle: before uvicorn's 5 s keep-alive timeout closes
    # it, so a request never races the server's close of an idle connection
    with server.client(limits=httpx.Limits(keepalive_expiry=4)) as c:
        start.wait()
        for _ in range(n_requests):
            roll = rng.random()
            try:
                if roll < 0.2:
                    r = c.get(
                        f"/projects/{pid}/reliability",
                        headers={**dashboard, **({"If-None-Match": etag} if etag else {})},
                    )
                    if tally.record("poll", r):
                        etag = r.headers.get("etag", etag)
                elif roll < 0.6 and held:
                    bid, items = held.pop(0)
                    rows = [
                        {"item": i, "rater": rater, "value": rng.choice(("pass", "fail")), "batch": bid} for i in items
                    ]
                    r = c.post(f"/projects/{pid}/labels", json=rows, headers=annotator)
                    if tally.record("label", r):
                        with tally.lock:
                            tally.acked_labels += r.json()["accepted"]
                            tally.acked_cells.update((rater, i) for i in items)
                else:
                    r = c.post(f"/projects/{pid}/batches", json={"size": BATCH_SIZE}, headers=annotator)
                    if tally.record("batch", r) and r.json()["items"]:
                        body = r.json()
                        with tally.lock:
                            if body["rater"] != rater:
                                tally.errors.append(f"annotator of {rater} was issued a batch of {body['rater']}")
                            tally.issued.extend((body["rater"], i) for i in body["items"])
                        held.append((body["id"], body["items"]))
            except httpx.TransportError as exc:
                with tally.lock:
                    tally.errors.append(f"transport error: {exc!r}")


def run_soak(
    server: LiveServer,
    *,
    clients: int = 50,
    requests: int = 1_500,
    n_raters: int = 10,
    n_items: int = 400,
    m: int = 200,
    seed: int = 0,
) -> SoakResult:
    """``clients`` threads, each an annotator of one of ``n_raters`` secondaries, share ``requests``."""
    pid, keys, viewer = _setup(server, n_items=n_items, n_raters=n_raters, m=m)
    raters = sorted(keys)
    with server.client() as c:
        seq_before = c.get(f"/projects/{pid}").json()["label_seq"]
    tally = _Tally()
    start = threading.Barrier(clients + 1)
    shares = [requests // clients + (k < requests % clients) for k in range(clients)]
    threads = [
        threading.Thread(
            target=_client,
            args=(
                server,
                pid,
                raters[k % n_raters],
                keys[raters[k % n_raters]],
                viewer,
                shares[k],
                seed * 1_000 + k,
                tally,
                start,
            ),
        )
        for k in range(clients)
    ]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - began
    with server.client() as c:
        seq_after = c.get(f"/projects/{pid}").json()["label_seq"]
        r = c.get(f"/projects/{pid}/labels", params={"format": "ndjson"})
        assert r.status_code == 200, r.text
    rows = [json.loads(line) for line in r.content.splitlines() if line.strip()]
    stored = {(row["rater"], row["item"]) for row in rows if row["rater"] in keys}
    return SoakResult(
        requests=sum(tally.statuses.values()) + sum(e.startswith("transport") for e in tally.errors),
        seconds=seconds,
        statuses=tally.statuses,
        errors=tally.errors,
        issued=tally.issued,
        acked_labels=tally.acked_labels,
        acked_cells=tally.acked_cells,
        stored_cells=stored,
        label_events=seq_after - seq_before,
    )


def test_soak_50_clients_no_5xx_no_duplicate_assignment_labels_match(database_url: str) -> None:
    with LiveServer(database_url, ADMIN_KEY, bootstrap_resamples=20) as server:
        result = run_soak(server, clients=50, requests=1_500)
    assert result.requests == 1_500
    assert result.errors == []
    assert not any(status >= 500 for _, status in result.statuses)
    kinds = Counter(kind for kind, _ in result.statuses.elements())
    assert min(kinds.values()) >= 150, kinds  # every kind of request was really exercised
    assert result.issued and result.duplicates == 0
    assert result.stored_cells == result.acked_cells  # every acknowledged label is stored, nothing else
    assert result.acked_labels == len(result.acked_cells) == result.label_events
    assert result.acked_cells <= set(result.issued)  # annotators labeled only what they were issued
