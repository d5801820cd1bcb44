"""A dashboard answers at once after a write: the newest computed document, marked, while one background
thread computes the fresh one (stale while refresh); reads hand what their look records to the background and
store no pool-score point.

The fresh computation is held on an event, so "at once" is shown without timing anything.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

import service.documents.history_keeper as history_keeper
import service.documents.history_replays as history_replays
import service.documents.looks as looks
from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.models import Base, Job, PoolScore, ShownDecision
from tests.conftest import ADMIN_KEY
from tests.factories import create_project

ITEMS = [f"i{k}" for k in range(12)]


@pytest.fixture
def impatient(settings: Settings) -> Iterator[TestClient]:
    """A client of an app whose dashboards do not wait for a fresh document at all."""
    with TestClient(
        create_app(settings.model_copy(update={"dashboard_wait_seconds": 0})), raise_server_exceptions=False
    ) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield client


class Held:
    """``reliability_document`` counting its calls and waiting for :meth:`release` before it computes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.calls = 0
        self.gate = threading.Event()
        original = looks.reliability_document

        def held(*args: Any, **kwargs: Any) -> dict[str, Any]:
            self.calls += 1
            assert self.gate.wait(60), "never released"
            return original(*args, **kwargs)

        monkeypatch.setattr(looks, "reliability_document", held)

    def release(self) -> None:
        self.gate.set()


def _write(client: TestClient, pid: str, rater: str, flip: int = 0) -> int:
    rows = [{"item": i, "rater": rater, "value": "pass" if (k + flip) % 3 else "fail"} for k, i in enumerate(ITEMS)]
    r = client.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text
    return int(r.json()["label_seq"])


def _labelled(client: TestClient) -> tuple[str, int]:
    """A project every rater of the panel has labelled, and its label_seq."""
    pid = create_project(client, items=ITEMS)
    for rater in ("judge", "prim", "h2", "h3"):
        now = _write(client, pid, rater)
    return pid, now


def _turn(client: TestClient) -> list[tuple[str, int, float | None]]:
    """The job queue's history turn, taken now: the points it stored (it queues the replays due)."""
    points, _ = history_keeper.store_due_points(client.app.state.sessions, "")  # type: ignore[attr-defined]
    return points


