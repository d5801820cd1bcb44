"""Label Studio (issue 9): import of a JSON export, the annotation webhook, and batch export as
tasks, through HTTP with hand-written payloads in tests/fixtures/label_studio/.

Expected counts are read off the fixture by hand (see the comments next to each)."""

from __future__ import annotations

import copy
import doctest
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import service.label_studio.mapping
from service.data.labels import label_for
from service.label_studio.mapping import item_from_task
from service.label_studio.payloads import LSTask

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "label_studio"
JUDGE = "gpt-4o-judge-v2"
ADMIN = "ak_test_admin_key"  # tests/conftest.py's admin key


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def new_project(client: TestClient, **extra: Any) -> str:
    r = client.post("/projects", json={"name": "ls", "labels": ["pass", "fail"], **extra})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def new_key(client: TestClient, pid: str, role: str, rater: str | None = None) -> str:
    r = client.post(f"/projects/{pid}/keys", json={"role": role, **({"rater": rater} if rater else {})})
    assert r.status_code == 201, r.text
    return r.json()["key"]


def current_labels(client: TestClient, pid: str, **params: Any) -> dict[tuple[str, str], str]:
    rows = client.get(f"/projects/{pid}/labels", params={"limit": 1000, **params}).json()["items"]
    return {(r["item"], r["rater"]): r["value"] for r in rows}


def raters(client: TestClient, pid: str) -> dict[str, tuple[str, str | None]]:
    rows = client.get(f"/projects/{pid}/raters").json()["items"]
    return {r["external_id"]: (r["kind"], r["name"]) for r in rows}


def import_export(client: TestClient, pid: str, body: Any = None, **params: Any) -> Any:
    return client.post(
        f"/projects/{pid}/import/label-studio", json=fixture("export.json") if body is None else body, params=params
    )


# What the export fixture holds, read by hand:
#   task 101: user 7 "Pass" made from the judge's prediction 9001 (parent_prediction: no human
#             label, kept in the inbox), user 8 "FAIL", judge "Pass"
#   task 102: user 7 "Fail", user 8 cancelled, judge "Fail"
#   task 103: user 7 "Unsure" (unmapped), user 9 tone "rude" first then verdict "Pass", judge "Pass"
#   (no labeling config: the control is "verdict", whose choices map to labels; "tone"'s never do)
#   task 104: user 8 two choices (no label, kept in the inbox), user 9 "pass", judge "Fail"
#   task 105: no annotations
#   task 106: user 7 "PASS"; no "text" field, the text is in "dialogue"
EXPECTED = {
    ("101", "ls-user-8"): "fail",
    ("101", JUDGE): "pass",
    ("102", "ls-user-7"): "fail",
    ("102", JUDGE): "fail",
    ("103", "ls-user-9"): "pass",
    ("103", JUDGE): "pass",
    ("104", "ls-user-9"): "pass",
    ("104", JUDGE): "fail",
    ("106", "ls-user-7"): "pass",
}


# --- pure mapping -----------------------------------------------------------------------------


def test_doctests() -> None:
    result = doctest.testmod(service.label_studio.mapping)
    assert result.attempted > 0 and result.failed == 0


def test_label_for_exact_before_case_insensitive_and_ambiguity_is_unmapped() -> None:
    assert label_for("Pass", ["Pass", "pass"]) == "Pass"
    assert label_for("pass", ["Pass", "pass"]) == "pass"
    assert label_for("PASS", ["Pass", "pass"]) is None
    assert label_for("Straße", ["STRASSE", "x"]) == "STRASSE"
    assert label_for("", ["pass", "fail"]) is None


def test_item_from_task_text_features_and_external_id() -> None:
    task = LSTask(id=5, data={"image": "s3://b/1.png", "text": "hello", "n": 1.5, "ok": False, "none": None, "o": {}})
    item = item_from_task(task)
    assert (item.external_id, item.text) == ("5", "hello")
    assert item.features == {"image": "s3://b/1.png", "n": 1.5, "ok": False, "none": None}
    exported = LSTask(id=77, data={"annoplan_item": "i4", "topic": "b", "text": "t"})
    assert item_from_task(exported).model_dump() == {"external_id": "i4", "features": {"topic": "b"}, "text": "t"}


