"""``POST /projects/{pid}/selective`` and judge labels' ``confidence`` (docs/method.md §3c)."""

from __future__ import annotations

from typing import Any

import numpy as np
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from planner.selective import calibrate_selective
from tests.service.test_plans import PRIOR, make_plan

N = 300
WORDS = ("pass", "fail")


def _panel(seed: int = 4) -> dict[str, Any]:
    """Humans agree on the truth; each judge is right with probability rising in its confidence."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, N)
    out: dict[str, Any] = {"prim": truth, "h2": np.where(rng.random(N) < 0.9, truth, 1 - truth)}
    for judge in ("small", "large"):
        conf = np.round(rng.random(N), 3)
        out[judge] = np.where(rng.random(N) < 0.5 + 0.5 * conf, truth, 1 - truth)
        out[f"{judge}_conf"] = conf
    return out


def _project(client: TestClient) -> str:
    pid: str = client.post("/projects", json={"name": "selective", "labels": list(WORDS)}).json()["id"]
    for ext, kind in [("small", "judge"), ("large", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(N)]).status_code == 200
    panel = _panel()
    rows = [{"item": f"i{i}", "rater": r, "value": WORDS[int(panel[r][i])]} for r in ("prim", "h2") for i in range(N)]
    rows += [
        {"item": f"i{i}", "rater": j, "value": WORDS[int(panel[j][i])], "confidence": float(panel[f"{j}_conf"][i])}
        for j in ("small", "large")
        for i in range(N)
    ]
    r = client.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text
    return pid


def _label_events(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM label_events")).scalar_one())


def test_the_thresholds_are_the_planners_on_the_stored_confidences(client: TestClient) -> None:
    pid = _project(client)
    r = client.post(f"/projects/{pid}/selective", json={"alpha": 0.15, "delta": 0.1, "judges": ["small", "large"]})
    assert r.status_code == 200, r.text
    doc = r.json()
    panel = _panel()
    # with one or two humans per item, the majority is defined where prim and h2 agree (ties left out)
    usable = panel["prim"] == panel["h2"]
    conf = np.column_stack([panel["small_conf"], panel["large_conf"]])[usable]
    wrong = np.column_stack([panel["small"], panel["large"]])[usable] != panel["prim"][usable, None]
    expected = calibrate_selective(conf, wrong, alpha=0.15, delta=0.1)
    assert doc["n_calibration"] == int(usable.sum())
    assert [s["threshold"] for s in doc["stages"]] == [
        None if np.isnan(s.threshold) else s.threshold for s in expected.stages
    ]
    assert [s["n_kept"] for s in doc["stages"]] == [s.n_kept for s in expected.stages]
    assert doc["coverage"] == expected.coverage and doc["guarantee"] == expected.guarantee
    assert doc["stages"][0]["delta"] == 0.05  # delta split over the two judges
    assert doc["n_items"] == N and sum(doc["kept_by"].values()) + doc["n_escalated"] == N
    assert len(doc["curve"]["thresholds"]) == 101 and doc["curve"]["coverage"][0] == 1.0
    assert doc["escalated_to"] == {}


def test_escalated_items_join_a_humans_list_and_its_next_batches(client: TestClient) -> None:
    pid = _project(client)
    make_plan(client, pid, m=20, design="random", seed=1, **PRIOR)
    r = client.post(f"/projects/{pid}/selective", json={"alpha": 0.1, "delta": 0.1, "escalate_to": ["h3"]})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["n_escalated"] > 0 and 0 < doc["escalated_to"]["h3"] <= doc["n_escalated"]
    batch = client.post(f"/projects/{pid}/batches", json={"rater": "h3", "size": 1000}).json()
    assert set(doc["escalated"]) <= set(batch["items"])
    again = client.post(f"/projects/{pid}/selective", json={"alpha": 0.1, "delta": 0.1, "escalate_to": ["h3"]})
    assert again.json()["escalated_to"]["h3"] == 0  # already on the list: nothing appended twice


def test_bad_input_is_422_and_nothing_is_written(client: TestClient, engine: Engine) -> None:
    pid = _project(client)
    before = _label_events(engine)
    for body in [{"alpha": 0.0}, {"alpha": 1.0}, {"delta": 1.5}, {"judges": ["prim"]}, {"escalate_to": ["small"]}]:
        r = client.post(f"/projects/{pid}/selective", json=body)
        assert r.status_code == 422, (body, r.text)
    r = client.post(f"/projects/{pid}/selective", json={"escalate_to": ["h3"]})
    assert r.status_code == 409 and "create a plan first" in r.text
    bad = [
        [{"item": "i0", "rater": "small", "value": "pass", "confidence": 1.2}],
        [{"item": "i0", "rater": "small", "value": "pass", "confidence": -0.1}],
        [
            {"item": "i1", "rater": "large", "value": "fail"},
            {"item": "i0", "rater": "h3", "value": "pass", "confidence": 0.5},
        ],
    ]
    for rows in bad:
        r = client.post(f"/projects/{pid}/labels", json=rows)
        assert r.status_code == 422, r.text
    assert "only a judge's label carries a confidence" in r.text
    assert _label_events(engine) == before
