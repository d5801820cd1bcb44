"""Access control (issue 8): one table of every endpoint x every caller -> the expected status,
blind annotation (annotators never see other raters' labels, the judge's labels or per-item
agreement), aggregates-only viewers, revocation at once, and keys stored only as hashes.

Expected statuses follow README's "Roles and keys": out-of-scope project -> 404,
role not allowed on a visible project -> 403, missing or revoked key -> 401. Where a role's reach is
loose the stricter reading is taken and named in the row's comment.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, text

from service.app import create_app
from service.core.db import make_engine
from service.core.settings import Settings
from service.data.keys import key_hash
from service.data.models import Base
from tests.conftest import ADMIN_KEY, fresh_database

CALLERS = ("admin", "pm", "annotator", "viewer", "no_key", "revoked", "other_project")
"""Columns of the matrix: the four roles on project A (the annotator bound to rater ANN),
no Authorization header, a revoked PM key of A, and a PM key of project B."""

# Distinctive ids, so a body leaking them is found by a substring search.
JUDGE, PRIMARY, ANN, OTHER_HUMAN, IDLE_HUMAN = (
    "rtr-judge-j1",
    "rtr-primary-p1",
    "rtr-annot-a1",
    "rtr-human-h9",
    "rtr-human-h8",
)
NAMES = {
    JUDGE: "Name Of Judge",
    PRIMARY: "Name Of Primary",
    ANN: "Name Of Annotator",
    OTHER_HUMAN: "Name Of Other",
    IDLE_HUMAN: "Name Of Idle",
}
N_ITEMS = 60
ITEMS = [f"itm-{i:03d}" for i in range(N_ITEMS)]
AGREEMENT = {
    "labels": ["yes", "no"],
    "matrix": [["yes", "yes"], ["no", "yes"], ["no", "no"]],
    "n_resamples": 20,
    "seed": 1,
}
PLAN = {"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 7, "m": 40}
SMALL_SIMULATION = {"trials": 1, "n_items": 20, "rho": 0.5, "design": "strat", "coefficient": "po", "seed": 3}

# --------------------------------------------------------------------------- the matrix
# One row per endpoint: (method, path template, then one status per caller in CALLERS order).
#   admin  pm  annotator  viewer  no_key  revoked  other_project
MATRIX: list[tuple[str, str, int, int, int, int, int, int, int]] = [
    ("GET", "/healthz", 200, 200, 200, 200, 200, 200, 200),
    ("GET", "/healthz/queue", 200, 200, 200, 200, 200, 200, 200),
    ("GET", "/livez", 200, 200, 200, 200, 200, 200, 200),
    ("GET", "/readyz", 200, 200, 200, 200, 200, 200, 200),
    ("POST", "/agreement", 200, 200, 200, 200, 401, 401, 200),
    ("POST", "/pairwise", 200, 200, 200, 200, 401, 401, 200),  # stateless, as /agreement
    ("POST", "/projects", 201, 403, 403, 403, 401, 401, 403),
    ("GET", "/projects", 200, 200, 403, 403, 401, 401, 200),  # pm: its own project only (checked below)
    ("GET", "/projects/{pid}", 200, 200, 403, 403, 401, 401, 404),
    ("PATCH", "/projects/{pid}", 200, 200, 403, 403, 401, 401, 404),
    ("GET", "/keys", 200, 403, 403, 403, 401, 401, 403),
    ("DELETE", "/keys/{kid}", 204, 403, 403, 403, 401, 401, 403),
    ("POST", "/projects/{pid}/keys", 201, 403, 403, 403, 401, 401, 404),
    ("DELETE", "/projects/{pid}/keys/{kid}", 204, 403, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/items", 200, 200, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/items", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/raters", 201, 201, 403, 403, 401, 401, 404),
    ("PATCH", "/projects/{pid}/raters/{rid}", 200, 200, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/raters", 200, 200, 403, 200, 401, 401, 404),  # viewer: no names (checked below)
    # judge versions: added by PMs; the versions, their comparison and the drift watch are aggregates
    ("POST", "/projects/{pid}/raters/{rid}/versions", 201, 201, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/raters/{rid}/versions", 200, 200, 403, 200, 401, 401, 404),
    ("GET", "/projects/{pid}/raters/{rid}/versions/compare", 200, 200, 403, 200, 401, 401, 404),
    ("GET", "/projects/{pid}/raters/{rid}/drift", 200, 200, 403, 200, 401, 401, 404),
    ("PUT", "/projects/{pid}/raters/{rid}/drift-watch", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/raters/{rid}/anchor-panel", 201, 201, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/raters/{rid}/anchor-panel", 200, 200, 403, 403, 401, 401, 404),  # names items
    ("POST", "/projects/{pid}/labels", 200, 200, 200, 403, 401, 401, 404),  # annotator: own rater only
    ("POST", "/projects/{pid}/labels/retractions", 200, 200, 200, 403, 401, 401, 404),  # annotator: own rater only
    (
        "GET",
        "/projects/{pid}/labels",
        200,
        200,
        403,
        403,
        401,
        401,
        404,
    ),  # strict: annotator may not export even its own
    ("POST", "/projects/{pid}/plan", 201, 201, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/plan", 200, 200, 403, 200, 401, 401, 404),
    ("POST", "/projects/{pid}/simulate", 200, 200, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/simulations/{sim_id}", 200, 200, 403, 403, 401, 401, 404),
    ("DELETE", "/projects/{pid}/simulations/{sim_id}", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/batches", 200, 200, 200, 403, 401, 401, 404),  # admin: "everything"
    ("GET", "/projects/{pid}/batches/{bid}", 200, 200, 200, 403, 401, 401, 404),  # the batch is ANN's
    ("POST", "/projects/{pid}/batches/{bid}/release", 200, 200, 200, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/reliability", 200, 200, 403, 200, 401, 401, 404),
    ("POST", "/projects/{pid}/selective", 200, 200, 403, 403, 401, 401, 404),  # calibrates; may append to lists
    ("GET", "/projects/{pid}/ranking", 200, 200, 403, 200, 401, 401, 404),
    ("GET", "/projects/{pid}/report", 200, 200, 403, 200, 401, 401, 404),
    ("GET", "/projects/{pid}/batches/{bid}/label-studio", 200, 200, 200, 403, 401, 401, 404),  # ANN's batch
    ("POST", "/projects/{pid}/import/label-studio", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/import/generic", 200, 200, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/export/generic", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/import/promptfoo", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/import/inspect", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/import/langfuse", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/import/langsmith", 200, 200, 403, 403, 401, 401, 404),
    # a shared-secret webhook: any key but an admin or pm key of the project is a 401 (nothing revealed)
    ("POST", "/projects/{pid}/webhooks/label-studio", 200, 200, 401, 401, 401, 401, 401),
    ("GET", "/projects/{pid}/integrations/label-studio/issues", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/integrations/label-studio/issues/replay", 200, 200, 403, 403, 401, 401, 404),
    # the role is checked before Label Studio is called: at an unreachable address, admin and pm get the 502
    ("POST", "/projects/{pid}/integrations/label-studio/sync", 502, 502, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/integrations/label-studio/connect", 502, 502, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/integrations/label-studio/annotators", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/integrations/label-studio/annotators", 200, 200, 403, 403, 401, 401, 404),
    # the role is checked before the mapping is looked up: user 42 is never mapped, so admin and pm get the 404
    ("DELETE", "/projects/{pid}/integrations/label-studio/annotators/{ls_user}", 404, 404, 403, 403, 401, 401, 404),
    # the dashboard page: HTML, a redirect to /login without a (valid) key
    ("GET", "/projects/{pid}/dashboard", 200, 200, 403, 200, 303, 303, 404),
    ("GET", "/dashboard", 200, 200, 403, 200, 303, 303, 200),  # other_project: its own project only
    ("GET", "/projects/{pid}/annotator", 403, 403, 200, 403, 303, 303, 404),  # an annotator's own page
    ("GET", "/projects/{pid}/dashboard/charts/{chart_id}.csv", 200, 200, 403, 200, 401, 401, 404),
    ("GET", "/projects/{pid}/dashboard/charts/{chart_id}.svg", 200, 200, 403, 200, 401, 401, 404),
    # outbound webhooks: PMs only; certificates: issued by PMs, read by viewers, verified with any key
    ("POST", "/projects/{pid}/webhooks", 201, 201, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/webhooks", 200, 200, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/webhooks/{wid}", 200, 200, 403, 403, 401, 401, 404),
    ("DELETE", "/projects/{pid}/webhooks/{wid}", 204, 204, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/webhooks/{wid}/deliveries", 200, 200, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/webhooks/{wid}/deliveries/{did}/redeliver", 202, 202, 403, 403, 401, 401, 404),
    ("POST", "/projects/{pid}/certificates", 201, 201, 403, 403, 401, 401, 404),
    ("GET", "/projects/{pid}/certificates", 200, 200, 403, 200, 401, 401, 404),
    ("GET", "/projects/{pid}/certificates/{cid}", 200, 200, 403, 200, 401, 401, 404),
    ("POST", "/certificates/verify", 200, 200, 200, 200, 401, 401, 200),
    ("GET", "/glossary", 200, 200, 200, 200, 200, 200, 200),  # public: words in plain language, no project data
    ("GET", "/login", 200, 200, 200, 200, 200, 200, 200),
    ("POST", "/login", 303, 303, 303, 303, 401, 401, 303),  # the caller's key posted in the form
    ("POST", "/logout", 303, 303, 303, 303, 303, 303, 303),  # no login cookie: nothing to end, to /login
]


@dataclass
class World:
    """Project A (four raters, items, labels, a plan, a simulation job) and project B, with keys."""

    client: TestClient
    pid: str
    other_pid: str
    keys: dict[str, str | None] = field(default_factory=dict)
    sim_id: str = ""
    counter: Iterator[int] = field(default_factory=itertools.count)

    def admin(self, method: str, path: str, **kw: Any) -> Any:
        r = self.client.request(method, path, headers={"Authorization": f"Bearer {ADMIN_KEY}"}, **kw)
        assert r.status_code < 300, r.text
        return r.json() if r.content else None

    def key(self, pid: str, role: str, rater: str | None = None) -> tuple[str, str]:
        body = {"role": role, **({"rater": rater} if rater else {})}
        created = self.admin("POST", f"/projects/{pid}/keys", json=body)
        return created["id"], created["key"]

    def fresh(self, prefix: str) -> str:
        return f"{prefix}-{next(self.counter)}"

    def call(self, caller: str, method: str, path: str, **kw: Any) -> Any:
        secret = self.keys[caller]
        headers = {**({"Authorization": f"Bearer {secret}"} if secret else {}), **kw.pop("headers", {})}
        try:
            return self.client.request(method, path, headers=headers, follow_redirects=False, **kw)
        finally:
            self.client.cookies.clear()  # a login cookie must not authenticate the next caller


@pytest.fixture(scope="module")
def module_url(template_url: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    return fresh_database(template_url, tmp_path_factory.mktemp("authz"))


@pytest.fixture(scope="module")
def world(module_url: str) -> Iterator[World]:
    settings = Settings(
        database_url=module_url,
        admin_key=ADMIN_KEY,
        bootstrap_resamples=20,
        simulation_sync_limit=1_000,
        webhook_sender=False,
        webhook_allow_private=True,
        outbound_allow_private=True,  # the sync row calls an unserved loopback port: 502
    )
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        w = World(client, "", "")
        w.pid = w.admin("POST", "/projects", json={"name": "A", "labels": ["pass", "fail"]})["id"]
        w.other_pid = w.admin("POST", "/projects", json={"name": "B", "labels": ["pass", "fail"]})["id"]
        kinds = [(JUDGE, "judge"), (PRIMARY, "primary"), (ANN, "human"), (OTHER_HUMAN, "human"), (IDLE_HUMAN, "human")]
        for ext, kind in kinds:
            w.admin("POST", f"/projects/{w.pid}/raters", json={"external_id": ext, "kind": kind, "name": NAMES[ext]})
        w.admin("POST", f"/projects/{w.other_pid}/raters", json={"external_id": "b-human", "kind": "human"})
        w.admin("POST", f"/projects/{w.pid}/items", json=[{"external_id": i} for i in ITEMS])
        w.admin("POST", f"/projects/{w.other_pid}/items", json=[{"external_id": "b-item"}])
        rows = [
            {"item": i, "rater": r, "value": "pass" if (k + j) % 3 else "fail"}
            for k, i in enumerate(ITEMS)
            for j, r in enumerate((JUDGE, PRIMARY, OTHER_HUMAN))
        ]
        w.admin("POST", f"/projects/{w.pid}/labels", json=rows)
        w.admin("POST", f"/projects/{w.pid}/plan", json=PLAN)
        queued = w.client.post(
            f"/projects/{w.pid}/simulate",
            json={**SMALL_SIMULATION, "trials": 30},
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        )
        assert queued.status_code == 202, queued.text
        w.sim_id = queued.json()["id"]
        revoked_id, revoked = w.key(w.pid, "pm")
        w.admin("DELETE", f"/projects/{w.pid}/keys/{revoked_id}")
        w.keys = {
            "admin": ADMIN_KEY,
            "pm": w.key(w.pid, "pm")[1],
            "annotator": w.key(w.pid, "annotator", ANN)[1],
            "viewer": w.key(w.pid, "viewer")[1],
            "no_key": None,
            "revoked": revoked,
            "other_project": w.key(w.other_pid, "pm")[1],
        }
        yield w


# --------------------------------------------------------------------------- one request per row
# Each builder returns (path params, request kwargs) for one call; writes use fresh names so the
# rows do not depend on the order they run in.

Request = tuple[dict[str, str], dict[str, Any]]


def _label_rows(w: World, caller: str) -> Request:
    return {}, {"json": [{"item": ITEMS[next(w.counter) % N_ITEMS], "rater": ANN, "value": "pass"}]}


def _batch_body(w: World, caller: str) -> Request:
    return {}, {"json": {"size": 1} if caller == "annotator" else {"size": 1, "rater": ANN}}


def _ann_batch(w: World, caller: str) -> Request:
    """A fresh one-item batch of ANN's (so 'that annotator' is the annotator column)."""
    b = w.admin("POST", f"/projects/{w.pid}/batches", json={"rater": ANN, "size": 1})
    assert b["id"], b
    return {"bid": b["id"]}, {}


