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
import json
from typing import Any

from fastapi.testclient import TestClient

from tests.service.test_label_studio_real import (
    FIXTURES,
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
from tests.service.test_label_studio_sync import FakeLabelStudio, label_studio, settings, sync

__all__ = ["label_studio", "settings"]  # the stand-in Label Studio on loopback, and the settings allowing it


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


def copies_webhooks() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "copies-webhooks.ndjson").read_text().splitlines() if line]


def test_a_copy_whose_prediction_was_deleted_is_told_by_its_results_origin(client: TestClient) -> None:
    """Captured from a real Label Studio: task 10's annotation is the editor's copy of the judge's prediction
    (origin `prediction`), task 11's the copy edited (`prediction-changed`), task 12's the annotator's own
    (`manual`, equal to the prediction by chance). Once the predictions of 10 and 11 are deleted (a model run
    replaced), Label Studio empties `parent_prediction`; the results' origin still tells the copies: both are
    kept out of the labels and in the inbox, the annotator's own label counts."""
    tasks = fixture("copies-snapshot-predictions-deleted.json")
    anns = {t["id"]: t["annotations"][0] for t in tasks}
    assert [anns[t]["parent_prediction"] for t in (10, 11, 12)] == [None, None, None]
    assert [anns[t]["result"][0]["origin"] for t in (10, 11, 12)] == ["prediction", "prediction-changed", "manual"]
    pid = new_project(client)
    done = ok(post_import(client, pid, tasks))
    assert current(client, pid) == {("12", "ls-user-1"): "Negative", ("12", "gpt-4o-judge"): "Negative"}
    copies = open_issues(client, pid, "Label Studio's mark of a copy")
    assert sorted(i["annotation"] for i in copies) == ["10", "11"] and len(done["issues"]) == 2
    with_parent = ok(post_import(client, new_project(client), fixture("copies-snapshot-with-parent.json")))
    assert sorted(s["annotation"] for s in with_parent["skipped"] if COPY in s["reason"]) == [10, 11]


def test_the_real_copy_webhooks_keep_the_copies_out(client: TestClient) -> None:
    """The three ANNOTATION_CREATED deliveries of that run: the two copies to the inbox, the own label recorded;
    the copies without their `parent_prediction` (as a replay after the prediction's deletion sees them) too."""
    for strip in (False, True):
        pid = new_project(client)
        for payload in copies_webhooks():
            if strip:
                payload["annotation"]["parent_prediction"] = None
            deliver(client, pid, payload)
        assert current(client, pid) == {("12", "ls-user-1"): "Negative"}, strip
        assert sorted(i["annotation"] for i in open_issues(client, pid)) == ["10", "11"], strip


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


# --- 2. deletions: TASKS_DELETED, and a rubric's annotation deleted under every criterion ------


def test_tasks_deleted_retracts_every_label_of_the_deleted_tasks(client: TestClient) -> None:
    pid = new_project(client)
    tasks = fixture("snapshot-full-predictions.json")
    ok(post_import(client, pid, tasks))
    before = current(client, pid)
    gone = fixture("webhook-tasks-deleted.json")
    ids = [str(t["id"]) for t in gone["tasks"]]
    assert ids == ["8", "9"]
    on_them = {cell for cell in before if cell[0] in ids}
    assert {r for _, r in on_them} >= {"gpt-4o-judge", "ls-user-2"}  # humans and judges
    seq = label_seq(client, pid)
    payload = copy.deepcopy(gone)
    payload["tasks"].append({"id": 999})
    r = deliver(client, pid, payload)
    assert r["retracted"] == len(on_them) and r["unknown_tasks"] == [999]
    assert r["label_seq"] == label_seq(client, pid) == seq + len(on_them)
    assert current(client, pid) == {c: v for c, v in before.items() if c not in on_them}
    # delivered twice: nothing more
    again = deliver(client, pid, gone)
    assert again["retracted"] == 0 and again["unknown_tasks"] == [8, 9]


