"""Issue 2 item 5: every bad input gets its documented 4xx, the one error body, and writes nothing.

A snapshot of every row of every table, plus what the API shows (projects, items, raters,
current labels and their history), is taken before the bad requests; after each one the
snapshot must be identical. Cases of one kind share a database and run as subtests, so
the set stays fast while each case is still reported by name.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from service.app import create_app
from service.core.pagination import encode_cursor
from service.core.settings import Settings
from service.data.models import Base

ADMIN_KEY = "ak_test_admin_key"  # the key tests/conftest.py registers
PG_URL = os.environ.get("ANNOPLAN_TEST_DATABASE_URL")
GOOD = [
    {"item": "i5", "rater": "judge", "value": "pass"},
    {"item": "i5", "rater": "prim", "value": "fail"},
]
TAIL = [
    {"item": "i6", "rater": "judge", "value": "fail"},
    {"item": "i6", "rater": "h2", "value": "pass"},
]


def table_contents(engine: Engine) -> dict[str, list[str]]:
    """Every row of every table of the schema, read straight from the database; of the job queue, the jobs
    (a request's work), not the standing rows (periodic turns, worker heartbeats, webhook targets) whose
    leases background workers take whatever the requests do."""
    from service.data.jobs import STANDING
    from service.data.models import Job

    with engine.connect() as conn:
        tables = {t: select(t) for t in Base.metadata.sorted_tables}
        tables[Job.__table__] = select(Job.__table__).where(Job.kind.not_in(STANDING))
        return {t.name: sorted(repr(tuple(row)) for row in conn.execute(query)) for t, query in tables.items()}


def snapshot(client: TestClient, engine: Engine, pid: str) -> dict:
    """The stored data: every table's rows, and what the API shows of project ``pid``."""

    def get(path: str, **params: object) -> dict:
        r = client.get(path, params={"limit": 1000, **params})
        assert r.status_code == 200, r.text
        return r.json()

    return {
        **table_contents(engine),
        "api projects": get("/projects"),
        "api items": get(f"/projects/{pid}/items"),
        "api raters": get(f"/projects/{pid}/raters"),
        "api current labels": get(f"/projects/{pid}/labels"),
        "api label history": get(f"/projects/{pid}/labels", history="true"),
    }


class Unchanged:
    """Checks that the database still equals the snapshot taken at construction."""

    def __init__(self, client: TestClient, engine: Engine, pid: str):
        self.client = client
        self.engine = engine
        self.pid = pid
        self.before = snapshot(client, engine, pid)

    def check(self) -> None:
        after = snapshot(self.client, self.engine, self.pid)
        changed = sorted(k for k in after if after[k] != self.before.get(k))
        self.before = after  # later cases compare to the new state
        assert not changed, f"the database changed: {changed}"


def assert_error(r, status: int, code: str | None = None, *, mentions: tuple[str, ...] = ()) -> dict:
    """The response has ``status`` and the documented error body; return the body."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) <= {"error", "detail", "fields"} and {"error", "detail"} <= set(body), body
    assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", body["error"]), body
    assert isinstance(body["detail"], str) and len(body["detail"]) > 5, body
    if code is not None:
        assert body["error"] == code, body
    for word in mentions:
        assert word in body["detail"], (word, body)
    return body


def build_projects(c: TestClient) -> tuple[dict, dict]:
    """conftest's demo project with ten labels on i0..i4, and a second project to reference from it."""
    p = c.post("/projects", json={"name": "demo", "labels": ["pass", "fail"]}).json()
    pid = p["id"]
    for ext, kind in [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]:
        assert c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}).status_code == 201
    items = [{"external_id": f"i{i}", "features": {"topic": "a" if i % 2 else "b"}} for i in range(20)]
    assert c.post(f"/projects/{pid}/items", json=items).status_code == 200
    rows = [
        {"item": f"i{i}", "rater": r, "value": "pass" if i % 2 else "fail"} for i in range(5) for r in ("judge", "prim")
    ]
    r = c.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 10, "duplicates": 0, "label_seq": 10}
    other = c.post("/projects", json={"name": "other", "labels": ["pass", "fail"]}).json()
    assert c.post(f"/projects/{other['id']}/raters", json={"external_id": "judge2", "kind": "judge"}).status_code == 201
    assert c.post(f"/projects/{other['id']}/items", json=[{"external_id": "only2"}]).status_code == 200
    return p, other