# --- import -----------------------------------------------------------------------------------


def test_import_counts_raters_mapping_and_reports(client: TestClient, project: dict) -> None:
    pid = project["id"]
    r = import_export(client, pid)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["items"] == {"created": 6, "updated": 0, "unchanged": 0}
    assert body["labels"] == {"accepted": 9, "duplicates": 0, "label_seq": 9}
    assert {(c["external_id"], c["kind"], c["name"]) for c in body["raters_created"]} == {
        ("ls-user-7", "human", "ana@example.com"),
        ("ls-user-8", "human", None),
        ("ls-user-9", "human", "cho@example.com"),
        (JUDGE, "judge", JUDGE),
    }
    assert sorted((u["task"], u["annotation"], u["rater"], u["value"]) for u in body["unmapped"]) == [
        (103, 505, "ls-user-7", "Unsure"),
    ]
    skipped = {(s["task"], s["annotation"], s["rater"]): s["reason"][:35] for s in body["skipped"]}
    assert skipped == {
        (101, 501, "ls-user-7"): "created from prediction 9001 (Label",
        (102, 504, "ls-user-8"): "cancelled",
        (104, 507, "ls-user-8"): "2 choices ['Pass', 'Fail'] selected",
    }
    assert len(body["issues"]) == 2
    assert current_labels(client, pid) == EXPECTED
    items = {i["external_id"]: i for i in client.get(f"/projects/{pid}/items", params={"limit": 1000}).json()["items"]}
    assert items["101"]["features"] == {"source": "chat", "turns": 2}
    assert items["101"]["text"].startswith("User: How do I reset my password?")
    assert items["106"]["text"].startswith("User: Is the warranty transferable?")
    assert items["106"]["features"] == {"source": "forum", "turns": 1, "reviewed": True}
    assert items["105"]["features"] == {"source": "forum", "turns": 1}
    assert raters(client, pid)[JUDGE] == ("judge", JUDGE)


def test_reimport_writes_nothing_new(client: TestClient, project: dict) -> None:
    pid = project["id"]
    assert import_export(client, pid).status_code == 200
    again = import_export(client, pid).json()
    assert again["items"] == {"created": 0, "updated": 0, "unchanged": 6}
    assert again["labels"] == {"accepted": 0, "duplicates": 9, "label_seq": 9}
    assert again["raters_created"] == []


def test_from_name_picks_the_control(client: TestClient, project: dict) -> None:
    pid = project["id"]
    body = import_export(client, pid, from_name="verdict").json()
    assert body["labels"]["accepted"] == 9  # task 103's user 9 now reads "Pass"
    assert [(u["task"], u["value"]) for u in body["unmapped"]] == [(103, "Unsure")]
    assert current_labels(client, pid) == EXPECTED


def test_from_name_that_no_result_has_skips_everything(client: TestClient) -> None:
    pid = new_project(client)
    body = import_export(client, pid, from_name="sentiment").json()
    assert body["labels"]["accepted"] == 0
    # 9 annotations and 4 predictions, one annotation cancelled, one made from a prediction
    reasons = [s["reason"] for s in body["skipped"]]
    assert reasons.count("no choices result from 'sentiment'") == 11 and reasons.count("cancelled") == 1
    assert sum(r.startswith("created from prediction 9001") for r in reasons) == 1


def test_strict_mode_writes_nothing(client: TestClient, project: dict) -> None:
    pid = project["id"]
    r = import_export(client, pid, strict="true")
    assert r.status_code == 422
    assert r.json()["error"] == "unmapped_values"
    assert {f["value"] for f in r.json()["fields"]} == {"Unsure"}
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0
    assert client.get(f"/projects/{pid}").json()["n_items"] == 20
    assert set(raters(client, pid)) == {"judge", "prim", "h2", "h3"}