def _version_pair(w: World, caller: str) -> Request:
    """The judge against a fresh version of its own (no shared item: an undefined comparison, still a 200)."""
    made = w.admin("POST", f"/projects/{w.pid}/raters/{JUDGE}/versions", json={"name": w.fresh("cmp")})
    return {"rid": JUDGE}, {"params": {"old": JUDGE, "new": made["name"]}}


def _anchor_judge(w: World, caller: str, *, frozen: bool = False) -> Request:
    """A fresh judge labelling every item (so each call can freeze its own panel); ``frozen``: with one."""
    judge = w.fresh("anchored")
    w.admin("POST", f"/projects/{w.pid}/raters", json={"external_id": judge, "kind": "judge"})
    rows = [{"item": i, "rater": judge, "value": "pass" if k % 2 else "fail"} for k, i in enumerate(ITEMS)]
    w.admin("POST", f"/projects/{w.pid}/labels", json=rows)
    body = {"drop": 0.3, "discordance": 0.5, "seed": 1}  # Connor's n = 42 of the 60 shared items
    if frozen:
        w.admin("POST", f"/projects/{w.pid}/raters/{judge}/anchor-panel", json=body)
    return {"rid": judge}, {} if frozen else {"json": body}


def _login_form(w: World, caller: str) -> Request:
    token = re.search(r'name="csrf" value="([^"]+)"', w.client.get("/login").text).group(1)  # sets the cookie too
    form = {
        "content": f"key={w.keys[caller] or ''}&csrf={token}",
        "headers": {"Content-Type": "application/x-www-form-urlencoded"},
    }
    return {}, form


