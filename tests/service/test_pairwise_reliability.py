"""A pairwise project's /reliability (issue 34, docs/method.md §13): LLMBar's GPT-4 verdicts uploaded as a
user would, the systems' Bradley-Terry strengths against choix, and undefined statistics with their reasons."""

from __future__ import annotations

import json
from pathlib import Path

import choix
import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy.stats import binomtest

LLMBAR = Path(__file__).parents[1] / "fixtures" / "llmbar" / "natural_gpt4_vanilla.json"


def _labels(c: TestClient, pid: str, rows: list[dict]) -> None:
    r = c.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text


def test_llmbar_gpt4_natural_vanilla_through_reliability(client: TestClient) -> None:
    """LLMBar's per-item GPT-4 verdicts (Natural set, vanilla prompt) uploaded as a user would, the gold answer as
    both humans' label: right with the first order 95, the second 96, in both 93, same verdict in both 95 of 100."""
    items = json.loads(LLMBAR.read_text())["items"]
    pid = client.post("/projects", json={"name": "llmbar", "kind": "pairwise", "labels": ["A", "B"]}).json()["id"]
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"n{k}"} for k in range(len(items))])
    for ext, kind in (("gpt-4", "judge"), ("gold", "primary"), ("gold-2", "human")):
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    for rater in ("gold", "gold-2"):
        _labels(client, pid, [{"item": f"n{k}", "rater": rater, "value": g} for k, (g, _, _) in enumerate(items)])
    for order, col in (("AB", 1), ("BA", 2)):  # the judge's two runs, one upload each
        rows = [{"item": f"n{k}", "rater": "gpt-4", "value": row[col], "order": order} for k, row in enumerate(items)]
        _labels(client, pid, rows)
    doc = client.get(f"/projects/{pid}/reliability").json()
    [judge] = doc["pairwise"]["judges"]
    assert judge["judge"] == "gpt-4" and doc["pairwise"]["n_reference"] == 100
    assert judge["accuracy"] == {"n_items": 100, "right_ab": 0.95, "right_ba": 0.96, "right_both": 0.93, "reason": None}
    position = judge["position"]
    assert (position["n_items"], position["consistency"]) == (100, 0.95)
    # by hand from the fixture: 3 flips kept the first-shown answer, 2 the second; Bin(5, 1/2) two-sided p = 1
    assert (position["first_favoured"], position["second_favoured"], position["bias_direction"]) == (3, 2, "first")
    assert position["bias_p"] == pytest.approx(binomtest(3, 5, 0.5).pvalue) == 1.0
    assert judge["rankings"] == []  # the items name no systems
    # the decision reads the AB order: the judge agrees with each human on 95 of 100 items
    assert doc["judge"] == "gpt-4" and doc["decision"] in {"pass", "reject", "continue", "inconclusive"}


