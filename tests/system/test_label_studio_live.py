"""Opt-in: drive a real Label Studio (issue 17) against a live annoplan server.

Skipped unless ``LABEL_STUDIO_URL`` and ``LABEL_STUDIO_TOKEN`` (a legacy API token: start
Label Studio with ``--enable-legacy-api-token``) are set; Label Studio must run with
``SSRF_PROTECTION_ENABLED=false`` to deliver webhooks to a loopback annoplan. ``make
label-studio`` installs and starts one that fits. The test creates a Label Studio project
with a webhook to annoplan, then: create, update, delete, skip an annotation (each reaching
annoplan by webhook), a prediction (no webhook: recovered by sync), the Export button's JSON
and JSON_MIN imported, and a sync that is then idempotent. Issue 36's cases follow: connect (and again: only
the secret changes), a personal access token from the command line, two Label Studio projects feeding one
annoplan project, a deleted task, copies of the judge's prediction (by ``parent_prediction``, then by the
results' ``origin`` once the prediction is deleted), a rubric's deletions, a mapped annotator's labels
counting for its rater's batch in its Data Manager tab and then unmapped, and a Pairwise control.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer

LS_URL = os.environ.get("LABEL_STUDIO_URL", "").rstrip("/")
LS_TOKEN = os.environ.get("LABEL_STUDIO_TOKEN", "")
pytestmark = pytest.mark.skipif(not (LS_URL and LS_TOKEN), reason="set LABEL_STUDIO_URL and LABEL_STUDIO_TOKEN")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "label_studio_1_23_2"
LABEL_CONFIG = json.loads((FIXTURES / "webhooks.ndjson").read_text().splitlines()[0])["project"]["label_config"]
LABELS = ["Positive", "Negative", "Neutral"]
ADMIN = "ak_label_studio_live_admin"


def ok(r: httpx.Response) -> Any:
    assert r.status_code < 300, f"{r.request.method} {r.request.url}: {r.status_code} {r.text[:500]}"
    return r.json() if r.content else None


def sentiment(choice: str) -> list[dict]:
    return [{"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": [choice]}}]


def eventually(check: Callable[[], bool], what: str, within: float = 15.0) -> None:
    """Label Studio posts webhooks on its own schedule: wait for their effect."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"not within {within:.0f} s: {what}"
        time.sleep(0.2)


@pytest.fixture
def ls() -> Iterator[httpx.Client]:
    with httpx.Client(base_url=LS_URL, headers={"Authorization": f"Token {LS_TOKEN}"}, timeout=60) as client:
        yield client


