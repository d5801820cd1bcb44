"""`POST /projects/{pid}/labels/retractions`: a label withdrawn through the API is a retraction event (the
history keeps both), leaves the current labels and the documents, and a repeat writes nothing; bad rows and
an annotator naming another rater change nothing."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.factories import create_project

ITEMS = [f"i{i}" for i in range(12)]


def _labelled(client: TestClient, **settings: Any) -> str:
    pid = create_project(client, items=ITEMS, **settings)
    rows = [{"item": i, "rater": r, "value": "pass"} for i in ITEMS for r in ("judge", "prim")]
    rows += [{"item": i, "rater": "h2", "value": "fail"} for i in ITEMS[:6]]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def _current(client: TestClient, pid: str) -> set[tuple[str, str]]:
    page = client.get(f"/projects/{pid}/labels", params={"limit": 1000}).json()["items"]
    return {(row["item"], row["rater"]) for row in page}


def _seq(client: TestClient, pid: str) -> int:
    history = client.get(f"/projects/{pid}/labels", params={"limit": 1000, "history": True}).json()["items"]
    return max(row["seq"] for row in history)


def test_a_retraction_withdraws_the_label_keeps_the_history_and_a_repeat_writes_nothing(client: TestClient) -> None:
    pid = _labelled(client)
    before = client.get(f"/projects/{pid}/reliability").json()
    seq = _seq(client, pid)
    r = client.post(f"/projects/{pid}/labels/retractions", json=[{"item": "i0", "rater": "h2"}])
    assert r.status_code == 200, r.text
    assert r.json() == {"retracted": 1, "label_seq": seq + 1}
    assert ("i0", "h2") not in _current(client, pid) and ("i1", "h2") in _current(client, pid)
    history = client.get(f"/projects/{pid}/labels", params={"limit": 1000, "history": True}).json()["items"]
    cell = [row for row in history if (row["item"], row["rater"]) == ("i0", "h2")]
    assert [row["value"] for row in cell] == ["fail", None] and cell[-1]["retracted"] is True
    after = client.get(f"/projects/{pid}/reliability").json()
    assert after["label_seq"] == seq + 1 and after != before
    again = client.post(f"/projects/{pid}/labels/retractions", json=[{"item": "i0", "rater": "h2"}])
    assert again.json() == {"retracted": 0, "label_seq": seq + 1}
    # a cell never labelled is no error either, and the label can be written again afterwards
    csv = "item,rater\ni7,h2\ni1,h2\n"
    both = client.post(f"/projects/{pid}/labels/retractions", content=csv, headers={"Content-Type": "text/csv"}).json()
    assert both == {"retracted": 1, "label_seq": seq + 2}
    relabel = client.post(f"/projects/{pid}/labels", json=[{"item": "i0", "rater": "h2", "value": "pass"}])
    assert relabel.json()["accepted"] == 1 and ("i0", "h2") in _current(client, pid)


def test_bad_rows_and_another_raters_cells_change_nothing(client: TestClient) -> None:
    pid = _labelled(client)
    seq, labels = _seq(client, pid), _current(client, pid)
    cases = [
        ([{"item": "i0", "rater": "h2"}, {"item": "nope", "rater": "h2"}], 422, "row 2: unknown item"),
        ([{"item": "i0", "rater": "ghost"}], 422, "row 1: unknown rater"),
        ([{"item": "i0", "rater": "h2", "criterion": "tone"}], 422, "row 1: unknown criterion"),
        ([{"item": "i0"}], 422, "rater"),
    ]
    for rows, status, says in cases:
        r = client.post(f"/projects/{pid}/labels/retractions", json=rows)
        assert r.status_code == status and says in r.text, r.text
    key = client.post(f"/projects/{pid}/keys", json={"role": "annotator", "rater": "h2"}).json()["key"]
    annotator = {"Authorization": f"Bearer {key}"}
    theirs = [{"item": "i0", "rater": "h2"}, {"item": "i0", "rater": "prim"}]
    r = client.post(f"/projects/{pid}/labels/retractions", json=theirs, headers=annotator)
    assert r.status_code == 403 and "row 2" in r.text
    assert _seq(client, pid) == seq and _current(client, pid) == labels
    own = client.post(f"/projects/{pid}/labels/retractions", json=theirs[:1], headers=annotator)
    assert own.status_code == 200 and own.json()["retracted"] == 1  # control: its own cell is fine


def test_a_rubric_retracts_one_criterion_and_the_same_key_replays(client: TestClient) -> None:
    pid = create_project(client, items=ITEMS, criteria=["tone", "truth"])
    rows = [{"item": "i0", "rater": "h2", "value": "pass", "criterion": c} for c in ("tone", "truth")]
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    unnamed = client.post(f"/projects/{pid}/labels/retractions", json=[{"item": "i0", "rater": "h2"}])
    assert unnamed.status_code == 422 and "'criterion' is required" in unnamed.text
    body = [{"item": "i0", "rater": "h2", "criterion": "tone"}]
    key = {"Idempotency-Key": "retract-tone-1"}
    first = client.post(f"/projects/{pid}/labels/retractions", json=body, headers=key)
    replay = client.post(f"/projects/{pid}/labels/retractions", json=body, headers=key)
    assert first.status_code == replay.status_code == 200 and first.json() == replay.json()
    assert first.json()["retracted"] == 1
    left = client.get(f"/projects/{pid}/labels", params={"limit": 10}).json()["items"]
    assert [row["criterion"] for row in left] == ["truth"]
