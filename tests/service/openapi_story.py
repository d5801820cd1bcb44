"""The story behind the OpenAPI examples (issue 31): the README's toxicity project, driven through every
operation that answers JSON, the request examples of service/schemas/examples.py posted where they
apply. Its answers are the response examples in service/schemas/response_examples.json; the tests in
tests/service/test_openapi_examples.py check that they validate and that the story still answers so.

Record them again after a response model changes:

    .venv/bin/python -m tests.service.openapi_story
"""

from __future__ import annotations

import json
import socket
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

from fastapi.testclient import TestClient

from service.schemas.examples import REQUEST_EXAMPLES, RESPONSE_EXAMPLES_PATH, ExampleKey

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
JUDGE, PRIMARY, SECONDARY, THIRD = "gpt-judge", "ann-1", "ann-2", "ann-3"
SYSTEMS = ["model-x", "model-y", "model-z"]
ITEMS = [f"q{i}" for i in range(1, 41)]
PUBLIC_ADDRESS = "93.184.215.14"
"""Where hooks.example.org resolves during the story (there is no DNS in tests)."""
VERIFY_FIELDS = ("item", "rater", "criterion", "value", "seq")
"""The label export's fields a certificate check reads (the verify example keeps only these)."""
VERIFY_EXAMPLE_PATH = RESPONSE_EXAMPLES_PATH.with_name("verify_example.json")


def _label(item: int, rater: int) -> str:
    """A deterministic label: the primary and the judge agree on most items, the secondaries a little less."""
    return "toxic" if (item * 7 + rater * (item % 5 == 0)) % 3 == 0 else "ok"


@contextmanager
def hooks_resolve_publicly() -> Iterator[None]:
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "hooks.example.org":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC_ADDRESS, port))]
        return real(host, port, *args, **kwargs)

    with mock.patch.object(socket, "getaddrinfo", getaddrinfo):
        yield


class Story:
    """Calls the API as admin and keeps each operation's first JSON answer per status; a call without a body
    posts the operation's request example (with `stand_in`, the example with those fields replaced: the
    address and token of a stand-in for a service of the user's)."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.answers: dict[ExampleKey, Any] = {}
        self.examples_posted: set[tuple[str, str]] = set()
        self.variants: dict[ExampleKey, dict[str, Any]] = {}
        """Named answers beside an operation's first (a pairwise project's /reliability: `named="pairwise"`; the
        first project's sliced by a feature: `named="sliced"`)."""
        self.verify_body: dict[str, Any] = {}
        """The certificate check's body built from this story's certificate (recorded as its example)."""

    def call(
        self,
        method: str,
        template: str,
        path: dict[str, str] | None = None,
        stand_in: dict[str, Any] | None = None,
        named: str | None = None,
        **kw: Any,
    ) -> Any:
        if "json" not in kw and "content" not in kw and (method, template) in REQUEST_EXAMPLES:
            example = REQUEST_EXAMPLES[(method, template)]
            kw["json"] = {**example, **stand_in} if stand_in else example
            self.examples_posted.add((method, template))
        r = self.client.request(method.upper(), template.format(**(path or {})), **kw)
        assert r.status_code < 300, (method, template, r.status_code, r.text[:500])
        key = (method, template, str(r.status_code))
        if named is None:
            self.answers.setdefault(key, r.json())
        else:
            self.variants.setdefault(key, {}).setdefault(named, r.json())
        return r.json()