def test_the_tasks_deleted_bodies_captured_from_label_studio_retract_their_tasks(client: TestClient) -> None:
    """Label Studio 1.23.2's own TASKS_DELETED deliveries (one task deleted from its page, two by the data
    manager's bulk action) have the shape the hand-built fixture assumed, and retract tasks 1, 2 and 3."""
    captured = [json.loads(line) for line in (FIXTURES / "webhooks-tasks-deleted.ndjson").read_text().splitlines()]
    modelled = fixture("webhook-tasks-deleted.json")
    for body in captured:
        assert body["action"] == "TASKS_DELETED" and sorted(body) == sorted(modelled)
        assert all(list(task) == ["id"] for task in body["tasks"]) and sorted(body["project"]) == sorted(
            modelled["project"]
        )
    pid = new_project(client)
    ok(post_import(client, pid, fixture("snapshot-full-predictions.json")))
    before = current(client, pid)
    for body, ids in zip(captured, [{"1"}, {"2", "3"}], strict=True):
        on_them = {cell for cell in before if cell[0] in ids}
        assert on_them and deliver(client, pid, body)["retracted"] == len(on_them)
    assert current(client, pid) == {c: v for c, v in before.items() if c[0] not in {"1", "2", "3"}}


def test_tasks_deleted_retracts_webhook_labels_and_supersedes_their_issues(client: TestClient) -> None:
    pid = new_project(client)
    sent = deliveries()
    assert deliver(client, pid, sent[0])["value"] == "Positive"  # task 8, user 1
    kept = deliver(client, pid, two_choices(sent[0]))
    assert kept["issue"]
    r = deliver(client, pid, fixture("webhook-tasks-deleted.json"))
    assert r["retracted"] == 1 and r["unknown_tasks"] == [9]
    assert current(client, pid) == {} and open_issues(client, pid) == []


def test_sync_retracts_the_labels_of_tasks_gone_from_label_studio(
    client: TestClient, label_studio: FakeLabelStudio
) -> None:
    pid = new_project(client)
    ok(sync(client, pid, label_studio))
    before = current(client, pid)
    label_studio.tasks = [t for t in label_studio.tasks if t["id"] not in (8, 9)]
    done = ok(sync(client, pid, label_studio))
    on_them = {cell for cell in before if cell[0] in ("8", "9")}
    assert on_them and done["changes"]["retracted"] == len(on_them)
    assert current(client, pid) == {c: v for c, v in before.items() if c not in on_them}


def test_a_rubric_annotation_deleted_is_retracted_under_every_criterion(client: TestClient) -> None:
    """One webhook per criterion links one annotation to one cell per criterion; its deletion retracts all."""
    r = client.post("/projects", json={"name": "rubric", "labels": LABELS_RUBRIC, "criteria": ["tone", "truth"]})
    pid = ok(r, 201)["id"]
    sent = deliveries()
    for criterion in ("tone", "truth"):
        assert deliver(client, pid, sent[0], criterion=criterion)["value"] == "Positive"
    assert current(client, pid, criterion="tone") and current(client, pid, criterion="truth")
    r = deliver(client, pid, sent[2])  # ANNOTATIONS_DELETED [116]
    assert r["retracted"] == 2
    assert current(client, pid, criterion="tone") == current(client, pid, criterion="truth") == {}


def test_per_criterion_imports_each_retract_a_deleted_annotation(client: TestClient) -> None:
    pid = ok(
        client.post("/projects", json={"name": "rubric", "labels": LABELS_RUBRIC, "criteria": ["tone", "truth"]}),
        201,
    )["id"]
    tasks = fixture("snapshot-full-predictions.json")
    for criterion in ("tone", "truth"):
        ok(post_import(client, pid, tasks, criterion=criterion))
    task8 = next(t for t in tasks if t["id"] == 8)
    ann = task8["annotations"].pop(0)
    cell = ("8", f"ls-user-{ann['completed_by']['id']}")
    for criterion in ("tone", "truth"):
        assert cell in current(client, pid, criterion=criterion)
        assert ok(post_import(client, pid, tasks, criterion=criterion))["changes"]["retracted"] == 1
        assert cell not in current(client, pid, criterion=criterion)


LABELS_RUBRIC = ["Positive", "Negative", "Neutral"]


# --- 5. two Label Studio projects feeding one annoplan project --------------------------------


def as_ls_project(tasks: list[dict], ls_project: int, users: set[int], offset: int) -> list[dict]:
    """The tasks as another Label Studio project holds them after importing annoplan's batch export:
    its own task and annotation ids, the item's id in ``data.annoplan_item``, only ``users``' annotations."""
    out = []
    for t in copy.deepcopy(tasks):
        t["data"]["annoplan_item"] = f"item-{t['id']}"
        t["id"] += offset
        t["project"] = ls_project
        t["annotations"] = [
            dict(a, id=a["id"] + offset, task=t["id"]) for a in t["annotations"] if a["completed_by"]["id"] in users
        ]
        t["predictions"] = [dict(p, id=p["id"] + offset) for p in t["predictions"]] if ls_project == 1 else []
        out.append(t)
    return out


