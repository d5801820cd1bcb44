"""Label Studio for real (issue 17): payloads recorded from a Label Studio 1.23.2 server, in
tests/fixtures/label_studio_1_23_2/ (see its README): every JSON export, the webhook sequence
(create, update, delete, skip, an unmapped choice, a second control first), retractions, the
inbox and its replay, rater promotion and names, and batch export under the config's data key.

Expected labels are read off the fixtures by the small independent reader below, not by the
service's code.
"""

from __future__ import annotations

import doctest
import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import service.label_studio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "label_studio_1_23_2"
LABELS = ["Positive", "Negative", "Neutral"]  # no "Mixed": the real server's 4th choice is unmapped here
ADMIN = "ak_test_admin_key"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def deliveries() -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / "webhooks.ndjson").read_text().splitlines() if line.strip()]


LABEL_CONFIG = deliveries()[0]["project"]["label_config"]


def new_project(client: TestClient, labels: list[str] = LABELS) -> str:
    r = client.post("/projects", json={"name": "ls-real", "labels": labels})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def current(client: TestClient, pid: str, **params: Any) -> dict[tuple[str, str], str]:
    rows = ok(client.get(f"/projects/{pid}/labels", params={"limit": 1000, **params}))["items"]
    return {(r["item"], r["rater"]): r["value"] for r in rows}


def history(client: TestClient, pid: str, **params: Any) -> list[tuple[str, str, str | None, bool]]:
    rows = ok(client.get(f"/projects/{pid}/labels", params={"limit": 1000, "history": "true", **params}))["items"]
    return [(r["item"], r["rater"], r["value"], r["retracted"]) for r in rows]


def label_seq(client: TestClient, pid: str) -> int:
    return ok(client.get(f"/projects/{pid}"))["label_seq"]


def post_import(client: TestClient, pid: str, body: Any, **params: Any) -> Any:
    return client.post(f"/projects/{pid}/import/label-studio", json=body, params=params)


def deliver(client: TestClient, pid: str, payload: dict, **params: Any) -> dict:
    r = client.post(
        f"/projects/{pid}/webhooks/label-studio", json=payload, params=params, headers={"X-Annoplan-Secret": ADMIN}
    )
    return ok(r)


def user_id(completed_by: Any) -> int:
    return completed_by["id"] if isinstance(completed_by, dict) else completed_by


def expected_human_labels(tasks: list[dict]) -> dict[tuple[str, str], str]:
    """An independent reading: each non-cancelled annotation's one `sentiment` choice, when it is a label."""
    out = {}
    for task in tasks:
        for ann in task["annotations"]:
            if ann["was_cancelled"]:
                continue
            for r in ann["result"]:
                choices = r["value"]["choices"]
                if r["from_name"] == "sentiment" and len(choices) == 1 and choices[0] in LABELS:
                    out[(str(task["id"]), f"ls-user-{user_id(ann['completed_by'])}")] = r["value"]["choices"][0]
    return out


def expected_judge_labels(tasks: list[dict]) -> dict[tuple[str, str], str]:
    return {
        (str(t["id"]), p["model_version"]): p["result"][0]["value"]["choices"][0]
        for t in tasks
        for p in t["predictions"]
        if p["result"] and p["result"][0]["value"]["choices"][0] in LABELS
    }


def test_doctests() -> None:
    """Every module of the integration, so a module split off keeps its doctests run."""
    names = [m.name for m in pkgutil.iter_modules(service.label_studio.__path__, "service.label_studio.")]
    assert {"service.label_studio.reading", "service.label_studio.reconcile"} <= set(names)
    tried = 0
    for name in names:
        result = doctest.testmod(importlib.import_module(name))
        assert result.failed == 0, name
        tried += result.attempted
    assert tried > 0


# --- every JSON export ------------------------------------------------------------------------


