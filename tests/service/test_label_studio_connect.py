"""`POST .../integrations/label-studio/connect` (issue 36) against a stand-in Label Studio on loopback:
what it changes, that a re-run changes only the webhook's secret, and that a config it cannot read,
predictions the user will not hide, or a Label Studio that fails part way leave no key behind.
The real Label Studio run is in tests/system/test_label_studio_live.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Header, HTTPException
from fastapi.testclient import TestClient

from tests.factories import create_project
from tests.live_server import InThreadApp

TOKEN = "ls-connect-token"
PAT = "eyJhbGciOiJIUzI1NiJ9.eyJ0b2tlbl90eXBlIjoicmVmcmVzaCJ9.c2lnbmF0dXJl"  # a JWT, as LS makes them
CHOICES = (
    '<View><Text name="text" value="$text"/>'
    '<Choices name="s" toName="text"><Choice value="pass"/><Choice value="fail"/></Choices></View>'
)
TEXTAREA = '<View><Text name="text" value="$text"/><TextArea name="why" toName="text"/></View>'


class StandIn(InThreadApp):
    """Label Studio's project, user list, webhook and Data Manager view endpoints for project 5."""

    def __init__(self) -> None:
        self.project: dict[str, Any] = {
            "id": 5,
            "label_config": CHOICES,
            "show_collab_predictions": True,
            "maximum_annotations": 1,
        }
        self.hooks: dict[int, dict[str, Any]] = {}
        self.views: dict[int, dict[str, Any]] = {}
        self.users = [{"id": 7, "email": "prim@example.com"}, {"id": 8, "email": "Ana@example.com"}, {"id": 9}]
        self.fail_views = False
        api = FastAPI()

        def auth(authorization: str | None) -> None:
            if authorization not in (f"Token {TOKEN}", f"Bearer access-for-{PAT}"):
                raise HTTPException(401)

        @api.post("/api/token/refresh/")
        def refresh(body: dict[str, Any]) -> dict[str, Any]:
            if body.get("refresh") != PAT:
                raise HTTPException(401)
            return {"access": f"access-for-{PAT}"}

        @api.get("/api/projects/{pid}")
        def project(pid: int, authorization: str | None = Header(None)) -> dict[str, Any]:
            auth(authorization)
            return self.project

        @api.patch("/api/projects/{pid}")
        def patch(pid: int, body: dict[str, Any], authorization: str | None = Header(None)) -> dict[str, Any]:
            auth(authorization)
            self.project.update(body)
            return self.project

        @api.get("/api/users/")
        def users(authorization: str | None = Header(None)) -> list[dict[str, Any]]:
            auth(authorization)
            return self.users

        @api.get("/api/webhooks")
        def hooks(project: int, authorization: str | None = Header(None)) -> list[dict[str, Any]]:
            auth(authorization)
            return list(self.hooks.values())

        @api.post("/api/webhooks", status_code=201)
        def hook(body: dict[str, Any], authorization: str | None = Header(None)) -> dict[str, Any]:
            auth(authorization)
            hid = len(self.hooks) + 1
            self.hooks[hid] = {**body, "id": hid}
            return self.hooks[hid]

        @api.patch("/api/webhooks/{hid}")
        def rehook(hid: int, body: dict[str, Any], authorization: str | None = Header(None)) -> dict[str, Any]:
            auth(authorization)
            self.hooks[hid].update(body)
            return self.hooks[hid]

        @api.get("/api/dm/views")
        def views(project: int, authorization: str | None = Header(None)) -> list[dict[str, Any]]:
            auth(authorization)
            return list(self.views.values())

        @api.post("/api/dm/views", status_code=201)
        def view(body: dict[str, Any], authorization: str | None = Header(None)) -> dict[str, Any]:
            auth(authorization)
            if self.fail_views:
                raise HTTPException(500)
            vid = len(self.views) + 1
            self.views[vid] = {**body, "id": vid}
            return self.views[vid]

        super().__init__(api)


