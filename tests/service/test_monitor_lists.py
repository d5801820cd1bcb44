"""Lists that never run dry while the monitored decision is open (docs/method.md §8.1), through the API
in-process: a PM follows the batches of each secondary to the end, labels drawn by the test's own
noise channel, the primary's and the judge's labels in hand first."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy import text

LABELS = ["pass", "fail"]
N_ITEMS = 600


def _project(c: Any, rng: np.random.Generator, p_h: float, p_j: float) -> tuple[str, np.ndarray]:
    pid = c.post("/projects", json={"name": "lists", "labels": LABELS}).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert c.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(N_ITEMS)]).status_code == 200
    truth = rng.integers(0, 2, N_ITEMS)
    for rater, p in (("judge", p_j), ("prim", p_h)):
        values = np.where(rng.random(N_ITEMS) < p, truth, 1 - truth)
        rows = [{"item": f"i{i}", "rater": rater, "value": LABELS[v]} for i, v in enumerate(values)]
        assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid, truth


def _follow(c: Any, pid: str, truth: np.ndarray, rng: np.random.Generator, p_h: float, size: int) -> dict[str, Any]:
    """Ask each secondary's batches in turn and label them until every one says done (a batch not done has
    items: the lists are not leased elsewhere). Returns what each secondary labeled and the last answers."""
    labeled: dict[str, list[str]] = {"h2": [], "h3": []}
    last: dict[str, dict[str, Any]] = {}
    for _ in range(200):
        open_raters = [r for r in labeled if not last.get(r, {}).get("done")]
        if not open_raters:
            break
        for rater in open_raters:
            b = c.post(f"/projects/{pid}/batches", json={"rater": rater, "size": size}).json()
            last[rater] = b
            if b["done"]:
                assert b["remaining"] == 0 and b["reason"]
                continue
            assert b["items"], b  # not done: there is a batch to give
            rows = []
            for ext in b["items"]:
                t = truth[int(ext[1:])]
                v = t if rng.random() < p_h else 1 - t
                rows.append({"item": ext, "rater": rater, "value": LABELS[v], "batch": b["id"]})
            assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
            labeled[rater] += b["items"]
    return {"labeled": labeled, "last": last}


def test_a_good_judge_followed_to_the_end_is_decided_never_left_continue(client):
    rng = np.random.default_rng(5)
    pid, truth = _project(client, rng, 0.85, 0.93)
    plan = client.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.93, "design": "random", "seed": 2})
    assert plan.status_code == 201, plan.text
    recipe = plan.json()["recipe"]
    block = recipe["monitoring"]
    assert plan.json()["m"] == block["m"] == block["m_anytime"] == recipe["m_anytime"] >= recipe["m_fixed"]
    assert block["sentence"] == f"read once: {recipe['m_fixed']}; watch continuously: {block['m_anytime']}"
    followed = _follow(client, pid, truth, rng, 0.85, 40)
    for items in followed["labeled"].values():
        assert len(items) == len(set(items))  # no item issued twice
    doc = client.get(f"/projects/{pid}/reliability").json()
    assert doc["decision"] in ("pass", "reject", "inconclusive"), doc["decision"]
    assert doc["decision"] != "continue"


def test_an_open_decision_extends_the_lists_to_the_budget_then_says_inconclusive(client, engine):
    """A judge on the margin stays open: past m the lists grow (random design, inclusion stored as
    target/n, no item twice) to the requested budget, where the decision is inconclusive."""
    rng = np.random.default_rng(8)
    p_j = 0.85 * 0.85 + 0.15 * 0.15 - 0.05 - 0.15
    p_j = p_j / 0.7  # mu_d = -epsilon against one human of accuracy .85
    pid, truth = _project(client, rng, 0.85, p_j)
    body = {"p_h": 0.85, "p_j": 0.9, "design": "random", "seed": 3, "m": 30, "budget": 70}
    plan = client.post(f"/projects/{pid}/plan", json=body)
    assert plan.status_code == 201, plan.text
    assert plan.json()["m"] == 30 and plan.json()["recipe"]["monitoring"]["budget"] == 70
    followed = _follow(client, pid, truth, rng, 0.85, 25)
    doc = client.get(f"/projects/{pid}/reliability").json()
    for rater, items in followed["labeled"].items():
        assert len(items) == len(set(items))
        if doc["decision"] == "inconclusive":
            assert len(items) == 70, rater  # extended past m = 30 to the budget
    assert doc["decision"] == "inconclusive" and "budget" in doc["reason"]
    assert all("budget" in b["reason"] for b in followed["last"].values())
    with engine.connect() as db:
        shares = db.execute(
            text(
                "SELECT DISTINCT a.inclusion_probability FROM assignments a JOIN raters r ON r.id = a.rater_id "
                "WHERE r.external_id = 'h2' AND a.project_id = :pid"
            ),
            {"pid": pid},
        ).scalars()
        assert {round(float(s) * N_ITEMS) for s in shares} >= {30, 55}  # m / n, then each list's size / n
    progress = client.get(f"/projects/{pid}/plan").json()["progress"]
    assert progress["remaining_labels"] == 0 and progress["m_done_min"] == 70


def test_a_budget_below_m_is_422_and_writes_nothing(client):
    rng = np.random.default_rng(1)
    pid, _ = _project(client, rng, 0.85, 0.9)
    r = client.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "m": 50, "budget": 40})
    assert r.status_code == 422 and "budget" in r.text
    r = client.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "design": "random", "budget": 5})
    assert r.status_code == 422 and "budget" in r.text, r.text
    assert client.get(f"/projects/{pid}/plan").status_code == 404
    for power in (0, 1, 1.5):
        r = client.patch(f"/projects/{pid}", json={"decision": {"power": power}})
        assert r.status_code == 422 and "power" in r.text
    assert client.get(f"/projects/{pid}").json()["decision"].get("power", 0.8) == 0.8
    before = client.get("/projects").json()
    for power in (0, 1, -0.2):  # a project made with such a power: 422, no project
        r = client.post("/projects", json={"name": "p", "labels": LABELS, "decision": {"power": power}})
        assert r.status_code == 422 and "power" in r.text and set(r.json()) >= {"error", "detail"}
    assert client.get("/projects").json() == before
