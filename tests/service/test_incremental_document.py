"""A document brought up to date from what a worker kept equals a fresh computation (issue 37).

One worker reads ``/reliability`` after every write, so its matrix, its kept monitorings and its
document cache advance incrementally through additions, corrections (of the opening's labels, early in
every path, and of labels added later, near the paths' ends: the monitor computed again from the mark
before them) and retractions in any mix (hypothesis); a second worker started afterwards on the same
database has kept nothing and computes the same document from scratch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planner.sequential as sequential
from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.labels import retract_labels
from service.data.models import Item, Project, Rater
from tests.conftest import ADMIN_KEY
from tests.factories import PANEL, create_project

N_ITEMS = 24
RATERS = [ext for ext, _ in PANEL]
VALUES = ["pass", "fail"]

cell = st.tuples(st.integers(0, N_ITEMS - 1), st.integers(0, len(RATERS) - 1))
write = st.tuples(
    st.sampled_from(["label", "label", "retract"]),
    st.lists(st.tuples(cell, st.sampled_from(VALUES)), min_size=1, max_size=12),
)
histories = st.lists(write, min_size=1, max_size=4)


def _base(c: TestClient, pid: str) -> None:
    """Every rater labels every item but the last rater the second half, each right with probability .85
    (seeded): a write corrects labels of the opening (early ranks) and adds the last rater's, which a later
    write may correct (late ranks)."""
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 2, N_ITEMS)
    rows = [
        {"item": f"i{i}", "rater": ext, "value": VALUES[t if rng.random() < 0.85 else 1 - t]}
        for ext in RATERS
        for i, t in enumerate(truth)
        if ext != RATERS[-1] or i < N_ITEMS // 2
    ]
    assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200


def _apply(c: TestClient, pid: str, op: tuple[str, list[tuple[tuple[int, int], str]]]) -> None:
    kind, cells = op
    rows = {(f"i{i}", RATERS[r]): value for (i, r), value in cells}  # one value per cell
    if kind == "label":  # an addition where the cell was empty, a correction where it held another value
        body = [{"item": item, "rater": rater, "value": value} for (item, rater), value in rows.items()]
        r = c.post(f"/projects/{pid}/labels", json=body)
        assert r.status_code == 200, r.text
        return
    with session_scope(c.app.state.sessions, write=True) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)  # a retraction as Label Studio's deletions write it
        assert project is not None
        items = dict(session.query(Item.external_id, Item.id).filter(Item.project_id == pid).all())
        raters = dict(session.query(Rater.external_id, Rater.id).filter(Rater.project_id == pid).all())
        retract_labels(session, project, [(items[item], raters[rater], project.criteria[0]) for item, rater in rows])


def _document(c: TestClient, pid: str) -> dict[str, Any]:
    r = c.get(f"/projects/{pid}/reliability")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories, chunk=st.sampled_from([1, 3, 1 << 16]))
def test_a_document_kept_up_to_date_equals_a_fresh_one(
    client: TestClient, settings: Settings, history: list[Any], chunk: int
) -> None:
    """The first worker's monitor reads its paths ``chunk`` entries at a time, the fresh worker's in one pass."""
    pid = create_project(client, items=[f"i{i}" for i in range(N_ITEMS)])
    default, sequential._PATH_CHUNK = sequential._PATH_CHUNK, chunk
    try:
        _base(client, pid)
        _document(client, pid)
        late = [((i, len(RATERS) - 1), "pass") for i in range(N_ITEMS // 2, N_ITEMS // 2 + 4)]
        for op in (("label", late), ("label", [(late[0][0], "fail")])):  # labels added, one corrected late
            _apply(client, pid, op)
            _document(client, pid)
        for op in history:
            _apply(client, pid, op)
            kept = _document(client, pid)
    finally:
        sequential._PATH_CHUNK = default
    with TestClient(create_app(settings), raise_server_exceptions=False) as fresh_worker:
        fresh_worker.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        fresh = _document(fresh_worker, pid)
    assert kept == fresh
