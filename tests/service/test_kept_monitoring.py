"""A worker's kept monitorings (service.documents.monitoring.judge_monitorings, kept): the monitoring block of
GET /reliability, brought up to date from the labels written since, is the block computed afresh from
every current label, whatever the writes in between (labels added, corrected, retracted), and reads only
the rows written since."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

import planner.monitor_paths
import planner.sequential
from service.core.caches import RecentlyUsed
from service.core.db import session_scope
from service.data.labels import retract_labels
from service.data.models import Item, Project, Rater
from service.documents.monitoring import MONITOR_KEY, judge_monitorings
from service.matrices.arrival import arrival_order
from service.matrices.matrix import load_matrix
from service.schemas.projects import DecisionSettings
from tests.factories import create_project

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
N_ITEMS = 80


def _fresh_block(client: TestClient, pid: str) -> dict[str, object] | None:
    with session_scope(client.app.state.sessions) as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        matrix = load_matrix(session, project, "default")
        [block] = judge_monitorings(
            matrix,
            matrix.columns("judge"),
            matrix.columns("primary", "human"),
            DecisionSettings(**project.decision),
            None,
            None,
            arrival_order(project, matrix.label_seq),
        )
    return block


def test_the_kept_monitoring_is_the_fresh_one_after_each_write(client: TestClient, monkeypatch: pytest.MonkeyPatch):
    pid = create_project(client, raters=RATERS, items=[f"i{k}" for k in range(N_ITEMS)])
    rng = np.random.default_rng(11)
    truth = rng.integers(0, 2, N_ITEMS)

    def labels(rater: str, items: range | list[int], p: float = 0.85) -> list[dict[str, str]]:
        right = rng.random(len(items)) < p
        return [
            {"item": f"i{k}", "rater": rater, "value": ("pass", "fail")[t if r else 1 - t]}
            for k, t, r in zip(items, truth[list(items)], right, strict=True)
        ]

    rounds: list[tuple[str, list[dict[str, str]]]] = [
        ("added", labels("judge", range(N_ITEMS), 0.95) + labels("prim", range(N_ITEMS))),
        ("added", labels("h2", range(0, 40)) + labels("h3", range(20, 50))),
        ("added", labels("h2", range(40, 60))),  # only these rows are read again
        ("corrected", labels("judge", [3, 25, 41], 0.0)),  # the judge's labels changed: these rows read again
        ("added", labels("h3", range(50, 80))),
    ]
    read: list[int] = []
    differences = planner.sequential.differences
    monkeypatch.setattr(planner.sequential, "differences", lambda c, *a: read.append(c.shape[0]) or differences(c, *a))
    for k, (_kind, body) in enumerate(rounds):
        assert client.post(f"/projects/{pid}/labels", json=body).status_code == 200
        read.clear()
        doc = client.get(f"/projects/{pid}/reliability").json()
        client.app.state.documents.settle()  # type: ignore[attr-defined]  # the opening is stored in the background
        assert doc["monitoring"] == _fresh_block(client, pid), k
        if k > 0:  # the kept monitoring read only the rows written since
            assert 0 < read[0] <= len({row["item"] for row in body}), k  # a label written as it was: not read
        else:
            assert read[0] == N_ITEMS, k
    assert doc["monitoring"]["raters"] and doc["monitoring"]["looks"] > 0
    states = client.app.state.sessions.kw["info"][MONITOR_KEY]  # type: ignore[attr-defined]
    assert isinstance(states, RecentlyUsed)
    with session_scope(client.app.state.sessions, write=True) as s:  # type: ignore[attr-defined]
        project = s.get(Project, pid)
        assert project is not None
        ids = dict(s.execute(select(Rater.external_id, Rater.id).where(Rater.project_id == pid)).all())
        item = s.execute(select(Item.id).where(Item.project_id == pid, Item.external_id == "i45")).scalar_one()
        retract_labels(s, project, [(item, ids["h2"], "default")])  # a retraction: its row read again
    read.clear()
    assert client.get(f"/projects/{pid}/reliability").json()["monitoring"] == _fresh_block(client, pid)
    assert read[0] == 1