def test_snapshot_reads_annotations_predictions_and_the_sentiment_control(client: TestClient) -> None:
    pid = new_project(client)
    tasks = fixture("snapshot-full-predictions.json")
    body = ok(post_import(client, pid, tasks))
    assert (body["format"], body["from_name"]) == ("snapshot", "sentiment")
    assert body["items"] == {"created": 52, "updated": 0, "unchanged": 0}
    want = {**expected_human_labels(tasks), **expected_judge_labels(tasks)}
    assert current(client, pid) == want
    assert body["changes"] == {"added": len(want), "updated": 0, "unchanged": 0, "retracted": 0}
    kinds = {(c["external_id"], c["kind"], c["name"]) for c in body["raters_created"]}
    assert ("ls-user-2", "human", "ann2@example.com") in kinds and ("gpt-4o-judge", "judge", "gpt-4o-judge") in kinds
    # the multi-choice `flags` control is never taken for the label, wherever it comes in the result
    assert current(client, pid)[("3", "ls-user-1")] == "Positive"
    assert {u["value"] for u in body["unmapped"]} == {"Mixed"}
    assert sum(s["reason"] == "cancelled" for s in body["skipped"]) == 3
    item = next(
        i for i in ok(client.get(f"/projects/{pid}/items", params={"limit": 1000}))["items"] if i["external_id"] == "1"
    )
    assert (item["text"], item["features"]) == ("I love this phone (#0)", {"source": "app", "gold": "pos"})
    again = ok(post_import(client, pid, tasks))  # idempotent: nothing changes
    assert again["changes"] == {"added": 0, "updated": 0, "unchanged": len(want), "retracted": 0}
    assert label_seq(client, pid) == len(want)


def test_export_button_json_imports_annotations_and_reports_prediction_ids(client: TestClient) -> None:
    pid = new_project(client)
    tasks = fixture("export-json.json")
    body = ok(post_import(client, pid, tasks))
    assert body["format"] == "json"
    assert current(client, pid) == expected_human_labels(tasks)
    by_id = [s for s in body["skipped"] if s["prediction"] is not None]
    assert len(by_id) == sum(len(t["predictions"]) for t in tasks) == 76
    assert all("snapshot export with full predictions" in s["reason"] and "/sync" in s["reason"] for s in by_id)
    assert not any(c["kind"] == "judge" for c in body["raters_created"])


def test_json_min_needs_the_control_then_reads_it(client: TestClient) -> None:
    pid = new_project(client)
    rows = fixture("export-json-min.json")
    r = post_import(client, pid, rows)
    assert r.status_code == 422 and r.json()["error"] == "needs_from_name"
    assert "?from_name=" in r.json()["detail"] and "snapshot export" in r.json()["detail"]
    assert label_seq(client, pid) == 0
    body = ok(post_import(client, pid, rows, label_config=LABEL_CONFIG))
    assert (body["format"], body["from_name"]) == ("json_min", "sentiment")
    assert current(client, pid) == expected_human_labels(fixture("snapshot-full-predictions.json"))
    items = {i["external_id"]: i for i in ok(client.get(f"/projects/{pid}/items", params={"limit": 1000}))["items"]}
    assert items["3"]["features"] == {"source": "app", "gold": "neu"}  # `flags` is a control, not data
    other = new_project(client)
    assert current(client, pid) == (
        ok(post_import(client, other, rows, from_name="sentiment")) and current(client, other)
    )


def test_a_second_single_choice_control_needs_from_name(client: TestClient) -> None:
    pid = new_project(client)
    config = LABEL_CONFIG.replace('choice="multiple"', 'choice="single"').replace("sarcasm", "Positive")
    r = post_import(client, pid, fixture("snapshot-full-predictions.json")[:3], label_config=config)
    assert r.status_code == 200, r.text  # sentiment's choices map to 3 labels, flags' to 1: sentiment
    config = config.replace('<Choice value="spam"/>', '<Choice value="Negative"/><Choice value="Neutral"/>')
    r = post_import(client, pid, fixture("snapshot-full-predictions.json")[:3], label_config=config)
    assert r.status_code == 422 and r.json()["error"] == "ambiguous_from_name"
    assert (
        ok(
            post_import(
                client, pid, fixture("snapshot-full-predictions.json")[:3], label_config=config, from_name="sentiment"
            )
        )["from_name"]
        == "sentiment"
    )


# --- webhooks as the real server sent them ----------------------------------------------------


