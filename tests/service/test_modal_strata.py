"""A worker's kept modal strata (service.matrices.modal_strata) brought up to date from the label events since
equal the modal strata computed afresh from every label in hand, whatever the writes in between:
new labels, changed labels, CANNOT_ASSESS, retractions, labels of the judge (not in hand). The
warmer computes them ahead of the batches, once per plan."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from service.core.db import session_scope
from service.data.labels import retract_labels
from service.data.models import Item, Project, Rater
from service.documents.sessions import worker_sessionmaker
from service.matrices.modal_strata import MODAL_KEY, ModalStore, StrataWarmer, _from_matrix
from service.matrices.store import STORE_KEY, MatrixStore

RATERS = [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"), ("h4", "human")]
VALUES = ["a", "b", "c", "CANNOT_ASSESS"]
N_ITEMS = 12

writes = st.lists(
    st.tuples(st.sampled_from([r for r, _ in RATERS]), st.integers(0, N_ITEMS - 1), st.sampled_from([*VALUES, None])),
    min_size=1,
    max_size=25,
)


def modal_of(rows: dict[tuple[str, int], str]) -> list[int]:
    """The modal stratum of every item by hand: the mode of the primary's and humans' labels in hand
    (CANNOT_ASSESS is not one), ties to the primary's label, else the lowest; 3 when none."""
    out = []
    for i in range(N_ITEMS):
        labels = {r: rows[(r, i)] for r, kind in RATERS if kind != "judge" and rows.get((r, i)) in VALUES[:3]}
        if not labels:
            out.append(3)
            continue
        counts = {v: sum(1 for x in labels.values() if x == v) for v in VALUES[:3]}
        top = max(counts.values())
        tied = [v for v in VALUES[:3] if counts[v] == top]
        out.append(VALUES.index(labels["prim"]) if labels.get("prim") in tied else VALUES.index(tied[0]))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(writes, min_size=1, max_size=4))
# two secondaries agree, then only the primary writes: the mode stays theirs, not the primary's label
@example(rounds=[[("h2", 0, "a"), ("h3", 0, "a"), ("prim", 1, "c")], [("prim", 0, "b"), ("prim", 1, None)]])
def test_kept_strata_equal_fresh_strata_after_any_writes(client, engine: Engine, rounds) -> None:
    pid = client.post("/projects", json={"name": "modal", "labels": VALUES[:3], "allow_abstain": True}).json()["id"]
    for ext, kind in RATERS:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(N_ITEMS)]).raise_for_status()
    sessions = worker_sessionmaker(engine, MatrixStore())
    store = ModalStore()
    state: dict[tuple[str, int], str] = {}
    for k, round_ in enumerate(rounds):
        last = {(r, i): v for r, i, v in round_}  # one write per cell and round
        labels = [{"item": f"i{i}", "rater": r, "value": v} for (r, i), v in last.items() if v is not None]
        gone = [cell for cell, v in last.items() if v is None]
        if labels:
            r = client.post(f"/projects/{pid}/labels", json=labels)
            assert r.status_code == 200, r.text
        state |= {cell: v for cell, v in last.items() if v is not None}
        with session_scope(sessions, write=True) as s:
            project = s.get(Project, pid)
            ids = dict(s.execute(select(Rater.external_id, Rater.id).where(Rater.project_id == pid)).all())
            items = dict(s.execute(select(Item.external_id, Item.id).where(Item.project_id == pid)).all())
            if gone:
                retract_labels(s, project, [(items[f"i{i}"], ids[r], project.criteria[0]) for r, i in gone])
        for cell in gone:
            state.pop(cell, None)
        with session_scope(sessions) as s:
            project = s.get(Project, pid)
            kept = store.strata(s, project, project.criteria[0])
            fresh = _from_matrix(s, project, project.criteria[0])
        assert kept.label_seq == fresh.label_seq
        np.testing.assert_array_equal(kept.modal, fresh.modal)
        np.testing.assert_array_equal(kept.primary_labeled, fresh.primary_labeled)
        np.testing.assert_array_equal(kept.secondary_labeled, fresh.secondary_labeled)
        by_item = dict(zip(fresh.item_ids.tolist(), kept.modal.tolist(), strict=True))
        assert [by_item[items[f"i{i}"]] for i in range(N_ITEMS)] == modal_of(state), k


