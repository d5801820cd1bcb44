"""Label Studio, third pass (issue 36), against the real 1.23.2 payloads in
tests/fixtures/label_studio_1_23_2/: annotations made from a prediction kept out of the labels
and in the inbox (webhook, import, sync); deleted tasks retracted; rubric deletions retracting
every criterion; JSON_MIN with unannotated tasks; CSV/TSV refused with the export to use; and
several choices kept in the inbox with a reason that names the controls.

Where a payload is changed from the recorded one (a `parent_prediction` set, two choices), the
change is made here, in the test, on a copy of the real payload.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi.testclient import TestClient

from tests.service.test_label_studio_real import (
    LABEL_CONFIG,
    current,
    deliver,
    deliveries,
    expected_human_labels,
    expected_judge_labels,
    fixture,
    label_seq,
    new_project,
    ok,
    post_import,
)
from tests.service.test_label_studio_sync import FakeLabelStudio, label_studio, sync

__all__ = ["label_studio"]  # the stand-in Label Studio fixture


def open_issues(client: TestClient, pid: str, about: str = "") -> list[dict]:
    """The open inbox issues whose reason holds ``about``."""
    items = ok(client.get(f"/projects/{pid}/integrations/label-studio/issues"))["items"]
    return [i for i in items if about in i["reason"]]


COPY = "parent_prediction"  # in the reason of an annotation made from a prediction


def copied_from_prediction(tasks: list[dict], task_id: int, user: int) -> tuple[list[dict], dict]:
    """A copy of the tasks where ``user``'s annotation of ``task_id`` is the first prediction's copy,
    as Label Studio makes it: the prediction's result, and ``parent_prediction`` its id."""
    tasks = copy.deepcopy(tasks)
    task = next(t for t in tasks if t["id"] == task_id)
    ann = next(a for a in task["annotations"] if a["completed_by"]["id"] == user)
    pred = task["predictions"][0]
    ann["result"], ann["parent_prediction"] = copy.deepcopy(pred["result"]), pred["id"]
    return tasks, ann


# --- 1. blindness: an annotation made from a prediction is no human label --------------------


def test_snapshot_annotation_made_from_a_prediction_is_kept_out_and_in_the_inbox(client: TestClient) -> None:
    pid = new_project(client)
    tasks, ann = copied_from_prediction(fixture("snapshot-full-predictions.json"), 8, 3)
    body = ok(post_import(client, pid, tasks))
    independent = [dict(t, annotations=[a for a in t["annotations"] if not a["parent_prediction"]]) for t in tasks]
    want = {**expected_human_labels(independent), **expected_judge_labels(tasks)}
    assert ("8", "ls-user-3") not in want
    assert current(client, pid) == want
    issues = open_issues(client, pid, COPY)
    assert [(i["task"], i["annotation"]) for i in issues] == [("8", str(ann["id"]))]
    assert issues[0]["id"] in body["issues"]
    assert f"created from prediction {ann['parent_prediction']}" in issues[0]["reason"]
    assert "show_collab_predictions: false" in issues[0]["reason"]
    assert any(s.get("annotation") == ann["id"] and "parent_prediction" in s["reason"] for s in body["skipped"])
    # a second import files no duplicate, and a replay keeps it open (it is still not independent)
    again = ok(post_import(client, pid, tasks))
    assert again["issues"] == body["issues"] and again["changes"]["added"] == 0
    replay = ok(client.post(f"/projects/{pid}/integrations/label-studio/issues/replay"))
    assert replay["resolved"] == [] and [i["id"] for i in replay["still_open"]] == body["issues"]
    assert current(client, pid) == want


def test_a_label_imported_before_is_retracted_once_known_to_be_a_copy(client: TestClient) -> None:
    """A label counted as human earlier (e.g. before this check) leaves the pool at the next import."""
    pid = new_project(client)
    real = fixture("snapshot-full-predictions.json")
    ok(post_import(client, pid, real))
    assert ("8", "ls-user-3") in current(client, pid)
    tasks, _ = copied_from_prediction(real, 8, 3)
    body = ok(post_import(client, pid, tasks))
    assert body["changes"]["retracted"] == 1 and ("8", "ls-user-3") not in current(client, pid)


def test_webhook_annotation_made_from_a_prediction_goes_to_the_inbox(client: TestClient) -> None:
    pid = new_project(client)
    payload = copy.deepcopy(deliveries()[0])  # task 8, user 1, Positive
    payload["annotation"]["parent_prediction"] = 16  # the real gpt-4o-judge prediction of task 8
    r = deliver(client, pid, payload)
    assert r["issue"] and "created from prediction 16 (Label Studio's parent_prediction)" in r["reason"]
    assert label_seq(client, pid) == 0 and current(client, pid) == {}
    assert [(i["task"], i["annotation"]) for i in open_issues(client, pid)] == [("8", "116")]
    replay = ok(client.post(f"/projects/{pid}/integrations/label-studio/issues/replay"))
    assert replay["resolved"] == [] and label_seq(client, pid) == 0


def test_sync_keeps_annotations_made_from_a_prediction_out(client: TestClient, label_studio: FakeLabelStudio) -> None:
    pid = new_project(client)
    label_studio.tasks, ann = copied_from_prediction(label_studio.tasks, 8, 2)
    done = ok(sync(client, pid, label_studio))
    assert ("8", "ls-user-2") not in current(client, pid)
    copies = open_issues(client, pid, COPY)
    assert [i["annotation"] for i in copies] == [str(ann["id"])] and copies[0]["id"] in done["issues"]
    assert ok(sync(client, pid, label_studio))["issues"] == done["issues"]
    assert len(open_issues(client, pid)) == len(done["issues"])