def _tournament(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items comparing two of three systems, each answer order drawn, and Bradley-Terry outcomes (0 A, 1 B, 2 tie)
    from strengths (0.8, 0, -0.8) with ties one time in ten: an independent generator."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    theta = np.array([0.8, 0.0, -0.8])
    win = rng.random(n) < 1 / (1 + np.exp(theta[b] - theta[a]))
    return a, b, np.where(rng.random(n) < 0.1, 2, np.where(win, 0, 1))


def test_systems_ranked_by_the_judge_and_the_humans_match_choix(client: TestClient) -> None:
    n, systems, verdict = 150, ["sys-x", "sys-y", "sys-z"], ["A", "B", "tie"]
    a, b, truth = _tournament(7, n)
    rng = np.random.default_rng(8)
    judge_ab = np.where(rng.random(n) < 0.85, truth, rng.integers(0, 3, n))
    judge_ba = np.where(rng.random(n) < 0.85, truth, rng.integers(0, 3, n))
    pid = client.post("/projects", json={"name": "bt", "kind": "pairwise"}).json()["id"]
    features = [{"system_a": systems[a[k]], "system_b": systems[b[k]], "prompt": f"p{k}"} for k in range(n)]
    client.post(
        f"/projects/{pid}/items", json=[{"external_id": f"i{k}", "features": f} for k, f in enumerate(features)]
    )
    for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human")):
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    humans = np.arange(n) < 100  # the humans labelled the first 100 items, both alike
    for rater in ("prim", "h2"):
        _labels(client, pid, [{"item": f"i{k}", "rater": rater, "value": verdict[truth[k]]} for k in range(100)])
    for order, codes in (("AB", judge_ab), ("BA", judge_ba)):
        _labels(
            client,
            pid,
            [{"item": f"i{k}", "rater": "judge", "value": verdict[v], "order": order} for k, v in enumerate(codes)],
        )
    block = client.get(f"/projects/{pid}/reliability").json()["pairwise"]
    assert (block["n_items"], block["n_reference"], block["n_systems"]) == (n, 100, 3)
    by_source = {r["source"]: r for r in block["judges"][0]["rankings"]}

    def peer(first: np.ndarray, second: np.ndarray, outcome: np.ndarray) -> np.ndarray:
        games = []  # a decisive verdict as two games, a tie as one won each way: choix's likelihood, doubled
        for i, j, o in zip(first.tolist(), second.tolist(), outcome.tolist()):
            games += [(i, j), (j, i)] if o == 2 else [(i, j) if o == 0 else (j, i)] * 2
        s = choix.mm_pairwise(3, games, tol=1e-12, max_iter=100_000)
        return s - s.mean()

    judge = by_source["judge"]
    assert judge["n_comparisons"] == 2 * n
    expected = peer(np.r_[a, a], np.r_[b, b], np.r_[judge_ab, judge_ba])
    assert [s["system"] for s in judge["systems"]] == systems
    assert [s["strength"] for s in judge["systems"]] == pytest.approx(expected.tolist(), abs=1e-6)
    human = by_source["humans"]
    assert [s["strength"] for s in human["systems"]] == pytest.approx(
        peer(a[humans], b[humans], truth[humans]).tolist(), abs=1e-6
    )
    assert all(s["ci"][0] < s["strength"] < s["ci"][1] for s in human["systems"])
    powered = by_source["humans+judge"]
    assert powered["reason"] is None and powered["n_comparisons"] == n
    assert [s["strength"] for s in powered["systems"]][0] > 0 > [s["strength"] for s in powered["systems"]][2]


def test_a_pairwise_project_without_judge_or_humans_reports_undefined(client: TestClient) -> None:
    pid = client.post("/projects", json={"name": "ab", "kind": "pairwise"}).json()["id"]
    client.post(f"/projects/{pid}/items", json=[{"external_id": "q0"}, {"external_id": "q1"}])
    client.post(f"/projects/{pid}/raters", json={"external_id": "prim", "kind": "primary"})
    _labels(client, pid, [{"item": "q0", "rater": "prim", "value": "A"}])
    block = client.get(f"/projects/{pid}/reliability").json()["pairwise"]
    assert block["judges"] == [] and block["reason"] == "no judge rater yet"
    client.post(f"/projects/{pid}/raters", json={"external_id": "judge", "kind": "judge"})
    _labels(client, pid, [{"item": "q1", "rater": "judge", "value": "A", "order": "AB"}])
    [judge] = client.get(f"/projects/{pid}/reliability").json()["pairwise"]["judges"]
    assert judge["position"]["consistency"] is None and judge["position"]["reason"]
    assert judge["accuracy"]["right_both"] is None and judge["accuracy"]["reason"]


def test_a_pairwise_certificate_verifies_against_the_label_export(client: TestClient) -> None:
    """The certificate freezes the labels the decision reads (the AB order); the export, BA rows and all, verifies."""
    pid = client.post("/projects", json={"name": "ab", "kind": "pairwise"}).json()["id"]
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"q{k}"} for k in range(30)])
    for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human")):
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    rng = np.random.default_rng(2)
    truth = rng.integers(0, 2, 30)
    for rater in ("prim", "h2"):
        _labels(client, pid, [{"item": f"q{k}", "rater": rater, "value": "AB"[v]} for k, v in enumerate(truth)])
    _labels(
        client, pid, [{"item": f"q{k}", "rater": "judge", "value": "AB"[v], "order": "AB"} for k, v in enumerate(truth)]
    )
    # written last, the BA labels all disagree: a snapshot that read them would change the decision
    _labels(
        client, pid, [{"item": f"q{k}", "rater": "judge", "value": "BA"[v], "order": "BA"} for k, v in enumerate(truth)]
    )
    cert = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    assert cert["predicate"]["snapshot"]["n_rows"] == 90
    rows = client.get(f"/projects/{pid}/labels", params={"history": "true", "limit": 1000}).json()["items"]
    assert sum(r["order"] == "BA" for r in rows) == 30
    ok = client.post("/certificates/verify", json={"certificate": cert, "labels": rows}).json()
    assert ok["match"], ok
