"""The slices' monitors read the main monitor's arrival order (issue 28 item 3, docs/method.md §3b, §8.2):
arrival ranks, the opening at one rank, ties in the project's seeded item order. The same labels uploaded as one
bulk write, item by item in file order, and reversed and grouped by rater give the same slice decisions."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from planner.slices import monitor_judge_by_slice
from service.data.models import Project
from service.matrices.matrix import load_matrix

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
N_ITEMS = 240
SEED = 20261202


def _file(rng: np.random.Generator) -> list[list[dict[str, str]]]:
    """Per item, its labels in file order: the judge .99 right on language en (even items), .8 on de."""
    truth = rng.integers(0, 2, N_ITEMS)
    rows = []
    for k in range(N_ITEMS):
        labels = []
        for rater, p in (("judge", 0.99 if k % 2 == 0 else 0.8), ("prim", 0.85), ("h2", 0.85), ("h3", 0.85)):
            value = truth[k] if rng.random() < p else 1 - truth[k]
            labels.append({"item": f"i{k}", "rater": rater, "value": ("pass", "fail")[value]})
        rows.append(labels)
    return rows


def _project(client: TestClient) -> str:
    body = {"name": "slice order", "labels": ["pass", "fail"], "order_seed": SEED}
    pid: str = client.post("/projects", json=body).json()["id"]
    for ext, kind in RATERS:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{k}", "features": {"language": "en" if k % 2 == 0 else "de"}} for k in range(N_ITEMS)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    return pid


def _slices(client: TestClient, pid: str) -> dict[str, object]:
    r = client.get(f"/projects/{pid}/reliability", params={"by": "feature:language"})
    assert r.status_code == 200, r.text
    client.app.state.documents.settle()  # type: ignore[attr-defined]  # the opening is stored in the background
    return dict(r.json()["slices"])


def test_three_upload_orders_give_the_same_slice_decisions(client: TestClient) -> None:
    file = _file(np.random.default_rng(3))
    pids = [_project(client) for _ in range(3)]
    bulk, by_item, grouped = pids
    assert client.post(f"/projects/{bulk}/labels", json=[r for item in file for r in item]).status_code == 200
    for item in file:  # item by item, in file order
        assert client.post(f"/projects/{by_item}/labels", json=item).status_code == 200
    for rater in ("h3", "judge", "h2", "prim"):  # reversed, grouped by rater, one write each
        rows = [r for item in reversed(file) for r in item if r["rater"] == rater]
        assert client.post(f"/projects/{grouped}/labels", json=rows).status_code == 200
    blocks = [_slices(client, pid) for pid in pids]
    assert blocks[0]["mode"] == "anytime" and [s["value"] for s in blocks[0]["slices"]] == ["de", "en"]  # type: ignore[index]
    assert {s["decision"] for s in blocks[0]["slices"]} <= {"pass", "reject", "continue"}  # type: ignore[attr-defined]
    assert blocks[1] == blocks[0] and blocks[2] == blocks[0]
    # Not vacuous: the slices read in label_seq order (each project's upload order) give other e-values.
    in_upload_order = []
    for pid in (bulk, grouped):
        with client.app.state.sessions() as session:  # type: ignore[attr-defined]
            project = session.get(Project, pid)
            assert project is not None
            matrix = load_matrix(session, project, "default")
        languages = np.where(np.arange(N_ITEMS) % 2 == 0, "en", "de")  # rows in upload order of the items
        judge, humans = matrix.columns("judge")[0], matrix.columns("primary", "human")
        monitored = monitor_judge_by_slice(
            matrix.codes, languages, judge=judge, humans=humans, n_labels=2, order=matrix.order
        )
        in_upload_order.append([[r.e_value for r in fit.raters] for _, _, fit in monitored.slices if fit is not None])
    assert in_upload_order[0] != in_upload_order[1]