def test_label_studio_end_to_end(database_url: str, ls: httpx.Client) -> None:
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as annoplan:
        pid = ok(annoplan.post("/projects", json={"name": "live ls", "labels": LABELS}))["id"]
        pm = ok(annoplan.post(f"/projects/{pid}/keys", json={"role": "pm"}))["key"]
        # Label Studio gives a delivery 1 s: warm the webhook path (imports, connections) first
        ok(
            annoplan.post(
                f"/projects/{pid}/webhooks/label-studio",
                json={"action": "PROJECT_UPDATED"},
                headers={"X-Annoplan-Secret": pm},
            )
        )

        def current() -> dict[tuple[str, str], str]:
            rows = ok(annoplan.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
            return {(r["item"], r["rater"]): r["value"] for r in rows}

        project = ok(ls.post("/api/projects", json={"title": f"annoplan live {pid}", "label_config": LABEL_CONFIG}))
        lsp = project["id"]
        try:
            me = ok(ls.get("/api/current-user/whoami"))["id"]
            rater = f"ls-user-{me}"
            ok(
                ls.post(
                    "/api/webhooks",
                    json={
                        "project": lsp,
                        "url": f"{server.base_url}/projects/{pid}/webhooks/label-studio",
                        "headers": {"X-Annoplan-Secret": pm},
                        "send_payload": True,
                        "send_for_all_actions": False,
                        "actions": ["ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED"],
                        "is_active": True,
                    },
                )
            )
            ok(
                ls.post(
                    f"/api/projects/{lsp}/import", json=[{"text": f"live task {n}", "source": "live"} for n in range(3)]
                )
            )
            tasks = sorted(t["id"] for t in ok(ls.get("/api/tasks", params={"project": lsp}))["tasks"])
            t1, t2, t3 = (str(t) for t in tasks)

            # create -> a label; update -> a correction; delete -> a retraction
            ann = ok(ls.post(f"/api/tasks/{t1}/annotations", json={"result": sentiment("Positive")}))
            eventually(lambda: current().get((t1, rater)) == "Positive", "the created label")
            ok(ls.patch(f"/api/annotations/{ann['id']}", json={"result": sentiment("Negative")}))
            eventually(lambda: current().get((t1, rater)) == "Negative", "the updated label")
            ls.delete(f"/api/annotations/{ann['id']}").raise_for_status()
            eventually(lambda: (t1, rater) not in current(), "the deletion's retraction")
            # a label, then a skip of the same task
            ann2 = ok(ls.post(f"/api/tasks/{t2}/annotations", json={"result": sentiment("Neutral")}))
            eventually(lambda: current().get((t2, rater)) == "Neutral", "the second label")
            ok(ls.patch(f"/api/annotations/{ann2['id']}", json={"was_cancelled": True, "result": []}))
            eventually(lambda: (t2, rater) not in current(), "the skip's retraction")
            history = ok(annoplan.get(f"/projects/{pid}/labels", params={"history": "true"}))["items"]
            assert [(h["item"], h["value"], h["retracted"]) for h in history] == [
                (t1, "Positive", False),
                (t1, "Negative", False),
                (t1, None, True),
                (t2, "Neutral", False),
                (t2, None, True),
            ]

            # a prediction sends no webhook: a sync brings the judge in
            ok(ls.post(f"/api/tasks/{t3}/annotations", json={"result": sentiment("Positive")}))
            ok(
                ls.post(
                    "/api/predictions",
                    json={"task": int(t3), "model_version": "live-judge", "result": sentiment("Negative")},
                )
            )
            eventually(lambda: current().get((t3, rater)) == "Positive", "the third label")
            body = {"url": LS_URL, "project": lsp, "token": LS_TOKEN}
            synced = ok(annoplan.post(f"/projects/{pid}/integrations/label-studio/sync", json=body))
            assert synced["changes"]["added"] == 1 and current()[(t3, "live-judge")] == "Negative"
            again = ok(annoplan.post(f"/projects/{pid}/integrations/label-studio/sync", json=body))
            assert {k: again["changes"][k] for k in ("added", "updated", "retracted")} == {
                "added": 0,
                "updated": 0,
                "retracted": 0,
            }
            assert ok(annoplan.get(f"/projects/{pid}/integrations/label-studio/issues"))["items"] == []

            # the exports people download import into a fresh project with the same human labels
            for export_type in ("JSON", "JSON_MIN"):
                rows = ok(ls.get(f"/api/projects/{lsp}/export", params={"exportType": export_type}))
                fresh = ok(annoplan.post("/projects", json={"name": f"from {export_type}", "labels": LABELS}))["id"]
                got = ok(
                    annoplan.post(
                        f"/projects/{fresh}/import/label-studio", json=rows, params={"label_config": LABEL_CONFIG}
                    )
                )
                assert got["format"] == ("json" if export_type == "JSON" else "json_min")
                labels = ok(annoplan.get(f"/projects/{fresh}/labels"))["items"]
                assert {(r["item"], r["rater"], r["value"]) for r in labels} == {(t3, rater, "Positive")}
        finally:
            ls.delete(f"/api/projects/{lsp}")


def test_connect_sets_label_studio_up_and_a_rerun_changes_only_the_secret(database_url: str, ls: httpx.Client) -> None:
    """`POST .../integrations/label-studio/connect` against the real Label Studio: predictions hidden,
    annotations per task raised to the panel, the webhook made (and working), one tab per secondary
    showing exactly its batch's tasks; connecting again rotates the secret and changes nothing else."""
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as annoplan:
        pid = ok(annoplan.post("/projects", json={"name": "connect", "labels": LABELS}))["id"]
        for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
            ok(annoplan.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}))
        ok(annoplan.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}", "text": f"t{i}"} for i in range(60)]))
        ok(
            annoplan.post(
                f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "m": 20, "seed": 1}
            )
        )
        project = ok(ls.post("/api/projects", json={"title": f"annoplan connect {pid}", "label_config": LABEL_CONFIG}))
        lsp = project["id"]
        try:
            batch = ok(annoplan.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 5}))
            tasks = ok(annoplan.get(f"/projects/{pid}/batches/{batch['id']}/label-studio"))
            ok(ls.post(f"/api/projects/{lsp}/import", json=tasks))
            ok(ls.post(f"/api/projects/{lsp}/import", json=[{"text": "not a batch task"}]))
            body = {"url": LS_URL, "project": lsp, "token": LS_TOKEN, "webhook_url": server.base_url}
            first = ok(annoplan.post(f"/projects/{pid}/integrations/label-studio/connect", json=body))
            settings = ok(ls.get(f"/api/projects/{lsp}"))
            assert settings["show_collab_predictions"] is False and settings["maximum_annotations"] == 3
            assert sorted(first["views"]) == ["h2", "h3"] and first["maximum_annotations"] == 3
            shown = ok(ls.get("/api/tasks", params={"project": lsp, "view": first["views"]["h2"]}))["tasks"]
            assert sorted(t["data"]["annoplan_item"] for t in shown) == sorted(batch["items"])
            assert ok(ls.get("/api/tasks", params={"project": lsp, "view": first["views"]["h3"]}))["tasks"] == []

            again = ok(annoplan.post(f"/projects/{pid}/integrations/label-studio/connect", json=body))
            assert again["views"] == first["views"] and again["webhook_id"] == first["webhook_id"]
            assert len(again["changed"]) == 1 and "new secret" in again["changed"][0]
            keys = {k["id"]: k for k in ok(annoplan.get("/keys", params={"include_revoked": True}))}
            assert keys[first["key_id"]]["revoked_at"] and not keys[again["key_id"]]["revoked_at"]

            task = shown[0]
            ok(ls.post(f"/api/tasks/{task['id']}/annotations", json={"result": sentiment("Negative")}))
            eventually(
                lambda: any(
                    r["item"] == task["data"]["annoplan_item"]
                    for r in ok(annoplan.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
                ),
                "the annotation reaching annoplan through the connected webhook",
            )
        finally:
            ls.delete(f"/api/projects/{lsp}")


def test_a_personal_access_token_connects_from_the_command_line(database_url: str, ls: httpx.Client) -> None:
    """`annoplan connect label-studio --token-type Personal` with a real personal access token (a JWT refresh
    token, exchanged at /api/token/refresh/); the same token sent as a legacy one is told which type to use."""
    from typer.testing import CliRunner

    from service.cli import app as cli

    made = ls.post("/api/token/")
    if made.status_code >= 400:
        pytest.skip(f"no new personal access token for this user ({made.status_code}): it has one already")
    pat = made.json()["token"]
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as annoplan:
        pid = ok(annoplan.post("/projects", json={"name": "pat", "labels": LABELS}))["id"]
        for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human")]:
            ok(annoplan.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}))
        project = ok(ls.post("/api/projects", json={"title": f"annoplan pat {pid}", "label_config": LABEL_CONFIG}))
        try:
            args = ["connect", "label-studio", "--project", pid, "--ls-project", str(project["id"])]
            args += ["--ls-url", LS_URL, "--url", server.base_url, "--webhook-url", server.base_url]
            env = {"ANNOPLAN_KEY": ADMIN, "LABEL_STUDIO_TOKEN": pat}
            wrong = CliRunner().invoke(cli, args, env=env)
            assert wrong.exit_code == 1 and "token_type Personal" in wrong.output, wrong.output
            done = CliRunner().invoke(cli, [*args, "--token-type", "Personal"], env=env)
            assert done.exit_code == 0 and "show_collab_predictions: false" in done.output, done.output
            assert ok(ls.get(f"/api/projects/{project['id']}"))["show_collab_predictions"] is False
        finally:
            ls.delete(f"/api/projects/{project['id']}")
            # Label Studio gives a user one personal access token at a time: revoke it, so the test can run again
            ls.post("/api/token/blacklist/", json={"refresh": pat})