@pytest.fixture(scope="module")
def seeded(template_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict | None:
    """On SQLite, a migrated database file holding ``build_projects`` once for the module."""
    if PG_URL:
        return None
    path = tmp_path_factory.mktemp("bad_input") / "seeded.db"
    shutil.copyfile(template_url.removeprefix("sqlite:///"), path)
    # The tests' history turn (an hour apart, as conftest's): a turn of the default 5 s taken while the projects
    # are built would queue a history replay that a test's app then runs, changing the jobs under the check.
    seeding = Settings(database_url=f"sqlite:///{path}", admin_key=ADMIN_KEY, history_point_seconds=3600)
    with TestClient(create_app(seeding)) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        labelled, other = build_projects(c)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file before copying
    conn.close()
    return {"path": path, "labelled": labelled, "other": other}


@pytest.fixture
def database_url(database_url: str, seeded: dict | None, tmp_path: Path) -> str:
    """A fresh copy of the seeded database per test on SQLite (a dozen commits saved per test);
    conftest's freshly truncated database on PostgreSQL."""
    if seeded is None:
        return database_url
    path = tmp_path / "seeded.db"
    shutil.copyfile(seeded["path"], path)
    return f"sqlite:///{path}"


@pytest.fixture
def built(client: TestClient, seeded: dict | None) -> dict:
    if seeded is not None:
        return seeded
    labelled, other = build_projects(client)
    return {"labelled": labelled, "other": other}


@pytest.fixture
def labelled(built: dict) -> dict:
    """A binary project (raters judge, prim, h2, h3; items i0..i19) with ten labels stored."""
    return built["labelled"]


@pytest.fixture
def other_project(built: dict) -> dict:
    """A second project with rater judge2 and item only2."""
    return built["other"]


@pytest.fixture
def unchanged(client: TestClient, engine: Engine, labelled: dict, other_project: dict) -> Unchanged:
    return Unchanged(client, engine, labelled["id"])


def small_client(database_url: str, **limits: int) -> TestClient:
    """A client of an app over the same database with tighter limits."""
    settings = Settings(database_url=database_url, admin_key=ADMIN_KEY, **limits)
    c = TestClient(create_app(settings), raise_server_exceptions=False)
    c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
    return c


def test_the_snapshot_sees_every_kind_of_write(client, labelled, unchanged, subtests):
    """Control for every check below: a write of each kind does change the snapshot."""
    pid = labelled["id"]
    writes = [
        ("label", lambda: client.post(f"/projects/{pid}/labels", json=GOOD[:1])),
        ("correction", lambda: client.post(f"/projects/{pid}/labels", json=[{**GOOD[0], "value": "fail"}])),
        ("item", lambda: client.post(f"/projects/{pid}/items", json=[{"external_id": "new"}])),
        ("item-update", lambda: client.post(f"/projects/{pid}/items", json=[{"external_id": "new", "text": "t"}])),
        ("rater", lambda: client.post(f"/projects/{pid}/raters", json={"external_id": "h9", "kind": "human"})),
        ("rename", lambda: client.patch(f"/projects/{pid}", json={"name": "renamed"})),
        (
            "idempotency-record",
            lambda: client.post(f"/projects/{pid}/items", json=[], headers={"Idempotency-Key": "k"}),
        ),
    ]
    for name, write in writes:
        with subtests.test(msg=name):
            assert write().status_code in (200, 201)
            with pytest.raises(AssertionError, match="the database changed"):
                unchanged.check()


# --- labels: one bad row in the middle of a good payload writes nothing -------------------

BAD_ROWS = [
    ("value-not-a-label", {"item": "i5", "rater": "h2", "value": "maybe"}, "invalid", ("row 3", "maybe")),
    ("label-case-differs", {"item": "i5", "rater": "h2", "value": "Pass"}, "invalid", ("row 3", "Pass")),
    (
        "abstain-not-allowed",
        {"item": "i5", "rater": "h2", "value": "CANNOT_ASSESS"},
        "invalid",
        ("row 3", "CANNOT_ASSESS"),
    ),
    (
        "abstain-not-allowed-judge",
        {"item": "i5", "rater": "judge", "value": "CANNOT_ASSESS"},
        "invalid",
        ("row 3", "CANNOT_ASSESS"),
    ),
    ("invalid-from-human", {"item": "i5", "rater": "h2", "value": "INVALID"}, "invalid", ("row 3", "INVALID")),
    ("invalid-from-primary", {"item": "i7", "rater": "prim", "value": "INVALID"}, "invalid", ("row 3", "INVALID")),
    ("unknown-item", {"item": "nope", "rater": "h2", "value": "pass"}, "invalid", ("row 3", "nope")),
    ("unknown-rater", {"item": "i5", "rater": "ghost", "value": "pass"}, "invalid", ("row 3", "ghost")),
    ("item-of-other-project", {"item": "only2", "rater": "h2", "value": "pass"}, "invalid", ("row 3", "only2")),
    ("rater-of-other-project", {"item": "i5", "rater": "judge2", "value": "pass"}, "invalid", ("row 3", "judge2")),
    (
        "unknown-criterion",
        {"item": "i5", "rater": "h2", "criterion": "style", "value": "pass"},
        "invalid",
        ("row 3", "style"),
    ),
    (
        "unknown-batch",
        {"item": "i5", "rater": "h2", "value": "pass", "batch": "b_nope"},
        "invalid",
        ("row 3", "b_nope"),
    ),
    ("missing-value", {"item": "i5", "rater": "h2"}, "validation_error", ("row 3", "value")),
    (
        "unknown-field",
        {"item": "i5", "rater": "h2", "value": "pass", "score": 1},
        "validation_error",
        ("row 3", "score"),
    ),
    ("value-not-a-string", {"item": "i5", "rater": "h2", "value": 1}, "validation_error", ("row 3",)),
    ("empty-item", {"item": "", "rater": "h2", "value": "pass"}, "validation_error", ("row 3",)),
    ("row-not-an-object", ["i5", "h2", "pass"], "validation_error", ("row 3",)),
]


def test_bad_label_row_in_a_good_payload_writes_nothing(client, labelled, unchanged, subtests):
    for name, bad, code, mentions in BAD_ROWS:
        with subtests.test(msg=name):
            r = client.post(f"/projects/{labelled['id']}/labels", json=[*GOOD, bad, *TAIL])
            assert_error(r, 422, code, mentions=mentions)
            unchanged.check()


def test_bad_label_row_in_ndjson_and_csv_writes_nothing(client, labelled, unchanged, subtests):
    pid = labelled["id"]
    rows = [*GOOD, {"item": "i5", "rater": "h2", "value": "maybe"}, *TAIL]
    ndjson = "".join(json.dumps(r) + "\n" for r in rows)
    csv_body = "item,rater,value\n" + "".join(f"{r['item']},{r['rater']},{r['value']}\n" for r in rows)
    for media, body in [("application/x-ndjson", ndjson), ("text/csv", csv_body)]:
        with subtests.test(msg=media):
            r = client.post(f"/projects/{pid}/labels", content=body, headers={"content-type": media})
            assert_error(r, 422, "invalid", mentions=("row 3", "maybe"))
            unchanged.check()


def test_batch_of_another_rater_writes_nothing(client, labelled, engine):
    pid = labelled["id"]
    plan = client.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 7})
    assert plan.status_code == 201, plan.text
    lease = client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 2})
    assert lease.status_code == 200, lease.text
    bid, items = lease.json()["id"], lease.json()["items"]
    unchanged = Unchanged(client, engine, pid)
    rows = [
        {"item": items[0], "rater": "h2", "value": "pass", "batch": bid},
        {"item": items[1], "rater": "h3", "value": "pass", "batch": bid},
    ]
    assert_error(client.post(f"/projects/{pid}/labels", json=rows), 422, "invalid", mentions=("row 2", bid))
    unchanged.check()
    r = client.post(f"/projects/{pid}/labels", json=rows[:1])
    assert r.status_code == 200 and r.json()["accepted"] == 1, r.text  # control: its own rater's batch