def _throwaway_key(w: World, caller: str) -> Request:
    return {"kid": w.key(w.pid, "viewer")[0]}, {}


def _webhook(w: World, caller: str) -> Request:
    body = {"url": "http://127.0.0.1:9/h", "events": ["plan.created"]}
    hook = w.admin("POST", f"/projects/{w.pid}/webhooks", json=body)
    return {"wid": hook["id"]}, {}


def _delivery(w: World, caller: str) -> Request:
    params, _ = _webhook(w, caller)
    w.admin("POST", f"/projects/{w.pid}/plan", json=PLAN)
    (delivery,) = w.admin("GET", f"/projects/{w.pid}/webhooks/{params['wid']}/deliveries")["items"]
    return {**params, "did": str(delivery["id"])}, {}


def _certificate(w: World, caller: str) -> Request:
    made = w.admin("POST", f"/projects/{w.pid}/certificates", json={"seed": next(w.counter), "n_resamples": 10})
    return {"cid": made["predicate"]["certificate"]["id"]}, {}


def _verification(w: World, caller: str) -> Request:
    made = w.admin("POST", f"/projects/{w.pid}/certificates", json={"n_resamples": 10})
    labels = w.admin("GET", f"/projects/{w.pid}/labels", params={"limit": 1000})["items"]
    return {}, {"json": {"certificate": made, "labels": labels}}