def test_real_webhook_sequence_create_update_delete_skip_unmapped_then_replay(client: TestClient) -> None:
    pid = new_project(client)
    sent = deliveries()
    first = deliver(client, pid, sent[0])  # task 8, user 1: Positive
    assert (first["item"], first["rater"], first["value"]) == ("8", "ls-user-1", "Positive")
    assert deliver(client, pid, sent[1])["value"] == "Negative"  # updated
    seq = label_seq(client, pid)
    etag = client.get(f"/projects/{pid}/reliability").headers["ETag"]
    gone = deliver(client, pid, sent[2])  # ANNOTATIONS_DELETED [116]
    assert gone["retracted"] == 1 and gone["label_seq"] == seq + 1 == label_seq(client, pid)
    assert ("8", "ls-user-1") not in current(client, pid)
    assert history(client, pid) == [
        ("8", "ls-user-1", "Positive", False),
        ("8", "ls-user-1", "Negative", False),
        ("8", "ls-user-1", None, True),
    ]
    assert client.get(f"/projects/{pid}/reliability").headers["ETag"] != etag
    assert deliver(client, pid, sent[3])["skipped"] == "cancelled"  # task 9 skipped, nothing to withdraw
    mixed = deliver(client, pid, sent[4])  # task 10: "Mixed" is none of LABELS
    assert mixed["issue"] and "['Mixed']" in mixed["reason"]
    assert deliver(client, pid, sent[5])["value"] == "Positive"  # flags comes first in the result
    assert deliver(client, pid, sent[6]) == {"ignored": "TASKS_CREATED"}
    for payload in sent[7:]:
        assert deliver(client, pid, payload)["value"] in LABELS
    issues = ok(client.get(f"/projects/{pid}/integrations/label-studio/issues"))["items"]
    assert [(i["task"], i["annotation"], i["status"]) for i in issues] == [("10", "118", "open")]

    nothing = ok(client.post(f"/projects/{pid}/integrations/label-studio/issues/replay"))
    assert nothing["resolved"] == [] and nothing["still_open"][0]["id"] == mixed["issue"]
    r = client.patch(f"/projects/{pid}", json={"label_map": {"Mixed": "Nope"}})
    assert r.status_code == 422 and "'Nope' is not one of the labels" in r.json()["detail"]
    assert ok(client.patch(f"/projects/{pid}", json={"label_map": {"Mixed": "Neutral"}}))["label_map"] == {
        "Mixed": "Neutral"
    }
    replay = ok(client.post(f"/projects/{pid}/integrations/label-studio/issues/replay"))
    assert replay == {"resolved": [mixed["issue"]], "superseded": [], "still_open": []}
    assert current(client, pid)[("10", "ls-user-1")] == "Neutral"
    assert ok(client.get(f"/projects/{pid}/integrations/label-studio/issues"))["items"] == []
    assert (
        ok(client.get(f"/projects/{pid}/integrations/label-studio/issues", params={"status": "resolved"}))["items"][0][
            "status"
        ]
        == "resolved"
    )


def test_a_later_delivery_supersedes_an_open_issue_of_the_same_annotation(client: TestClient) -> None:
    pid = new_project(client)
    mixed = deliveries()[4]
    assert deliver(client, pid, mixed)["issue"]
    fixed = json.loads(json.dumps(mixed))
    fixed["action"] = "ANNOTATION_UPDATED"
    fixed["annotation"]["result"][0]["value"]["choices"] = ["Negative"]
    assert deliver(client, pid, fixed)["value"] == "Negative"
    ok(client.patch(f"/projects/{pid}", json={"label_map": {"Mixed": "Neutral"}}))
    assert ok(client.post(f"/projects/{pid}/integrations/label-studio/issues/replay"))["resolved"] == []
    assert current(client, pid)[("10", "ls-user-1")] == "Negative"  # the older state is not replayed over it
    superseded = ok(client.get(f"/projects/{pid}/integrations/label-studio/issues", params={"status": "all"}))
    assert [i["status"] for i in superseded["items"]] == ["superseded"]


def test_skip_after_a_label_retracts_it(client: TestClient) -> None:
    pid = new_project(client)
    created = deliveries()[0]
    assert deliver(client, pid, created)["value"] == "Positive"
    skipped = json.loads(json.dumps(created))
    skipped["action"] = "ANNOTATION_UPDATED"
    skipped["annotation"].update(was_cancelled=True, result=[])
    out = deliver(client, pid, skipped)
    assert (out["skipped"], out["retracted"]) == ("cancelled", 1)
    assert current(client, pid) == {}
    emptied = json.loads(json.dumps(created))
    emptied["annotation"]["result"] = [r for r in emptied["annotation"]["result"] if r["from_name"] == "flags"]
    deliver(client, pid, created)  # labeled again, then only a flag is left: withdrawn again
    assert deliver(client, pid, emptied)["retracted"] == 1
    assert [h[2:] for h in history(client, pid)] == [
        ("Positive", False),
        (None, True),
        ("Positive", False),
        (None, True),
    ]