def test_the_good_rows_alone_are_accepted(client, labelled):
    """Control for the tests above: without the bad row the same payload is written."""
    r = client.post(f"/projects/{labelled['id']}/labels", json=[*GOOD, *TAIL])
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 4, "duplicates": 0, "label_seq": 14}


def test_conflicting_duplicates_in_one_payload(client, labelled, unchanged, subtests):
    pid = labelled["id"]
    with subtests.test(msg="json"):
        rows = [*GOOD, {"item": "i5", "rater": "judge", "value": "fail"}, *TAIL]
        body = assert_error(client.post(f"/projects/{pid}/labels", json=rows), 422, "invalid")
        assert re.search(r"\b1\b.*\b3\b", body["detail"]), body  # names both rows
        assert "i5" in body["detail"] and "judge" in body["detail"]
        unchanged.check()
    with subtests.test(msg="csv"):
        csv_body = "item,rater,value\ni5,judge,pass\ni6,h2,pass\ni5,judge,fail\n"
        r = client.post(f"/projects/{pid}/labels", content=csv_body, headers={"content-type": "text/csv"})
        assert_error(r, 422, "invalid", mentions=("i5",))
        unchanged.check()
    with subtests.test(msg="same-value-then-conflict"):
        rows = [*GOOD, GOOD[0], {"item": "i5", "rater": "judge", "value": "fail"}]
        assert_error(client.post(f"/projects/{pid}/labels", json=rows), 422, "invalid")
        unchanged.check()


def test_identical_duplicates_in_one_payload_are_not_conflicts(client, labelled):
    """Control: the same cell twice with the same value is counted once, not rejected."""
    r = client.post(f"/projects/{labelled['id']}/labels", json=[*GOOD, GOOD[0]])
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 2, "duplicates": 1, "label_seq": 12}


def test_invalid_from_a_judge_is_accepted(client, labelled):
    """Control for the value cases: INVALID is always accepted from judges."""
    r = client.post(f"/projects/{labelled['id']}/labels", json=[{"item": "i9", "rater": "judge", "value": "INVALID"}])
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == 1