def tell(client: TestClient, recording: bool = False) -> Story:
    """The story told: every JSON answer, the Label Studio sync and connect against stand-ins on loopback
    (the app runs with :func:`story_settings`); unless `recording`, the recorded certificate check's example
    is posted too and must match."""
    s = Story(client)
    s.call("get", "/livez")
    s.call("get", "/readyz")
    s.call("get", "/healthz")
    s.call("get", "/healthz/queue")
    pid = s.call("post", "/projects")["id"]
    p = {"pid": pid}
    s.call("get", "/projects", params={"limit": 1})
    s.call("get", "/projects/{pid}", p)
    s.call("patch", "/projects/{pid}", p)
    for ext, kind in [(JUDGE, "judge"), (PRIMARY, "primary")]:
        s.call("post", "/projects/{pid}/raters", p, json={"external_id": ext, "kind": kind})
    s.call("post", "/projects/{pid}/raters", p)
    s.call("post", "/projects/{pid}/raters", p, json={"external_id": THIRD, "kind": "human"})
    s.call("patch", "/projects/{pid}/raters/{rid}", {**p, "rid": SECONDARY})
    s.call("get", "/projects/{pid}/raters", p)
    s.call("post", "/projects/{pid}/items", p)
    more = [{"external_id": i, "text": f"reply {i}", "features": {"domain": "chat"}} for i in ITEMS[2:]]
    s.call("post", "/projects/{pid}/items", p, json=more)
    s.call("get", "/projects/{pid}/items", p, params={"limit": 2})
    rows = [
        {"item": item, "rater": rater, "value": _label(k, r)}
        for k, item in enumerate(ITEMS)
        for r, rater in enumerate([JUDGE, PRIMARY])
    ]
    rows += [{"item": item, "rater": THIRD, "value": _label(k, 2)} for k, item in enumerate(ITEMS[:20])]
    s.call("post", "/projects/{pid}/labels", p, json=rows)
    s.call("post", "/projects/{pid}/labels", p)
    s.call("post", "/projects/{pid}/labels/retractions", p)
    s.call("get", "/projects/{pid}/labels", p, params={"limit": 2})
    s.call("post", "/projects/{pid}/import/generic", p)
    s.call("post", "/projects/{pid}/keys", p)
    s.call("get", "/keys")
    s.call("post", "/projects/{pid}/webhooks", p)
    hooks = s.call("get", "/projects/{pid}/webhooks", p)
    wid = hooks["items"][0]["id"]
    s.call("get", "/projects/{pid}/webhooks/{wid}", {**p, "wid": wid})
    s.call("post", "/projects/{pid}/plan", p)
    s.call("get", "/projects/{pid}/plan", p)
    deliveries = s.call("get", "/projects/{pid}/webhooks/{wid}/deliveries", {**p, "wid": wid})
    did = str(deliveries["items"][0]["id"])
    s.call("post", "/projects/{pid}/webhooks/{wid}/deliveries/{did}/redeliver", {**p, "wid": wid, "did": did})
    batch = s.call("post", "/projects/{pid}/batches", p)
    b = {**p, "bid": batch["id"]}
    s.call("get", "/projects/{pid}/batches/{bid}", b)
    s.call("get", "/projects/{pid}/batches/{bid}/label-studio", b)
    s.call("post", "/projects/{pid}/batches/{bid}/release", b)
    s.call("get", "/projects/{pid}/reliability", p)
    s.call("get", "/projects/{pid}/reliability", p, params={"by": "feature:domain"}, named="sliced")
    s.call("get", "/projects/{pid}/ranking", p)
    s.call("get", "/projects/{pid}/report", p)
    s.call("post", "/projects/{pid}/selective", p)
    s.call("post", "/projects/{pid}/simulate", p)
    large = {**REQUEST_EXAMPLES[("post", "/projects/{pid}/simulate")], "trials": 5_000}  # past the sync limit
    job = s.call("post", "/projects/{pid}/simulate", p, json=large)
    s.call("get", "/projects/{pid}/simulations/{sim_id}", {**p, "sim_id": job["id"]})
    s.call("delete", "/projects/{pid}/simulations/{sim_id}", {**p, "sim_id": job["id"]})
    certificate = s.call("post", "/projects/{pid}/certificates", p)
    s.call("post", "/projects/{pid}/certificates", p)  # the same statement again: 200
    cid = certificate["predicate"]["certificate"]["id"]
    s.call("get", "/projects/{pid}/certificates", p)
    s.call("get", "/projects/{pid}/certificates/{cid}", {**p, "cid": cid})
    labels = client.get(f"/projects/{pid}/labels", params={"limit": 1000}).json()["items"]
    s.verify_body = {"certificate": certificate, "labels": [{k: row[k] for k in VERIFY_FIELDS} for row in labels]}
    assert s.call("post", "/certificates/verify", json=s.verify_body)["match"]
    if not recording:
        assert s.call("post", "/certificates/verify")["match"], "record the examples again (module docstring)"
    version = s.call("post", "/projects/{pid}/raters/{rid}/versions", {**p, "rid": JUDGE})
    new = version["rater"]
    relabel = [{"item": i, "rater": new, "value": _label(k + 1, 0)} for k, i in enumerate(ITEMS)]
    client.post(f"/projects/{pid}/labels", json=relabel)
    s.call("get", "/projects/{pid}/raters/{rid}/versions", {**p, "rid": JUDGE})
    compare = {"old": JUDGE, "new": version["name"]}
    s.call("get", "/projects/{pid}/raters/{rid}/versions/compare", {**p, "rid": JUDGE}, params=compare)
    s.call("put", "/projects/{pid}/raters/{rid}/drift-watch", {**p, "rid": JUDGE})
    s.call("post", "/projects/{pid}/raters/{rid}/anchor-panel", {**p, "rid": JUDGE})
    s.call("get", "/projects/{pid}/raters/{rid}/anchor-panel", {**p, "rid": JUDGE})
    s.call("get", "/projects/{pid}/raters/{rid}/drift", {**p, "rid": JUDGE}, params={"baseline": 0.88})
    s.call("post", "/agreement")
    s.call("post", "/pairwise")
    _pairwise_project(s)
    _label_studio(s)
    _tool_imports(s)
    _label_studio_sync_and_connect(s)
    return s


