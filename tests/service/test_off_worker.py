"""Issue 16 item 5: large computations leave the web worker (service.core.offload.off_worker).

The documents a child process computes are the ones computed in place, exceptions cross back
with their status and code, and a child that dies is an error, never a hang.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service.core import offload as cancellable
from service.core.errors import Conflict
from service.core.offload import ComputationLost, off_worker, off_worker_each
from service.documents import reliability
from service.documents.monitoring import MONITOR_KEY
from service.documents.reliability import DocumentCache
from service.matrices.matrix import LabelMatrix, RaterColumn
from service.matrices.shared import SharedMatrix
from tests.factories import create_project

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"), ("h4", "human"))


def _refuse(detail: str) -> None:
    raise Conflict(detail, code="no_pilot")


def _die() -> None:
    os._exit(3)


def test_off_worker_computes_in_place_below_the_threshold_and_in_a_child_from_it() -> None:
    here = os.getpid()
    assert off_worker(cancellable.OFF_WORKER_CELLS - 1, os.getpid) == here
    assert off_worker(cancellable.OFF_WORKER_CELLS, os.getpid) != here
    assert off_worker(10**9, np.add, np.arange(3), 1).tolist() == [1, 2, 3]


def test_a_childs_error_is_raised_in_the_request_with_its_code() -> None:
    with pytest.raises(Conflict) as caught:
        off_worker(10**9, _refuse, "no overlap yet")
    assert caught.value.code == "no_pilot" and caught.value.detail == "no overlap yet"
    assert "_refuse" in str(caught.value.__cause__)  # the child's traceback travels with it


def test_a_child_that_dies_is_an_error_not_a_hang() -> None:
    with pytest.raises(ComputationLost, match="exit code 3"):
        off_worker(10**9, _die)


def _meet(folder: str) -> tuple[int, bool]:
    """Its pid, and whether another child signed ``folder`` while it waited (both ran at once)."""
    with open(os.path.join(folder, str(os.getpid())), "w"):
        pass
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return os.getpid(), len(os.listdir(folder)) == 2


def _pid_after(seconds: float, path: str) -> int:
    """Writes its pid to ``path`` first, so the test can see whether it still runs."""
    with open(path, "w") as out:
        out.write(str(os.getpid()))
    time.sleep(seconds)
    return os.getpid()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_off_worker_each_computes_at_once_in_children_and_in_place_below_the_threshold(tmp_path) -> None:
    here = os.getpid()
    assert off_worker_each(cancellable.OFF_WORKER_CELLS - 1, (os.getpid, (), {}), (round, (2.5,), {"ndigits": 0})) == [
        here,
        2.0,
    ]
    (first, met), (second, met_too) = off_worker_each(
        10**9, (_meet, (str(tmp_path),), {}), (_meet, (str(tmp_path),), {})
    )
    assert here != first != second != here and met and met_too  # side by side, not one after the other
    assert multiprocessing.active_children() == []  # every child joined


@pytest.mark.parametrize("failing", [_refuse, _die])
def test_the_first_failing_child_is_raised_at_once_and_the_others_are_killed(failing, tmp_path) -> None:
    marker = tmp_path / "pid"
    start = time.perf_counter()
    with pytest.raises((Conflict, ComputationLost)):
        off_worker_each(
            10**9, (_pid_after, (60, str(marker)), {}), (failing, ("no overlap yet",) if failing is _refuse else (), {})
        )
    assert time.perf_counter() - start < 30  # not after the 60 s sibling
    assert multiprocessing.active_children() == []  # killed and joined: no zombie
    if marker.exists() and marker.read_text():
        assert not _alive(int(marker.read_text()))


def _matrix_seen(matrix: LabelMatrix) -> dict[str, object]:
    return {
        "raw": (matrix.raw.dtype.str, matrix.raw.tolist(), matrix.raw.flags.writeable),
        "order": (matrix.order.dtype.str, matrix.order.tolist()),
        "item_ids": matrix.item_ids.tolist(),
        "codes": matrix.codes.tolist(),
        "rest": (matrix.raters, matrix.n_labels, matrix.label_seq, matrix.criterion),
    }


def test_a_shared_matrix_reaches_children_as_the_same_matrix_in_compact_types() -> None:
    rng = np.random.default_rng(3)
    raw = rng.integers(-1, 5, size=(50, 4))  # 3 labels, CANNOT_ASSESS (3) and INVALID (4)
    order = np.where(raw >= 0, rng.permutation(raw.size).reshape(raw.shape) + 2**20, -1)
    raters = [RaterColumn(7 + k, f"r{k}", "human") for k in range(4)]
    matrix = LabelMatrix(
        raw=raw, item_ids=rng.permutation(50) * 11, raters=raters, n_labels=3, label_seq=99, criterion="c", order=order
    )
    with SharedMatrix(matrix) as shared:
        first, second = off_worker_each(10**9, (_matrix_seen, (shared,), {}), (_matrix_seen, (shared,), {}))
    want = _matrix_seen(matrix)
    for seen in (first, second):
        assert seen["raw"] == ("|i1", want["raw"][1], False)  # type: ignore[index]
        assert seen["order"] == ("<i4", want["order"][1])  # type: ignore[index]
        same = ("item_ids", "codes", "rest")
        assert {k: seen[k] for k in same} == {k: want[k] for k in same}
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(shared)


def test_a_shared_matrix_of_no_items_reaches_a_child_empty() -> None:
    raters = [RaterColumn(1, "j", "judge"), RaterColumn(2, "p", "primary")]
    empty = np.empty((0, 2), dtype=np.int8)
    matrix = LabelMatrix(
        raw=empty, item_ids=np.empty(0, np.int64), raters=raters, n_labels=2, label_seq=0, criterion="c", order=empty
    )
    with SharedMatrix(matrix) as shared:
        [seen] = off_worker_each(10**9, (_matrix_seen, (shared,), {}))
    assert seen["raw"] == ("|i1", [], False) and seen["order"] == ("<i4", []) and seen["item_ids"] == []


def _labelled_project(client: TestClient, n_items: int) -> str:
    pid = create_project(client, raters=RATERS, items=[f"i{k}" for k in range(n_items)])
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 2, n_items)
    for rater, _ in RATERS:
        values = np.where(rng.random(n_items) < 0.85, truth, 1 - truth)
        rows = [{"item": f"i{k}", "rater": rater, "value": ("pass", "fail")[v]} for k, v in enumerate(values)]
        assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def _documents(client: TestClient, pid: str) -> dict[str, object]:
    client.app.state.documents = DocumentCache()  # type: ignore[attr-defined]  # computed afresh
    out: dict[str, object] = {}
    for name, body in [
        ("prior", {"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 5}),
        ("pilot", {"source": "pilot", "design": "neyman", "seed": 5}),
    ]:
        r = client.post(f"/projects/{pid}/plan", json=body)
        assert r.status_code == 201, r.text
        out[f"plan {name}"] = r.json()["recipe"]
    for path in ("reliability", "ranking", "report"):
        r = client.get(f"/projects/{pid}/{path}")
        assert r.status_code == 200, r.text
        out[path] = r.json()
    out["reliability"]["plan"].pop("plan")  # type: ignore[index]  # the id of the newest plan, new each round
    return out


def test_plans_documents_and_reports_computed_off_the_worker_are_those_computed_in_place(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _labelled_project(client, 120)
    in_place = _documents(client, pid)
    monkeypatch.setattr(cancellable, "OFF_WORKER_CELLS", 0)
    children = _documents(client, pid)
    assert children == in_place
    assert in_place["report"]["judges"] and in_place["reliability"]["raters"]  # type: ignore[index]


def test_a_worker_keeping_monitorings_hands_its_statistics_child_the_item_patterns_not_the_matrix(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statistics' child reads the few thousand item patterns the worker built: no shared-memory copy of the
    matrix is made (at 1M x 10 it was 58 MB written and mapped per document) unless the monitoring runs in a
    child too; the document is the one computed in place."""
    pid = _labelled_project(client, 60)
    in_place = client.get(f"/projects/{pid}/reliability").json()
    shared: list[int] = []
    monkeypatch.setattr(reliability, "SharedMatrix", lambda m: shared.append(m.raw.size) or SharedMatrix(m))
    monkeypatch.setattr(cancellable, "OFF_WORKER_CELLS", 0)
    client.app.state.documents = DocumentCache()  # type: ignore[attr-defined]  # computed afresh
    assert client.get(f"/projects/{pid}/reliability").json() == in_place
    assert shared == []
    client.app.state.documents = DocumentCache()  # type: ignore[attr-defined]
    monkeypatch.setitem(client.app.state.sessions.kw["info"], MONITOR_KEY, None)  # type: ignore[attr-defined]
    assert client.get(f"/projects/{pid}/reliability").json() == in_place
    assert shared == [60 * len(RATERS)]  # the monitoring's child maps the matrix