def test_retractions_reach_every_reader(client: TestClient) -> None:
    """Raters' counts, exports, reliability, the dashboard and the report all drop a retracted label."""
    pid = new_project(client)
    ok(post_import(client, pid, fixture("snapshot-full-predictions.json")))
    counts = {r["external_id"]: r["n_labels"] for r in ok(client.get(f"/projects/{pid}/raters"))["items"]}
    reliability = ok(client.get(f"/projects/{pid}/reliability"))
    deleted = ok(
        client.post(
            f"/projects/{pid}/webhooks/label-studio",
            headers={"X-Annoplan-Secret": ADMIN},
            json={"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 1}, {"id": 107}]},
        )
    )
    assert deleted["retracted"] == 2  # task 1: user 2 and user 3
    after = {r["external_id"]: r["n_labels"] for r in ok(client.get(f"/projects/{pid}/raters"))["items"]}
    assert after["ls-user-2"] == counts["ls-user-2"] - 1 and after["ls-user-3"] == counts["ls-user-3"] - 1
    csv = client.get(f"/projects/{pid}/labels", params={"format": "csv", "history": "true"}).text
    assert csv.splitlines()[0].endswith(",retracted,order") and csv.count(",true") == 2
    assert ok(client.get(f"/projects/{pid}/reliability"))["label_seq"] == reliability["label_seq"] + 2
    assert client.get(f"/projects/{pid}/dashboard").status_code == 200
    assert client.get(f"/projects/{pid}/report", params={"positive": "Positive"}).status_code == 200


def test_an_annotation_gone_from_a_later_export_is_retracted(client: TestClient) -> None:
    pid = new_project(client)
    tasks = fixture("snapshot-full-predictions.json")
    ok(post_import(client, pid, tasks))
    tasks[0]["annotations"] = tasks[0]["annotations"][:1]  # annotation 107 (user 3) deleted in Label Studio
    tasks[0]["predictions"] = []  # and both predictions of task 1
    body = ok(post_import(client, pid, tasks))
    assert body["changes"]["retracted"] == 2  # user 3's label and gpt-4o-judge's (small-judge's "Mixed" is none)
    assert {k for k in current(client, pid) if k[0] == "1"} == {("1", "ls-user-2")}
    assert ok(post_import(client, pid, tasks))["changes"]["retracted"] == 0


# --- raters -----------------------------------------------------------------------------------


def test_import_promotes_a_webhook_made_rater_and_fills_its_name(client: TestClient) -> None:
    pid = new_project(client)
    deliver(client, pid, deliveries()[0])  # makes ls-user-1, human, nameless
    body = ok(post_import(client, pid, fixture("snapshot-full-predictions.json"), primary="A@B.C"))
    assert "ls-user-1" in body["raters_updated"]
    raters = {r["external_id"]: r for r in ok(client.get(f"/projects/{pid}/raters"))["items"]}
    assert (raters["ls-user-1"]["kind"], raters["ls-user-1"]["name"]) == ("primary", "a@b.c")


def test_patch_rater_kind_and_name_until_a_plan_depends_on_it(client: TestClient) -> None:
    pid = new_project(client)
    ok(post_import(client, pid, fixture("snapshot-full-predictions.json")))
    raters = {r["external_id"]: r for r in ok(client.get(f"/projects/{pid}/raters"))["items"]}
    rid = raters["ls-user-2"]["id"]
    got = ok(client.patch(f"/projects/{pid}/raters/{rid}", json={"kind": "primary", "name": "Ann Two"}))
    assert (got["kind"], got["name"], got["n_labels"]) == ("primary", "Ann Two", raters["ls-user-2"]["n_labels"])
    r = client.patch(f"/projects/{pid}/raters/ls-user-3", json={"kind": "primary"})
    assert r.status_code == 409 and r.json()["error"] == "primary_exists"
    assert client.patch(f"/projects/{pid}/raters/nobody", json={"name": "x"}).status_code == 404
    assert client.patch(f"/projects/{pid}/raters/{rid}", json={"kind": None}).status_code == 422
    ok(client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "seed": 1}), 201)
    r = client.patch(f"/projects/{pid}/raters/ls-user-3", json={"kind": "judge"})
    assert r.status_code == 409 and r.json()["error"] == "plan_depends_on_rater"
    assert ok(client.patch(f"/projects/{pid}/raters/ls-user-3", json={"name": "Ann Three"}))["name"] == "Ann Three"