def test_writes_to_an_unknown_project_are_404(client, labelled, unchanged, subtests):
    for path, body in [
        ("labels", GOOD),
        ("items", [{"external_id": "x"}]),
        ("raters", {"external_id": "x", "kind": "human"}),
    ]:
        with subtests.test(msg=path):
            assert_error(client.post(f"/projects/p_nope/{path}", json=body), 404, "not_found")
            unchanged.check()
    with subtests.test(msg="patch"):
        assert_error(client.patch("/projects/p_nope", json={"name": "x"}), 404, "not_found")


# --- malformed bodies ---------------------------------------------------------------------

MALFORMED = [
    ("json-truncated", "application/json", b'[{"item": "i5", "rater": "judge", "value": "pass"},', ()),
    ("json-object-not-array", "application/json", b'{"item": "i5", "rater": "judge", "value": "pass"}', ("array",)),
    ("json-not-utf8", "application/json", b"\xff\xfe", ()),
    ("json-empty-body", "application/json", b"", ()),
    (
        "ndjson-bad-line",
        "application/x-ndjson",
        b'{"item": "i5", "rater": "judge", "value": "pass"}\n{"item": "i6", "rater": "judge", "value": "pass"}\n'
        b'{"item": "i7", "rater": "judge", "value": pass}\n{"item": "i8", "rater": "judge", "value": "pass"}\n',
        ("line 3",),
    ),
    (
        "csv-too-many-fields",
        "text/csv",
        b"item,rater,value\ni5,judge,pass\ni6,judge,fail,extra\ni7,judge,pass\n",
        ("line 3",),
    ),
    ("csv-too-few-fields", "text/csv", b"item,rater,value\ni5,judge,pass\ni6,judge,pass\ni7,judge\n", ("line 4",)),
    ("csv-unclosed-quote", "text/csv", b'item,rater,value\ni5,judge,pass\ni6,"judge,pass\n', ("line",)),
    ("csv-duplicate-header", "text/csv", b"item,item,value\ni5,judge,pass\n", ("line 1",)),
    ("csv-not-utf8", "text/csv", b"item,rater,value\ni5,judge,\xff\n", ("UTF-8",)),
]


def test_malformed_label_body_is_422_and_names_the_line(client, labelled, unchanged, subtests):
    for name, media, body, mentions in MALFORMED:
        with subtests.test(msg=name):
            r = client.post(f"/projects/{labelled['id']}/labels", content=body, headers={"content-type": media})
            assert_error(r, 422, "malformed_body", mentions=mentions)
            unchanged.check()


def test_csv_row_failing_validation_names_the_row(client, labelled, unchanged):
    body = "item,rater,value\ni5,judge,pass\ni6,judge,pass\ni7,judge,perhaps\n"
    r = client.post(f"/projects/{labelled['id']}/labels", content=body, headers={"content-type": "text/csv"})
    assert_error(r, 422, "invalid", mentions=("row 3", "perhaps"))
    unchanged.check()


def test_malformed_item_body_is_422(client, labelled, unchanged, subtests):
    cases = [
        ("csv", "text/csv", b"external_id,topic\nx1,a\nx2,b,c\n", ("line 3",)),
        ("ndjson", "application/x-ndjson", b'{"external_id": "x1"}\n{"external_id": \n', ("line 2",)),
        ("json", "application/json", b'[{"external_id": "x1"}, {"external_id": "x2"', ()),
    ]
    for name, media, body, mentions in cases:
        with subtests.test(msg=name):
            r = client.post(f"/projects/{labelled['id']}/items", content=body, headers={"content-type": media})
            assert_error(r, 422, "malformed_body", mentions=mentions)
            unchanged.check()


def test_bad_item_rows_write_nothing(client, labelled, unchanged, subtests):
    cases = [
        (
            "nested-feature",
            [{"external_id": "x1"}, {"external_id": "x2", "features": {"a": {"nested": 1}}}],
            ("row 2",),
        ),
        ("no-external-id", [{"external_id": "x1"}, {"id": "x2"}], ("row 2",)),
        ("conflicting-duplicate", [{"external_id": "x1", "text": "a"}, {"external_id": "x1", "text": "b"}], ("x1",)),
        (
            "unknown-field",
            [{"external_id": "i0", "features": {"topic": "changed"}}, {"external_id": "x2", "colour": "red"}],
            ("row 2",),
        ),
    ]
    for name, rows, mentions in cases:
        with subtests.test(msg=name):
            r = client.post(f"/projects/{labelled['id']}/items", json=rows)
            body = assert_error(r, 422, mentions=mentions)
            assert body["error"] in {"invalid", "validation_error"}
            unchanged.check()


def test_wrong_content_type_is_415(client, labelled, unchanged, subtests):
    body = b'[{"item": "i5", "rater": "judge", "value": "pass", "external_id": "x"}]'
    for endpoint in ("items", "labels"):
        for media in (
            "text/plain",
            "application/xml",
            "multipart/form-data; boundary=x",
            "application/x-www-form-urlencoded",
        ):
            with subtests.test(msg=f"{endpoint} {media}"):
                r = client.post(f"/projects/{labelled['id']}/{endpoint}", content=body, headers={"content-type": media})
                assert_error(r, 415, "unsupported_media_type")
                unchanged.check()