def _pairwise_project(s: Story) -> None:
    """A pairwise project (issue 34): three systems compared in turn, the humans preferring the earlier one but
    on every fourth item, ties on some, the last twelve items unlabelled; the judge shown both orders, keeping the
    first-shown answer on some items shown BA. Its /reliability is the example named `pairwise`."""
    pid = s.call("post", "/projects", json={"name": "helpfulness", "kind": "pairwise"})["id"]
    items = [
        {"external_id": f"p{k}", "features": {"system_a": SYSTEMS[k % 3], "system_b": SYSTEMS[(k + 1) % 3]}}
        for k in range(30)
    ]
    s.client.post(f"/projects/{pid}/items", json=items)
    for ext, kind in [(JUDGE, "judge"), (PRIMARY, "primary"), (SECONDARY, "human")]:
        s.client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
    rows = []
    for k in range(30):
        earlier_wins = (k % 3 < (k + 1) % 3) != (k % 4 == 3)
        verdict = "tie" if k % 7 == 3 else "A" if earlier_wins else "B"
        second = "tie" if k % 5 == 0 else verdict
        shown_ba = "B" if k % 6 == 1 else verdict  # B is shown first in the BA order
        if k < 18:  # the last twelve items are the judge's alone
            rows += [
                {"item": f"p{k}", "rater": PRIMARY, "value": verdict},
                {"item": f"p{k}", "rater": SECONDARY, "value": second},
            ]
        rows += [
            {"item": f"p{k}", "rater": JUDGE, "value": verdict, "order": "AB"},
            {"item": f"p{k}", "rater": JUDGE, "value": shown_ba, "order": "BA"},
        ]
    assert s.client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    s.call("get", "/projects/{pid}/reliability", {"pid": pid}, named="pairwise")


def _label_studio(s: Story) -> None:
    pid = s.call("post", "/projects", json={"name": "ls", "labels": ["pass", "fail"]})["id"]
    p = {"pid": pid}
    s.call("post", "/projects/{pid}/import/label-studio", p)
    export = json.loads((FIXTURES / "label_studio" / "export.json").read_text())
    s.call("post", "/projects/{pid}/import/label-studio", p, json=export)
    s.call("get", "/projects/{pid}/integrations/label-studio/issues", p)
    s.call("post", "/projects/{pid}/integrations/label-studio/issues/replay", p)
    s.call("post", "/projects/{pid}/webhooks/label-studio", p)
    created = json.loads((FIXTURES / "label_studio" / "webhook_annotation_created.json").read_text())
    s.call("post", "/projects/{pid}/webhooks/label-studio", p, json=created)
    s.client.post(f"/projects/{pid}/raters", json={"external_id": PRIMARY, "kind": "human"})
    s.call("post", "/projects/{pid}/integrations/label-studio/annotators", p)  # 12 -> ann-1: its label moves
    s.call("get", "/projects/{pid}/integrations/label-studio/annotators", p)
    s.call("delete", "/projects/{pid}/integrations/label-studio/annotators/{ls_user}", {**p, "ls_user": "12"})