def _queued_simulation(w: World, caller: str) -> Request:
    """A queued job row of its own for each caller to cancel (as another server would hold it)."""
    from service.core.db import session_scope
    from service.data.models import Simulation, new_public_id

    held = w.admin("GET", f"/projects/{w.pid}/simulations/{w.sim_id}")
    sim_id = new_public_id("sim")
    with session_scope(w.client.app.state.sessions, write=True) as session:
        params = {"settings": held["settings"]}
        session.add(Simulation(id=sim_id, project_id=w.pid, status="queued", done=0, total=1, params=params))
    return {"sim_id": sim_id}, {}


BUILDERS: dict[tuple[str, str], Callable[[World, str], Request]] = {
    ("DELETE", "/projects/{pid}/simulations/{sim_id}"): _queued_simulation,
    ("POST", "/projects/{pid}/webhooks"): lambda w, c: (
        {},
        {"json": {"url": "http://127.0.0.1:9/h", "events": ["decision.changed"]}},
    ),
    ("GET", "/projects/{pid}/webhooks/{wid}"): _webhook,
    ("DELETE", "/projects/{pid}/webhooks/{wid}"): _webhook,
    ("GET", "/projects/{pid}/webhooks/{wid}/deliveries"): _webhook,
    ("POST", "/projects/{pid}/webhooks/{wid}/deliveries/{did}/redeliver"): _delivery,
    ("POST", "/projects/{pid}/certificates"): lambda w, c: ({}, {"json": {"seed": next(w.counter), "n_resamples": 10}}),
    ("GET", "/projects/{pid}/certificates/{cid}"): _certificate,
    ("POST", "/certificates/verify"): _verification,
    ("POST", "/agreement"): lambda w, c: ({}, {"json": AGREEMENT}),
    ("POST", "/pairwise"): lambda w, c: ({}, {"json": {"verdicts": [{"item": "q", "order": "AB", "verdict": "A"}]}}),
    ("POST", "/projects"): lambda w, c: ({}, {"json": {"name": w.fresh("p"), "labels": ["x", "y"]}}),
    ("PATCH", "/projects/{pid}"): lambda w, c: ({}, {"json": {"name": "A"}}),
    ("POST", "/projects/{pid}/keys"): lambda w, c: ({}, {"json": {"role": "viewer"}}),
    ("DELETE", "/projects/{pid}/keys/{kid}"): _throwaway_key,
    ("DELETE", "/keys/{kid}"): _throwaway_key,
    ("POST", "/projects/{pid}/items"): lambda w, c: ({}, {"json": [{"external_id": w.fresh("extra-item")}]}),
    ("POST", "/projects/{pid}/raters"): lambda w, c: (
        {},
        {"json": {"external_id": w.fresh("extra-rater"), "kind": "human"}},
    ),
    ("POST", "/projects/{pid}/labels"): _label_rows,
    ("POST", "/projects/{pid}/labels/retractions"): lambda w, c: (
        {},
        {"json": [{"item": ITEMS[next(w.counter) % N_ITEMS], "rater": ANN}]},
    ),
    ("POST", "/projects/{pid}/raters/{rid}/versions"): lambda w, c: ({"rid": JUDGE}, {"json": {"name": w.fresh("v")}}),
    ("GET", "/projects/{pid}/raters/{rid}/versions"): lambda w, c: ({"rid": JUDGE}, {}),
    ("GET", "/projects/{pid}/raters/{rid}/versions/compare"): _version_pair,
    ("GET", "/projects/{pid}/raters/{rid}/drift"): lambda w, c: ({"rid": JUDGE}, {"params": {"baseline": 0.8}}),
    ("PUT", "/projects/{pid}/raters/{rid}/drift-watch"): lambda w, c: ({"rid": JUDGE}, {"json": {"baseline": 0.8}}),
    ("POST", "/projects/{pid}/raters/{rid}/anchor-panel"): _anchor_judge,
    ("GET", "/projects/{pid}/raters/{rid}/anchor-panel"): lambda w, c: _anchor_judge(w, c, frozen=True),
    ("POST", "/projects/{pid}/plan"): lambda w, c: ({}, {"json": PLAN}),
    ("POST", "/projects/{pid}/selective"): lambda w, c: ({}, {"json": {"alpha": 0.1, "delta": 0.1}}),
    ("POST", "/projects/{pid}/simulate"): lambda w, c: ({}, {"json": SMALL_SIMULATION}),
    ("GET", "/projects/{pid}/simulations/{sim_id}"): lambda w, c: ({"sim_id": w.sim_id}, {}),
    ("POST", "/projects/{pid}/batches"): _batch_body,
    ("GET", "/projects/{pid}/batches/{bid}"): _ann_batch,
    ("POST", "/projects/{pid}/batches/{bid}/release"): _ann_batch,
    ("GET", "/projects/{pid}/batches/{bid}/label-studio"): _ann_batch,
    ("POST", "/projects/{pid}/import/label-studio"): lambda w, c: (
        {},
        {"json": [{"id": 900_000 + next(w.counter), "data": {"text": "imported"}}]},
    ),
    ("POST", "/projects/{pid}/webhooks/label-studio"): lambda w, c: ({}, {"json": {"action": "PROJECT_UPDATED"}}),
    ("POST", "/projects/{pid}/import/generic"): lambda w, c: (
        {},
        {"json": [{"item": w.fresh("generic-item"), "rater": JUDGE, "kind": "judge", "value": "pass"}]},
    ),
    # empty files of each tool: the access check, not the reading, is under test here
    ("POST", "/projects/{pid}/import/promptfoo"): lambda w, c: ({}, {"json": {"results": {"results": []}}}),
    ("POST", "/projects/{pid}/import/inspect"): lambda w, c: ({}, {"json": {"samples": []}}),
    ("POST", "/projects/{pid}/import/langfuse"): lambda w, c: ({}, {"json": {"data": []}}),
    ("POST", "/projects/{pid}/import/langsmith"): lambda w, c: ({}, {"json": []}),
    ("PATCH", "/projects/{pid}/raters/{rid}"): lambda w, c: (
        {"rid": IDLE_HUMAN},
        {"json": {"name": NAMES[IDLE_HUMAN]}},
    ),
    ("POST", "/projects/{pid}/integrations/label-studio/sync"): lambda w, c: (
        {},
        {"json": {"url": "http://127.0.0.1:9", "project": 1, "token": "t"}},
    ),
    ("POST", "/projects/{pid}/integrations/label-studio/connect"): lambda w, c: (
        {},
        {"json": {"url": "http://127.0.0.1:9", "project": 1, "token": "t", "webhook_url": "http://annoplan.test"}},
    ),
    ("POST", "/projects/{pid}/integrations/label-studio/annotators"): lambda w, c: (
        {},
        {"json": {"annotators": {"41": OTHER_HUMAN}}},  # the same mapping every time: changes nothing after the first
    ),
    ("DELETE", "/projects/{pid}/integrations/label-studio/annotators/{ls_user}"): lambda w, c: ({"ls_user": 42}, {}),
    ("POST", "/login"): _login_form,
    ("GET", "/projects/{pid}/dashboard/charts/{chart_id}.csv"): lambda w, c: ({"chart_id": "margins-1"}, {}),
    ("GET", "/projects/{pid}/dashboard/charts/{chart_id}.svg"): lambda w, c: ({"chart_id": "margins-1"}, {}),
}