@pytest.fixture
def settings(settings: Any) -> Any:
    return settings.model_copy(update={"outbound_allow_private": True})  # the stand-in is on loopback


@pytest.fixture
def ls() -> Iterator[StandIn]:
    with StandIn() as stand_in:
        yield stand_in


def connect(client: TestClient, pid: str, ls: StandIn, **extra: Any) -> Any:
    body = {"url": ls.url, "project": 5, "token": TOKEN, "webhook_url": "https://annoplan.example.org/", **extra}
    return client.post(f"/projects/{pid}/integrations/label-studio/connect", json=body)


def webhook_keys(client: TestClient) -> list[dict[str, Any]]:
    keys: list[dict[str, Any]] = client.get("/keys", params={"include_revoked": True}).json()
    return [k for k in keys if (k.get("name") or "").startswith("label-studio webhook")]


def test_connect_sets_everything_up_once_and_a_rerun_only_rotates_the_secret(client: TestClient, ls: StandIn) -> None:
    pid = create_project(client, items=[f"i{i}" for i in range(40)])
    r = connect(client, pid, ls)
    assert r.status_code == 200, r.text
    first = r.json()
    assert ls.project["show_collab_predictions"] is False and ls.project["maximum_annotations"] == 3  # prim, h2, h3
    (hook,) = ls.hooks.values()
    assert hook["url"] == f"https://annoplan.example.org/projects/{pid}/webhooks/label-studio"
    assert sorted(first["views"]) == ["h2", "h3"] and len(first["changed"]) == 5
    filters = {v["data"]["title"]: v["data"]["filters"]["items"][0] for v in ls.views.values()}
    assert filters["annoplan: h2"]["filter"] == "filter:tasks:data.annoplan_rater"
    assert filters["annoplan: h2"]["value"] == "h2"
    # the webhook's secret is a working pm key of this project
    secret = hook["headers"]["X-Annoplan-Secret"]
    got = client.post(
        f"/projects/{pid}/webhooks/label-studio",
        json={"action": "PROJECT_UPDATED"},
        headers={"X-Annoplan-Secret": secret},
    )
    assert got.status_code == 200, got.text

    again = connect(client, pid, ls).json()
    assert len(again["changed"]) == 1 and "new secret" in again["changed"][0]
    assert again["views"] == first["views"] and len(ls.hooks) == 1 and len(ls.views) == 2
    revoked = {k["id"]: k["revoked_at"] for k in webhook_keys(client)}
    assert revoked[first["key_id"]] is not None and revoked[again["key_id"]] is None
    stale = client.post(
        f"/projects/{pid}/webhooks/label-studio",
        json={"action": "PROJECT_UPDATED"},
        headers={"X-Annoplan-Secret": secret},
    )
    assert stale.status_code == 401


def test_a_batch_exported_for_a_secondary_names_it_for_its_tab_and_is_no_feature(client: TestClient) -> None:
    pid = create_project(client, items=[f"i{i}" for i in range(40)])
    plan = client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "m": 10, "seed": 1})
    assert plan.status_code == 201, plan.text
    batch = client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 3}).json()
    tasks = client.get(f"/projects/{pid}/batches/{batch['id']}/label-studio").json()
    assert {t["data"]["annoplan_rater"] for t in tasks} == {"h2"}
    for task in tasks:  # the task coming back (an import of the export) leaves the item's features alone
        task["id"], task["annotations"] = 100 + tasks.index(task), []
    assert client.post(f"/projects/{pid}/import/label-studio", json=tasks).status_code == 200
    items = client.get(f"/projects/{pid}/items", params={"limit": 100}).json()["items"]
    assert all("annoplan_rater" not in item["features"] for item in items)