def test_strict_mode_passes_when_everything_maps(client: TestClient) -> None:
    pid = new_project(client)
    tasks = fixture("export.json")
    tasks[2]["annotations"][0]["result"][0]["value"]["choices"] = ["fail"]  # was "Unsure"
    r = import_export(client, pid, tasks, strict="true", from_name="verdict")
    assert r.status_code == 200, r.text
    assert r.json()["labels"]["accepted"] == 10 and r.json()["unmapped"] == []


def test_primary_by_email_or_id(client: TestClient) -> None:
    pid = new_project(client)
    body = import_export(client, pid, primary="ANA@example.com").json()
    assert ("ls-user-7", "primary", "ana@example.com") in {
        (c["external_id"], c["kind"], c["name"]) for c in body["raters_created"]
    }
    pid2 = new_project(client)
    assert import_export(client, pid2, primary="8").status_code == 200
    assert raters(client, pid2)["ls-user-8"] == ("primary", None)
    assert raters(client, pid2)["ls-user-7"] == ("human", "ana@example.com")


def test_primary_not_in_export_or_clashing_is_refused_and_writes_nothing(client: TestClient, project: dict) -> None:
    pid = new_project(client)
    r = import_export(client, pid, primary="nobody@example.com")
    assert r.status_code == 422 and r.json()["error"] == "unknown_primary"
    r = import_export(client, project["id"], primary="7")  # the fixture project already has "prim"
    assert r.status_code == 409 and r.json()["error"] == "primary_exists"
    assert client.get(f"/projects/{project['id']}").json()["n_items"] == 20
    assert set(raters(client, project["id"])) == {"judge", "prim", "h2", "h3"}


def test_existing_rater_of_another_kind_is_a_conflict(client: TestClient) -> None:
    pid = new_project(client)
    assert client.post(f"/projects/{pid}/raters", json={"external_id": JUDGE, "kind": "human"}).status_code == 201
    r = import_export(client, pid)
    assert r.status_code == 409 and r.json()["error"] == "rater_kind_clash"
    assert client.get(f"/projects/{pid}").json()["n_items"] == 0


def test_judge_prefix_and_existing_primary_takes_human_labels(client: TestClient) -> None:
    pid = new_project(client)
    assert (
        client.post(f"/projects/{pid}/raters", json={"external_id": "ls-user-9", "kind": "primary"}).status_code == 201
    )
    body = import_export(client, pid, judge_prefix="ls-model-").json()
    assert "ls-user-9" not in {c["external_id"] for c in body["raters_created"]}
    assert raters(client, pid)["ls-model-" + JUDGE] == ("judge", JUDGE)
    assert current_labels(client, pid)[("104", "ls-user-9")] == "pass"


def test_later_annotation_of_same_rater_wins(client: TestClient) -> None:
    pid = new_project(client)
    tasks = fixture("export.json")[:1]
    again = copy.deepcopy(tasks[0]["annotations"][1])  # user 8 "FAIL" on task 101
    again["id"] = 599
    again["result"][0]["value"]["choices"] = ["Pass"]
    tasks[0]["annotations"].append(again)
    body = import_export(client, pid, tasks).json()
    assert current_labels(client, pid)[("101", "ls-user-8")] == "pass"
    superseded = {(s["annotation"], s["reason"]) for s in body["skipped"] if s["annotation"] != 501}  # 501: a copy
    assert superseded == {(502, "superseded by a later label of this rater")}


def test_criterion_is_needed_with_several(client: TestClient) -> None:
    pid = new_project(client, criteria=["helpful", "safe"])
    r = import_export(client, pid)
    assert r.status_code == 422
    assert client.get(f"/projects/{pid}").json()["n_items"] == 0
    r = import_export(client, pid, criterion="safe")
    assert r.status_code == 200 and r.json()["labels"]["accepted"] == 9
    assert current_labels(client, pid, criterion="safe") == EXPECTED