def call_row(w: World, caller: str, method: str, template: str) -> Any:
    params, kwargs = BUILDERS.get((method, template), lambda w, c: ({}, {}))(w, caller)
    return w.call(caller, method, template.format(pid=w.pid, **params), **kwargs)


SEQUENCE = re.compile(r'"[a-z_]*label_seq"\s*:\s*\d')
"""A project-wide label sequence number in a JSON body (it would show how much the other raters label)."""


def leaked_to_annotator(body: str) -> list[str]:
    """Strings an annotator's response must never hold: other raters, any label value, the project's label_seq."""
    needles = [JUDGE, PRIMARY, OTHER_HUMAN, IDLE_HUMAN, *NAMES.values(), '"value"']
    return [n for n in needles if n in body] + SEQUENCE.findall(body)


def leaked_to_viewer(body: str) -> list[str]:
    """Per-item data or personal names in a viewer's response (aggregates only)."""
    return [n for n in [*ITEMS, *NAMES.values()] if n in body]


CASES = [
    pytest.param(method, template, caller, status, id=f"{method} {template} as {caller}")
    for method, template, *statuses in MATRIX
    for caller, status in zip(CALLERS, statuses, strict=True)
]


@pytest.mark.parametrize(("method", "template", "caller", "expected"), CASES)
def test_matrix(world: World, method: str, template: str, caller: str, expected: int) -> None:
    r = call_row(world, caller, method, template)
    assert r.status_code == expected, f"{method} {template} as {caller}: {r.status_code} {r.text[:300]}"
    if r.status_code >= 400 and not r.headers["content-type"].startswith("text/html"):  # pages answer in HTML
        assert set(r.json()) >= {"error", "detail"}, r.text
    if expected == 401 and template != "/login":
        assert r.headers.get("www-authenticate") == "Bearer"
    if expected == 303:
        assert r.headers["location"] == "/login" if template != "/login" else r.headers["set-cookie"]
    if caller == "annotator":
        assert leaked_to_annotator(r.text) == [], r.text[:500]
    if caller == "viewer" and r.status_code < 300:
        assert leaked_to_viewer(r.text) == [], r.text[:500]
    if caller == "other_project" and r.status_code < 300:
        assert world.pid not in r.text and JUDGE not in r.text