def replayed(client: TestClient, pid: str, timeout: float = 30.0) -> None:
    """Wait for the job queue's replay of the project's history to be done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
            key = history_replays.replay_key(pid, "default")
            if session.scalar(select(Job.state).where(Job.kind == history_replays.KIND, Job.key == key)) == "done":
                return
        time.sleep(0.05)
    raise AssertionError("the history replay did not end")


def _shown_seq(page: str) -> int:
    found = re.search(r'<span id="label-seq">(\d+)</span>', page)
    assert found, page[:500]
    return int(found.group(1))


def test_after_a_write_the_dashboard_shows_the_newest_document_marked_while_one_thread_refreshes(
    impatient: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = create_project(impatient, items=ITEMS)
    for rater in ("judge", "prim", "h2"):
        first = _write(impatient, pid, rater)
    page = impatient.get(f"/projects/{pid}/dashboard").text  # nothing computed yet: waits for the fresh one
    assert _shown_seq(page) == first and 'id="freshness"' not in page and 'data-refreshing="false"' in page
    etag = re.search(r'data-etag="([^"]+)"', page)
    assert etag
    now = _write(impatient, pid, "h3")
    held = Held(monkeypatch)
    pages = [impatient.get(f"/projects/{pid}/dashboard") for _ in range(3)]
    for r in pages:
        assert r.status_code == 200 and _shown_seq(r.text) == first
        assert f"{now - first} label events since, refreshing" in r.text and 'data-refreshing="true"' in r.text
        assert f'data-etag="{etag.group(1)}"' in r.text  # the page polls with the shown document's ETag
    index = impatient.get("/dashboard").text
    assert f"(at label_seq {first}; refreshing)" in index
    held.release()
    impatient.app.state.documents.settle()  # type: ignore[attr-defined]
    assert held.calls == 1  # three views and the index: one background computation
    page = impatient.get(f"/projects/{pid}/dashboard").text
    assert _shown_seq(page) == now and 'id="freshness"' not in page
    fresh = impatient.get(f"/projects/{pid}/reliability").json()
    assert fresh["label_seq"] == now and held.calls == 1  # the one the background computed
    assert "; refreshing)" not in impatient.get("/dashboard").text


def test_reliability_itself_is_never_an_older_document(impatient: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    pid = create_project(impatient, items=ITEMS)
    for rater in ("judge", "prim", "h2"):
        _write(impatient, pid, rater)
    assert impatient.get(f"/projects/{pid}/dashboard").status_code == 200
    now = _write(impatient, pid, "h3")
    held = Held(monkeypatch)
    assert "label events since, refreshing" in impatient.get(f"/projects/{pid}/dashboard").text
    answer: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: answer.append(impatient.get(f"/projects/{pid}/reliability").json()))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive()  # /reliability waits for the fresh document (the one being computed)
    held.release()
    reader.join(60)
    assert answer[0]["label_seq"] == now and held.calls == 1


def test_other_settings_or_another_worker_without_a_document_wait_for_the_fresh_one(
    impatient: TestClient, settings: Settings
) -> None:
    pid, now = _labelled(impatient)
    assert _shown_seq(impatient.get(f"/projects/{pid}/dashboard").text) == now
    r = impatient.patch(f"/projects/{pid}", json={"decision": {"rule": "alt-test"}})
    assert r.status_code == 200, r.text
    now = _write(impatient, pid, "h3", flip=1)
    page = impatient.get(f"/projects/{pid}/dashboard").text  # a document under the old rule is not shown
    assert _shown_seq(page) == now and "alt-test" in page and 'id="freshness"' not in page
    with TestClient(create_app(settings.model_copy(update={"dashboard_wait_seconds": 0}))) as other:
        other.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        now = _write(other, pid, "h2", flip=1)
        assert _shown_seq(other.get(f"/projects/{pid}/dashboard").text) == now


def test_a_read_hands_what_its_look_records_to_the_background_and_stores_no_pool_score_point(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read is a look: the pass or reject it shows is recorded by a background thread it does not wait for
    (docs/method.md §8.3); the pool-score point is the history turn's, not the read's."""
    n_items, rng = 200, np.random.default_rng(3)
    truth = rng.integers(0, 2, n_items)
    pid = create_project(client, items=[f"i{k}" for k in range(n_items)], order_seed=7)
    rows = [  # a judge right .95 of the time, three humans .8: passed at the first look
        {"item": f"i{k}", "rater": rater, "value": ("pass", "fail")[int(t if rng.random() < p else 1 - t)]}
        for rater, p in (("judge", 0.95), ("prim", 0.8), ("h2", 0.8), ("h3", 0.8))
        for k, t in enumerate(truth)
    ]
    r = client.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text
    now = int(r.json()["label_seq"])
    gate, stored = threading.Event(), []
    original = looks.store_shown

    def slow_store(*args: Any) -> None:  # a database whose one writer is busy
        assert gate.wait(60)
        original(*args)
        stored.append(args[-1])

    monkeypatch.setattr(looks, "store_shown", slow_store)
    doc = client.get(f"/projects/{pid}/reliability").json()  # answered while the record waits
    assert doc["label_seq"] == now and stored == [] and doc["decision"] in ("pass", "reject")
    gate.set()
    client.app.state.documents.settle()  # type: ignore[attr-defined]
    assert [(r["j"], r["d"], r["s"]) for r in stored[0]] == [(doc["judge"], doc["decision"], now)]
    with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
        assert session.scalar(select(ShownDecision.decision).where(ShownDecision.project_id == pid)) == doc["decision"]
        assert session.execute(select(PoolScore).where(PoolScore.project_id == pid)).first() is None


