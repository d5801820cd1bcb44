"""The pairwise project kind (issue 34): items compared by A/B verdicts, a judge's label per shown order
(AB, BA) as its own cell on every write path, and bad input 422 with nothing written."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text


def pairwise_project(c: TestClient, n_items: int = 4, **fields: object) -> str:
    """A pairwise project with items q0.. comparing systems x and y, a judge, a primary and a human."""
    r = c.post("/projects", json={"name": "ab", "kind": "pairwise", **fields})
    assert r.status_code == 201, r.text
    pid = r.json()["id"]
    items = [{"external_id": f"q{i}", "features": {"system_a": "x", "system_b": "y"}} for i in range(n_items)]
    assert c.post(f"/projects/{pid}/items", json=items).status_code == 200
    for ext, kind in (("judge", "judge"), ("prim", "primary"), ("h2", "human")):
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    return pid


def _current(c: TestClient, pid: str) -> list[tuple[str, str, str | None, str]]:
    rows = c.get(f"/projects/{pid}/labels", params={"limit": 1000}).json()["items"]
    return sorted((r["item"], r["rater"], r["order"], r["value"]) for r in rows)


def test_a_pairwise_project_has_the_verdict_labels(client: TestClient) -> None:
    body = client.post("/projects", json={"name": "ab", "kind": "pairwise"}).json()
    assert (body["kind"], body["labels"]) == ("pairwise", ["A", "B", "tie"])
    no_ties = client.post("/projects", json={"name": "ab", "kind": "pairwise", "labels": ["A", "B"]}).json()
    assert no_ties["labels"] == ["A", "B"]
    assert client.post("/projects", json={"name": "p", "labels": ["x", "y"]}).json()["kind"] == "pointwise"
    for bad in ({"labels": ["yes", "no"]}, {"labels": ["B", "A"]}, {"scale": "ordinal"}):
        assert client.post("/projects", json={"name": "ab", "kind": "pairwise", **bad}).status_code == 422
    pid = body["id"]
    assert client.patch(f"/projects/{pid}", json={"labels": ["A", "B", "both"]}).status_code == 422


def test_a_judge_holds_a_label_per_order_and_a_resubmission_writes_nothing(client: TestClient) -> None:
    pid = pairwise_project(client)
    rows = [
        {"item": "q0", "rater": "judge", "value": "A", "order": "AB"},
        {"item": "q0", "rater": "judge", "value": "B", "order": "BA"},
        {"item": "q1", "rater": "judge", "value": "tie", "order": "BA"},
        {"item": "q0", "rater": "prim", "value": "A"},
    ]
    first = client.post(f"/projects/{pid}/labels", json=rows).json()
    assert (first["accepted"], first["duplicates"]) == (4, 0)
    again = client.post(f"/projects/{pid}/labels", json=rows).json()
    assert (again["accepted"], again["duplicates"], again["label_seq"]) == (0, 4, first["label_seq"])
    assert _current(client, pid) == [
        ("q0", "judge", "AB", "A"),
        ("q0", "judge", "BA", "B"),
        ("q0", "prim", None, "A"),
        ("q1", "judge", "BA", "tie"),
    ]
    # a correction of one order leaves the other
    fixed = client.post(f"/projects/{pid}/labels", json=[{"item": "q0", "rater": "judge", "value": "A", "order": "BA"}])
    assert fixed.json()["accepted"] == 1
    assert ("q0", "judge", "AB", "A") in _current(client, pid) and ("q0", "judge", "BA", "A") in _current(client, pid)
    raters = {r["external_id"]: r for r in client.get(f"/projects/{pid}/raters").json()["items"]}
    assert raters["judge"]["n_labels"] == 3


def test_csv_uploads_carry_the_order(client: TestClient) -> None:
    pid = pairwise_project(client)
    csv = "item,rater,value,order\nq0,judge,A,AB\nq0,judge,B,BA\nq1,prim,tie,\n"
    r = client.post(f"/projects/{pid}/labels", content=csv, headers={"Content-Type": "text/csv"})
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == 3
    exported = client.get(f"/projects/{pid}/labels", params={"format": "csv"}).text.splitlines()
    assert exported[0].split(",")[-1] == "order"
    assert sorted(line.split(",")[-1] for line in exported[1:]) == ["", "AB", "BA"]
    again = client.post(f"/projects/{pid}/labels", content=csv, headers={"Content-Type": "text/csv"})
    assert again.json()["duplicates"] == 3


def test_a_retraction_withdraws_one_order_or_both(client: TestClient) -> None:
    pid = pairwise_project(client)
    rows = [{"item": f"q{i}", "rater": "judge", "value": "A", "order": o} for i in (0, 1) for o in ("AB", "BA")]
    client.post(f"/projects/{pid}/labels", json=rows)
    one = client.post(f"/projects/{pid}/labels/retractions", json=[{"item": "q0", "rater": "judge", "order": "BA"}])
    assert one.json()["retracted"] == 1
    both = client.post(f"/projects/{pid}/labels/retractions", json=[{"item": "q1", "rater": "judge"}])
    assert both.json()["retracted"] == 2
    assert _current(client, pid) == [("q0", "judge", "AB", "A")]
    history = client.get(f"/projects/{pid}/labels", params={"history": "true", "limit": 100}).json()["items"]
    assert sorted((h["item"], h["order"]) for h in history if h["retracted"]) == [
        ("q0", "BA"),
        ("q1", "AB"),
        ("q1", "BA"),
    ]


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"item": "q0", "rater": "judge", "value": "A", "order": "BB"}, "order"),  # an order other than AB/BA
        ({"item": "q0", "rater": "judge", "value": "A"}, "names the order"),  # a judge's label without one
        ({"item": "q0", "rater": "prim", "value": "A", "order": "AB"}, "only a judge"),
        ({"item": "q0", "rater": "judge", "value": "C", "order": "AB"}, "unknown label"),
    ],
)
def test_bad_rows_are_422_and_write_nothing(client: TestClient, row: dict, says: str) -> None:
    pid = pairwise_project(client)
    good = {"item": "q1", "rater": "judge", "value": "A", "order": "AB"}
    r = client.post(f"/projects/{pid}/labels", json=[good, row])
    assert r.status_code == 422 and says in r.text, r.text
    assert _current(client, pid) == [] and client.get(f"/projects/{pid}").json()["label_seq"] == 0


def test_a_tie_where_ties_are_disallowed_is_422(client: TestClient) -> None:
    pid = pairwise_project(client, labels=["A", "B"])
    rows = [
        {"item": "q1", "rater": "prim", "value": "A"},
        {"item": "q0", "rater": "judge", "value": "tie", "order": "AB"},
    ]
    r = client.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 422 and "disallows ties" in r.json()["detail"], r.text
    assert _current(client, pid) == [] and client.get(f"/projects/{pid}").json()["label_seq"] == 0
    csv = "item,rater,value,order\nq1,prim,A,\nq0,judge,tie,BA\n"
    r = client.post(f"/projects/{pid}/labels", content=csv, headers={"Content-Type": "text/csv"})
    assert r.status_code == 422 and "disallows ties" in r.json()["detail"], r.text
    assert _current(client, pid) == [] and client.get(f"/projects/{pid}").json()["label_seq"] == 0


def test_an_order_on_a_pointwise_project_is_422(client: TestClient) -> None:
    pid = client.post("/projects", json={"name": "p", "labels": ["pass", "fail"]}).json()["id"]
    client.post(f"/projects/{pid}/items", json=[{"external_id": "q0"}])
    client.post(f"/projects/{pid}/raters", json={"external_id": "judge", "kind": "judge"})
    r = client.post(f"/projects/{pid}/labels", json=[{"item": "q0", "rater": "judge", "value": "pass", "order": "AB"}])
    assert r.status_code == 422 and "pointwise" in r.text
    r = client.post(f"/projects/{pid}/labels/retractions", json=[{"item": "q0", "rater": "judge", "order": "AB"}])
    assert r.status_code == 422
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0


@pytest.mark.parametrize(
    "features", [{"system_a": "x"}, {"system_a": "x", "system_b": "x"}, {"system_a": "x", "system_b": 3}]
)
def test_a_pairwise_item_names_two_different_systems_or_none(client: TestClient, features: dict) -> None:
    pid = client.post("/projects", json={"name": "ab", "kind": "pairwise"}).json()["id"]
    good = {"external_id": "q0", "features": {"system_a": "x", "system_b": "y", "answer_a": "...", "answer_b": "..."}}
    r = client.post(f"/projects/{pid}/items", json=[good, {"external_id": "q1", "features": features}])
    assert r.status_code == 422, r.text
    assert client.get(f"/projects/{pid}").json()["n_items"] == 0


def test_the_generic_format_round_trips_both_orders(client: TestClient) -> None:
    src = pairwise_project(client)
    rows = [
        {"item": "q0", "rater": "judge", "value": "A", "order": "AB"},
        {"item": "q0", "rater": "judge", "value": "B", "order": "BA"},
        {"item": "q0", "rater": "prim", "value": "A"},
    ]
    client.post(f"/projects/{src}/labels", json=rows)
    exported = client.get(f"/projects/{src}/export/generic")
    assert exported.text.splitlines()[0].split(",")[-1] == "order"
    dst = client.post("/projects", json={"name": "copy", "kind": "pairwise"}).json()["id"]
    r = client.post(f"/projects/{dst}/import/generic", content=exported.content, headers={"content-type": "text/csv"})
    assert r.status_code == 200, r.text
    assert r.json()["labels"]["accepted"] == 3
    assert _current(client, dst) == _current(client, src)
    again = client.post(
        f"/projects/{dst}/import/generic", content=exported.content, headers={"content-type": "text/csv"}
    )
    assert again.json()["labels"]["duplicates"] == 3


def test_a_judges_two_orders_count_one_labelled_item(client: TestClient, engine: Engine) -> None:
    """The rater's progress (what batches read for what is left) counts items, not orders, in one write or two."""
    pid = pairwise_project(client)
    both = [{"item": "q0", "rater": "judge", "value": "A", "order": o} for o in ("AB", "BA")]
    client.post(f"/projects/{pid}/labels", json=both)
    client.post(f"/projects/{pid}/labels", json=[{"item": "q1", "rater": "judge", "value": "B", "order": "AB"}])
    client.post(f"/projects/{pid}/labels", json=[{"item": "q1", "rater": "judge", "value": "B", "order": "BA"}])
    sql = (
        "SELECT labeled_items FROM rater_progress JOIN raters ON raters.id = rater_progress.rater_id "
        "WHERE raters.project_id = :p AND raters.external_id = 'judge'"
    )
    with engine.connect() as conn:
        assert conn.execute(text(sql), {"p": pid}).scalar_one() == 2
    client.post(f"/projects/{pid}/labels/retractions", json=[{"item": "q1", "rater": "judge", "order": "BA"}])
    with engine.connect() as conn:
        assert conn.execute(text(sql), {"p": pid}).scalar_one() == 2  # q1 keeps its AB label
