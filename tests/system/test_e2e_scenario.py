"""End to end through HTTP on a real server (issue 6): a simulated corpus, a certification plan
from priors, three annotators collecting their lists in parallel, and a final reliability
document that equals what ``planner`` decides on the exported labels."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from planner.decision import validate_judge
from tests.conftest import ADMIN_KEY
from tests.live_server import LiveServer
from tests.service.test_reliability import loo_margins

N_ITEMS = 2_000
P_H, P_J = 0.85, 0.90
LABELS = ["pass", "fail"]
ANNOTATORS = ("ann-1", "ann-2", "ann-3")
RESAMPLES = 1_000  # the server's bootstrap_resamples, passed to it explicitly below


def noisy(rng: np.random.Generator, truth: np.ndarray, accuracy: float) -> np.ndarray:
    """Binary symmetric noise channel (docs/method.md §6)."""
    return np.where(rng.random(truth.size) < accuracy, truth, 1 - truth)


def annotate(server: LiveServer, pid: str, key: str, truth: np.ndarray, seed: int) -> list[str]:
    """One annotator tool: fetch a batch, post simulated labels for it, until the list is done."""
    rng = np.random.default_rng(seed)
    issued: list[str] = []
    with server.client(key) as c:
        for _ in range(100):
            r = c.post(f"/projects/{pid}/batches", json={"size": 20})
            assert r.status_code == 200, r.text
            b = r.json()
            if b["done"]:
                return issued
            assert b["items"], "nothing to label but not done: items lost to a lease"
            issued += b["items"]
            codes = noisy(rng, truth[[int(i[1:]) for i in b["items"]]], P_H)
            rows = [
                {"item": i, "rater": b["rater"], "value": LABELS[v], "batch": b["id"]}
                for i, v in zip(b["items"], codes, strict=True)
            ]
            r = c.post(f"/projects/{pid}/labels", json=rows)
            assert r.status_code == 200 and r.json()["accepted"] == len(rows), r.text
    raise AssertionError("the list was not done after 100 batches")


def test_certification_scenario_end_to_end(database_url):
    rng = np.random.default_rng(20261129)
    truth = (rng.random(N_ITEMS) < 0.4).astype(np.int64)  # 40% "fail"
    with LiveServer(database_url, ADMIN_KEY, bootstrap_resamples=RESAMPLES) as server, server.client() as admin:
        pid = admin.post("/projects", json={"name": "e2e", "labels": LABELS}).json()["id"]
        raters = [("judge", "judge"), ("prim", "primary"), *((a, "human") for a in ANNOTATORS)]
        for ext, kind in raters:
            assert admin.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
        items = [{"external_id": f"i{i}"} for i in range(N_ITEMS)]
        assert admin.post(f"/projects/{pid}/items", json=items).json()["created"] == N_ITEMS
        for ext, accuracy in (("judge", P_J), ("prim", P_H)):
            values = noisy(rng, truth, accuracy)
            rows = [{"item": f"i{i}", "rater": ext, "value": LABELS[v]} for i, v in enumerate(values)]
            assert admin.post(f"/projects/{pid}/labels", json=rows).json()["accepted"] == N_ITEMS

        body = {"purpose": "certify", "source": "prior", "p_h": P_H, "p_j": P_J, "seed": 1}
        r = admin.post(f"/projects/{pid}/plan", json=body)
        assert r.status_code == 201, r.text
        plan = r.json()
        assert plan["design"] == "strat"  # balanced primary -> Strat (docs/method.md §5)
        # design auto: the chosen Strat is served at the overlap the designs were compared at (one held-in
        # label per item), not re-planned at its own smaller m (docs/method.md §5, issue 29 item 2)
        assert plan["recipe"]["moments"]["pool_size"] == 1 and plan["recipe"]["m"] == plan["check"]["m_compared"]
        # read continuously (the default anytime mode) the lists are the monitor's m (docs/method.md §8.1)
        assert plan["recipe"]["m_fixed"] == plan["recipe"]["m"] < plan["m"] == plan["recipe"]["m_anytime"]
        assert plan["recipe"]["n_humans"] == 4

        keys = {}
        for a in ANNOTATORS:
            k = admin.post(f"/projects/{pid}/keys", json={"role": "annotator", "rater": a})
            assert k.status_code == 201, k.text
            keys[a] = k.json()["key"]
        start = threading.Barrier(len(ANNOTATORS))

        def run(a: str) -> list[str]:
            start.wait()
            return annotate(server, pid, keys[a], truth, seed=ANNOTATORS.index(a))

        with ThreadPoolExecutor(len(ANNOTATORS)) as pool:
            issued = dict(zip(ANNOTATORS, pool.map(run, ANNOTATORS), strict=True))
        for a, got in issued.items():
            assert len(got) == len(set(got)) == plan["m"], a
        assert set(issued["ann-1"]) == set(issued["ann-2"]) == set(issued["ann-3"])  # the shared panel

        export = admin.get(f"/projects/{pid}/labels", params={"format": "ndjson"})
        rows = [json.loads(line) for line in export.text.splitlines()]
        r = admin.get(f"/projects/{pid}/reliability")
        assert r.status_code == 200, r.text
        doc = r.json()
        progress = admin.get(f"/projects/{pid}/plan").json()["progress"]

    # the code matrix from the export: rows in corpus order, columns in rater order
    column = {ext: k for k, (ext, _) in enumerate(raters)}
    codes = np.full((N_ITEMS, len(raters)), -1, dtype=np.int64)
    for row in rows:
        codes[int(row["item"][1:]), column[row["rater"]]] = LABELS.index(row["value"])
    label_seq = max(row["seq"] for row in rows)
    assert label_seq == len(rows) == 2 * N_ITEMS + 3 * plan["m"]

    humans = [1, 2, 3, 4]
    expected = validate_judge(
        codes,
        judge=0,
        humans=humans,
        n_labels=2,
        rule="margin",
        coefficient="po",
        epsilon=0.05,
        omega_threshold=0.5,
        q=0.05,
        inconclusive_level=0.2,
        n_resamples=RESAMPLES,
        rng=label_seq,
    )
    assert doc["fixed_decision"] == expected.decision  # the fixed-sample view, beside the monitored one
    assert doc["fixed_omega"] == pytest.approx(expected.omega)
    assert doc["p_opposite"] == pytest.approx(expected.p_opposite)
    assert doc["label_seq"] == label_seq and doc["n_items"] == N_ITEMS and doc["judge"] == "judge"
    names = [ext for ext, _ in raters]
    assert [r["rater"] for r in doc["raters"]] == [names[o.rater] for o in expected.raters]
    for got, want in zip(doc["raters"], expected.raters, strict=True):
        assert got["m"] == want.m and got["won"] == want.won
        assert got["d"] == pytest.approx(want.d, abs=1e-12)
        assert got["ci"] == pytest.approx(want.ci.as_list(), abs=1e-12)  # the same bootstrap draws
    assert doc["human_pool"]["estimate"] == pytest.approx(expected.human_pool.estimate)

    # consistent with the labels, computed without the planner
    direct = loo_margins(codes, 0, humans)
    assert [r["m"] for r in doc["raters"]] == [direct[k]["m"] for k in humans] == [plan["m"]] * 4
    assert [r["d"] for r in doc["raters"]] == pytest.approx([direct[k]["d"] for k in humans])
    assert doc["coefficients"]["po"]["n_items"] == plan["m"]  # items with two or more human labels
    assert doc["plan"]["m_target"] == plan["m"] and doc["plan"]["m_done_min"] == plan["m"]
    assert doc["plan"]["remaining_labels"] == 0 == progress["remaining_labels"]
    # the recipe re-estimated from the pilot pools every held-out human's xi (docs/method.md §4, "Pilot")
    now = doc["recipe_now"]
    assert now["source"] == "pilot" and now["m_pilot"] == 4 * plan["m"]
    pooled = sum(direct[k]["d"] * direct[k]["m"] for k in humans) / sum(direct[k]["m"] for k in humans)
    assert now["mu_d"] == pytest.approx(pooled)
    if now["m_cert"] is not None:
        assert now["more_overlap_needed"] == max(0, now["m_cert"] - plan["m"])