@pytest.mark.parametrize(
    ("change", "extra", "status", "code"),
    [
        ({"label_config": TEXTAREA}, {}, 422, "bad_label_config"),
        ({}, {"hide_predictions": False}, 409, "predictions_shown"),
        ({}, {"webhook_url": "ftp://x"}, 422, None),
    ],
)
def test_what_connect_refuses_changes_nothing(
    client: TestClient, ls: StandIn, change: dict[str, Any], extra: dict[str, Any], status: int, code: str | None
) -> None:
    pid = create_project(client, items=["a", "b"])
    ls.project.update(change)
    before = dict(ls.project)
    r = connect(client, pid, ls, **extra)
    assert r.status_code == status, r.text
    if code:
        assert r.json()["error"] == code
    assert ls.project == before and not ls.hooks and not ls.views and webhook_keys(client) == []


def test_a_label_studio_failing_part_way_leaves_no_working_key(client: TestClient, ls: StandIn) -> None:
    pid = create_project(client, items=["a", "b"])
    ls.fail_views = True
    r = connect(client, pid, ls)
    assert r.status_code == 502 and r.json()["error"] == "label_studio_unavailable"
    assert [k["revoked_at"] is not None for k in webhook_keys(client)] == [True]


def mapped(client: TestClient, pid: str) -> list[dict[str, Any]]:
    annotators: list[dict[str, Any]] = client.get(f"/projects/{pid}/integrations/label-studio/annotators").json()[
        "annotators"
    ]
    return annotators


def test_connect_maps_annotators_by_id_and_email_and_gives_each_mapped_rater_a_tab(
    client: TestClient, ls: StandIn
) -> None:
    """LS user 7 -> the primary (by id), ana@ (user 8, by the email Label Studio lists) -> h2: both mapped, the
    primary gets a tab of its batches beside the secondaries'; a webhook from user 8 then labels as h2."""
    pid = create_project(client, items=[f"i{i}" for i in range(40)])
    r = connect(client, pid, ls, annotators={"7": "prim", "ana@EXAMPLE.com": "h2"})
    assert r.status_code == 200, r.text
    done = r.json()
    assert [(a["ls_user"], a["rater"]) for a in done["annotators"]] == [(7, "prim"), (8, "h2")]
    assert mapped(client, pid) == done["annotators"] and done["moved"] == 0
    assert sorted(done["views"]) == ["h2", "h3", "prim"] and ls.project["maximum_annotations"] == 3
    assert {v["data"]["title"] for v in ls.views.values()} == {"annoplan: h2", "annoplan: h3", "annoplan: prim"}
    assert sum("Label Studio user" in c for c in done["changed"]) == 2
    (hook,) = ls.hooks.values()
    body = {
        "action": "ANNOTATION_CREATED",
        "annotation": {
            "id": 1,
            "completed_by": 8,
            "task": 3,
            "result": [{"from_name": "s", "type": "choices", "value": {"choices": ["pass"]}}],
        },
        "task": {"id": 3, "data": {"text": "x", "annoplan_item": "i3"}},
        "project": {"id": 5, "label_config": CHOICES},
    }
    got = client.post(
        f"/projects/{pid}/webhooks/label-studio",
        json=body,
        headers={"X-Annoplan-Secret": hook["headers"]["X-Annoplan-Secret"]},
    )
    assert got.status_code == 200 and got.json()["rater"] == "h2", got.text
    again = connect(client, pid, ls, annotators={"7": "prim"}).json()
    assert len(again["changed"]) == 1 and again["views"] == done["views"]  # the secret only; mappings stay