def planned_project(client) -> str:
    """A project of 12 items with primary and secondary labels and a seq-coverage plan."""
    pid = client.post("/projects", json={"name": "warm", "labels": VALUES[:3]}).json()["id"]
    for ext, kind in RATERS:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).raise_for_status()
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(N_ITEMS)]).raise_for_status()
    rows = [
        {"item": f"i{i}", "rater": r, "value": VALUES[(i + k) % 3]}
        for i in range(N_ITEMS)
        for k, r in enumerate(["judge", "prim", "h2"])
        if i < 8 or r != "h2"
    ]
    client.post(f"/projects/{pid}/labels", json=rows).raise_for_status()
    plan(client, pid)
    return pid


def plan(client, pid: str) -> None:
    r = client.post(
        f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "seed": 1, "design": "seq-coverage", "m": 4}
    )
    assert r.status_code == 201, r.text


def test_the_warmer_computes_the_strata_of_each_new_plan_once(client, engine: Engine) -> None:
    """At start it finds the projects with plans; then each newly stored plan's project, once."""
    first, second = planned_project(client), planned_project(client)
    sessions = worker_sessionmaker(engine, MatrixStore())
    warmer = StrataWarmer(sessions)
    assert warmer.run_once() == [second, first]  # newest plan first
    assert warmer.run_once() == []
    plan(client, first)  # a newer plan (another worker's, as far as this warmer knows)
    assert warmer.run_once() == [first]
    store = sessions.kw["info"][MODAL_KEY]
    with session_scope(sessions) as s:
        project = s.get(Project, first)
        kept = store._kept.get((first, project.criteria[0]))
        fresh = _from_matrix(s, project, project.criteria[0])
    assert kept is not None and kept.label_seq == fresh.label_seq == 32
    np.testing.assert_array_equal(kept.modal, fresh.modal)


def test_a_batch_after_the_warm_up_reads_no_label_matrix(client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's warmer computes the strata when the plan is stored (poked by POST /plan): the
    first batches (the secondary's list drawn from them) find them kept."""
    pid = planned_project(client)
    store = client.app.state.sessions.kw["info"][MODAL_KEY]
    deadline = time.monotonic() + 10
    while store._kept.get((pid, "default")) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store._kept.get((pid, "default")) is not None, "not warmed"
    built: list[str] = []
    monkeypatch.setattr("service.matrices.modal_strata._from_matrix", lambda *a: built.append("built"))
    for rater in ("h3", "h4"):
        r = client.post(f"/projects/{pid}/batches", json={"rater": rater, "size": 2})
        assert r.status_code == 200 and len(r.json()["items"]) == 2, r.text
    assert built == []


def test_concurrent_first_uses_compute_the_strata_once(client, engine: Engine, monkeypatch) -> None:
    """A request arriving while the warmer computes the strata waits for them instead of computing them again."""
    pid = planned_project(client)
    sessions = worker_sessionmaker(engine, MatrixStore())
    store = ModalStore()
    built: list[int] = []

    def slow(*args):  # type: ignore[no-untyped-def]
        if threading.current_thread().name.startswith("first-use"):  # not the app's own warmer, still at work
            built.append(1)
        time.sleep(0.3)
        return _from_matrix(*args)

    monkeypatch.setattr("service.matrices.modal_strata._from_matrix", slow)

    def first_use() -> np.ndarray:
        with session_scope(sessions) as s:
            project = s.get(Project, pid)
            return store.strata(s, project, project.criteria[0]).modal

    with ThreadPoolExecutor(2, thread_name_prefix="first-use") as pool:
        a, b = pool.map(lambda _: first_use(), range(2))
    assert built == [1]
    np.testing.assert_array_equal(a, b)


def test_the_strata_share_the_matrix_stores_sort_order_of_the_items(client, engine: Engine) -> None:
    """A worker holds one argsort of a project's item ids (8 bytes an item), not one per cache."""
    pid = planned_project(client)
    sessions = worker_sessionmaker(engine, MatrixStore())
    with session_scope(sessions) as s:
        project = s.get(Project, pid)
        strata = _from_matrix(s, project, project.criteria[0])
        kept = sessions.kw["info"][STORE_KEY]._kept.get((pid, project.criteria[0]))
    assert kept is not None and strata.sorter is kept.sorter
    np.testing.assert_array_equal(strata.sorter, np.argsort(strata.item_ids))