def test_the_history_before_the_first_stored_point_is_replayed_in_the_background(
    impatient: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid, now = _labelled(impatient)
    gate, original = threading.Event(), history_replays.pool_history
    monkeypatch.setattr(history_replays, "pool_history", lambda *a, **k: gate.wait(60) and original(*a, **k))
    r = impatient.get(f"/projects/{pid}/dashboard/charts/pool-history.csv")
    assert r.status_code == 200 and [line.split(",")[0] for line in r.text.splitlines()[1:]] == [str(now)]
    assert [(p, s) for p, s, _ in _turn(impatient)] == [(pid, now)]  # the turn's first point queues the replay
    r = impatient.get(f"/projects/{pid}/dashboard/charts/pool-history.csv")
    assert r.status_code == 200 and [line.split(",")[0] for line in r.text.splitlines()[1:]] == [str(now)]
    gate.set()
    replayed(impatient, pid)
    seqs = [
        int(line.split(",")[0])
        for line in impatient.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text.splitlines()[1:]
    ]
    assert len(seqs) == 8 and seqs[-1] == now  # the 8 replayed points, the last one the document's


def test_while_the_history_is_replayed_the_page_says_how_far_and_reloads_until_done(
    impatient: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid, now = _labelled(impatient)
    gate, stretches, original = threading.Event(), [], history_replays.validate_judge

    def second_stretch_held(*args: Any, **kwargs: Any) -> Any:
        stretches.append(1)
        if len(stretches) == 2:
            assert gate.wait(60), "never released"
        return original(*args, **kwargs)

    monkeypatch.setattr(history_replays, "validate_judge", second_stretch_held)
    page = impatient.get(f"/projects/{pid}/dashboard").text
    assert 'data-history-rebuilding="true"' in page and "History being rebuilt: reading the events." in page
    _turn(impatient)
    for _ in range(200):  # the replay thread reaches its second stretch
        if len(stretches) == 2:
            break
        threading.Event().wait(0.05)
    page = impatient.get(f"/projects/{pid}/dashboard").text
    found = re.search(
        r'<p id="history-rebuilding" class="refreshing">History being rebuilt: (\d+) of (\d+) events\.', page
    )
    assert found, page
    done, total = int(found.group(1)), int(found.group(2))
    assert total == len(ITEMS) * 4 == now and 0 < done < total  # every event of the 4 raters; one stretch applied
    assert 'data-history-rebuilding="true"' in page
    gate.set()
    replayed(impatient, pid)
    page = impatient.get(f"/projects/{pid}/dashboard").text
    assert 'id="history-rebuilding"' not in page and 'data-history-rebuilding="false"' in page
    csv = impatient.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text
    assert len(csv.splitlines()[1:]) == 8  # the replayed points drawn once it is done


def test_an_api_process_that_runs_no_jobs_leaves_the_replay_to_the_job_queue(settings: Settings) -> None:
    """Issue 32: the replay is queue work, queued by the history turn; the api process only reads how far it has
    come (issue 27: a view queues nothing)."""
    quiet = settings.model_copy(update={"dashboard_wait_seconds": 0, "api_runs_jobs": False})
    with TestClient(create_app(quiet), raise_server_exceptions=False) as api:
        api.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        pid, now = _labelled(api)
        csv = api.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text
        assert [line.split(",")[0] for line in csv.splitlines()[1:]] == [str(now)]
        page = api.get(f"/projects/{pid}/dashboard").text
        assert "History being rebuilt: reading the events." in page  # not queued yet: the turn queues it
        sessions = api.app.state.sessions  # type: ignore[attr-defined]
        key = history_replays.replay_key(pid, "default")
        with session_scope(sessions) as session:
            assert session.scalar(select(Job.state).where(Job.kind == history_replays.KIND, Job.key == key)) is None
        _turn(api)
        assert "History being rebuilt: reading the events." in api.get(f"/projects/{pid}/dashboard").text
        with session_scope(sessions) as session:
            assert session.scalar(select(Job.state).where(Job.kind == history_replays.KIND, Job.key == key)) == (
                "queued"
            )
        worker = history_replays.HistoryReplayer(sessions, quiet, owner="test-worker")
        assert worker.run_once() == 1 and worker.run_once() == 0  # once, by the worker
        with session_scope(sessions) as session:
            job = session.scalar(select(Job).where(Job.kind == history_replays.KIND, Job.key == key))
            assert job is not None and job.state == "done" and job.result == {"points": 8}
            assert job.payload["done"] == job.payload["total"] == now
        csv = api.get(f"/projects/{pid}/dashboard/charts/pool-history.csv").text
        assert len(csv.splitlines()[1:]) == 8
        assert 'id="history-rebuilding"' not in api.get(f"/projects/{pid}/dashboard").text


def _rows(client: TestClient) -> dict[str, int]:
    """Rows of every table but the looks' shown decisions, and of jobs but the periodic turns' own rows."""
    with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
        rows = {t.name: session.scalar(select(func.count()).select_from(t)) or 0 for t in Base.metadata.sorted_tables}
        rows["jobs"] = session.scalar(select(func.count()).select_from(Job).where(Job.kind != "periodic")) or 0
    del rows["shown_decisions"]
    return rows


def test_a_dashboard_view_and_the_history_downloads_write_no_row(client: TestClient) -> None:
    """Issue 27: views are reads. A labelled project with no stored history: its dashboard and the history's
    CSV and SVG add no row to any table (no replay job, no pool-score point), and the turn then queues the one
    replay and stores the point."""
    pid, now = _labelled(client)
    before = _rows(client)
    page = client.get(f"/projects/{pid}/dashboard")
    for chart in ("pool-history.csv", "pool-history.svg"):
        assert client.get(f"/projects/{pid}/dashboard/charts/{chart}").status_code == 200
    client.app.state.documents.settle()  # type: ignore[attr-defined]
    assert _rows(client) == before
    assert page.status_code == 200 and "History being rebuilt: reading the events." in page.text  # not queued
    assert [(p, s) for p, s, _ in _turn(client)] == [(pid, now)]
    after = _rows(client)
    assert (
        after["jobs"] == before["jobs"] + 1 and after["pool_scores"] > before["pool_scores"]
    )  # the replay may have run