def _tool_imports(s: Story) -> None:
    files = [
        ("promptfoo", "promptfoo_results.json", ["pass", "fail"], {"primary": "promptfoo-human"}),
        ("inspect", "inspect_log.json", ["correct", "incorrect"], {}),
        ("langsmith", "langsmith_feedback.json", ["1", "0"], {"primary": "langsmith-user-u-1"}),
    ]
    for source, name, labels, params in files:
        pid = s.call("post", "/projects", json={"name": source, "labels": labels})["id"]
        body = (FIXTURES / "integrations" / name).read_bytes()
        s.call("post", f"/projects/{{pid}}/import/{source}", {"pid": pid}, content=body, params=params)
    pid = s.call("post", "/projects", json={"name": "langfuse", "labels": ["pass", "fail"]})["id"]
    s.client.patch(f"/projects/{pid}", json={"label_map": {"true": "pass", "false": "fail"}})
    body = (FIXTURES / "integrations" / "langfuse_scores.json").read_bytes()
    s.call("post", "/projects/{pid}/import/langfuse", {"pid": pid}, content=body)


def _label_studio_sync_and_connect(s: Story) -> None:
    from tests.service.test_label_studio_connect import TOKEN as CONNECT_TOKEN
    from tests.service.test_label_studio_connect import StandIn
    from tests.service.test_label_studio_sync import LABELS, TOKEN, FakeLabelStudio

    with FakeLabelStudio() as ls:
        pid = s.call("post", "/projects", json={"name": "synced", "labels": LABELS})["id"]
        stand_in = {"url": ls.url, "token": TOKEN}
        s.call("post", "/projects/{pid}/integrations/label-studio/sync", {"pid": pid}, stand_in=stand_in)
    with StandIn() as stand_in:
        pid = s.call("post", "/projects", json={"name": "connected", "labels": ["pass", "fail"]})["id"]
        p = {"pid": pid}
        for ext, kind in [(PRIMARY, "primary"), (SECONDARY, "human"), (THIRD, "human")]:
            s.client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind})
        s.client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}"} for i in range(40)])
        s.client.post(f"/projects/{pid}/plan", json={"source": "prior", "p_h": 0.85, "p_j": 0.9, "n_raters": 3})
        stand_in_connect = {"url": stand_in.url, "project": 5, "token": CONNECT_TOKEN}
        s.call("post", "/projects/{pid}/integrations/label-studio/connect", p, stand_in=stand_in_connect)


def story_settings(database_url: str, admin_key: str) -> Any:
    """The settings the story runs under: small bootstraps, no webhook sender, loopback stand-ins allowed."""
    from service.core.settings import Settings

    return Settings(
        database_url=database_url,
        admin_key=admin_key,
        bootstrap_resamples=50,
        webhook_sender=False,
        outbound_allow_private=True,  # the Label Studio stand-ins are on loopback
    )


def record() -> None:
    """Tell the story on a fresh SQLite database and write its answers as the response examples."""
    from alembic import command

    from service.app import create_app
    from tests.conftest import ADMIN_KEY, alembic_config

    with ExitStack() as stack:
        directory = stack.enter_context(tempfile.TemporaryDirectory())
        url = f"sqlite:///{directory}/story.db"
        command.upgrade(alembic_config(url), "head")
        settings = story_settings(url, ADMIN_KEY)
        client = stack.enter_context(TestClient(create_app(settings), raise_server_exceptions=False))
        client.headers["Authorization"] = f"Bearer {settings.admin_key}"
        stack.enter_context(hooks_resolve_publicly())
        story = tell(client, recording=True)
    VERIFY_EXAMPLE_PATH.write_text(json.dumps(story.verify_body, indent=1, ensure_ascii=False) + "\n")
    answers = story.answers
    table: dict[str, dict[str, Any]] = {}
    for (method, template, status), body in sorted(answers.items()):
        table.setdefault(f"{method} {template}", {})[status] = body
    for (method, template, status), named in sorted(story.variants.items()):
        for name, body in sorted(named.items()):
            table[f"{method} {template}"][f"{status} {name}"] = body
    RESPONSE_EXAMPLES_PATH.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    record()