def test_matrix_covers_every_route(world: World) -> None:
    """A new endpoint (every one is in /openapi.json) without a row in MATRIX fails here."""
    paths = world.client.get("/openapi.json").json()["paths"]
    documented = {(method.upper(), path) for path, ops in paths.items() for method in ops}
    assert documented == {(m, t) for m, t, *_ in MATRIX}


def test_matrix_rows_have_one_status_per_caller() -> None:
    assert all(len(row) == 2 + len(CALLERS) for row in MATRIX)
    assert len({(m, t) for m, t, *_ in MATRIX}) == len(MATRIX)


# --------------------------------------------------------------------------- annotators


def test_annotator_writes_only_its_own_rater_all_or_nothing(world: World) -> None:
    pid = world.pid
    before = world.admin("GET", f"/projects/{pid}")["label_seq"]
    mixed = [
        {"item": ITEMS[0], "rater": ANN, "value": "fail"},
        {"item": ITEMS[1], "rater": OTHER_HUMAN, "value": "fail"},
    ]
    r = world.call("annotator", "POST", f"/projects/{pid}/labels", json=mixed)
    assert r.status_code == 403, r.text
    for rater in (JUDGE, PRIMARY, OTHER_HUMAN):
        row = {"item": ITEMS[2], "rater": rater, "value": "fail"}
        r = world.call("annotator", "POST", f"/projects/{pid}/labels", json=[row])
        assert r.status_code == 403, r.text
    assert world.admin("GET", f"/projects/{pid}")["label_seq"] == before  # nothing written
    row = {"item": ITEMS[3], "rater": ANN, "value": "fail"}
    own = world.call("annotator", "POST", f"/projects/{pid}/labels", json=[row])
    assert own.status_code == 200, own.text
    assert own.json() == {"accepted": 1, "duplicates": 0, "label_seq": None}


