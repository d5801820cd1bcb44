"""Label Studio's ``Rating`` and ``Number`` controls give a numeric project its labels (issue 33): the labeling
config, the export import (snapshot and JSON_MIN) and the annotation webhook. The payloads are those Label
Studio 1.23.2 sent (tests/fixtures/label_studio_1_23_2) with their results made ratings and numbers by hand,
in the shape its Rating and Number tags write (``{"type": "rating", "value": {"rating": 4}}``,
``{"type": "number", "value": {"number": 3}}``; JSON_MIN holds the bare number under the control's name)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.core.errors import Invalid
from service.label_studio.config import choice_controls, label_controls
from service.label_studio.mapping import chosen_value
from service.label_studio.payloads import LSResult

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "label_studio_1_23_2"
RATING_CONFIG = (
    '<View>\n  <Text name="text" value="$text"/>\n  <Rating name="stars" toName="text" maxRating="5"/>\n</View>'
)
NUMBER_CONFIG = (
    '<View>\n  <Text name="text" value="$text"/>\n  <Choices name="flags" toName="text" choice="multiple">'
    '<Choice value="spam"/></Choices>\n  <Number name="score" toName="text" min="0" max="10"/>\n</View>'
)


def ok(r, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _numeric_project(client: TestClient, high: int = 5) -> str:
    body = {"name": "ls-scores", "scale": "numeric", "value_range": {"min": 1 if high == 5 else 0, "max": high}}
    return ok(client.post("/projects", json=body), 201)["id"]


def _labels(client: TestClient, pid: str) -> dict[tuple[str, str], str]:
    rows = ok(client.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
    return {(r["item"], r["rater"]): r["value"] for r in rows}


def _rated_snapshot(kind: str, name: str, values: list[list[float]]) -> list[dict[str, Any]]:
    """The first tasks of the 1.23.2 snapshot with each annotation's and prediction's result replaced by a
    ``kind`` result of ``values[task][k]`` (annotations first, then predictions)."""
    tasks = copy.deepcopy(json.loads((REAL / "snapshot-full-predictions.json").read_text())[: len(values)])
    for task, row in zip(tasks, values, strict=True):
        regions = task["annotations"] + task["predictions"]
        assert len(regions) >= len(row)
        for region, value in zip(regions, row, strict=False):
            region["result"] = [{"from_name": name, "to_name": "text", "type": kind, "value": {kind: value}}]
        del task["annotations"][len(row) :]
        task["predictions"] = task["predictions"][: max(0, len(row) - len(task["annotations"]))]
    return tasks


def test_configs_with_rating_and_number_controls() -> None:
    (stars,) = choice_controls(RATING_CONFIG)
    assert (stars.name, stars.kind, stars.data_key, stars.choices) == ("stars", "rating", "text", ())
    both = choice_controls(NUMBER_CONFIG)
    assert [c.name for c in label_controls(both, numeric=True)] == ["score"]
    assert [c.name for c in label_controls(both, numeric=False)] == ["flags"]
    with pytest.raises(Invalid, match="Rating> or <Number"):
        label_controls(
            choice_controls('<View><Choices name="c" toName="t"><Choice value="a"/></Choices></View>'), numeric=True
        )
    with pytest.raises(Invalid, match="no <Choices>, <Pairwise>, <Rating> or <Number>"):
        choice_controls('<View><TextArea name="t" toName="x"/></View>')


def test_chosen_value_reads_numbers() -> None:
    kinds = ("rating", "number")
    assert chosen_value([LSResult(type="number", from_name="score", value={"number": 2.5})], None, kinds) == (
        "2.5",
        None,
    )
    assert chosen_value([LSResult(type="rating", from_name="s", value={"rating": True})], None, kinds) == (
        None,
        "value.rating is not a number",
    )
    assert chosen_value([], "s", kinds) == (None, "no rating or number result from 's'")


def test_snapshot_with_ratings_imports_numbers(client: TestClient) -> None:
    """Task 1: two annotators and the judge's prediction; task 2: a 7, outside 1..5, reported unmapped
    (the rest of the export counts); the config given names the control."""
    pid = _numeric_project(client)
    tasks = _rated_snapshot("rating", "stars", [[4, 5, 3], [7, 2]])
    done = ok(client.post(f"/projects/{pid}/import/label-studio", json=tasks, params={"label_config": RATING_CONFIG}))
    labels = _labels(client, pid)
    first = tasks[0]
    users = [f"ls-user-{a['completed_by']['id']}" for a in first["annotations"]]
    judge = first["predictions"][0]["model_version"] if first["predictions"] else None
    expected = dict(zip([("1", u) for u in users] + ([("1", judge)] if judge else []), ["4", "5", "3"], strict=False))
    assert len(expected) == 3 and {k: v for k, v in labels.items() if k[0] == "1"} == expected
    second = f"ls-user-{tasks[1]['annotations'][1]['completed_by']['id']}"
    assert labels[("2", second)] == "2" and len([k for k in labels if k[0] == "2"]) == 1
    assert [u["value"] for u in done["unmapped"]] == ["7"]
    assert ok(client.get(f"/projects/{pid}"))["label_studio"]["kind"] == "rating"


def test_json_min_numbers_import(client: TestClient) -> None:
    """JSON_MIN rows of the 1.23.2 export with the control's value made a number."""
    pid = _numeric_project(client, high=10)
    rows = copy.deepcopy(json.loads((REAL / "export-json-min.json").read_text())[:4])
    for n, row in enumerate(rows):
        del row["sentiment"]
        row["score"] = [7, 2.5, 10, 0][n]
    ok(client.post(f"/projects/{pid}/import/label-studio", json=rows, params={"from_name": "score"}))
    written = sorted(_labels(client, pid).values())
    assert written == sorted(["7", "2.5", "10", "0"])


