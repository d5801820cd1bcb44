"""A numeric plan's lists never run dry while the monitored decision is open (docs/method.md §8b): in anytime
mode a secondary's labeled list grows by the plan's design up to the plan's monitoring budget, where an open
decision is inconclusive. A PM follows each secondary's batches to the end through the API in-process, the
ratings drawn by the test's own generator, the judge's and the primary's in hand first."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from service.planning.score_plans import _monitoring_block
from service.schemas.plans import PlanCreate
from service.schemas.projects import DecisionSettings

N_ITEMS = 1000
HUMAN_SD = 0.8


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _rating(truth: float, sd: float, rng: np.random.Generator) -> int:
    return int(np.clip(np.round(truth + rng.normal(0.0, sd)), 1, 5))


def _project(client: TestClient, rng: np.random.Generator, judge_sd: float, n_pilot: int, **decision: Any) -> tuple:
    """A 1-5 project: the judge and the primary rate every item, h1 and h2 the first ``n_pilot``."""
    body = {"name": "s", "scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 1}, "decision": decision}
    pid = ok(client.post("/projects", json=body), 201)["id"]
    for ext, kind in [("j", "judge"), ("p", "primary"), ("h1", "human"), ("h2", "human")]:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in range(N_ITEMS)]))
    truth = rng.uniform(1, 5, N_ITEMS)
    for ext, sd, n in [
        ("j", judge_sd, N_ITEMS),
        ("p", HUMAN_SD, N_ITEMS),
        ("h1", HUMAN_SD, n_pilot),
        ("h2", HUMAN_SD, n_pilot),
    ]:
        rows = [{"item": f"i{k}", "rater": ext, "value": _rating(truth[k], sd, rng)} for k in range(n)]
        ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid, truth


def _follow(client: TestClient, pid: str, truth: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    """Each secondary's batches in turn, labeled, until both say done; every answer checked against the
    monitored decision of /reliability at that moment: a list ends only when the decision is not continue."""
    last: dict[str, dict[str, Any]] = {}
    labeled = {"h1": 0, "h2": 0}
    for _ in range(100):
        open_raters = [r for r in labeled if not last.get(r, {}).get("done")]
        if not open_raters:
            break
        for rater in open_raters:
            batch = ok(client.post(f"/projects/{pid}/batches", json={"rater": rater, "size": 60}))
            last[rater] = batch
            if batch["done"]:
                (monitored,) = ok(client.get(f"/projects/{pid}/reliability"))["monitoring"]
                assert monitored["decision"] != "continue", (batch, monitored)  # never dry while open
                assert batch["remaining"] == 0 and batch["reason"]
                continue
            assert batch["items"], batch
            rows = [
                {"item": e, "rater": rater, "value": _rating(truth[int(e[1:])], HUMAN_SD, rng), "batch": batch["id"]}
                for e in batch["items"]
            ]
            ok(client.post(f"/projects/{pid}/labels", json=rows))
            labeled[rater] += len(rows)
    assert all(b["done"] for b in last.values())
    document = ok(client.get(f"/projects/{pid}/reliability"))
    return {"last": last, "labeled": labeled, "document": document}


def test_an_open_decision_grows_the_lists_to_the_budget_then_is_inconclusive(client: TestClient) -> None:
    """A judge no better than the humans at a budget of 120: no sequence can decide by then (xi = 0 on every
    item needs 351), so the lists grow past m = 40 until every human has 120 usable items (the pilot's count),
    and the decision ends inconclusive."""
    rng = np.random.default_rng(8)
    pid, truth = _project(client, rng, HUMAN_SD, n_pilot=30)
    plan = ok(client.post(f"/projects/{pid}/plan", json={"source": "pilot", "seed": 4, "m": 40, "budget": 120}), 201)
    block = plan["recipe"]["monitoring"]
    assert block["budget"] == 120 and block["budget_extends_lists"] and block["m"] == 40
    run = _follow(client, pid, truth, rng)
    (monitored,) = run["document"]["monitoring"]
    assert monitored["decision"] == "inconclusive" and "budget of 120" in monitored["reason"]
    assert all("budget of 120" in b["reason"] for b in run["last"].values())
    assert [r["m"] for r in monitored["raters"]] == [120, 120, 120]  # usable overlap, the 30 pilot items with it
    progress = run["document"]["plan"]
    assert all(40 < r["listed"] <= 120 for r in progress["raters"]) and progress["remaining_labels"] == 0
    assert min(run["labeled"].values()) > 40  # the lists grew past m


def test_a_good_judge_is_decided_within_the_sized_budget(client: TestClient) -> None:
    """The budget sized from the pilot: a judge better than the humans is passed before its lists reach it,
    and the lists end there, decided."""
    rng = np.random.default_rng(9)
    pid, truth = _project(client, rng, 0.4, n_pilot=150)
    plan = ok(client.post(f"/projects/{pid}/plan", json={"source": "pilot", "seed": 5}), 201)
    block = plan["recipe"]["monitoring"]
    assert block["simulated"] and block["budget"] >= plan["m"] and block["decided_by_budget"] >= block["budget_level"]
    run = _follow(client, pid, truth, rng)
    (monitored,) = run["document"]["monitoring"]
    assert monitored["decision"] == "pass", monitored
    assert all("the monitored decision is pass" in b["reason"] for b in run["last"].values())


def test_a_budget_below_m_is_422_and_fixed_mode_has_none(client: TestClient) -> None:
    rng = np.random.default_rng(1)
    pid, _ = _project(client, rng, 0.4, n_pilot=100)
    r = client.post(f"/projects/{pid}/plan", json={"source": "pilot", "m": 40, "budget": 20})
    assert r.status_code == 422, r.text
    r = client.post(f"/projects/{pid}/plan", json={"source": "pilot", "budget": 1})
    assert r.status_code == 422 and r.json()["error"] == "budget_below_m", r.text
    assert client.get(f"/projects/{pid}/plan").status_code == 404
    fixed, _ = _project(client, rng, 0.4, n_pilot=100, monitoring="fixed")
    r = client.post(f"/projects/{fixed}/plan", json={"source": "pilot", "budget": 500})
    assert r.status_code == 409 and "fixed mode" in r.text, r.text
    plan = ok(client.post(f"/projects/{fixed}/plan", json={"source": "pilot", "m": 40}), 201)
    assert plan["recipe"]["monitoring"] == {
        "mode": "fixed",
        "simulated": False,
        "reason": plan["recipe"]["monitoring"]["reason"],
    }


def test_a_plan_past_the_sizing_work_bound_keeps_the_requested_budget_unsimulated() -> None:
    """200 runs x 3 humans x m = 40,000 items is past the 2e7 differences a sizing draws: the block says so and
    the budget is the request's (else m), without simulating."""
    decision = DecisionSettings(rule="margin")
    for budget, expected in ((None, 40_000), (50_000, 50_000)):
        body = PlanCreate(source="pilot", budget=budget)
        block = _monitoring_block(body, decision, np.zeros(10), 40_000, 100_000, 3, 0)
        assert (
            not block["simulated"] and block["budget"] == expected and "differences a sizing draws" in block["reason"]
        )