def test_annotator_never_reads_the_project_label_seq(world: World) -> None:
    """The project-wide sequence is null in an annotator's label write, its idempotent replay and its duplicate;
    a pm's identical write gets the number."""
    pid = world.pid
    row = {"item": ITEMS[4], "rater": ANN, "value": "pass"}
    idem = {"Idempotency-Key": world.fresh("seq")}
    first = world.call("annotator", "POST", f"/projects/{pid}/labels", json=[row], headers=idem)
    replay = world.call("annotator", "POST", f"/projects/{pid}/labels", json=[row], headers=idem)
    again = world.call("annotator", "POST", f"/projects/{pid}/labels", json=[row])
    for r in (first, replay, again):
        assert r.status_code == 200 and r.json()["label_seq"] is None, r.text
    assert (first.json()["accepted"], again.json()["duplicates"]) == (1, 1)
    as_pm = world.call("pm", "POST", f"/projects/{pid}/labels", json=[row])
    assert as_pm.json()["label_seq"] == world.admin("GET", f"/projects/{pid}")["label_seq"] > 0


def test_annotator_fetches_only_its_own_batches(world: World) -> None:
    pid = world.pid
    theirs = world.admin("POST", f"/projects/{pid}/batches", json={"rater": IDLE_HUMAN, "size": 2})
    assert theirs["id"]
    for method, path in [
        ("GET", f"/projects/{pid}/batches/{theirs['id']}"),
        ("POST", f"/projects/{pid}/batches/{theirs['id']}/release"),
    ]:
        r = world.call("annotator", method, path)
        assert r.status_code == 404, r.text  # another rater's batch: hidden, not forbidden
    status = world.admin("GET", f"/projects/{pid}/batches/{theirs['id']}")
    assert status["released"] is False  # the refused release changed nothing
    r = world.call("annotator", "POST", f"/projects/{pid}/batches", json={"rater": IDLE_HUMAN, "size": 1})
    assert r.status_code == 403, r.text
    mine = world.call("annotator", "POST", f"/projects/{pid}/batches", json={"size": 2})
    assert mine.status_code == 200 and mine.json()["rater"] == ANN, mine.text
    assert world.call("annotator", "GET", f"/projects/{pid}/batches/{mine.json()['id']}").status_code == 200
    world.admin("POST", f"/projects/{pid}/batches/{theirs['id']}/release")


def test_annotator_cannot_read_labels_even_filtered_to_itself(world: World) -> None:
    for params in ({}, {"rater": ANN}, {"history": "true"}, {"format": "csv"}, {"format": "ndjson", "rater": JUDGE}):
        r = world.call("annotator", "GET", f"/projects/{world.pid}/labels", params=params)
        assert r.status_code == 403, r.text
        assert leaked_to_annotator(r.text) == []


def test_annotator_key_is_404_on_another_project(world: World) -> None:
    for method, path in [
        ("POST", f"/projects/{world.other_pid}/batches"),
        ("GET", f"/projects/{world.other_pid}/plan"),
    ]:
        r = world.call("annotator", method, path, json={"size": 1} if method == "POST" else None)
        assert r.status_code == 404, r.text
    row = {"item": "b-item", "rater": "b-human", "value": "pass"}
    r = world.call("annotator", "POST", f"/projects/{world.other_pid}/labels", json=[row])
    assert r.status_code == 404, r.text


# --------------------------------------------------------------------------- viewers and scope


def test_viewer_sees_raters_without_names(world: World) -> None:
    r = world.call("viewer", "GET", f"/projects/{world.pid}/raters")
    assert r.status_code == 200
    rows = r.json()["items"]
    assert {row["external_id"] for row in rows} >= set(NAMES)
    assert all(row["name"] is None and isinstance(row["n_labels"], int) for row in rows)
    named = world.call("pm", "GET", f"/projects/{world.pid}/raters").json()["items"]
    assert {row["name"] for row in named} >= set(NAMES.values())  # the names are there for a PM


@pytest.mark.parametrize("fmt", ["json", "csv", "html"])
def test_viewer_report_formats_are_aggregates(world: World, fmt: str) -> None:
    r = world.call("viewer", "GET", f"/projects/{world.pid}/report", params={"format": fmt})
    assert r.status_code == 200, r.text
    assert leaked_to_viewer(r.text) == []


def test_viewer_cannot_write_anything(world: World) -> None:
    pid = world.pid
    writes = [
        ("POST", f"/projects/{pid}/labels", [{"item": ITEMS[0], "rater": ANN, "value": "pass"}]),
        ("POST", f"/projects/{pid}/items", [{"external_id": "v-item"}]),
        ("POST", f"/projects/{pid}/raters", {"external_id": "v-rater", "kind": "human"}),
        ("PATCH", f"/projects/{pid}", {"name": "by viewer"}),
        ("POST", f"/projects/{pid}/plan", PLAN),
        ("POST", f"/projects/{pid}/batches", {"rater": ANN, "size": 1}),
        ("POST", f"/projects/{pid}/keys", {"role": "pm"}),
    ]
    for method, path, body in writes:
        r = world.call("viewer", method, path, json=body)
        assert r.status_code == 403, f"{method} {path}: {r.text}"