def _die_with(*_: object, **__: object) -> None:
    os._exit(9)


def test_a_document_whose_child_dies_is_a_503_and_the_next_request_computes_it(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _labelled_project(client, 60)
    monkeypatch.setattr(cancellable, "OFF_WORKER_CELLS", 0)
    for computation in ("judge_monitorings", "document_statistics"):  # the monitoring in a child or in the worker
        with monkeypatch.context() as patch:
            patch.setattr(reliability, computation, _die_with)
            if computation == "judge_monitorings":  # a worker keeping no monitorings: both in children
                patch.setitem(client.app.state.sessions.kw["info"], MONITOR_KEY, None)  # type: ignore[attr-defined]
            r = client.get(f"/projects/{pid}/reliability")
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "computation_lost" and "exit code 9" in r.json()["detail"]
        assert multiprocessing.active_children() == []  # the sibling killed, all joined
    r = client.get(f"/projects/{pid}/reliability")
    assert r.status_code == 200 and r.json()["judges"], r.text


@pytest.mark.parametrize("prestart", [True, False])
def test_a_starting_worker_starts_the_forkserver_only_when_told(settings, monkeypatch, prestart: bool) -> None:
    from service.app import create_app

    started: list[bool] = []
    monkeypatch.setattr(multiprocessing.forkserver, "ensure_running", lambda: started.append(True))
    with TestClient(create_app(settings.model_copy(update={"computing_prestart": prestart}))) as c:
        assert c.get("/healthz").status_code == 200
        assert started == ([True] if prestart else [])