@pytest.mark.parametrize(
    "body",
    [
        {"id": 1, "data": {}},  # an object, not a list
        [{"id": 1, "data": "text"}],  # data not an object
        [{"id": 1, "data": {}, "annotations": [{"id": 2, "result": []}]}],  # no completed_by
        [{"id": 1, "data": {}, "annotations": [{"completed_by": {"first_name": "x"}}]}],  # no id nor email
        [{"id": 1, "data": {}, "annotations": [{"completed_by": 3, "result": [{"value": {}}]}]}],  # result without type
    ],
)
def test_malformed_export_is_422(client: TestClient, body: Any) -> None:
    pid = new_project(client)
    r = import_export(client, pid, body)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "validation_error"


def test_import_roles_and_idempotency(client: TestClient, project: dict) -> None:
    pid = project["id"]
    viewer = new_key(client, pid, "viewer")
    annotator = new_key(client, pid, "annotator", "h2")
    for key in (viewer, annotator):
        r = client.post(
            f"/projects/{pid}/import/label-studio",
            json=fixture("export.json"),
            headers={"Authorization": f"Bearer {key}"},
        )
        assert r.status_code == 403
    pm = new_key(client, pid, "pm")
    headers = {"Authorization": f"Bearer {pm}", "Idempotency-Key": "ls-1"}
    first = client.post(f"/projects/{pid}/import/label-studio", json=fixture("export.json"), headers=headers)
    replay = client.post(f"/projects/{pid}/import/label-studio", json=fixture("export.json"), headers=headers)
    assert first.status_code == replay.status_code == 200
    assert replay.json() == first.json() and replay.headers.get("Idempotent-Replayed") == "true"
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 9


# --- webhook ----------------------------------------------------------------------------------


@contextmanager
def no_default_auth(client: TestClient) -> Iterator[None]:
    """Send requests without the client's default admin Authorization header."""
    saved = client.headers.pop("Authorization")
    try:
        yield
    finally:
        client.headers["Authorization"] = saved


def webhook(client: TestClient, pid: str, payload: Any, headers: dict[str, str], **params: Any) -> Any:
    with no_default_auth(client):
        content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return client.post(
            f"/projects/{pid}/webhooks/label-studio",
            content=content,
            params=params,
            headers={"Content-Type": "application/json", **headers},
        )


def test_webhook_created_then_updated_is_a_correction(client: TestClient, project: dict) -> None:
    pid = project["id"]
    auth = {"Authorization": f"Bearer {new_key(client, pid, 'pm')}"}
    r = webhook(client, pid, fixture("webhook_annotation_created.json"), auth)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "action": "ANNOTATION_CREATED",
        "task": 201,
        "item": "201",
        "rater": "ls-user-12",
        "value": "fail",
        "item_created": True,
        "rater_created": True,
        "labels": {"accepted": 1, "duplicates": 0, "label_seq": 1},
    }
    item = client.get(f"/projects/{pid}/items", params={"limit": 1000}).json()["items"][-1]
    assert item["external_id"] == "201" and item["features"] == {"source": "chat", "turns": 1}
    assert raters(client, pid)["ls-user-12"] == ("human", None)

    r = webhook(client, pid, fixture("webhook_annotation_updated.json"), auth)
    assert r.status_code == 200, r.text
    assert r.json()["labels"] == {"accepted": 1, "duplicates": 0, "label_seq": 2}
    assert (r.json()["item_created"], r.json()["rater_created"]) == (False, False)
    history = client.get(f"/projects/{pid}/labels", params={"history": "true", "rater": "ls-user-12"}).json()["items"]
    assert [(h["item"], h["value"], h["seq"]) for h in history] == [("201", "fail", 1), ("201", "pass", 2)]
    assert current_labels(client, pid) == {("201", "ls-user-12"): "pass"}

    r = webhook(client, pid, fixture("webhook_annotation_updated.json"), auth)  # delivered twice
    assert r.json()["labels"] == {"accepted": 0, "duplicates": 1, "label_seq": 2}


