"""Plans for numeric projects through the REST route (docs/method.md §4b): the pilot recipe is the planner's on
the project's numbers, the check is simulated and keeps its promise, lists are disjoint and stratified on
the primary's score bin, and plans the method does not cover are a 409 that writes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from planner.recipes import rank_recipe
from planner.score_ranking import SCORE_RANK_SHARE, score_rank_variance
from planner.score_recipes import score_pilot, score_recipe
from service.matrices.matrix import RaterColumn
from service.matrices.ratings import RatingsMatrix
from service.matrices.score_bins import MAX_BINS, score_bins

RATERS = [("j", "judge"), ("p", "primary"), ("h1", "human"), ("h2", "human")]


def ok(r, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json()


def _pilot_project(
    client: TestClient, rule: str = "margin", n_items: int = 400, n_pilot: int = 200
) -> tuple[str, np.ndarray]:
    """A 1-5 project (integer steps) whose first ``n_pilot`` items are rated by everyone: the ratings
    (columns j, p, h1, h2) of those items."""
    body = {
        "name": "scores",
        "scale": "numeric",
        "value_range": {"min": 1, "max": 5, "step": 1},
        "decision": {"rule": rule},
    }
    pid = ok(client.post("/projects", json=body), 201)["id"]
    for ext, kind in RATERS:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in range(n_items)]))
    rng = np.random.default_rng(2)
    truth = rng.uniform(1, 5, n_pilot)
    sds = (0.6, 0.8, 0.8, 0.8)
    x = np.column_stack([np.clip(np.round(truth + rng.normal(0, sd, n_pilot)), 1, 5) for sd in sds])
    rows = [{"item": f"i{n}", "rater": RATERS[k][0], "value": int(x[n, k])} for n in range(n_pilot) for k in range(4)]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid, x


@pytest.mark.parametrize("rule", ["margin", "alt-test"])
def test_a_pilot_plan_is_the_planners_recipe_on_the_numbers(client: TestClient, rule: str) -> None:
    pid, x = _pilot_project(client, rule)
    plan = ok(client.post(f"/projects/{pid}/plan", json={"source": "pilot", "seed": 3}), 201)
    pilot = score_pilot(x, 0, [1, 2, 3], rule=rule, value_range=(1, 5), n_resamples=20, rng=0)
    epsilon = 0.05 if rule == "margin" else 0.2
    recipe = score_recipe(
        pilot.mu_d,
        pilot.sigma0_sq,
        n_items=400,
        n_humans=3,
        rule=rule,
        epsilon=epsilon,
        steps=4 if rule == "margin" else None,
    )
    document = plan["recipe"]
    assert document["scale"] == "numeric" and plan["design"] == "disjoint" and plan["source"] == "pilot"
    assert document["moments"]["mu_d"] == pytest.approx(pilot.mu_d, abs=1e-12)
    assert document["moments"]["sigma0_sq"] == pytest.approx(pilot.sigma0_sq, abs=1e-12)
    assert document["m"] == recipe.m and recipe.m is not None
    check = plan["check"]
    assert check["simulated"] and check["promised"] == "rater_fr" and check["promise"] == 0.025
    assert check["plan"]["trials"] == 1000 and check["plan"]["keeps_promise"]
    assert plan["m"] == check["plan"]["m"] >= recipe.m
    assert (check["raised_from"] is None) == (plan["m"] == recipe.m)
    assert ok(client.get(f"/projects/{pid}/plan"))["id"] == plan["id"]


def test_secondaries_get_disjoint_lists(client: TestClient) -> None:
    pid, _ = _pilot_project(client, n_items=600, n_pilot=150)
    plan = ok(client.post(f"/projects/{pid}/plan", json={"source": "pilot", "seed": 1, "m": 40}), 201)
    assert plan["m"] == 40 and plan["check"]["plan"]["m"] == 40  # a requested m is checked, never raised
    lists = {}
    for rater in ("h1", "h2"):
        batch = ok(client.post(f"/projects/{pid}/batches", json={"rater": rater, "size": 1000}))
        lists[rater] = set(batch["items"])
    assert all(len(items) <= 40 for items in lists.values())
    assert not lists["h1"] & lists["h2"]


@pytest.mark.parametrize(
    "body, says",
    [
        ({"source": "prior", "p_h": 0.8, "p_j": 0.8}, "planned from the pilot"),
        ({"source": "pilot", "design": "strat"}, "disjoint secondaries"),
    ],
)
def test_plans_outside_the_method_are_409_and_write_nothing(client: TestClient, body: dict, says: str) -> None:
    pid, _ = _pilot_project(client, n_pilot=40)
    r = client.post(f"/projects/{pid}/plan", json=body)
    assert r.status_code == 409 and r.json()["error"] == "numeric_scale" and says in r.text, r.text
    assert client.get(f"/projects/{pid}/plan").status_code == 404


@pytest.mark.parametrize("rule", ["margin", "alt-test"])
def test_a_ranking_plan_is_the_planners_ranking_recipe_on_the_numbers(client: TestClient, rule: str) -> None:
    """Ranking score judges was a 409: the plan is now m_rank at ``SCORE_RANK_SHARE`` of alpha_sig on the pilot's
    disjoint-design margin variance (``score_rank_variance``; one judge in the pilot: twice its own), with
    disjoint lists of m (500 items: alt-test's m of 206 per secondary does not fit two disjoint lists in 400)."""
    pid, x = _pilot_project(client, rule, n_items=500)
    body = {"source": "pilot", "purpose": "rank", "delta_min": 0.05, "seed": 1}
    plan = ok(client.post(f"/projects/{pid}/plan", json=body), 201)
    variance = score_rank_variance(x, [0], [1, 2, 3], rule=rule, value_range=(1, 5))
    recipe = rank_recipe(variance, 0.05, n_items=500, n_humans=3, n_judges=2, alpha_share=SCORE_RANK_SHARE)
    assert recipe.m != rank_recipe(variance, 0.05, n_items=500, n_humans=3, n_judges=2).m  # the share counts
    document = plan["recipe"]
    assert plan["design"] == "disjoint" and document["purpose"] == "rank" and document["goal"] == "rank"
    assert document["moments"]["ranking_variance"] == pytest.approx(variance, abs=1e-12)
    assert recipe.m is not None and plan["m"] == document["m"] == recipe.m and not plan["check"]["simulated"]
    lists = [
        set(ok(client.post(f"/projects/{pid}/batches", json={"rater": h, "size": 1000}))["items"]) for h in ("h1", "h2")
    ]
    assert all(len(items) <= plan["m"] for items in lists) and not lists[0] & lists[1]


def test_no_overlap_is_no_pilot(client: TestClient) -> None:
    pid, _ = _pilot_project(client, n_pilot=0)
    r = client.post(f"/projects/{pid}/plan", json={"source": "pilot"})
    assert r.status_code == 409 and r.json()["error"] == "no_pilot", r.text
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "j", "value": 3}]))
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": "i1", "rater": "p", "value": 3}]))
    r = client.post(f"/projects/{pid}/plan", json={"source": "pilot"})
    assert r.status_code == 409 and r.json()["error"] == "no_pilot", r.text