# --- batch export -----------------------------------------------------------------------------


def test_batch_export_matches_the_real_round_trip_and_keeps_the_configs_data_key(client: TestClient) -> None:
    pid = new_project(client)
    ok(post_import(client, pid, fixture("snapshot-full-predictions.json"), primary="2"))
    ok(client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "seed": 3}), 201)
    batch = ok(client.post(f"/projects/{pid}/batches", json={"rater": "ls-user-3", "size": 5}))
    tasks = ok(client.get(f"/projects/{pid}/batches/{batch['id']}/label-studio"))
    real = fixture("annoplan-batch-as-tasks.json")  # what Label Studio accepted from an earlier build
    # annoplan_rater is newer than that capture; the live test imports it into a real Label Studio and filters on it
    assert {t["data"].pop("annoplan_rater") for t in tasks} == {"ls-user-3"}
    assert {tuple(sorted(t["data"])) for t in tasks} <= {tuple(sorted(t["data"])) for t in real}
    assert {tuple(sorted(t["meta"])) for t in tasks} == {tuple(sorted(t["meta"])) for t in real}

    review = new_project(client)
    config = LABEL_CONFIG.replace('value="$text"', 'value="$review"')
    task = {
        "id": 17,
        "data": {"title": "Order 17", "review": "Arrived late and cold"},
        "annotations": [
            {
                "id": 5,
                "completed_by": 2,
                "result": [
                    {"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": ["Negative"]}}
                ],
            }
        ],
    }
    ok(post_import(client, review, [task], label_config=config, primary="2"))
    item = ok(client.get(f"/projects/{review}/items"))["items"][0]
    assert (item["text"], item["features"]) == ("Arrived late and cold", {"title": "Order 17"})
    assert ok(client.get(f"/projects/{review}"))["label_studio"]["data_key"] == "review"
    ok(client.post(f"/projects/{review}/raters", json={"external_id": "ann-9", "kind": "human"}), 201)
    ok(client.post(f"/projects/{review}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "seed": 3}), 201)
    batch = ok(client.post(f"/projects/{review}/batches", json={"rater": "ann-9", "size": 1}))
    out = ok(client.get(f"/projects/{review}/batches/{batch['id']}/label-studio"))
    assert out[0]["data"] == {
        "title": "Order 17",
        "review": "Arrived late and cold",
        "annoplan_item": "17",
        "annoplan_rater": "ann-9",
    }


# --- invariant: current labels are the replay of the history ----------------------------------


ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["label", "cancel", "delete"]), st.integers(0, 2), st.integers(0, 1), st.sampled_from(LABELS)
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS)
def test_webhook_sequences_leave_current_labels_equal_to_a_replay(client: TestClient, actions: list) -> None:
    """Any sequence of labels, skips and deletions of a few annotations: the current labels equal
    an independent model (annotation -> cell; last state wins), and the history replays to them."""
    pid = new_project(client)
    template = deliveries()[0]
    model: dict[tuple[str, str], str] = {}
    for what, task, user, value in actions:
        cell = (str(100 + task), f"ls-user-{user}")
        ann_id = 1000 + 10 * task + user  # one annotation per (task, user), as Label Studio keeps it
        if what == "delete":
            deliver(client, pid, {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": ann_id}]})
            model.pop(cell, None)
            continue
        payload = json.loads(json.dumps(template))
        payload["action"] = "ANNOTATION_UPDATED"
        payload["task"]["id"] = payload["annotation"]["task"] = 100 + task
        payload["annotation"].update(
            id=ann_id,
            completed_by=user,
            was_cancelled=what == "cancel",
            result=[]
            if what == "cancel"
            else [{"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": [value]}}],
        )
        deliver(client, pid, payload)
        if what == "cancel":
            model.pop(cell, None)
        else:
            model[cell] = value
    assert current(client, pid) == model
    replayed: dict[tuple[str, str], str] = {}
    for item, rater, value, retracted in history(client, pid):
        if retracted:
            del replayed[(item, rater)]
        else:
            replayed[(item, rater)] = value
    assert replayed == model
