"""Per-slice plans (issue 35, docs/method.md §3b): the overlap sized so each slice can be decided, the panel
drawn slice by slice, a fixed budget shared by Neyman allocation; bad requests 422 with nothing written."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient

from planner import neyman_allocation
from tests.service.test_plans import PRIOR, full_list, make_plan

N_EN, N_DE = 300, 100


def _project(client: TestClient, **decision: Any) -> str:
    body = {"name": "sliced", "labels": ["pass", "fail"], "decision": {"monitoring": "fixed", **decision}}
    pid: str = client.post("/projects", json=body).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}", "features": {"language": "en" if i < N_EN else "de"}} for i in range(N_EN + N_DE)]
    assert client.post(f"/projects/{pid}/items", json=items).status_code == 200
    rows = [{"item": f"i{i}", "rater": "prim", "value": "fail" if i % 10 < 3 else "pass"} for i in range(N_EN + N_DE)]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def _alone(client: TestClient, n_items: int, epsilon: float) -> int:
    """The recipe's overlap of a project holding only one slice's items, at that slice's epsilon."""
    body = {"name": "one slice", "labels": ["pass", "fail"], "decision": {"monitoring": "fixed", "epsilon": epsilon}}
    pid = client.post("/projects", json=body).json()["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(n_items)])
    m: int = make_plan(client, pid, **PRIOR, design="strat", seed=1)["recipe"]["m"]
    return m


def test_each_slice_gets_its_own_recipes_overlap_and_the_lists_hold_it(client: TestClient) -> None:
    pid = _project(client, epsilon=0.05, slice_epsilon={"de": 0.1})
    plan = make_plan(client, pid, **PRIOR, design="strat", slices="feature:language", seed=3)
    block = plan["recipe"]["slices"]
    assert block["feature"] == "language" and block["allocation"] == "the recipe per slice"
    by = {s["value"]: s for s in block["slices"]}
    assert by["de"]["epsilon"] == 0.1 and by["en"]["epsilon"] == 0.05
    assert by["de"]["m_needed"] == _alone(client, N_DE, 0.1)
    assert by["en"]["m_needed"] == min(_alone(client, N_EN, 0.05), N_EN)
    assert all(s["m"] == s["m_needed"] for s in block["slices"])
    assert plan["m"] == plan["recipe"]["m_planned"] == by["de"]["m"] + by["en"]["m"]
    listed = full_list(client, pid, "h2")
    assert listed == full_list(client, pid, "h3") and len(set(listed)) == plan["m"]
    index = np.array([int(x[1:]) for x in listed])
    assert int((index >= N_EN).sum()) == by["de"]["m"]
    fails = index % 10 < 3
    for part, rows in (("de", index >= N_EN), ("en", index < N_EN)):  # Strat inside each slice
        assert abs(int(fails[rows].sum()) - 0.3 * by[part]["m"]) <= 1
    half = index[: plan["m"] // 2]  # slices interleaved: any prefix holds each in proportion
    assert abs(int((half >= N_EN).sum()) - by["de"]["m"] / 2) <= 1


def test_a_fixed_budget_is_shared_across_slices_by_neyman_allocation(client: TestClient) -> None:
    pid = _project(client)
    plan = make_plan(client, pid, **PRIOR, design="strat", slices="feature:language", m=60, seed=3)
    block = plan["recipe"]["slices"]
    assert block["allocation"].startswith("neyman")
    sizes, sds = [s["n_items"] for s in block["slices"]], [s["sd"] for s in block["slices"]]
    assert [s["m"] for s in block["slices"]] == neyman_allocation(sizes, sds, 60).tolist()
    assert plan["m"] == 60 and sum(s["m"] for s in block["slices"]) == 60
    assert any(not s["decidable"] for s in block["slices"])  # 60 items cannot decide both slices


def test_bad_slice_plans_are_422_and_write_nothing(client: TestClient) -> None:
    pid = _project(client)
    for body in (
        {**PRIOR, "slices": "feature:language"},  # design auto
        {**PRIOR, "design": "random", "slices": "feature:language"},
        {"purpose": "rank", "delta_min": 0.05, **PRIOR, "design": "strat", "slices": "feature:language"},
        {**PRIOR, "design": "strat", "slices": "language"},
        {**PRIOR, "design": "strat", "slices": "feature:topic"},  # no item has it
    ):
        r = client.post(f"/projects/{pid}/plan", json=body)
        assert r.status_code == 422, (body, r.text)
    assert client.get(f"/projects/{pid}/plan").status_code == 404