def _ratings(values: list[list[float]]) -> RatingsMatrix:
    array = np.array(values, dtype=float)
    raters = [RaterColumn(k, f"r{k}", "human") for k in range(array.shape[1])]
    return RatingsMatrix(array, np.arange(array.shape[0]), raters, "c", 0, 0, np.zeros(array.shape))


def test_score_bins_by_hand() -> None:
    """Steps of .5 on 1..5: nine bins, one per value; a 0..1 range without a step: ten bins of width .1
    (1.0 in the last); no rating: -1."""
    stepped = score_bins(_ratings([[1.0, 5.0], [2.5, np.nan]]), {"min": 1, "max": 5, "step": 0.5})
    assert stepped.n_labels == 9 and stepped.codes.tolist() == [[0, 8], [3, -1]]
    free = score_bins(_ratings([[0.0, 1.0], [0.35, 0.99]]), {"min": 0, "max": 1, "step": None})
    assert free.n_labels == MAX_BINS and free.codes.tolist() == [[0, 9], [3, 9]]
    fine = score_bins(_ratings([[0.0, 100.0]]), {"min": 0, "max": 100, "step": 1})
    assert fine.n_labels == MAX_BINS and fine.codes.tolist() == [[0, 9]]


def test_reliability_shows_each_secondarys_progress_through_the_plan(client: TestClient) -> None:
    """As a label project's: per secondary the list's items labeled against its length m, and the labels owed."""
    pid, _ = _pilot_project(client, n_items=600, n_pilot=150)
    assert ok(client.get(f"/projects/{pid}/reliability"))["plan"] is None
    plan = ok(client.post(f"/projects/{pid}/plan", json={"source": "pilot", "seed": 1, "m": 40}), 201)
    batch = ok(client.post(f"/projects/{pid}/batches", json={"rater": "h1", "size": 1000}))
    owed = len(batch["items"])
    rows = [{"item": item, "rater": "h1", "value": 3, "batch": batch["id"]} for item in batch["items"][:10]]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    progress = ok(client.get(f"/projects/{pid}/reliability"))["plan"]
    h2_done = progress["raters"][1]["done"]  # pilot items on h2's list count as labeled, as they do for labels
    assert progress["plan"] == plan["id"] and progress["m_target"] == 40 and progress["design"] == "disjoint"
    assert progress["raters"] == [
        {"rater": "h1", "done": 40 - owed + 10, "listed": 40},
        {"rater": "h2", "done": h2_done, "listed": 40},
    ]
    assert progress["m_done_min"] == min(40 - owed + 10, h2_done)
    assert progress["remaining_labels"] == owed - 10 + 40 - h2_done