def _number_webhook(client: TestClient, pid: str, number: float) -> Any:
    """The first 1.23.2 webhook (ANNOTATION_CREATED of task 8 by user 1), its result a Number control's."""
    payload = json.loads((REAL / "webhooks.ndjson").read_text().splitlines()[0])
    result = {"from_name": "score", "to_name": "text", "type": "number", "value": {"number": number}}
    payload["annotation"]["result"] = [result]
    payload["project"]["label_config"] = NUMBER_CONFIG
    key = ok(client.post(f"/projects/{pid}/keys", json={"role": "pm"}), 201)["key"]
    saved = client.headers.pop("Authorization")
    try:
        return client.post(
            f"/projects/{pid}/webhooks/label-studio",
            content=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
        )
    finally:
        client.headers["Authorization"] = saved


def test_webhook_with_a_number_result(client: TestClient) -> None:
    pid = _numeric_project(client, high=10)
    body = ok(_number_webhook(client, pid, 6))
    assert body["value"] == "6" and body["rater"] == "ls-user-1" and body["item"] == "8"
    assert _labels(client, pid) == {("8", "ls-user-1"): "6"}


def test_webhook_number_outside_the_range_is_kept_in_the_inbox(client: TestClient) -> None:
    pid = _numeric_project(client, high=10)
    ok(_number_webhook(client, pid, 42))  # answered 200: Label Studio never retries a delivery
    assert _labels(client, pid) == {}
    issues = ok(client.get(f"/projects/{pid}/integrations/label-studio/issues"))["items"]
    assert len(issues) == 1 and "42" in json.dumps(issues[0])


def test_a_label_project_refuses_a_rating_only_config(client: TestClient) -> None:
    pid = ok(client.post("/projects", json={"name": "cats", "labels": ["a", "b"]}), 201)["id"]
    tasks = _rated_snapshot("rating", "stars", [[4]])
    r = client.post(f"/projects/{pid}/import/label-studio", json=tasks, params={"label_config": RATING_CONFIG})
    assert r.status_code == 422 and "<Choices> control" in r.text, r.text
    assert _labels(client, pid) == {}