def test_wrong_content_type_on_json_endpoints_is_415(client, labelled, unchanged):
    """The single-object JSON endpoints refuse other media types like the bulk ones do."""
    pid = labelled["id"]
    cases = [
        ("POST", "/projects", '{"name": "y", "labels": ["a", "b"]}'),
        ("POST", f"/projects/{pid}/raters", '{"external_id": "h9", "kind": "human"}'),
        ("PATCH", f"/projects/{pid}", '{"name": "renamed"}'),
    ]
    wrong = {}
    for method, path, body in cases:
        for media in ("text/plain", "text/csv", "application/x-ndjson"):
            r = client.request(method, path, content=body, headers={"content-type": media})
            if r.status_code != 415:
                wrong[f"{method} {path} {media}"] = r.status_code
    unchanged.check()
    assert not wrong, wrong


# --- size limits --------------------------------------------------------------------------


def test_body_over_the_size_limit_is_413(client, labelled, unchanged, database_url, subtests):
    rows = [{"item": f"i{i % 20}", "rater": "h3", "value": "pass"} for i in range(60)]
    payload = json.dumps(rows).encode()
    assert len(payload) > 2048
    pid = labelled["id"]
    with small_client(database_url, max_body_bytes=2048) as small:
        with subtests.test(msg="content-length"):
            r = small.post(f"/projects/{pid}/labels", content=payload, headers={"content-type": "application/json"})
            assert_error(r, 413, "payload_too_large", mentions=("2048",))
            unchanged.check()
        with subtests.test(msg="chunked, no content-length"):
            chunks = (payload[k : k + 512] for k in range(0, len(payload), 512))
            r = small.post(f"/projects/{pid}/labels", content=chunks, headers={"content-type": "application/json"})
            assert_error(r, 413, "payload_too_large")
            unchanged.check()
        with subtests.test(msg="items csv"):
            csv_body = ("external_id,topic\n" + "".join(f"n{i},a\n" for i in range(500))).encode()
            assert len(csv_body) > 2048
            r = small.post(f"/projects/{pid}/items", content=csv_body, headers={"content-type": "text/csv"})
            assert_error(r, 413, "payload_too_large")
            unchanged.check()
        with subtests.test(msg="boundary: 2048 bytes pass, 2049 do not"):
            row = {"item": "i19", "rater": "h3", "value": "pass"}
            exact = json.dumps([row]).encode()
            exact = exact[:-1] + b" " * (2048 - len(exact)) + b"]"  # JSON whitespace padding
            assert len(exact) == 2048
            over = exact[:-1] + b" ]"
            assert_error(
                small.post(f"/projects/{pid}/labels", content=over, headers={"content-type": "application/json"}), 413
            )
            unchanged.check()
            r = small.post(f"/projects/{pid}/labels", content=exact, headers={"content-type": "application/json"})
            assert r.status_code == 200, r.text
            assert r.json()["accepted"] == 1
        with subtests.test(msg="control: a small body passes the same app"):
            r = small.post(f"/projects/{pid}/labels", json=rows[:2])
            assert r.status_code == 200, r.text
            assert r.json()["accepted"] == 2


def test_chunked_body_over_the_limit_on_json_endpoints_is_413(client, labelled, unchanged, database_url):
    """Without Content-Length the limit is enforced while the body streams in, for pydantic bodies too."""
    pid = labelled["id"]
    padding = b" " * 3000
    cases = [
        ("POST", "/projects", b'{"name": "x", "labels": ["a", "b"]' + padding + b"}"),
        ("POST", f"/projects/{pid}/raters", b'{"external_id": "h9", "kind": "human"' + padding + b"}"),
        ("PATCH", f"/projects/{pid}", b'{"name": "renamed"' + padding + b"}"),
    ]
    wrong = {}
    with small_client(database_url, max_body_bytes=2048) as small:
        for method, path, body in cases:
            chunks = (body[k : k + 512] for k in range(0, len(body), 512))
            r = small.request(method, path, content=chunks, headers={"content-type": "application/json"})
            if r.status_code != 413:
                wrong[f"{method} {path}"] = (r.status_code, r.json().get("error"))
    unchanged.check()
    assert not wrong, wrong


