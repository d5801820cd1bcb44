"""Label Studio's `Pairwise` control feeds a pairwise project (issue 36), against payloads captured from a real
Label Studio 1.23.2 (tests/fixtures/label_studio_1_23_2/pairwise-*: three tasks, each with a `judge-v1`
prediction and an annotation of user 1; task p3 is shown in the order BA, its left object showing answer B).

Expected verdicts are read off the fixtures here by a reader of their own (left/right and the task's
`annoplan_order`), and the first ones by hand: p1 left -> A, p2 right -> B, p3 (BA) right -> A for the human;
the judge's left on p3 is B, shown BA.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from service.label_studio.config import choice_controls, label_controls
from tests.service.test_label_studio_real import FIXTURES, current, deliver, fixture, ok, post_import

CONFIG = fixture("pairwise-project.json")["label_config"]


def pairwise_webhooks() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "pairwise-webhooks.ndjson").read_text().splitlines() if line]


def pairwise_project(client: TestClient, labels: list[str] | None = None) -> str:
    body: dict[str, Any] = {"name": "ls-pairwise", "kind": "pairwise", **({"labels": labels} if labels else {})}
    return str(ok(client.post("/projects", json=body), 201)["id"])


def verdict(side: str, order: str) -> str:
    """The answer a pick names: the left object shows the order's first answer."""
    return {"left": order[0], "right": order[1]}[side]


def expected(tasks: list[dict]) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], tuple[str, str]]]:
    """The humans' verdicts, and the judges' (verdict, shown order), of snapshot tasks."""
    humans: dict[tuple[str, str], str] = {}
    judges: dict[tuple[str, str], tuple[str, str]] = {}
    for task in tasks:
        item, order = task["data"]["annoplan_item"], task["data"].get("annoplan_order", "AB")
        for ann in task["annotations"]:
            rater = f"ls-user-{ann['completed_by']['id']}"
            humans[(item, rater)] = verdict(ann["result"][0]["value"]["selected"], order)
        for pred in task["predictions"]:
            judges[(item, pred["model_version"])] = (verdict(pred["result"][0]["value"]["selected"], order), order)
    return humans, judges


def labels_with_order(client: TestClient, pid: str) -> dict[tuple[str, str], tuple[str, str | None]]:
    rows = ok(client.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
    return {(r["item"], r["rater"]): (r["value"], r.get("order")) for r in rows}


def test_the_pairwise_control_is_read_from_the_real_config() -> None:
    (pw,) = choice_controls(CONFIG)
    assert (pw.name, pw.kind, pw.choices, pw.data_key) == ("pw", "pairwise", ("left", "right"), None)
    assert label_controls([pw], numeric=False, pairwise=True) == [pw]


def test_a_snapshot_gives_human_verdicts_and_judge_verdicts_with_their_shown_order(client: TestClient) -> None:
    snapshot = fixture("pairwise-snapshot.json")
    humans, judges = expected(snapshot)
    assert humans == {("p1", "ls-user-1"): "A", ("p2", "ls-user-1"): "B", ("p3", "ls-user-1"): "A"}  # by hand
    assert judges[("p3", "judge-v1")] == ("B", "BA")
    pid = pairwise_project(client)
    done = ok(post_import(client, pid, snapshot))
    assert done["changes"]["added"] == 6 and done["from_name"] == "pw"
    got = labels_with_order(client, pid)
    assert {cell: v for cell, (v, _) in got.items() if cell[1].startswith("ls-user-")} == humans
    assert {cell: vo for cell, vo in got.items() if not cell[1].startswith("ls-user-")} == judges
    items = {i["external_id"]: i for i in ok(client.get(f"/projects/{pid}/items", params={"limit": 10}))["items"]}
    assert (items["p3"]["features"]["system_a"], items["p3"]["features"]["system_b"]) == ("model-x", "model-y")
    assert "annoplan_order" not in items["p3"]["features"]  # how the task was shown, not a feature of the item
    again = ok(post_import(client, pid, snapshot))["changes"]
    assert (again["added"], again["updated"], again["retracted"]) == (0, 0, 0)


def test_the_real_webhooks_create_update_and_delete_verdicts(client: TestClient) -> None:
    """Created p1 left, p2 left, p3 right (shown BA); p2 updated to right; p1's annotation deleted."""
    pid = pairwise_project(client)
    seen = [deliver(client, pid, payload) for payload in pairwise_webhooks()]
    assert [s.get("value") for s in seen[:4]] == ["A", "A", "A", "B"]
    assert seen[4]["retracted"] == 1
    assert current(client, pid) == {("p2", "ls-user-1"): "B", ("p3", "ls-user-1"): "A"}


def test_json_min_pairwise_values_read_as_verdicts(client: TestClient) -> None:
    rows = fixture("pairwise-export-json-min.json")
    assert rows[0]["pw"] == [{"selected": "left"}]  # what JSON_MIN writes for a Pairwise control
    pid = pairwise_project(client)
    ok(post_import(client, pid, rows, label_config=CONFIG))
    humans, _ = expected(fixture("pairwise-snapshot.json"))
    assert current(client, pid) == humans


def test_a_pairwise_control_gives_no_labels_to_a_pointwise_project_and_a_bad_order_is_422(client: TestClient) -> None:
    pointwise = ok(client.post("/projects", json={"name": "pw", "labels": ["A", "B"]}), 201)["id"]
    r = post_import(client, pointwise, fixture("pairwise-snapshot.json"), label_config=CONFIG)
    assert r.status_code == 422 and "needs a <Choices> control" in r.json()["detail"], r.text
    pid = pairwise_project(client)
    snapshot = fixture("pairwise-snapshot.json")
    snapshot[0]["data"]["annoplan_order"] = "ab"
    r = post_import(client, pid, snapshot)
    assert r.status_code == 422 and "annoplan_order" in r.json()["detail"], r.text
    assert current(client, pid) == {}


def test_a_project_without_ties_refuses_none_of_the_picks(client: TestClient) -> None:
    """Label Studio's Pairwise has no tie: a project without one reads every pick."""
    pid = pairwise_project(client, ["A", "B"])
    ok(post_import(client, pid, fixture("pairwise-snapshot.json")))
    assert len(current(client, pid)) == 6