@pytest.mark.parametrize(
    ("annotators", "code"),
    [
        ({"99": "h2"}, "unknown_ls_user"),  # Label Studio lists no user 99
        ({"nobody@example.com": "h2"}, "unknown_ls_user"),
        ({"7": "judge"}, "judge_rater"),
        ({"7": "ann-9"}, "unknown_rater"),
    ],
)
def test_connect_refuses_an_unknown_user_or_rater_before_changing_anything(
    client: TestClient, ls: StandIn, annotators: dict[str, str], code: str
) -> None:
    pid = create_project(client, items=["a", "b"])
    before = dict(ls.project)
    r = connect(client, pid, ls, annotators=annotators)
    assert r.status_code == 422 and r.json()["error"] == code, r.text
    assert ls.project == before and not ls.hooks and not ls.views and webhook_keys(client) == []
    assert mapped(client, pid) == []


def test_cli_connect_prints_what_it_changed(database_url: str, ls: StandIn) -> None:
    """`annoplan connect label-studio` against a live server: the first run lists each change and the
    secondaries' tabs; a rerun says only that the secret was rotated; a missing token is a usage error."""
    from typer.testing import CliRunner

    from service.cli import app as cli
    from tests.live_server import LiveServer

    admin = "ak_test_connect_admin"
    runner = CliRunner()
    with LiveServer(database_url, admin, outbound_allow_private=1) as server, server.client() as c:
        pid = create_project(c, items=[f"i{i}" for i in range(40)])
        args = ["connect", "label-studio", "--project", pid, "--ls-project", "5", "--url", server.base_url]
        args += ["--webhook-url", "https://annoplan.example.org", "--ls-url", ls.url]
        env = {"ANNOPLAN_KEY": admin, "LABEL_STUDIO_TOKEN": TOKEN}
        first = runner.invoke(cli, args, env=env)
        assert first.exit_code == 0, first.output
        assert first.output.count("\n- ") + first.output.startswith("- ") == 5
        assert "'annoplan: h2'" in first.output and "'annoplan: h3'" in first.output
        assert ls.project["show_collab_predictions"] is False
        again = runner.invoke(cli, args, env=env)
        assert again.exit_code == 0 and again.output.startswith("- ") and "new secret" in again.output
        assert again.output.count("\n- ") == 0
        ls.project["show_collab_predictions"] = True  # someone turned them back on in Label Studio
        refused = runner.invoke(cli, [*args, "--no-hide-predictions"], env=env)
        assert refused.exit_code == 1 and "409" in refused.output
        missing = runner.invoke(cli, args, env={"ANNOPLAN_KEY": admin, "LABEL_STUDIO_TOKEN": ""})
        assert missing.exit_code != 0 and "--ls-token" in missing.output
        named = runner.invoke(cli, [*args, "--annotator", "7=prim", "--annotator", "ana@example.com=h2"], env=env)
        assert named.exit_code == 0, named.output
        assert "Label Studio user 7 is rater prim" in named.output and "'annoplan: prim'" in named.output
        assert "(Label Studio user 8, ana@example.com)" in named.output
        bad = runner.invoke(cli, [*args, "--annotator", "7"], env=env)
        assert bad.exit_code != 0 and "USER=RATER" in bad.output


def test_a_personal_access_token_is_exchanged_and_a_misused_one_says_which_type(
    client: TestClient, ls: StandIn
) -> None:
    """token_type Personal exchanges the token at /api/token/refresh and calls with the access token; the
    same token sent as a legacy token, or a wrong personal one, is a 502 naming what to do, nothing kept."""
    pid = create_project(client, items=[f"i{i}" for i in range(40)])
    wrong = connect(client, pid, ls, token=PAT)
    assert wrong.status_code == 502 and "token_type Personal" in wrong.json()["detail"], wrong.text
    stale = connect(client, pid, ls, token=PAT[:-2], token_type="Personal")
    assert stale.status_code == 502 and "not accepted" in stale.json()["detail"], stale.text
    assert ls.hooks == {} and ls.project["maximum_annotations"] == 1 and webhook_keys(client) == []
    done = connect(client, pid, ls, token=PAT, token_type="Personal")
    assert done.status_code == 200, done.text
    assert len(ls.hooks) == 1 and ls.project["show_collab_predictions"] is False
