"""Plans of a pairwise project (issue 34, docs/method.md §13): a Strat panel is drawn over the first judge's
verdict crossed with whether that verdict held in both answer orders, so the position-inconsistent items,
where the judge is least sure, are in the panel in their corpus share at every seed."""

from __future__ import annotations

import numpy as np
from fastapi.testclient import TestClient

N = 60
SIZES = {"A, the same in both orders": 30, "B, the same in both orders": 18, "A, different in the two orders": 12}


def _project(c: TestClient) -> tuple[str, dict[str, str]]:
    """60 items whose judge strata (sizes 30, 18, 12) are shuffled through the corpus, and a primary whose own
    label (A on even positions, B on odd) cuts across them; returns the project and each item's judge stratum."""
    pid = c.post("/projects", json={"name": "ab", "kind": "pairwise"}).json()["id"]
    c.post(f"/projects/{pid}/items", json=[{"external_id": f"q{i}"} for i in range(N)])
    for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human")):
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    names = [name for name, size in SIZES.items() for _ in range(size)]
    stratum = dict(zip((f"q{i}" for i in np.random.default_rng(3).permutation(N)), names, strict=True))
    rows = []
    for i in range(N):
        item = f"q{i}"
        ab, ba = ("A", "B") if "different" in stratum[item] else (stratum[item][0],) * 2
        rows += [
            {"item": item, "rater": "judge", "value": ab, "order": "AB"},
            {"item": item, "rater": "judge", "value": ba, "order": "BA"},
            {"item": item, "rater": "prim", "value": "AB"[i % 2]},
        ]
    assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid, stratum


def test_a_strat_panel_is_drawn_over_the_judges_verdict_and_consistency(client: TestClient) -> None:
    panels = []
    for seed in (1, 2, 3):  # a project each: re-planning keeps a secondary's list
        pid, stratum = _project(client)
        body = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "strat", "m": 30, "seed": seed}
        plan = client.post(f"/projects/{pid}/plan", json=body)
        assert plan.status_code == 201, plan.text
        assert plan.json()["m"] == 30
        assert sorted(plan.json()["recipe"]["strat_strata"]) == sorted(f"judge: {name}" for name in SIZES)
        batch = client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": N}).json()
        items = batch["items"]
        assert len(items) == 30
        counts = {name: sum(stratum[i] == name for i in items) for name in SIZES}
        assert counts == {name: size // 2 for name, size in SIZES.items()}  # proportional: half of each stratum
        panels.append(frozenset(items))
    assert len(set(panels)) == 3  # a draw, not a fixed choice


def test_a_pointwise_projects_strat_panel_keeps_the_primarys_label(client: TestClient) -> None:
    pid = client.post("/projects", json={"name": "p", "labels": ["pass", "fail"]}).json()["id"]
    client.post(f"/projects/{pid}/items", json=[{"external_id": f"q{i}"} for i in range(20)])
    for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human")):
        client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    rows = [{"item": f"q{i}", "rater": "prim", "value": ["pass", "fail"][i < 5]} for i in range(20)]
    client.post(f"/projects/{pid}/labels", json=rows)
    body = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "strat", "m": 8, "seed": 1}
    plan = client.post(f"/projects/{pid}/plan", json=body).json()
    assert "strat_strata" not in plan["recipe"]
    items = client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 20}).json()["items"]
    assert sum(int(i[1:]) < 5 for i in items) == 2  # a quarter fail: 2 of 8
