"""The batches read the monitored decision in the document's arrival order (issue 28 items 2-3, docs/method.md
§8.1-§8.2): whether a secondary's list grows follows the decision /reliability shows, not the order rows sat
in the file. A file sorted by a feature the judge's accuracy depends on (on the margin overall), one write:
read in file order the monitor passes the judge, in the service's order it is still open."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

from planner.sequential import monitor_judge
from service.data.models import Project
from service.matrices.matrix import load_matrix
from service.planning.extension import monitored_decision
from tests.factories import create_project

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
N_ITEMS = 200
SEED = 20261202


def _sorted_file(seed: int) -> np.ndarray:
    """Codes (items x judge, prim, h2, h3): the judge .9667 right on the first half of the file, .4667 on
    the second (on the margin overall at p_h .8, epsilon .05), the humans .8."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, N_ITEMS)
    p = np.column_stack([np.where(np.arange(N_ITEMS) < N_ITEMS // 2, 0.9667, 0.4667), np.full((N_ITEMS, 3), 0.8)])
    return np.where(rng.random((N_ITEMS, 4)) < p, truth[:, None], 1 - truth[:, None])


def test_the_batches_monitored_decision_is_the_documents(client: TestClient) -> None:
    codes = _sorted_file(5)
    pid = create_project(client, raters=RATERS, items=[f"i{k}" for k in range(N_ITEMS)], order_seed=SEED)
    rows = [
        {"item": f"i{k}", "rater": rater, "value": ("pass", "fail")[int(codes[k, c])]}
        for k in range(N_ITEMS)
        for c, (rater, _) in enumerate(RATERS)
    ]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    shown = client.get(f"/projects/{pid}/reliability").json()["monitoring"]
    client.app.state.documents.settle()  # type: ignore[attr-defined]  # the opening is stored in the background
    with client.app.state.sessions() as session:  # type: ignore[attr-defined]
        project = session.get(Project, pid)
        assert project is not None
        decision, _ = monitored_decision(session, project, None)  # type: ignore[arg-type]  # no plan: no budget
        matrix = load_matrix(session, project, "default")
    assert shown["decision"] == decision == "continue"
    # Not vacuous: the same write read in row (file) order passes the judge.
    in_file_order = monitor_judge(matrix.codes, judge=0, humans=[1, 2, 3], n_labels=2, order=matrix.order)
    assert in_file_order.decision == "pass"