def test_too_many_rows_is_413(client, labelled, unchanged, database_url, subtests):
    pid = labelled["id"]
    with small_client(database_url, max_rows=5) as small:
        with subtests.test(msg="labels json"):
            rows = [{"item": f"i{i}", "rater": "h3", "value": "pass"} for i in range(6)]
            assert_error(small.post(f"/projects/{pid}/labels", json=rows), 413, mentions=("6", "5"))
            unchanged.check()
        with subtests.test(msg="items ndjson"):
            items = "".join(f'{{"external_id": "n{i}"}}\n' for i in range(6))
            r = small.post(f"/projects/{pid}/items", content=items, headers={"content-type": "application/x-ndjson"})
            assert_error(r, 413, mentions=("6", "5"))
            unchanged.check()
        with subtests.test(msg="control: exactly max_rows rows are accepted"):
            rows = [{"item": f"i{i}", "rater": "h3", "value": "pass"} for i in range(5)]
            r = small.post(f"/projects/{pid}/labels", json=rows)
            assert r.status_code == 200, r.text
            assert r.json()["accepted"] == 5


# --- raters and project settings ----------------------------------------------------------


def test_bad_raters_are_rejected(client, labelled, unchanged, subtests):
    pid = labelled["id"]
    cases = [
        ("second-primary", {"external_id": "prim2", "kind": "primary"}, 409, "primary_exists", ()),
        ("duplicate-external-id", {"external_id": "h2", "kind": "human"}, 409, None, ("h2",)),
        ("duplicate-primary-id", {"external_id": "prim", "kind": "primary"}, 409, None, ()),
        ("unknown-kind", {"external_id": "h9", "kind": "expert"}, 422, "validation_error", ()),
        ("empty-id", {"external_id": "", "kind": "human"}, 422, "validation_error", ()),
        ("no-id", {"kind": "human"}, 422, "validation_error", ()),
    ]
    for name, body, status, code, mentions in cases:
        with subtests.test(msg=name):
            assert_error(client.post(f"/projects/{pid}/raters", json=body), status, code, mentions=mentions)
            unchanged.check()


def test_primary_in_another_project_is_allowed(client, labelled, other_project):
    """Control: the one-primary rule is per project."""
    r = client.post(f"/projects/{other_project['id']}/raters", json={"external_id": "prim", "kind": "primary"})
    assert r.status_code == 201, r.text


def test_frozen_settings_cannot_change_once_labels_exist(client, labelled, unchanged, subtests):
    cases = [
        ("reorder-labels", {"labels": ["fail", "pass"]}),
        ("add-label", {"labels": ["pass", "fail", "unsure"]}),
        ("scale", {"scale": "ordinal"}),
        ("criteria", {"criteria": ["default", "style"]}),
        ("rename-with-labels", {"name": "renamed", "labels": ["pass", "meh"]}),
    ]
    for name, change in cases:
        with subtests.test(msg=name):
            assert_error(client.patch(f"/projects/{labelled['id']}", json=change), 409, "labels_exist")
            unchanged.check()


def test_renaming_is_allowed_after_labels_exist(client, labelled):
    pid = labelled["id"]
    before = client.get(f"/projects/{pid}").json()
    r = client.patch(f"/projects/{pid}", json={"name": "renamed", "labels": ["pass", "fail"], "scale": "nominal"})
    assert r.status_code == 200, r.text
    after = client.get(f"/projects/{pid}").json()
    assert after == {**before, "name": "renamed"}


def test_labels_and_scale_can_change_before_labels_exist(client, project):
    """Control for the 409: the same change is accepted while no label is stored."""
    pid = project["id"]
    r = client.patch(f"/projects/{pid}", json={"labels": ["fail", "pass", "unsure"], "scale": "ordinal"})
    assert r.status_code == 200, r.text
    assert client.get(f"/projects/{pid}").json()["labels"] == ["fail", "pass", "unsure"]


def test_invalid_project_settings_are_422(client, labelled, unchanged, subtests):
    patches = [
        ("one-label", {"labels": ["pass"]}),
        ("repeated-label", {"labels": ["pass", "pass"]}),
        ("reserved-label", {"labels": ["pass", "INVALID"]}),
        ("unknown-scale", {"scale": "ratio"}),
        ("null-setting", {"allow_abstain": None}),
        ("null-then-valid", {"name": "renamed", "allow_abstain": None}),
        ("unknown-coefficient", {"decision": {"coefficient": "tau"}}),
        ("unknown-field", {"colour": "red"}),
    ]
    for name, change in patches:
        with subtests.test(msg=f"patch {name}"):
            assert_error(client.patch(f"/projects/{labelled['id']}", json=change), 422)
            unchanged.check()
    creates = [
        ("one-label", {"name": "x", "labels": ["a"]}),
        ("reserved-label", {"name": "x", "labels": ["a", "CANNOT_ASSESS"]}),
        ("no-criteria", {"name": "x", "labels": ["a", "b"], "criteria": []}),
        ("delta-out-of-range", {"name": "x", "labels": ["a", "b"], "target": {"delta": 2}}),
        ("no-name", {"labels": ["a", "b"]}),
    ]
    for name, body in creates:
        with subtests.test(msg=f"create {name}"):
            assert_error(client.post("/projects", json=body), 422, "validation_error")
            unchanged.check()


# --- reads: filters and pagination --------------------------------------------------------


