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


def test_a_certificate_reads_the_planned_lists_in_list_order_as_the_document_does(client: TestClient) -> None:
    """Secondaries holding planned lists (random design, drawn before any label) whose labels arrive in file
    order, not list order: the document holds back each listed label behind an unlabeled item of its list
    (docs/method.md §8.2), and the certificate lists the lists so the verifier reads the same path."""
    rng = np.random.default_rng(45)
    pid = create_project(client, raters=RATERS, items=[f"i{k:03d}" for k in range(N_ITEMS)], order_seed=12)
    body = {"p_h": 0.85, "p_j": 0.95, "design": "random", "seed": 4, "m": N_ITEMS, "budget": N_ITEMS}
    assert client.post(f"/projects/{pid}/plan", json=body).status_code == 201
    for rater in ("h2", "h3"):  # each secondary's list is drawn at its first batch
        assert client.post(f"/projects/{pid}/batches", json={"rater": rater, "size": 1}).status_code == 200
    rows = _rows(rng, range(N_ITEMS), 0.95)
    first = [r for r in rows if r["rater"] in ("judge", "prim")]
    assert client.post(f"/projects/{pid}/labels", json=first).status_code == 200
    assert client.get(f"/projects/{pid}/reliability").status_code == 200  # the first look: the opening
    client.app.state.documents.settle()  # type: ignore[attr-defined]
    later = [r for r in rows if r["rater"] in ("h2", "h3")][: 2 * 200]  # the secondaries' first 200 items
    for start in range(0, len(later), 40):  # in file order, 20 items a write
        assert client.post(f"/projects/{pid}/labels", json=later[start : start + 40]).status_code == 200
    shown = client.get(f"/projects/{pid}/reliability").json()
    [judge] = shown["judges"]
    block = judge["monitoring"]
    n_of = {x["rater"]: x["n"] for x in block["raters"]}
    assert 0 < n_of["h2"] < 200 and 0 < n_of["h3"] < 200  # some of their labels wait behind a gap of their lists
    statement = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    predicate = statement["predicate"]
    [certified] = predicate["result"]["judges"]
    assert sorted(predicate["monitoring"]["lists"]) == ["h2", "h3"]
    assert all(len(x["items"]) == N_ITEMS for x in predicate["monitoring"]["lists"].values())
    text = json.dumps(statement)  # items by place, never by id: viewers read certificates
    assert not any(f'"i{k:03d}"' in text for k in range(N_ITEMS))
    assert certified["decision"] == judge["decision"]
    assert certified["monitoring"]["looks"] == block["looks"]
    assert certified["monitoring"]["decided_at_label_seq"] == block["decided_at_label_seq"]
    assert [(x["rater"], x["status"], x["n"]) for x in certified["monitoring"]["raters"]] == sorted(
        (x["rater"], x["status"], x["n"]) for x in block["raters"]
    )
    labels = _labels(client, pid)
    ok = client.post("/certificates/verify", json={"certificate": statement, "labels": labels}).json()
    assert ok["match"], ok
    # Not vacuous: without the lists the verifier reads every label by its write, another path.
    edited = copy.deepcopy(statement)
    del edited["predicate"]["monitoring"]["lists"]
    mismatches = client.post("/certificates/verify", json={"certificate": edited, "labels": labels}).json()
    assert any(m["field"].startswith("result.judges") for m in mismatches["mismatches"]), mismatches
