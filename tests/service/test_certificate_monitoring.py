"""A certificate of an anytime-mode project certifies the monitored decision in force (issue 28; docs/method.md
§8, §10): the decision, its ``label_seq`` and the humans' statuses /reliability shows at that ``label_seq``,
with the fixed-sample decision beside it, re-derived by the verifier from the statement and a label export."""

from __future__ import annotations

import copy
import json

import numpy as np
from fastapi.testclient import TestClient

from tests.factories import create_project

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
N_ITEMS = 240


def _rows(rng: np.random.Generator, items: range, p_judge: float) -> list[dict[str, str]]:
    rows = []
    for k in items:
        truth = int(rng.integers(0, 2))
        for rater, p in (("judge", p_judge), ("prim", 0.85), ("h2", 0.85), ("h3", 0.85)):
            value = ("pass", "fail")[truth ^ int(rng.random() >= p)]
            rows.append({"item": f"i{k:03d}", "rater": rater, "value": value})
    return rows


def _labels(client: TestClient, pid: str) -> list[dict[str, object]]:
    text = client.get(f"/projects/{pid}/labels", params={"history": "true", "format": "ndjson"}).text
    return [json.loads(line) for line in text.splitlines()]


def test_an_anytime_certificate_certifies_the_monitored_decision_and_verifies(client: TestClient) -> None:
    rng = np.random.default_rng(43)
    pid = create_project(client, raters=RATERS, items=[f"i{k:03d}" for k in range(N_ITEMS)], order_seed=11)
    assert client.post(f"/projects/{pid}/labels", json=_rows(rng, range(0, 60), 0.95)).status_code == 200
    assert client.get(f"/projects/{pid}/reliability").status_code == 200  # the first look: the opening
    client.app.state.documents.settle()  # type: ignore[attr-defined]
    for start in range(60, N_ITEMS, 20):  # later writes, each its own arrival after the opening
        assert (
            client.post(f"/projects/{pid}/labels", json=_rows(rng, range(start, start + 20), 0.95)).status_code == 200
        )
    shown = client.get(f"/projects/{pid}/reliability").json()
    [judge] = shown["judges"]
    assert judge["decision"] == "pass" and judge["monitoring"]["decided_at_label_seq"] > 4 * 60  # after the opening
    r = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50})
    assert r.status_code == 201, r.text
    statement = r.json()
    predicate = statement["predicate"]
    [certified] = predicate["result"]["judges"]
    block = judge["monitoring"]
    assert predicate["monitoring"]["opening"] == 4 * 60 and predicate["monitoring"]["ranks"]  # ranks after it listed
    assert certified["decision"] == judge["decision"] == predicate["result"]["decision"]
    assert certified["monitoring"]["decided_at_label_seq"] == block["decided_at_label_seq"] is not None
    assert certified["monitoring"]["looks"] == block["looks"]
    assert [(x["rater"], x["status"], x["n"]) for x in certified["monitoring"]["raters"]] == sorted(
        (x["rater"], x["status"], x["n"]) for x in block["raters"]
    )
    assert certified["fixed_decision"] == judge["fixed_decision"]
    labels = _labels(client, pid)
    ok = client.post("/certificates/verify", json={"certificate": statement, "labels": labels}).json()
    assert ok["match"], ok
    # Not vacuous: the same labels read in another arrival order (the ranks moved) are another monitored path.
    edited = copy.deepcopy(statement)
    edited["predicate"]["monitoring"]["ranks"] = [[i, rr, 1] for i, rr, _ in predicate["monitoring"]["ranks"]]
    fields = {
        m["field"]
        for m in client.post("/certificates/verify", json={"certificate": edited, "labels": labels}).json()[
            "mismatches"
        ]
    }
    assert "report" in fields and any(f.startswith("result.judges") for f in fields), fields  # the path recomputed


def test_a_fixed_mode_certificate_has_no_monitoring(client: TestClient) -> None:
    rng = np.random.default_rng(44)
    pid = create_project(
        client, raters=RATERS, items=[f"i{k:03d}" for k in range(60)], decision={"monitoring": "fixed"}
    )
    assert client.post(f"/projects/{pid}/labels", json=_rows(rng, range(60), 0.9)).status_code == 200
    predicate = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()["predicate"]
    assert "monitoring" not in predicate and "fixed_decision" not in predicate["result"]["judges"][0]