def test_bad_export_filters_are_422(client, labelled, unchanged, subtests):
    cases = [
        ("unknown-criterion", {"criterion": "style"}, "invalid"),
        ("unknown-rater", {"rater": "ghost"}, "invalid"),
        ("rater-of-other-project", {"rater": "judge2"}, "invalid"),
        ("negative-since", {"since_seq": -1}, "validation_error"),
        ("unknown-format", {"format": "xml"}, "validation_error"),
        ("bad-bool", {"history": "perhaps"}, "validation_error"),
    ]
    for name, params, code in cases:
        with subtests.test(msg=name):
            assert_error(client.get(f"/projects/{labelled['id']}/labels", params=params), 422, code)
    unchanged.check()


LISTS = ["/projects", "/projects/{pid}/items", "/projects/{pid}/raters", "/projects/{pid}/labels"]


def test_limit_over_the_max_page_size_is_422(client, labelled, subtests):
    for path in LISTS:
        with subtests.test(msg=path):
            url = path.format(pid=labelled["id"])
            assert_error(client.get(url, params={"limit": 1001}), 422, "limit_too_large", mentions=("1000",))
            assert_error(client.get(url, params={"limit": 0}), 422, "validation_error")
            assert_error(client.get(url, params={"limit": "ten"}), 422, "validation_error")
            assert client.get(url, params={"limit": 1000}).status_code == 200


def test_limit_follows_the_configured_max_page_size(labelled, database_url):
    with small_client(database_url, max_page_size=10) as small:
        url = f"/projects/{labelled['id']}/items"
        assert_error(small.get(url, params={"limit": 11}), 422, "limit_too_large", mentions=("10",))
        assert small.get(url, params={"limit": 10}).status_code == 200


def test_bad_cursor_is_422(client, labelled, subtests):
    for path in LISTS:
        for cursor in ["!!!", "bm90IGEgY3Vyc29y", "a2FiYw", "\u00e9t\u00e9", "%", "a"]:
            with subtests.test(msg=f"{path} {cursor}"):
                r = client.get(path.format(pid=labelled["id"]), params={"cursor": cursor})
                assert_error(r, 422, "invalid_cursor")


def test_out_of_range_numbers_are_422_not_500(client, labelled):
    """since_seq and cursors beyond 64 bits are refused before they reach the database."""
    pid = labelled["id"]
    cases = [
        ("since_seq", f"/projects/{pid}/labels", {"since_seq": 2**64}, None),
        ("labels cursor", f"/projects/{pid}/labels", {"cursor": encode_cursor(2**64)}, "invalid_cursor"),
        ("items cursor", f"/projects/{pid}/items", {"cursor": encode_cursor(2**64)}, "invalid_cursor"),
        ("raters cursor", f"/projects/{pid}/raters", {"cursor": encode_cursor(2**64)}, "invalid_cursor"),
        ("projects cursor", "/projects", {"cursor": encode_cursor(2**64)}, "invalid_cursor"),
    ]
    wrong = {}
    for name, path, params, code in cases:
        r = client.get(path, params=params)
        if r.status_code != 422 or (code and r.json().get("error") != code):
            wrong[name] = (r.status_code, r.json().get("error"))
    assert not wrong, wrong


def test_largest_since_seq_is_fine(client, labelled):
    """Control for the test above: the 64-bit maximum is an ordinary, empty filter."""
    r = client.get(f"/projects/{labelled['id']}/labels", params={"since_seq": 2**63 - 1})
    assert r.status_code == 200, r.text
    assert r.json()["items"] == []


def test_nul_characters_are_422_and_write_nothing(client, labelled, unchanged):
    """PostgreSQL cannot store NUL in text; both backends refuse it the same way."""
    pid = labelled["id"]
    cases = [
        ("item id", "POST", f"/projects/{pid}/items", [{"external_id": "a\u0000b"}]),
        ("item text", "POST", f"/projects/{pid}/items", [{"external_id": "x", "text": "a\u0000b"}]),
        ("feature", "POST", f"/projects/{pid}/items", [{"external_id": "x", "features": {"k": "a\u0000"}}]),
        ("rater id", "POST", f"/projects/{pid}/raters", {"external_id": "h\u0000", "kind": "human"}),
        ("project name", "POST", "/projects", {"name": "n\u0000", "labels": ["a", "b"]}),
        (
            "label batch",
            "POST",
            f"/projects/{pid}/labels",
            [{"item": "i1", "rater": "h2", "value": "pass", "batch": "b\u0000"}],
        ),
    ]
    wrong = {}
    for name, method, path, body in cases:
        r = client.request(method, path, json=body)
        if r.status_code != 422:
            wrong[name] = r.status_code
    assert not wrong, wrong
    unchanged.check()