# --- 3. exports: JSON_MIN with every task; CSV and TSV refused ----------------------------------


def test_json_min_with_unannotated_tasks_makes_items_without_labels(client: TestClient) -> None:
    """`download_all_tasks=true` adds a row with a null annotator for each task without annotations."""
    rows = fixture("export-json-min-all-tasks.json")
    empty = [r for r in rows if r["annotator"] is None]
    assert len(empty) == 2 and all(r["annotation_id"] is None for r in empty)
    pid, plain = new_project(client), new_project(client)
    body = ok(post_import(client, pid, rows, from_name="sentiment"))
    ok(post_import(client, plain, fixture("export-json-min.json"), from_name="sentiment"))
    assert body["items"]["created"] == len({r["id"] for r in rows}) == 54
    assert current(client, pid) == current(client, plain) != {}
    items = {i["external_id"]: i for i in ok(client.get(f"/projects/{pid}/items", params={"limit": 1000}))["items"]}
    for r in empty:
        assert items[str(r["id"])]["text"] == r["text"]
        assert not [k for k in current(client, pid) if k[0] == str(r["id"])]


def test_csv_and_tsv_exports_are_refused_naming_the_json_export(client: TestClient) -> None:
    pid = new_project(client)
    for media, body in (("text/csv", "id,sentiment\n1,Positive\n"), ("text/tab-separated-values", "id\t1\n")):
        r = client.post(f"/projects/{pid}/import/label-studio", content=body, headers={"Content-Type": media})
        assert r.status_code == 415, r.text
        assert "export JSON instead" in r.json()["detail"] and "JSON_MIN" in r.json()["detail"]
    assert label_seq(client, pid) == 0 and ok(client.get(f"/projects/{pid}"))["n_items"] == 0


# --- 4. several choices: the inbox, with a reason that names the controls ----------------------


def two_choices(payload: dict) -> dict:
    payload = copy.deepcopy(payload)
    payload["annotation"]["result"] = [
        {"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": ["Positive", "Negative"]}}
    ]
    payload["action"] = "ANNOTATION_UPDATED"
    return payload


def test_webhook_several_choices_go_to_the_inbox_and_the_label_stands(client: TestClient) -> None:
    pid = new_project(client)
    first = deliveries()[0]
    assert deliver(client, pid, first)["value"] == "Positive"
    seq = label_seq(client, pid)
    r = deliver(client, pid, two_choices(first))
    assert r["issue"] and "2 choices ['Positive', 'Negative'] selected in 'sentiment'" in r["reason"]
    assert label_seq(client, pid) == seq and current(client, pid) == {("8", "ls-user-1"): "Positive"}
    assert [i["annotation"] for i in open_issues(client, pid)] == ["116"]
    # corrected in Label Studio to one choice: recorded, and the issue is superseded
    assert deliver(client, pid, deliveries()[1])["value"] == "Negative"
    assert open_issues(client, pid) == []


def test_export_several_choices_go_to_the_inbox(client: TestClient) -> None:
    """The real snapshot has one: annotation 114 of task 5 picks Positive and Negative in `sentiment`."""
    pid = new_project(client)
    body = ok(post_import(client, pid, fixture("snapshot-full-predictions.json")))
    issues = open_issues(client, pid)
    assert [(i["task"], i["annotation"]) for i in issues] == [("5", "114")] and body["issues"] == [issues[0]["id"]]
    assert "2 choices ['Positive', 'Negative'] selected in 'sentiment'" in issues[0]["reason"]
    assert ("5", "ls-user-1") not in current(client, pid)


def test_export_several_choices_are_held_not_withdrawn(client: TestClient) -> None:
    """A label recorded earlier stands while its annotation has several choices (as on the webhook path)."""
    pid = new_project(client)
    real = fixture("snapshot-full-predictions.json")
    ok(post_import(client, pid, real))
    before = current(client, pid)
    tasks = copy.deepcopy(real)
    ann = next(a for a in next(t for t in tasks if t["id"] == 8)["annotations"] if a["completed_by"]["id"] == 2)
    ann["result"][0]["value"]["choices"] = ["Positive", "Negative"]
    body = ok(post_import(client, pid, tasks))
    assert current(client, pid) == before and body["changes"]["retracted"] == 0
    assert [(i["task"], i["annotation"]) for i in open_issues(client, pid, "2 choices")] == [
        ("5", "114"),
        ("8", str(ann["id"])),
    ]


def test_the_reason_without_from_name_names_the_controls(client: TestClient) -> None:
    """A config whose only choices control takes several choices: the reason names it (not `[]`)."""
    pid = new_project(client)
    payload = copy.deepcopy(deliveries()[0])
    config = LABEL_CONFIG.replace('choice="single"', 'choice="multiple"')
    assert config != LABEL_CONFIG
    payload["project"]["label_config"] = config
    r = deliver(client, pid, payload)
    assert "no single-choice control" in r["reason"] and "['sentiment', 'flags']" in r["reason"]
    assert "[]" not in r["reason"]
    named: Any = deliver(client, pid, payload, from_name="sentiment")
    assert named["value"] == "Positive"
