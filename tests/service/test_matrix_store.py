"""The incrementally kept label matrix equals a fresh read of ``current_labels`` after any history.

Two app instances on one database stand for two workers; either may answer a read, and a
"restart" gives one of them an empty store. Writes, corrections, retractions, item uploads,
new raters, kind changes and label-set changes come in any order (hypothesis).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.labels import retract_labels
from service.data.models import Item, Project, Rater
from service.matrices.matrix import LabelMatrix, load_matrix
from service.matrices.store import STORE_KEY, MatrixStore, current_matrix
from tests.conftest import ADMIN_KEY
from tests.factories import create_project

CRITERIA = ["tone", "facts"]
VALUES = ["pass", "fail", "CANNOT_ASSESS", "INVALID"]

label = st.tuples(
    st.just("label"),
    st.lists(
        st.tuples(st.integers(0, 11), st.integers(0, 5), st.sampled_from(CRITERIA), st.sampled_from(VALUES)),
        min_size=1,
        max_size=8,
    ),
)
cell = st.tuples(st.integers(0, 11), st.integers(0, 5), st.sampled_from(CRITERIA))
retraction = st.tuples(st.just("retract"), st.lists(cell, max_size=6))
items = st.tuples(st.just("items"), st.integers(1, 3))
rater = st.tuples(st.just("rater"), st.sampled_from(["human", "judge"]))
kind = st.tuples(st.just("kind"), st.integers(0, 5))
relabel = st.tuples(st.just("labels"), st.sampled_from([["pass", "fail"], ["fail", "pass"], ["pass", "fail", "meh"]]))
restart = st.tuples(st.just("restart"), st.integers(0, 1))
operations = st.lists(
    st.one_of(label, label, retraction, items, rater, kind, relabel, restart), min_size=1, max_size=10
)


@pytest.fixture
def workers(settings: Settings) -> Iterator[list[TestClient]]:
    """Two clients of two app instances on the same database (two workers)."""
    with ExitStack() as stack:
        clients = [stack.enter_context(TestClient(create_app(settings), raise_server_exceptions=False)) for _ in "ab"]
        for c in clients:
            c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield clients


def _same(kept: LabelMatrix, fresh: LabelMatrix) -> None:
    assert kept.label_seq == fresh.label_seq
    assert kept.raters == fresh.raters
    np.testing.assert_array_equal(kept.item_ids, fresh.item_ids)
    np.testing.assert_array_equal(kept.raw, fresh.raw)
    np.testing.assert_array_equal(kept.order, fresh.order)
    assert kept.order.dtype == np.int32  # label_seq below 2**31: half the bytes an update copies
    np.testing.assert_array_equal(kept.codes, fresh.codes)


def _check(worker: TestClient, pid: str) -> None:
    with session_scope(worker.app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        for criterion in CRITERIA:
            _same(current_matrix(session, project, criterion), load_matrix(session, project, criterion))


def _apply(worker: TestClient, pid: str, op: tuple[Any, ...], n_items: list[int]) -> None:
    """One operation through the API (the retraction through the Label Studio path's store call)."""
    raters = worker.get(f"/projects/{pid}/raters", params={"limit": 100}).json()["items"]
    if op[0] == "label":
        rows = [
            {
                "item": f"i{i % n_items[0]}",
                "rater": rater["external_id"],
                "criterion": c,
                "value": "fail" if v == "INVALID" and rater["kind"] != "judge" else v,
            }
            for i, r, c, v in op[1]
            for rater in [raters[r % len(raters)]]
        ]
        cells = {(x["item"], x["rater"], x["criterion"]): x for x in rows}  # one value per cell
        r = worker.post(f"/projects/{pid}/labels", json=list(cells.values()))
        assert r.status_code == 200, r.text
    elif op[0] == "retract":
        with session_scope(worker.app.state.sessions, write=True) as session:  # type: ignore[attr-defined]
            project = session.get(Project, pid)
            assert project is not None
            ids = dict(session.query(Item.external_id, Item.id).filter(Item.project_id == pid).all())
            rids = [r for (r,) in session.query(Rater.id).filter(Rater.project_id == pid).order_by(Rater.id).all()]
            cells = [(ids[f"i{i % n_items[0]}"], rids[r % len(rids)], c) for i, r, c in op[1]]
            retract_labels(session, project, cells)
    elif op[0] == "items":
        new = [{"external_id": f"i{n_items[0] + k}"} for k in range(op[1])]
        assert worker.post(f"/projects/{pid}/items", json=new).status_code == 200
        n_items[0] += op[1]
    elif op[0] == "rater":
        body = {"external_id": f"r{len(raters)}", "kind": op[1]}
        assert worker.post(f"/projects/{pid}/raters", json=body).status_code == 201
    elif op[0] == "kind":
        target = raters[op[1] % len(raters)]
        new_kind = "human" if target["kind"] == "judge" else "judge"
        r = worker.patch(f"/projects/{pid}/raters/{target['id']}", json={"kind": new_kind})
        assert r.status_code in (200, 409, 422), r.text
    elif op[0] == "labels":
        r = worker.patch(f"/projects/{pid}", json={"labels": op[1]})
        assert r.status_code in (200, 409, 422), r.text
    elif op[0] == "restart":
        worker.app.state.sessions.kw["info"][STORE_KEY] = MatrixStore()  # type: ignore[attr-defined]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, readers=st.lists(st.integers(0, 1), min_size=10, max_size=10))
def test_kept_matrix_equals_a_fresh_read_after_any_history(
    workers: list[TestClient], ops: list[tuple[Any, ...]], readers: list[int]
) -> None:
    pid = create_project(workers[0], criteria=CRITERIA, allow_abstain=True, items=[f"i{k}" for k in range(6)])
    n_items = [6]
    for k, op in enumerate(ops):
        _apply(workers[k % 2], pid, op, n_items)
        _check(workers[readers[k]], pid)
    _check(workers[0], pid)
    _check(workers[1], pid)


def test_a_write_after_a_read_reaches_the_next_read_through_the_events(workers: list[TestClient]) -> None:
    """The second read applies one event to the kept matrix (not a re-read): the kept array is extended."""
    pid = create_project(workers[0], items=["a", "b"])
    body = [{"item": "a", "rater": "judge", "value": "pass"}]
    assert workers[0].post(f"/projects/{pid}/labels", json=body).status_code == 200
    store = workers[0].app.state.sessions.kw["info"][STORE_KEY]  # type: ignore[attr-defined]
    with session_scope(workers[0].app.state.sessions) as session:  # type: ignore[attr-defined]
        first = store.matrix(session, session.get(Project, pid), "default")
    assert workers[1].post(f"/projects/{pid}/labels", json=[{**body[0], "value": "fail"}]).status_code == 200
    with session_scope(workers[0].app.state.sessions) as session:  # type: ignore[attr-defined]
        second = store.matrix(session, session.get(Project, pid), "default")
    assert (first.label_seq, second.label_seq) == (1, 2)
    assert first.raw[0, 0] == 0 and second.raw[0, 0] == 1  # the first matrix was not changed under its readers
    assert second.order[0, 0] == 1  # a correction keeps its cell's arrival rank (docs/method.md §8.2)
    with pytest.raises(ValueError):
        second.raw[0, 0] = 0