def test_two_projects_deleted_tasks_and_copied_predictions(database_url: str, ls: httpx.Client) -> None:
    """Issue 36 against the real Label Studio: two Label Studio projects feed one annoplan project and a sync of
    one retracts nothing of the other's; a task deleted in Label Studio retracts its labels through the connected
    webhook (TASKS_DELETED); an annotation made from the judge's prediction is kept out of the labels, in the inbox."""
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as annoplan:
        pid = ok(annoplan.post("/projects", json={"name": "two", "labels": LABELS}))["id"]

        def current() -> dict[tuple[str, str], str]:
            rows = ok(annoplan.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
            return {(r["item"], r["rater"]): r["value"] for r in rows}

        me = f"ls-user-{ok(ls.get('/api/current-user/whoami'))['id']}"
        made = [
            ok(ls.post("/api/projects", json={"title": f"annoplan {side} {pid}", "label_config": LABEL_CONFIG}))["id"]
            for side in ("a", "b")
        ]
        try:
            tasks: dict[int, list[str]] = {}
            for lsp, choice in zip(made, ("Positive", "Negative"), strict=True):
                ok(ls.post(f"/api/projects/{lsp}/import", json=[{"text": f"{lsp} task {n}"} for n in range(2)]))
                tasks[lsp] = sorted(str(t["id"]) for t in ok(ls.get("/api/tasks", params={"project": lsp}))["tasks"])
                for task in tasks[lsp]:
                    ok(ls.post(f"/api/tasks/{task}/annotations", json={"result": sentiment(choice)}))
            for lsp in made:
                body = {"url": LS_URL, "project": lsp, "token": LS_TOKEN}
                ok(annoplan.post(f"/projects/{pid}/integrations/label-studio/sync", json=body))
            a, b = made
            assert {current()[(t, me)] for t in tasks[a]} == {"Positive"}  # b's sync kept a's labels
            assert {current()[(t, me)] for t in tasks[b]} == {"Negative"}
            again = ok(
                annoplan.post(
                    f"/projects/{pid}/integrations/label-studio/sync",
                    json={"url": LS_URL, "project": a, "token": LS_TOKEN},
                )
            )
            assert again["changes"]["retracted"] == 0 and all((t, me) in current() for t in tasks[b])

            body = {"url": LS_URL, "project": a, "token": LS_TOKEN, "webhook_url": server.base_url}
            ok(annoplan.post(f"/projects/{pid}/integrations/label-studio/connect", json=body))
            gone = tasks[a][0]
            ls.delete(f"/api/tasks/{gone}").raise_for_status()
            eventually(lambda: (gone, me) not in current(), "the deleted task's retraction (TASKS_DELETED)")
            assert (tasks[a][1], me) in current()

            kept = tasks[a][1]
            prediction = ok(
                ls.post(
                    "/api/predictions", json={"task": int(kept), "model_version": "j", "result": sentiment("Neutral")}
                )
            )
            copied = {"result": sentiment("Neutral"), "parent_prediction": prediction["id"]}
            ok(ls.post(f"/api/tasks/{kept}/annotations", json=copied))
            eventually(
                lambda: bool(ok(annoplan.get(f"/projects/{pid}/integrations/label-studio/issues"))["items"]),
                "the copied prediction kept in the inbox",
            )
            assert current()[(kept, me)] == "Positive"  # the copy changed no human label
            # the editor's copy marks its results origin "prediction"; once the prediction is deleted (a model
            # run replaced), Label Studio empties parent_prediction and the origin alone tells the copy
            ls.delete(f"/api/annotations/{ok(ls.get(f'/api/tasks/{kept}'))['annotations'][-1]['id']}")
            second = ok(
                ls.post(
                    "/api/predictions", json={"task": int(kept), "model_version": "j", "result": sentiment("Neutral")}
                )
            )
            marked = [{**sentiment("Neutral")[0], "origin": "prediction"}]
            copy2 = ok(
                ls.post(f"/api/tasks/{kept}/annotations", json={"result": marked, "parent_prediction": second["id"]})
            )
            ls.delete(f"/api/predictions/{second['id']}").raise_for_status()
            assert ok(ls.get(f"/api/annotations/{copy2['id']}"))["parent_prediction"] is None
            synced = ok(
                annoplan.post(
                    f"/projects/{pid}/integrations/label-studio/sync",
                    json={"url": LS_URL, "project": a, "token": LS_TOKEN},
                )
            )
            assert any(s.get("annotation") == copy2["id"] and "origin" in s["reason"] for s in synced["skipped"])
            assert current()[(kept, me)] == "Positive"
        finally:
            for lsp in made:
                ls.delete(f"/api/projects/{lsp}")


RUBRIC_CONFIG = (
    '<View><Text name="text" value="$text"/>'
    '<Choices name="tone" toName="text" choice="single"><Choice value="Positive"/><Choice value="Negative"/></Choices>'
    '<Choices name="truth" toName="text" choice="single"><Choice value="Positive"/><Choice value="Negative"/></Choices>'
    "</View>"
)


def test_rubric_and_two_annotations_of_one_annotator_deleted(database_url: str, ls: httpx.Client) -> None:
    """Issue 36 against the real Label Studio: a rubric, one webhook per criterion. One annotator annotates a
    task twice; deleting the newer annotation makes the older one's labels current at once under every
    criterion; deleting the older then retracts every criterion (each webhook delivers the deletion)."""
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as annoplan:
        criteria = ["tone", "truth"]
        pid = ok(annoplan.post("/projects", json={"name": "rubric", "labels": LABELS, "criteria": criteria}))["id"]
        pm = ok(annoplan.post(f"/projects/{pid}/keys", json={"role": "pm"}))["key"]
        me = f"ls-user-{ok(ls.get('/api/current-user/whoami'))['id']}"
        # Label Studio gives a delivery 1 s: warm the webhook path (imports, connections) first
        for criterion in criteria:
            ok(
                annoplan.post(
                    f"/projects/{pid}/webhooks/label-studio",
                    params={"criterion": criterion, "from_name": criterion},
                    json={"action": "PROJECT_UPDATED"},
                    headers={"X-Annoplan-Secret": pm},
                )
            )

        def labels() -> dict[str, str | None]:
            got = {}
            for criterion in criteria:
                rows = ok(annoplan.get(f"/projects/{pid}/labels", params={"criterion": criterion}))["items"]
                got[criterion] = next((r["value"] for r in rows if r["rater"] == me), None)
            return got

        lsp = ok(ls.post("/api/projects", json={"title": f"annoplan rubric {pid}", "label_config": RUBRIC_CONFIG}))[
            "id"
        ]
        try:
            for criterion in criteria:
                ok(
                    ls.post(
                        "/api/webhooks",
                        json={
                            "project": lsp,
                            "url": f"{server.base_url}/projects/{pid}/webhooks/label-studio"
                            f"?criterion={criterion}&from_name={criterion}",
                            "headers": {"X-Annoplan-Secret": pm},
                            "send_payload": True,
                            "send_for_all_actions": False,
                            "actions": ["ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED"],
                            "is_active": True,
                        },
                    )
                )
            ok(ls.post(f"/api/projects/{lsp}/import", json=[{"text": "rubric task"}]))
            (task,) = (t["id"] for t in ok(ls.get("/api/tasks", params={"project": lsp}))["tasks"])

            def rubric(tone: str, truth: str) -> dict:
                return {
                    "result": [
                        {"from_name": "tone", "to_name": "text", "type": "choices", "value": {"choices": [tone]}},
                        {"from_name": "truth", "to_name": "text", "type": "choices", "value": {"choices": [truth]}},
                    ]
                }

            older = ok(ls.post(f"/api/tasks/{task}/annotations", json=rubric("Positive", "Negative")))
            eventually(lambda: labels() == {"tone": "Positive", "truth": "Negative"}, "the first annotation")
            newer = ok(ls.post(f"/api/tasks/{task}/annotations", json=rubric("Negative", "Positive")))
            eventually(lambda: labels() == {"tone": "Negative", "truth": "Positive"}, "the second annotation")
            ls.delete(f"/api/annotations/{newer['id']}").raise_for_status()
            eventually(
                lambda: labels() == {"tone": "Positive", "truth": "Negative"}, "the older annotation current again"
            )
            ls.delete(f"/api/annotations/{older['id']}").raise_for_status()
            eventually(lambda: labels() == {"tone": None, "truth": None}, "every criterion retracted")
            # a sync of what is left in Label Studio (no annotation) agrees and changes nothing
            body = {"url": LS_URL, "project": lsp, "token": LS_TOKEN}
            for criterion in criteria:
                synced = ok(
                    annoplan.post(
                        f"/projects/{pid}/integrations/label-studio/sync",
                        json={**body, "criterion": criterion, "from_name": criterion},
                    )
                )
                assert synced["changes"] == {"added": 0, "updated": 0, "unchanged": 0, "retracted": 0}, synced
            assert ok(annoplan.get(f"/projects/{pid}/integrations/label-studio/issues"))["items"] == []
        finally:
            ls.delete(f"/api/projects/{lsp}")


def test_a_mapped_annotator_labels_count_for_the_batches_of_its_rater(database_url: str, ls: httpx.Client) -> None:
    """Issue 36 against the real Label Studio: connect maps this Label Studio user to the planned secondary
    h2 (by id, then again by the email Label Studio lists: no change); its annotation of a task of h2's batch
    arrives as h2's label and the batch counts it; h2's tab lists the batch."""
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as annoplan:
        pid = ok(annoplan.post("/projects", json={"name": "mapped", "labels": LABELS}))["id"]
        for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
            ok(annoplan.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}))
        ok(annoplan.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}", "text": f"t{i}"} for i in range(60)]))
        plan = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "m": 20, "seed": 1}
        ok(annoplan.post(f"/projects/{pid}/plan", json=plan))
        me = ok(ls.get("/api/current-user/whoami"))
        project = ok(ls.post("/api/projects", json={"title": f"annoplan mapped {pid}", "label_config": LABEL_CONFIG}))
        lsp = project["id"]
        try:
            batch = ok(annoplan.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 3}))
            ok(
                ls.post(
                    f"/api/projects/{lsp}/import",
                    json=ok(annoplan.get(f"/projects/{pid}/batches/{batch['id']}/label-studio")),
                )
            )
            body = {"url": LS_URL, "project": lsp, "token": LS_TOKEN, "webhook_url": server.base_url}
            first = ok(
                annoplan.post(
                    f"/projects/{pid}/integrations/label-studio/connect",
                    json={**body, "annotators": {str(me["id"]): "h2"}},
                )
            )
            (mapped,) = first["annotators"]
            assert (mapped["ls_user"], mapped["rater"]) == (me["id"], "h2")
            assert (mapped["email"] or "").casefold() == me["email"].casefold()
            again = ok(
                annoplan.post(
                    f"/projects/{pid}/integrations/label-studio/connect",
                    json={**body, "annotators": {me["email"]: "h2"}},
                )
            )
            assert len(again["changed"]) == 1 and again["annotators"] == first["annotators"]
            shown = ok(ls.get("/api/tasks", params={"project": lsp, "view": first["views"]["h2"]}))["tasks"]
            assert sorted(t["data"]["annoplan_item"] for t in shown) == sorted(batch["items"])
            ok(ls.post(f"/api/tasks/{shown[0]['id']}/annotations", json={"result": sentiment("Negative")}))
            eventually(
                lambda: ok(annoplan.get(f"/projects/{pid}/batches/{batch['id']}"))["labeled"] == 1,
                "h2's batch counting the mapped annotator's label",
            )
            labels = ok(annoplan.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
            item = shown[0]["data"]["annoplan_item"]
            assert [(r["item"], r["rater"]) for r in labels] == [(item, "h2")]
            # unmapped: the label moves back to the user's own rater, and a sync agrees
            unmapped = ok(annoplan.delete(f"/projects/{pid}/integrations/label-studio/annotators/{me['id']}"))
            assert unmapped["moved"] == 1 and unmapped["annotators"] == []
            labels = ok(annoplan.get(f"/projects/{pid}/labels", params={"limit": 1000}))["items"]
            assert [(r["item"], r["rater"], r["value"]) for r in labels] == [(item, f"ls-user-{me['id']}", "Negative")]
            synced = ok(
                annoplan.post(
                    f"/projects/{pid}/integrations/label-studio/sync",
                    json={"url": LS_URL, "project": lsp, "token": LS_TOKEN},
                )
            )
            assert synced["changes"] == {"added": 0, "updated": 0, "unchanged": 1, "retracted": 0}, synced
        finally:
            ls.delete(f"/api/projects/{lsp}")


PAIRWISE_CONFIG = (
    '<View><Header value="$prompt"/><Text name="left" value="$left"/><Text name="right" value="$right"/>'
    '<Pairwise name="pw" toName="left,right"/></View>'
)


def test_a_pairwise_project_reads_label_studios_pairwise_control(database_url: str, ls: httpx.Client) -> None:
    """Issue 36 against the real Label Studio: a Pairwise project connected to a pairwise annoplan project; the
    annotator's picks arrive by webhook as verdicts (the task shown BA swaps left and right), a judge's
    predictions arrive by sync with the task's shown order."""
    with LiveServer(database_url, ADMIN, outbound_allow_private=1) as server, server.client() as annoplan:
        pid = ok(annoplan.post("/projects", json={"name": "pairwise", "kind": "pairwise"}))["id"]
        me = f"ls-user-{ok(ls.get('/api/current-user/whoami'))['id']}"
        lsp = ok(ls.post("/api/projects", json={"title": f"annoplan pairwise {pid}", "label_config": PAIRWISE_CONFIG}))[
            "id"
        ]
        try:
            body = {"url": LS_URL, "project": lsp, "token": LS_TOKEN, "webhook_url": server.base_url}
            ok(annoplan.post(f"/projects/{pid}/integrations/label-studio/connect", json=body))
            shown = [
                {
                    "annoplan_item": "q1",
                    "prompt": "1 + 1?",
                    "left": "2",
                    "right": "3",
                    "system_a": "x",
                    "system_b": "y",
                },
                {
                    "annoplan_item": "q2",
                    "annoplan_order": "BA",
                    "prompt": "Red?",
                    "left": "blue",
                    "right": "red",
                    "system_a": "x",
                    "system_b": "y",
                },
            ]
            ok(ls.post(f"/api/projects/{lsp}/import", json=shown))
            tasks = sorted(ok(ls.get("/api/tasks", params={"project": lsp}))["tasks"], key=lambda t: t["id"])

            def pick(side: str) -> list[dict]:
                return [{"from_name": "pw", "to_name": "pw", "type": "pairwise", "value": {"selected": side}}]

            def labels() -> dict[tuple[str, str], tuple[str, str | None]]:
                rows = ok(annoplan.get(f"/projects/{pid}/labels", params={"limit": 100}))["items"]
                return {(r["item"], r["rater"]): (r["value"], r.get("order")) for r in rows}

            for task in tasks:
                ok(ls.post(f"/api/tasks/{task['id']}/annotations", json={"result": pick("left")}))
                ok(
                    ls.post(
                        "/api/predictions", json={"task": task["id"], "model_version": "j1", "result": pick("right")}
                    )
                )
            eventually(lambda: len(labels()) == 2, "both picks by webhook")
            assert labels() == {("q1", me): ("A", None), ("q2", me): ("B", None)}  # q2 is shown BA: left is B
            ok(
                annoplan.post(
                    f"/projects/{pid}/integrations/label-studio/sync",
                    json={"url": LS_URL, "project": lsp, "token": LS_TOKEN},
                )
            )
            assert {cell: v for cell, v in labels().items() if cell[1] == "j1"} == {
                ("q1", "j1"): ("B", "AB"),
                ("q2", "j1"): ("A", "BA"),
            }
        finally:
            ls.delete(f"/api/projects/{lsp}")
