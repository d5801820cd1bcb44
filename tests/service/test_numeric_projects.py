"""Issue 33 item 1: a project with ``scale: "numeric"`` and a declared ``value_range``. Labels are numbers
(JSON numbers, numeric strings, CSV cells) stored as one canonical text per number; CANNOT_ASSESS as in
any project; a value out of range, off the step or not a number is a 422 naming the row, nothing written;
endpoints that read labels as categories answer 409 for such a project."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from planner.icc import intraclass_correlations
from planner.score_decision import validate_scores
from planner.scores import concordance_correlation
from service.schemas.documents import ScoreReliabilityDocument

CSV = {"content-type": "text/csv"}


def ok(r, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json()


def numeric_project(client: TestClient, **settings: object) -> str:
    """A 1-5 rating project (half steps) with judge j and humans h1, h2, items i1..i3."""
    body = {"name": "ratings", "scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 0.5}, **settings}
    pid = ok(client.post("/projects", json=body), 201)["id"]
    for ext, kind in [("j", "judge"), ("h1", "human"), ("h2", "human")]:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in (1, 2, 3)]))
    return pid


def current(client: TestClient, pid: str) -> dict[tuple[str, str], str]:
    rows = ok(client.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
    return {(r["item"], r["rater"]): r["value"] for r in rows}


def test_a_numeric_project_reads_back_its_range_and_no_labels(client: TestClient) -> None:
    pid = numeric_project(client)
    project = ok(client.get(f"/projects/{pid}"))
    assert project["scale"] == "numeric" and project["labels"] == []
    assert project["value_range"] == {"min": 1.0, "max": 5.0, "step": 0.5}
    nominal = ok(client.post("/projects", json={"name": "n", "labels": ["a", "b"]}), 201)
    assert nominal["value_range"] is None and nominal["scale"] == "nominal"


def test_project_bodies_that_do_not_fit_the_scale_are_refused(client: TestClient) -> None:
    for body, says in (
        ({"scale": "numeric"}, "needs value_range"),
        ({"scale": "numeric", "labels": ["a", "b"], "value_range": {"min": 0, "max": 1}}, "no labels"),
        ({"labels": ["a", "b"], "value_range": {"min": 0, "max": 1}}, "numeric scale only"),
        ({}, "needs labels"),
        ({"scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 0.3}}, "does not divide"),
        ({"scale": "numeric", "value_range": {"min": 2, "max": 1}}, "min < max"),
    ):
        r = client.post("/projects", json={"name": "x", **body})
        assert r.status_code == 422 and says in r.text, (body, r.text)
    pid = numeric_project(client)
    assert client.patch(f"/projects/{pid}", json={"scale": "ordinal"}).status_code == 422
    assert client.patch(f"/projects/{pid}", json={"labels": ["a", "b"]}).status_code == 422
    widened = ok(client.patch(f"/projects/{pid}", json={"value_range": {"min": 0, "max": 10}}))
    assert widened["value_range"] == {"min": 0.0, "max": 10.0, "step": None}


def test_numbers_as_json_strings_and_csv_are_one_value_each(client: TestClient) -> None:
    pid = numeric_project(client)
    written = ok(
        client.post(
            f"/projects/{pid}/labels",
            json=[
                {"item": "i1", "rater": "j", "value": 4},
                {"item": "i1", "rater": "h1", "value": 3.5},
                {"item": "i2", "rater": "j", "value": "2.0"},
            ],
        )
    )
    assert written["accepted"] == 3
    csv = "item,rater,value\ni1,j,4.0\ni1,h1,3.50\ni2,j,2\ni2,h1,5\n"
    again = ok(client.post(f"/projects/{pid}/labels", content=csv, headers=CSV))
    assert again == {"accepted": 1, "duplicates": 3, "label_seq": 4}  # 4 = 4.0, 3.5 = "3.50", "2.0" = 2
    assert current(client, pid) == {("i1", "j"): "4", ("i1", "h1"): "3.5", ("i2", "j"): "2", ("i2", "h1"): "5"}


def test_bad_numeric_values_are_422_naming_the_row_and_write_nothing(client: TestClient) -> None:
    pid = numeric_project(client)
    good = {"item": "i1", "rater": "h1", "value": 3}
    for bad, says in (
        (5.5, "outside the project's value_range [1, 5]"),
        (0, "outside"),
        (2.25, "in steps of 0.5"),
        ("three", "is not a number"),
        ("nan", "outside"),
        ("CANNOT_ASSESS", "allow_abstain is false"),
        ("INVALID", "only accepted from judges"),
        (True, "row 2"),
    ):
        r = client.post(f"/projects/{pid}/labels", json=[good, {"item": "i2", "rater": "h2", "value": bad}])
        assert r.status_code == 422 and "row 2" in r.text and says in r.text, (bad, r.text)
    r = client.post(f"/projects/{pid}/labels", content="item,rater,value\ni1,h1,3\ni2,h2,9\n", headers=CSV)
    assert r.status_code == 422 and "row 2" in r.text
    assert current(client, pid) == {} and ok(client.get(f"/projects/{pid}"))["label_seq"] == 0


def test_special_values_in_a_numeric_project(client: TestClient) -> None:
    pid = numeric_project(client, allow_abstain=True)
    rows = [
        {"item": "i1", "rater": "h1", "value": "CANNOT_ASSESS"},
        {"item": "i1", "rater": "j", "value": "INVALID"},
        {"item": "i2", "rater": "j", "value": 1},
    ]
    assert ok(client.post(f"/projects/{pid}/labels", json=rows))["accepted"] == 3
    assert current(client, pid) == {("i1", "h1"): "CANNOT_ASSESS", ("i1", "j"): "INVALID", ("i2", "j"): "1"}


def test_a_label_project_refuses_numbers(client: TestClient) -> None:
    pid = ok(client.post("/projects", json={"name": "n", "labels": ["1", "2"], "scale": "ordinal"}), 201)["id"]
    ok(client.post(f"/projects/{pid}/raters", json={"external_id": "h", "kind": "human"}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "i1"}]))
    r = client.post(f"/projects/{pid}/labels", json=[{"item": "i1", "rater": "h", "value": 1}])
    assert r.status_code == 422 and "row 1" in r.text and "is a number" in r.text
    assert ok(client.post(f"/projects/{pid}/labels", json=[{"item": "i1", "rater": "h", "value": "1"}]))["accepted"]


def test_documents_of_a_numeric_project_are_the_score_ones(client: TestClient) -> None:
    pid = numeric_project(client)
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": "i1", "rater": "h1", "value": 3}]))
    ranking = ok(client.get(f"/projects/{pid}/ranking"))  # by hand: tests/service/test_score_ranking.py
    assert ranking["scale"] == "numeric" and ranking["judges"][0]["defined"] is False
    assert client.get(f"/projects/{pid}/dashboard").status_code == 200  # the score dashboard: test_score_dashboard


def test_no_project_route_answers_500_for_a_numeric_project(client: TestClient) -> None:
    """Every GET under /projects/{pid} (and the writes that read labels as categories) on a labeled numeric
    project answers below 500: a 409 where labels would be read as categories."""
    pid = numeric_project(client)
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": f"i{n}", "rater": "h1", "value": n} for n in (1, 2, 3)]))
    spec = ok(client.get("/openapi.json"))["paths"]
    paths = sorted(
        p for p, ops in spec.items() if "get" in ops and p.startswith("/projects/{pid}/") and p.count("{") == 1
    )
    assert "/projects/{pid}/reliability" in paths
    statuses = {path: client.get(path.replace("{pid}", pid)).status_code for path in paths}
    statuses["POST plan"] = client.post(f"/projects/{pid}/plan", json={}).status_code
    statuses["POST batches"] = client.post(f"/projects/{pid}/batches", json={"rater": "h1"}).status_code
    statuses["POST simulate"] = client.post(f"/projects/{pid}/simulate", json={}).status_code
    assert all(status < 500 for status in statuses.values()), statuses


def _rated_project(client: TestClient, rule: str) -> tuple[str, np.ndarray]:
    """A 1-5 project (integer steps), judge j and humans h1..h3 on 60 items, a few abstentions; the ratings
    matrix it was given (columns j, h1, h2, h3; NaN: none or CANNOT_ASSESS)."""
    body = {
        "name": "r",
        "scale": "numeric",
        "value_range": {"min": 1, "max": 5, "step": 1},
        "allow_abstain": True,
        "decision": {"rule": rule, "epsilon": 0.15 if rule == "alt-test" else 0.1},
    }
    pid = ok(client.post("/projects", json=body), 201)["id"]
    raters = ["j", "h1", "h2", "h3"]
    for ext in raters:
        kind = "judge" if ext == "j" else "human"
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n}"} for n in range(60)]))
    rng = np.random.default_rng(5)
    x = np.clip(rng.integers(1, 6, size=(60, 1)) + rng.integers(-1, 2, size=(60, 4)), 1, 5).astype(float)
    x[rng.random((60, 4)) < 0.05] = np.nan
    rows = [
        {"item": f"i{n}", "rater": raters[k], "value": int(x[n, k])}
        for n in range(60)
        for k in range(4)
        if not np.isnan(x[n, k])
    ]
    rows += [{"item": f"i{n}", "rater": "h2", "value": "CANNOT_ASSESS"} for n in range(60) if np.isnan(x[n, 2])]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid, x


@pytest.mark.parametrize("rule", ["alt-test", "margin"])
def test_reliability_of_a_numeric_project_is_the_planner_on_its_numbers(client: TestClient, rule: str) -> None:
    pid, x = _rated_project(client, rule)
    r = client.get(f"/projects/{pid}/reliability")
    doc = ok(r)
    ScoreReliabilityDocument.model_validate(doc)
    assert client.get(f"/projects/{pid}/reliability", headers={"If-None-Match": r.headers["ETag"]}).status_code == 304
    epsilon = 0.15 if rule == "alt-test" else 0.1
    (want,) = validate_scores(x, [0], [1, 2, 3], rule=rule, epsilon=epsilon, value_range=(1, 5))  # type: ignore[arg-type]
    assert all(h.won is not None for h in want.raters) and want.decision in ("pass", "reject")
    assert doc["decision"] == want.decision and doc["judge"] == "j" and doc["rule"] == rule
    assert doc["omega"] == pytest.approx(want.omega) and doc["rho"] == pytest.approx(want.rho)
    assert [h["m"] for h in doc["judges"][0]["raters"]] == [h.m for h in want.raters]
    assert doc["n_special"] == int(np.isnan(x[:, 2]).sum()) > 0
    icc = {row["form"]: row for row in doc["icc"]}
    humans = x[:, 1:][(~np.isnan(x[:, 1:])).sum(axis=1) >= 2]
    theirs = intraclass_correlations(humans)["2,1"]
    assert icc["2,1"]["statistic"] == pytest.approx(theirs.statistic, abs=1e-12)
    assert icc["2,1"]["ci"] == pytest.approx([theirs.confidence_interval().low, theirs.confidence_interval().high])
    pair = next(p for p in doc["pairs"] if p["human"] == "h1")
    both = ~np.isnan(x[:, 0]) & ~np.isnan(x[:, 1])
    diff = x[both, 0] - x[both, 1]
    assert pair["n_items"] == int(both.sum()) and pair["bias"] == pytest.approx(diff.mean(), abs=1e-12)
    assert pair["mae"] == pytest.approx(np.abs(diff).mean()) and pair["rmse"] == pytest.approx(
        np.sqrt((diff**2).mean())
    )
    assert pair["ccc"] == pytest.approx(concordance_correlation(x[:, 0], x[:, 1]).statistic, abs=1e-12)