def test_two_label_studio_projects_do_not_retract_each_others_labels(client: TestClient) -> None:
    pid = new_project(client)
    real = fixture("snapshot-full-predictions.json")
    first, second = as_ls_project(real, 1, {1, 2}, 0), as_ls_project(real, 2, {3}, 10_000)
    ok(post_import(client, pid, first))
    ok(post_import(client, pid, second))
    both = current(client, pid)
    assert {r for _, r in both} >= {"ls-user-2", "ls-user-3", "gpt-4o-judge"}
    for tasks in (first, second, first):
        assert ok(post_import(client, pid, tasks))["changes"] == {
            "added": 0,
            "updated": 0,
            "unchanged": ok_unchanged(tasks, both),
            "retracted": 0,
        }
    assert current(client, pid) == both
    # a deletion in one project is still seen: user 3's annotation of item-8 removed from the second
    task = next(t for t in second if t["data"]["annoplan_item"] == "item-8")
    task["annotations"] = []
    assert ok(post_import(client, pid, second))["changes"]["retracted"] == 1
    assert ("item-8", "ls-user-3") not in current(client, pid) and ("item-8", "ls-user-2") in current(client, pid)


def ok_unchanged(tasks: list[dict], labels: dict[tuple[str, str], str]) -> int:
    """How many current labels these tasks restate (one per labelled cell they hold)."""
    raters = {f"ls-user-{a['completed_by']['id']}" for t in tasks for a in t["annotations"]}
    raters |= {p["model_version"] for t in tasks for p in t["predictions"]}
    items = {t["data"]["annoplan_item"] for t in tasks}
    return sum(1 for i, r in labels if i in items and r in raters)


def test_an_issue_is_superseded_once_an_import_records_the_corrected_annotation(client: TestClient) -> None:
    pid = new_project(client)
    tasks = fixture("snapshot-full-predictions.json")
    ok(post_import(client, pid, tasks))
    (issue,) = open_issues(client, pid, "2 choices")  # annotation 114 of task 5
    task5 = next(t for t in copy.deepcopy(tasks) if t["id"] == 5)
    ann = next(a for a in task5["annotations"] if a["id"] == 114)
    ann["result"][0]["value"]["choices"] = ["Negative"]  # corrected in Label Studio
    ok(post_import(client, pid, [task5]))
    assert current(client, pid)[("5", "ls-user-1")] == "Negative"
    assert open_issues(client, pid) == []
    superseded = ok(client.get(f"/projects/{pid}/integrations/label-studio/issues", params={"status": "superseded"}))
    assert [i["id"] for i in superseded["items"]] == [issue["id"]]


def test_json_min_of_unannotated_tasks_only_needs_no_control(client: TestClient) -> None:
    rows = [r for r in fixture("export-json-min-all-tasks.json") if r["annotator"] is None]
    pid = new_project(client)
    body = ok(post_import(client, pid, rows))
    assert body["items"]["created"] == 2 and current(client, pid) == {}


def test_cli_sync_per_criterion(database_url: str, label_studio: FakeLabelStudio) -> None:
    """`annoplan sync label-studio --criterion`: a rubric syncs each criterion; the inbox is mentioned."""
    from typer.testing import CliRunner

    from service.cli import app as cli
    from tests.live_server import LiveServer
    from tests.service.test_label_studio_sync import ADMIN as SYNC_ADMIN
    from tests.service.test_label_studio_sync import TOKEN

    runner = CliRunner()
    with LiveServer(database_url, SYNC_ADMIN, outbound_allow_private=1) as server, server.client() as c:
        body = {"name": "cli rubric", "labels": LABELS_RUBRIC, "criteria": ["tone", "truth"]}
        pid = c.post("/projects", json=body).json()["id"]
        args = ["sync", "label-studio", "--project", pid, "--ls-project", "7", "--ls-url", label_studio.url]
        env = {"ANNOPLAN_KEY": SYNC_ADMIN, "LABEL_STUDIO_TOKEN": TOKEN}
        for criterion in ("tone", "truth"):
            result = runner.invoke(cli, [*args, "--url", server.base_url, "--criterion", criterion], env=env)
            assert result.exit_code == 0, result.output
            assert "annotations kept out of the labels, open in the inbox" in result.output  # annotation 114
            rows = c.get(f"/projects/{pid}/labels", params={"limit": 1000, "criterion": criterion}).json()["items"]
            assert len(rows) > 100
        unnamed = runner.invoke(cli, [*args, "--url", server.base_url], env=env)
        assert unnamed.exit_code == 1 and "pass ?criterion=" in unnamed.output