def test_webhook_secret_header_and_admin_key(client: TestClient, project: dict) -> None:
    pid = project["id"]
    pm = new_key(client, pid, "pm")
    r = webhook(client, pid, fixture("webhook_annotation_created.json"), {"X-Annoplan-Secret": pm})
    assert r.status_code == 200 and r.json()["labels"]["accepted"] == 1
    r = webhook(client, pid, fixture("webhook_annotation_updated.json"), {"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 200 and r.json()["labels"]["accepted"] == 1


def test_webhook_other_actions_are_ignored(client: TestClient, project: dict) -> None:
    pid = project["id"]
    auth = {"X-Annoplan-Secret": new_key(client, pid, "pm")}
    r = webhook(client, pid, {"action": "PROJECT_UPDATED", "project": {"id": 12}}, auth)
    assert r.status_code == 200 and r.json() == {"ignored": "PROJECT_UPDATED"}
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0


def test_webhook_deletion_of_an_unknown_annotation_writes_nothing(client: TestClient, project: dict) -> None:
    pid = project["id"]
    r = webhook(client, pid, fixture("webhook_annotations_deleted.json"), {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 200
    assert r.json() == {"action": "ANNOTATIONS_DELETED", "retracted": 0, "unknown_annotations": [611], "label_seq": 0}
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0


def test_webhook_bad_secret_is_401_and_writes_nothing(client: TestClient, project: dict) -> None:
    pid = project["id"]
    other = new_project(client)
    wrong = [
        {},
        {"Authorization": "Bearer ak_not_a_key"},
        {"X-Annoplan-Secret": "ak_not_a_key"},
        {"X-Annoplan-Secret": new_key(client, pid, "viewer")},
        {"X-Annoplan-Secret": new_key(client, pid, "annotator", "h2")},
        {"Authorization": f"Bearer {new_key(client, other, 'pm')}"},
    ]
    for headers in wrong:
        r = webhook(client, pid, fixture("webhook_annotation_created.json"), headers)
        assert r.status_code == 401, (headers, r.text)
        assert r.json()["error"] == "unauthorized"
    r = webhook(client, pid, b"not json", {})
    assert r.status_code == 401  # the secret is checked before the body is read
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0
    assert client.get(f"/projects/{pid}").json()["n_items"] == 20
    assert "ls-user-12" not in raters(client, pid)


def test_webhook_to_unknown_project_is_404_for_admin(client: TestClient) -> None:
    r = webhook(client, "p_missing", fixture("webhook_annotation_created.json"), {"Authorization": f"Bearer {ADMIN}"})
    assert r.status_code == 404


def _created(**changes: Any) -> dict:
    payload = fixture("webhook_annotation_created.json")
    payload["annotation"].update(changes)
    return payload


@pytest.mark.parametrize("payload", [b"{not json", b"[1, 2]", {"annotation": {}}])  # the last: no action
def test_webhook_body_that_is_no_delivery_is_422(client: TestClient, project: dict, payload: Any) -> None:
    pid = project["id"]
    r = webhook(client, pid, payload, {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "malformed_body"
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0


def open_issues(client: TestClient, pid: str) -> list[dict]:
    r = client.get(f"/projects/{pid}/integrations/label-studio/issues")
    assert r.status_code == 200, r.text
    return r.json()["items"]


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"action": "ANNOTATION_CREATED"}, "annotation: Field required"),
        ({"action": "ANNOTATION_UPDATED", "annotation": {"id": 3, "result": []}}, "annotation.completed_by: Field"),
        ({"action": "ANNOTATION_CREATED", "annotation": {"completed_by": 4, "result": []}}, "names no task"),
        (
            {"action": "ANNOTATION_CREATED", "annotation": {"completed_by": 4, "result": "x", "task": 9}},
            "annotation.result: Input should be a valid list",
        ),
    ],
)
def test_webhook_malformed_delivery_is_kept_in_the_inbox(
    client: TestClient, project: dict, payload: Any, reason: str
) -> None:
    """Label Studio drops a refused delivery: an authenticated one that cannot be read is kept, answered 200."""
    pid = project["id"]
    r = webhook(client, pid, payload, {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 200, r.text
    assert reason in r.json()["reason"] and r.json()["issue"] == open_issues(client, pid)[0]["id"]
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0


def test_webhook_unmapped_and_unknown_task_go_to_the_inbox_and_write_nothing(client: TestClient, project: dict) -> None:
    pid = project["id"]
    unsure = _created(
        result=[{"type": "choices", "from_name": "verdict", "to_name": "text", "value": {"choices": ["Unsure"]}}]
    )
    r = webhook(client, pid, unsure, {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 200 and "['Unsure'] match none of the project's labels" in r.json()["reason"]
    bare = _created()
    del bare["task"]
    r = webhook(client, pid, bare, {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 200 and r.json()["reason"].startswith("unknown task: no item '201'")
    assert [(i["annotation"], i["task"], i["status"]) for i in open_issues(client, pid)] == [
        ("611", "201", "open"),
        ("611", "201", "open"),
    ]
    assert client.get(f"/projects/{pid}").json()["n_items"] == 20
    assert "ls-user-12" not in raters(client, pid)


def test_webhook_known_item_without_task_payload(client: TestClient, project: dict) -> None:
    pid = project["id"]
    payload = _created(task="i3")
    del payload["task"]
    r = webhook(client, pid, payload, {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 200 and r.json()["item_created"] is False
    assert current_labels(client, pid) == {("i3", "ls-user-12"): "fail"}


def test_webhook_cancelled_is_skipped_and_multi_choice_kept_in_the_inbox(client: TestClient, project: dict) -> None:
    pid = project["id"]
    r = webhook(client, pid, _created(was_cancelled=True, result=[]), {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 200 and r.json()["skipped"] == "cancelled" and "labels" not in r.json()
    two = _created(
        result=[{"type": "choices", "from_name": "verdict", "to_name": "text", "value": {"choices": ["Pass", "Fail"]}}]
    )
    r = webhook(client, pid, two, {"X-Annoplan-Secret": ADMIN})
    assert r.status_code == 200 and r.json()["reason"].startswith("2 choices ['Pass', 'Fail'] selected in 'verdict'")
    assert [i["id"] for i in open_issues(client, pid)] == [r.json()["issue"]]
    assert client.get(f"/projects/{pid}").json()["label_seq"] == 0
    assert client.get(f"/projects/{pid}").json()["n_items"] == 20


# --- batch export -----------------------------------------------------------------------------


def planned_batch(client: TestClient, pid: str, rater: str, size: int) -> dict:
    r = client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "seed": 3})
    assert r.status_code == 201, r.text
    r = client.post(f"/projects/{pid}/batches", json={"rater": rater, "size": size})
    assert r.status_code == 200, r.text
    assert len(r.json()["items"]) == size
    return r.json()


def test_batch_export_as_tasks_without_anyone_labels(client: TestClient, project: dict) -> None:
    pid = project["id"]
    b = planned_batch(client, pid, "h2", 4)
    others = [{"item": i, "rater": r, "value": "fail"} for i in b["items"] for r in ("judge", "h3", "prim")]
    assert client.post(f"/projects/{pid}/labels", json=others).status_code == 200
    r = client.get(f"/projects/{pid}/batches/{b['id']}/label-studio")
    assert r.status_code == 200, r.text
    tasks = r.json()
    assert [t["data"]["annoplan_item"] for t in tasks] == b["items"]
    topics = {f"i{i}": "a" if i % 2 else "b" for i in range(20)}  # the conftest corpus
    for t in tasks:
        assert set(t) == {"data", "meta"}
        item = t["data"]["annoplan_item"]
        assert t["data"] == {"topic": topics[item], "annoplan_item": item, "annoplan_rater": "h2"}
        assert t["meta"] == {"annoplan_batch": b["id"], "annoplan_rater": "h2"}
    assert "fail" not in r.text


def test_batch_export_includes_text(client: TestClient, project: dict) -> None:
    pid = project["id"]
    texts = [
        {"external_id": f"i{i}", "features": {"topic": "a" if i % 2 else "b"}, "text": f"reply {i}"} for i in range(20)
    ]
    assert client.post(f"/projects/{pid}/items", json=texts).json()["updated"] == 20
    b = planned_batch(client, pid, "h3", 3)
    tasks = client.get(f"/projects/{pid}/batches/{b['id']}/label-studio").json()
    assert [t["data"]["text"] for t in tasks] == [f"reply {i[1:]}" for i in b["items"]]


def test_batch_export_roles(client: TestClient, project: dict) -> None:
    pid = project["id"]
    b = planned_batch(client, pid, "h2", 2)
    url = f"/projects/{pid}/batches/{b['id']}/label-studio"
    own = new_key(client, pid, "annotator", "h2")
    assert client.get(url, headers={"Authorization": f"Bearer {own}"}).status_code == 200
    other = new_key(client, pid, "annotator", "h3")
    r = client.get(url, headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert client.get(url, headers={"Authorization": f"Bearer {new_key(client, pid, 'viewer')}"}).status_code == 403
    assert client.get(url, headers={"Authorization": f"Bearer {new_key(client, pid, 'pm')}"}).status_code == 200
    assert client.get(f"/projects/{pid}/batches/b_missing/label-studio").status_code == 404


def test_round_trip_batch_to_label_studio_and_back(client: TestClient, project: dict) -> None:
    """Tasks exported for h2, annotated in Label Studio by user 12, import back onto the same items."""
    pid = project["id"]
    assert (
        client.post(f"/projects/{pid}/raters", json={"external_id": "ls-user-12", "kind": "human"}).status_code == 201
    )
    b = planned_batch(client, pid, "h2", 5)
    tasks = client.get(f"/projects/{pid}/batches/{b['id']}/label-studio").json()

    def verdict(choice: str) -> dict:
        return {"from_name": "verdict", "to_name": "text", "type": "choices", "value": {"choices": [choice]}}

    annotated = [
        {
            **t,
            "id": 9000 + n,
            "annotations": [{"id": 700 + n, "completed_by": 12, "result": [verdict("Fail" if n % 2 else "Pass")]}],
        }
        for n, t in enumerate(tasks)
    ]
    body = import_export(client, pid, annotated).json()
    assert body["items"] == {"created": 0, "updated": 0, "unchanged": 5}
    assert body["raters_created"] == []
    assert current_labels(client, pid, rater="ls-user-12") == {
        (item, "ls-user-12"): "fail" if n % 2 else "pass" for n, item in enumerate(b["items"])
    }


def test_openapi_documents_the_endpoints_and_errors(client: TestClient) -> None:
    doc = client.get("/openapi.json").json()
    expected = {
        ("/projects/{pid}/import/label-studio", "post"): {"401", "403", "404", "409", "413", "422"},
        ("/projects/{pid}/webhooks/label-studio", "post"): {"401", "404", "422"},
        ("/projects/{pid}/batches/{bid}/label-studio", "get"): {"401", "403", "404"},
    }
    for (path, method), errors in expected.items():
        op = doc["paths"][path][method]
        assert errors <= set(op["responses"]), path
        assert op["description"]
    webhook_params = {p["name"] for p in doc["paths"]["/projects/{pid}/webhooks/label-studio"]["post"]["parameters"]}
    assert "X-Annoplan-Secret" in webhook_params
    for path, method in [
        ("/projects/{pid}/integrations/label-studio/issues", "get"),
        ("/projects/{pid}/integrations/label-studio/issues/replay", "post"),
        ("/projects/{pid}/raters/{rid}", "patch"),
    ]:
        assert {"401", "403", "404"} <= set(doc["paths"][path][method]["responses"]), path