def test_nul_characters_in_labels_and_criteria_are_422(client, labelled, unchanged):
    """List elements are checked too: a label with NUL could never be written."""
    pid = labelled["id"]
    cases = [
        ("POST", "/projects", {"name": "x", "labels": ["a\u0000", "b"]}),
        ("POST", "/projects", {"name": "x", "labels": ["a", "b"], "criteria": ["c\u0000"]}),
        ("PATCH", f"/projects/{pid}", {"criteria": ["default", "c\u0000"]}),  # 409 would do too: labels exist
    ]
    wrong = {}
    for method, path, body in cases:
        r = client.request(method, path, json=body)
        if r.status_code not in (409, 422) or (method == "POST" and r.status_code != 422):
            wrong[f"{method} {path} {body}"] = r.status_code
    assert not wrong, wrong
    unchanged.check()


def test_annotator_may_only_write_its_own_rater(client, labelled, engine):
    pid = labelled["id"]
    made = client.post(f"/projects/{pid}/keys", json={"role": "annotator", "rater": "h2"})
    assert made.status_code == 201, made.text
    unchanged = Unchanged(client, engine, pid)
    annotator = {"Authorization": f"Bearer {made.json()['key']}"}
    rows = [{"item": "i7", "rater": "h2", "value": "pass"}, {"item": "i7", "rater": "h3", "value": "pass"}]
    assert_error(
        client.post(f"/projects/{pid}/labels", json=rows, headers=annotator), 403, "forbidden", mentions=("row 2",)
    )
    unchanged.check()
    r = client.post(f"/projects/{pid}/labels", json=rows[:1], headers=annotator)
    assert r.status_code == 200, r.text  # control: its own rater is fine
    assert r.json()["accepted"] == 1


# --- authentication -----------------------------------------------------------------------

AUTH_CASES = [
    ("missing", None),
    ("unknown-key", "Bearer ak_not_a_key"),
    ("wrong-scheme", f"Basic {ADMIN_KEY}"),
    ("empty-key", "Bearer "),
    ("no-scheme", ADMIN_KEY),
]

ENDPOINTS = [
    ("GET", "/projects", None),
    ("POST", "/projects", {"name": "x", "labels": ["a", "b"]}),
    ("GET", "/projects/{pid}", None),
    ("PATCH", "/projects/{pid}", {"name": "stolen"}),
    ("POST", "/projects/{pid}/keys", {"role": "pm"}),
    ("GET", "/projects/{pid}/items", None),
    ("POST", "/projects/{pid}/items", [{"external_id": "x"}]),
    ("GET", "/projects/{pid}/raters", None),
    ("POST", "/projects/{pid}/raters", {"external_id": "h9", "kind": "human"}),
    ("GET", "/projects/{pid}/labels", None),
    ("POST", "/projects/{pid}/labels", GOOD),
]


def test_missing_or_invalid_key_is_401_everywhere(client, labelled, unchanged, subtests):
    anon = TestClient(client.app, raise_server_exceptions=False)  # the same server: no lifespan of its own
    assert "authorization" not in anon.headers
    for name, authorization in AUTH_CASES:
        headers = {"Authorization": authorization} if authorization is not None else {}
        with subtests.test(msg=name):
            for method, path, body in ENDPOINTS:
                r = anon.request(method, path.format(pid=labelled["id"]), json=body, headers=headers)
                assert_error(r, 401, "unauthorized")
                assert r.headers.get("www-authenticate", "").lower().startswith("bearer"), (method, path)
    unchanged.check()
    assert anon.get("/healthz").status_code == 200  # the one open endpoint


def test_a_project_key_cannot_reach_another_project(client, labelled, other_project, engine):
    made = client.post(f"/projects/{other_project['id']}/keys", json={"role": "pm"})
    assert made.status_code == 201, made.text
    pid = labelled["id"]
    unchanged = Unchanged(client, engine, pid)
    other_pm = {"Authorization": f"Bearer {made.json()['key']}"}
    for method, path, body in [e for e in ENDPOINTS if "{pid}" in e[1] and "/keys" not in e[1]]:
        r = client.request(method, path.format(pid=pid), json=body, headers=other_pm)
        assert_error(r, 404, "not_found")  # its existence stays hidden
    unchanged.check()
    r = client.get(f"/projects/{other_project['id']}/items", headers=other_pm)
    assert r.status_code == 200, r.text  # control: its own project is visible


def test_revoked_key_is_401(client, labelled, engine):
    pid = labelled["id"]
    made = client.post(f"/projects/{pid}/keys", json={"role": "pm"})
    assert made.status_code == 201, made.text
    secret, kid = made.json()["key"], made.json()["id"]
    assert client.get(f"/projects/{pid}", headers={"Authorization": f"Bearer {secret}"}).status_code == 200
    assert client.delete(f"/projects/{pid}/keys/{kid}").status_code == 204
    guard = Unchanged(client, engine, pid)
    r = client.post(f"/projects/{pid}/labels", json=GOOD, headers={"Authorization": f"Bearer {secret}"})
    assert_error(r, 401, "unauthorized")
    guard.check()