def test_pm_lists_only_its_own_project(world: World) -> None:
    ids = [p["id"] for p in world.call("pm", "GET", "/projects").json()["items"]]
    assert ids == [world.pid]
    ids = [p["id"] for p in world.call("other_project", "GET", "/projects").json()["items"]]
    assert ids == [world.other_pid]


def test_admin_cannot_revoke_a_key_through_another_project(world: World) -> None:
    kid, secret = world.key(world.other_pid, "viewer")
    r = world.client.delete(f"/projects/{world.pid}/keys/{kid}", headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    assert r.status_code == 404, r.text
    r = world.client.get(f"/projects/{world.other_pid}/plan", headers={"Authorization": f"Bearer {secret}"})
    assert r.status_code == 404 and r.json()["error"] == "no_plan", r.text  # B has no plan, but the key still works


@pytest.mark.parametrize(
    "header", ["Bearer", "Bearer ", "Basic " + ADMIN_KEY, ADMIN_KEY, "Bearer nope", "bearer " + ADMIN_KEY + "x"]
)
def test_malformed_or_unknown_authorization_is_401(world: World, header: str) -> None:
    r = world.client.get("/projects", headers={"Authorization": header})
    assert r.status_code == 401, r.text


# --------------------------------------------------------------------------- keys


def test_revoked_key_stops_working_at_once(world: World) -> None:
    kid, secret = world.key(world.pid, "pm")
    auth = {"Authorization": f"Bearer {secret}"}
    assert world.client.get(f"/projects/{world.pid}", headers=auth).status_code == 200
    world.admin("DELETE", f"/projects/{world.pid}/keys/{kid}")
    assert world.client.get(f"/projects/{world.pid}", headers=auth).status_code == 401
    row = {"item": ITEMS[0], "rater": ANN, "value": "pass"}
    r = world.client.post(f"/projects/{world.pid}/labels", headers=auth, json=[row])
    assert r.status_code == 401
    world.admin("DELETE", f"/projects/{world.pid}/keys/{kid}")  # revoking twice is harmless
    assert world.client.get(f"/projects/{world.pid}", headers=auth).status_code == 401


def test_key_secret_is_shown_once_and_stored_only_as_a_hash(world: World, module_url: str) -> None:
    created = world.admin("POST", f"/projects/{world.pid}/keys", json={"role": "annotator", "rater": ANN})
    secret = created["key"]
    assert len(secret) >= 32
    secrets = [secret, *(k for k in world.keys.values() if k)]  # the env admin key included
    engine = make_engine(module_url)
    try:
        with engine.connect() as conn:
            stored = [tuple(row) for row in conn.execute(text("SELECT * FROM api_keys"))]
            hashes = set(conn.execute(select(Base.metadata.tables["api_keys"].c.key_hash)).scalars())
            dump = json.dumps(
                [[str(v) for v in row] for t in Base.metadata.sorted_tables for row in conn.execute(select(t))]
            )
    finally:
        engine.dispose()
    assert len(stored) >= len(secrets)
    for s in secrets:
        assert key_hash(s) in hashes  # the hash is what is kept ...
        assert s not in dump  # ... and the secret is nowhere in the database
        assert s[3:] not in dump  # not even without its "ak_" prefix
    # the secret is not shown again anywhere: no endpoint lists keys
    assert secret not in world.call("admin", "GET", f"/projects/{world.pid}").text


def test_login_cookie_authenticates_reads_only(world: World) -> None:
    """The dashboard's login cookie stands in for the header on GET only: a page cannot be used to write."""
    pm, viewer, pid = world.keys["pm"], world.keys["viewer"], world.pid
    c = world.client

    def log_in(key: str | None) -> None:
        c.cookies.clear()
        params, form = _login_form(world, next(k for k, v in world.keys.items() if v == key))
        r = c.post("/login", follow_redirects=False, **form)
        assert r.status_code == 303, r.text

    try:
        log_in(viewer)
        assert c.get(f"/projects/{pid}/reliability").status_code == 200
        assert c.get(f"/projects/{pid}/labels").status_code == 403  # still a viewer
        log_in(pm)
        r = c.post(f"/projects/{pid}/labels", json=[{"item": ITEMS[0], "rater": ANN, "value": "pass"}])
        assert r.status_code == 401, r.text
        assert c.patch(f"/projects/{pid}", json={"name": "by cookie"}).status_code == 401
        c.cookies.set("annoplan_login", pm)  # a key in the cookie is no login
        assert c.get(f"/projects/{pid}/reliability").status_code == 401
    finally:
        c.cookies.clear()
