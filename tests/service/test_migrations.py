"""Issue 2 item 6: the migrations upgrade, downgrade and upgrade again on a fresh database, and
the ORM models match what they build.

Runs on a SQLite file in tmp_path, or on ``ANNOPLAN_TEST_DATABASE_URL`` when set. That
PostgreSQL database is shared with the other tests' fixtures, so every test here leaves it
migrated to head.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, insert, inspect, select, text
from sqlalchemy.exc import IntegrityError

from service.app import create_app
from service.core.db import make_engine
from service.core.settings import Settings
from service.data.models import Base, Project, Rater
from tests.conftest import alembic_config

PG_URL = os.environ.get("ANNOPLAN_TEST_DATABASE_URL")
ADMIN_KEY = "ak_migration_test_key"


@pytest.fixture
def fresh_url(tmp_path: Path) -> Iterator[str]:
    """An empty database (SQLite), or the PostgreSQL test database, left at head afterwards."""
    if not PG_URL:
        yield f"sqlite:///{tmp_path / 'migrations.db'}"
        return
    command.downgrade(alembic_config(PG_URL), "base")
    try:
        yield PG_URL
    finally:
        command.upgrade(alembic_config(PG_URL), "head")


@pytest.fixture
def engine(fresh_url: str) -> Iterator[Engine]:
    engine = make_engine(fresh_url)
    yield engine
    engine.dispose()


def schema(engine: Engine) -> dict:
    """The reflected schema: columns, keys, foreign keys (with ON DELETE), indexes and their predicates."""
    insp = inspect(engine)
    out = {}
    for table in sorted(insp.get_table_names()):
        if table == "alembic_version":
            continue
        out[table] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"]) for c in insp.get_columns(table)],
            "pk": insp.get_pk_constraint(table)["constrained_columns"],
            "fks": sorted(
                (
                    f["name"],
                    tuple(f["constrained_columns"]),
                    f["referred_table"],
                    tuple(f["referred_columns"]),
                    (f.get("options") or {}).get("ondelete"),
                )
                for f in insp.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (
                    i["name"],
                    tuple(i["column_names"]),
                    bool(i["unique"]),
                    str((i.get("dialect_options") or {}).get(f"{engine.dialect.name}_where")),
                )
                for i in insp.get_indexes(table)
            ),
            "uniques": sorted((u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(table)),
        }
    return out


def revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def model_diffs(engine: Engine) -> list:
    """What autogenerate would add to a new migration: nothing when models and migrations agree."""
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(ctx, Base.metadata)


def test_one_linear_history():
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    assert len(script.get_heads()) == 1
    assert len(script.get_bases()) == 1
    for rev in script.walk_revisions():
        assert rev.doc and rev.doc.strip(), f"revision {rev.revision} has no message"


def test_upgrade_downgrade_upgrade(fresh_url, engine):
    cfg = alembic_config(fresh_url)
    head = ScriptDirectory.from_config(cfg).get_current_head()
    command.upgrade(cfg, "head")
    assert revision(engine) == head
    first = schema(engine)
    assert set(first) == set(Base.metadata.tables)
    command.downgrade(cfg, "base")
    assert revision(engine) is None
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    command.upgrade(cfg, "head")
    assert revision(engine) == head
    assert schema(engine) == first


def test_each_revision_steps_up_and_down(fresh_url, engine):
    cfg = alembic_config(fresh_url)
    script = ScriptDirectory.from_config(cfg)
    order = [rev.revision for rev in reversed(list(script.walk_revisions()))]
    for rev in order:
        command.upgrade(cfg, "+1")
        assert revision(engine) == rev
    for rev in reversed(order):
        assert revision(engine) == rev
        command.downgrade(cfg, "-1")
    assert revision(engine) is None
    command.upgrade(cfg, "head")


def test_models_match_the_migrations(fresh_url, engine):
    command.upgrade(alembic_config(fresh_url), "head")
    assert model_diffs(engine) == []


def test_model_comparison_can_see_a_drift(fresh_url, engine):
    """Control for the test above: a schema one index short is reported."""
    command.upgrade(alembic_config(fresh_url), "head")
    (index,) = [i for i in Base.metadata.tables["items"].indexes if i.name == "ix_items_project_id_id"]
    with engine.begin() as conn:
        index.drop(conn)
    try:
        diffs = model_diffs(engine)
    finally:
        with engine.begin() as conn:
            index.create(conn)  # leave a shared PostgreSQL database as migrated
    assert any(d[0] == "add_index" and d[1].name == "ix_items_project_id_id" for d in diffs), diffs
    assert model_diffs(engine) == []


@pytest.mark.skipif(bool(PG_URL), reason="compares with metadata.create_all on a second SQLite file")
def test_migrated_schema_equals_the_models_create_all(fresh_url, engine, tmp_path):
    """Stricter than autogenerate: also ON DELETE actions and partial-index predicates."""
    command.upgrade(alembic_config(fresh_url), "head")
    direct = create_engine(f"sqlite:///{tmp_path / 'create_all.db'}")
    Base.metadata.create_all(direct)
    try:
        assert schema(engine) == schema(direct)
    finally:
        direct.dispose()


def test_at_most_one_primary_is_enforced_by_the_schema(fresh_url, engine):
    """The migration's partial unique index, not only the endpoint, keeps one primary per project."""
    command.upgrade(alembic_config(fresh_url), "head")
    common = {
        "labels": ["a", "b"],
        "scale": "nominal",
        "criteria": ["default"],
        "allow_abstain": False,
        "decision": {},
        "target": {},
        "label_seq": 0,
        "item_count": 0,
    }
    with engine.begin() as conn:
        conn.execute(insert(Project), [{"id": "p1", "name": "one", **common}, {"id": "p2", "name": "two", **common}])
        conn.execute(
            insert(Rater),
            [
                {"project_id": "p1", "external_id": "prim", "kind": "primary"},
                {"project_id": "p1", "external_id": "h1", "kind": "human"},
                {"project_id": "p1", "external_id": "h2", "kind": "human"},
                {"project_id": "p2", "external_id": "prim", "kind": "primary"},
            ],
        )
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(Rater), [{"project_id": "p1", "external_id": "prim2", "kind": "primary"}])
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(insert(Rater), [{"project_id": "p1", "external_id": "h1", "kind": "judge"}])
    with engine.connect() as conn:
        assert conn.execute(
            select(Rater.external_id).where(Rater.project_id == "p1").order_by(Rater.id)
        ).scalars().all() == ["prim", "h1", "h2"]


def test_downgrade_with_data_and_upgrade_to_an_empty_working_database(fresh_url, engine):
    """A populated database downgrades cleanly, and the re-upgraded one serves the app from scratch."""
    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "head")
    settings = Settings(database_url=fresh_url, admin_key=ADMIN_KEY)

    def session_client() -> TestClient:
        c = TestClient(create_app(settings), raise_server_exceptions=False)
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        return c

    with session_client() as c:
        pid = c.post("/projects", json={"name": "m", "labels": ["a", "b"]}).json()["id"]
        assert c.post(f"/projects/{pid}/raters", json={"external_id": "j", "kind": "judge"}).status_code == 201
        assert c.post(f"/projects/{pid}/items", json=[{"external_id": "x"}]).status_code == 200
        r = c.post(
            f"/projects/{pid}/labels",
            json=[{"item": "x", "rater": "j", "value": "a"}],
            headers={"Idempotency-Key": "m"},
        )
        assert r.status_code == 200, r.text
        assert c.post(f"/projects/{pid}/keys", json={"role": "pm"}).status_code == 201
    engine.dispose()  # release pooled connections before DDL
    command.downgrade(cfg, "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    command.upgrade(cfg, "head")
    with session_client() as c:
        assert c.get("/healthz").json() == {"status": "ok", "database": "ok"}
        assert c.get("/projects").json() == {"items": [], "next_cursor": None}
        assert c.post("/projects", json={"name": "again", "labels": ["a", "b"]}).status_code == 201


def test_primary_cursor_migration_keeps_existing_lists_and_counts(fresh_url, engine):
    """0007 on data: the primary's materialised list becomes its cursor (rows kept, as issued items),
    labeled items are counted per rater across criteria; the downgrade drops both and keeps the rows."""
    from sqlalchemy import text

    from service.data.models import Assignment, CurrentLabel, Item, Plan

    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0006_id_keys")
    with engine.begin() as conn:
        conn.execute(
            insert(Project),
            [
                {
                    "id": "p1",
                    "name": "one",
                    "labels": ["a", "b"],
                    "scale": "nominal",
                    "criteria": ["x", "y"],
                    "allow_abstain": False,
                    "decision": {},
                    "target": {},
                    "label_seq": 3,
                    "item_count": 3,
                }
            ],
        )
        conn.execute(
            insert(Rater),
            [
                {"id": 1, "project_id": "p1", "external_id": "prim", "kind": "primary"},
                {"id": 2, "project_id": "p1", "external_id": "h2", "kind": "human"},
            ],
        )
        conn.execute(
            insert(Item),
            [
                {"id": k, "project_id": "p1", "external_id": f"i{k}", "position": k - 1, "features": {}}
                for k in (1, 2, 3)
            ],
        )
        conn.execute(
            insert(Plan),
            [
                {
                    "id": "plan1",
                    "project_id": "p1",
                    "purpose": "certify",
                    "source": "prior",
                    "design": "strat",
                    "seed": 1,
                    "params": {},
                    "recipe": {},
                    "label_seq": 0,
                }
            ],
        )
        conn.execute(
            insert(Assignment),
            [{"project_id": "p1", "rater_id": 1, "item_id": k, "plan_id": "plan1", "position": k - 1} for k in (1, 2)],
        )
        conn.execute(
            insert(CurrentLabel),
            [
                {"item_id": i, "rater_id": r, "criterion": c, "project_id": "p1", "value": "a", "seq": s}
                for s, (i, r, c) in enumerate([(1, 1, "x"), (1, 1, "y"), (2, 2, "x")])
            ],
        )
    command.upgrade(cfg, "0007_primary_cursor")
    with engine.connect() as conn:
        cursors = conn.execute(text("SELECT external_id, issued_through FROM raters ORDER BY id")).all()
        counts = conn.execute(text("SELECT rater_id, labeled_items FROM rater_progress ORDER BY rater_id")).all()
    assert [tuple(r) for r in cursors] == [("prim", 2), ("h2", None)]
    assert [tuple(r) for r in counts] == [(1, 1), (2, 1)]
    command.downgrade(cfg, "0006_id_keys")
    with engine.connect() as conn:
        assert "issued_through" not in {c["name"] for c in inspect(conn).get_columns("raters")}
        assert "rater_progress" not in inspect(conn).get_table_names()
        assert conn.scalar(text("SELECT count(*) FROM assignments")) == 2
    command.upgrade(cfg, "head")


def _two_projects(conn) -> None:
    """Projects p1 (items 1, 2) and p2 (item 3), each with one human rater (1 and 2): the label migrations' data."""
    from service.data.models import Item

    conn.execute(
        insert(Project),
        [
            {
                "id": p,
                "name": p,
                "labels": ["a", "b"],
                "scale": "nominal",
                "criteria": ["x"],
                "allow_abstain": False,
                "decision": {},
                "target": {},
                "label_seq": 3,
                "item_count": 2,
            }
            for p in ("p1", "p2")
        ],
    )
    conn.execute(
        insert(Rater),
        [{"id": r, "project_id": p, "external_id": "h", "kind": "human"} for r, p in [(1, "p1"), (2, "p2")]],
    )
    conn.execute(
        insert(Item),
        [
            {"id": k, "project_id": "p1" if k < 3 else "p2", "external_id": f"i{k}", "position": k, "features": {}}
            for k in (1, 2, 3)
        ],
    )


def test_label_storage_migration_keeps_every_event_and_current_label(fresh_url, engine):
    """0009 on data: events and current labels survive the upgrade and the downgrade unchanged; on
    SQLite both tables become WITHOUT ROWID; only the project foreign key stays; after the downgrade
    events get ids and the item and rater foreign keys again."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    from service.data.models import CurrentLabel, LabelEvent

    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0008_pool_scores")
    stamp = datetime(2026, 11, 30, 20, 30, 1, 123456, tzinfo=UTC)
    events = [
        {
            "project_id": p,
            "seq": s,
            "item_id": i,
            "rater_id": 1 if p == "p1" else 2,
            "criterion": "x",
            "value": v,
            "batch_id": b,
            "created_at": stamp,
            "kind": k,
        }
        for p, s, i, v, b, k in [
            ("p1", 1, 1, "a", None, "label"),
            ("p2", 1, 3, "b", "bt", "label"),
            ("p1", 2, 2, "b", None, "label"),
            ("p1", 3, 1, None, None, "retraction"),
            ("p2", 2, 3, "a", None, "label"),
        ]
    ]
    current = [(2, 1, "x", "p1", "b", 2), (3, 2, "x", "p2", "a", 2)]
    with engine.begin() as conn:
        _two_projects(conn)
        conn.execute(insert(LabelEvent), events)  # ids from the table at 0008
        conn.execute(
            insert(CurrentLabel),
            [
                dict(zip(("item_id", "rater_id", "criterion", "project_id", "value", "seq"), c, strict=True))
                for c in current
            ],
        )

    def stored() -> tuple[list, list]:
        with engine.connect() as conn:
            e = conn.execute(
                select(*(LabelEvent.__table__.c[c] for c in events[0])).order_by(LabelEvent.project_id, LabelEvent.seq)
            ).all()
            c = conn.execute(select(*_before_0015(CurrentLabel)).order_by(CurrentLabel.item_id)).all()
        return [tuple(r) for r in e], [tuple(r) for r in c]

    def parents() -> dict[str, set[str]]:
        insp = inspect(engine)
        return {t: {f["referred_table"] for f in insp.get_foreign_keys(t)} for t in ("label_events", "current_labels")}

    assert parents() == {t: {"projects", "items", "raters"} for t in ("label_events", "current_labels")}
    expected = ([tuple(e.values()) for e in sorted(events, key=lambda e: (e["project_id"], e["seq"]))], current)
    assert stored() == expected
    command.upgrade(cfg, "0009_label_storage")
    assert stored() == expected
    assert parents() == {t: {"projects"} for t in ("label_events", "current_labels")}
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            ddl = dict(conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")).all())
        assert "WITHOUT ROWID" in ddl["label_events"] and "WITHOUT ROWID" in ddl["current_labels"]
        assert "WITHOUT ROWID" not in ddl["items"]
    command.downgrade(cfg, "0008_pool_scores")
    assert stored() == expected
    assert parents() == {t: {"projects", "items", "raters"} for t in ("label_events", "current_labels")}
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO label_events (project_id, seq, item_id, rater_id, criterion, value, "
                "created_at, kind) VALUES ('p1', 4, 2, 1, 'x', 'a', :t, 'label')"
            ),
            {"t": stamp},
        )
        ids = conn.execute(text("SELECT id FROM label_events ORDER BY id")).scalars().all()
    assert len(set(ids)) == 6 and None not in ids
    command.upgrade(cfg, "head")
    assert len(stored()[0]) == 6


def _before_0015(model) -> list:
    """A label table's columns but those added since 0015 (``confidence``, the arrival ``rank``, the pairwise
    ``shown_order``): what the tables of earlier revisions hold."""
    return [c for c in model.__table__.c if c.name not in ("confidence", "rank", "shown_order")]


def _store_labels(engine, events: list[dict], current: list[tuple]) -> None:
    """The two projects of :func:`_two_projects` with these label events and current labels."""
    from service.data.models import CurrentLabel, LabelEvent

    columns = ("item_id", "rater_id", "criterion", "project_id", "value", "seq")
    with engine.begin() as conn:
        _two_projects(conn)
        conn.execute(insert(LabelEvent), events)
        conn.execute(insert(CurrentLabel), [dict(zip(columns, c, strict=True)) for c in current])


def _stored_labels(engine) -> tuple[list, list]:
    """Every label event and current label, in the order of their project and seq."""
    from service.data.models import CurrentLabel, LabelEvent

    with engine.connect() as conn:
        e = conn.execute(select(*_before_0015(LabelEvent)).order_by(LabelEvent.project_id, LabelEvent.seq)).all()
        c = conn.execute(select(*_before_0015(CurrentLabel)).order_by(CurrentLabel.project_id, CurrentLabel.seq)).all()
    return [tuple(r) for r in e], [tuple(r) for r in c]


def test_label_project_keys_migration_keeps_every_label_and_drops_only_the_project_key(fresh_url, engine):
    """0010 on data: events and current labels survive the upgrade and the downgrade unchanged; the label
    tables lose the project's foreign key (and get it back, cascade included, on the downgrade); on
    SQLite they stay WITHOUT ROWID, with the current labels' (project, seq) index."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0009_label_storage")
    stamp = datetime(2026, 11, 30, 23, 30, 1, 654321, tzinfo=UTC)
    events = [
        {
            "project_id": p,
            "seq": s,
            "item_id": i,
            "rater_id": r,
            "criterion": "x",
            "value": v,
            "batch_id": b,
            "created_at": stamp,
            "kind": k,
        }
        for p, s, i, r, v, b, k in [
            ("p1", 1, 1, 1, "a", None, "label"),
            ("p2", 1, 3, 2, "b", "bt", "label"),
            ("p1", 2, 2, 1, "b", None, "label"),
            ("p1", 3, 1, 1, None, None, "retraction"),
        ]
    ]
    current = [(2, 1, "x", "p1", "b", 2), (3, 2, "x", "p2", "b", 1)]
    _store_labels(engine, events, current)

    def keys() -> dict[str, list]:
        insp = inspect(engine)
        return {
            t: [(f["referred_table"], (f.get("options") or {}).get("ondelete")) for f in insp.get_foreign_keys(t)]
            for t in ("label_events", "current_labels")
        }

    def layout() -> tuple[bool, list]:
        index = [i["column_names"] for i in inspect(engine).get_indexes("current_labels")]
        if engine.dialect.name != "sqlite":
            return True, index
        with engine.connect() as conn:
            ddl = [
                sql
                for (sql,) in conn.execute(
                    text("SELECT sql FROM sqlite_master WHERE name IN ('label_events', 'current_labels')")
                )
            ]
        return all("WITHOUT ROWID" in d for d in ddl), index

    expected = _stored_labels(engine)
    assert len(expected[0]) == 4 and len(expected[1]) == 2
    assert keys() == {t: [("projects", "CASCADE")] for t in ("label_events", "current_labels")}
    command.upgrade(cfg, "0010_label_project_keys")
    assert _stored_labels(engine) == expected
    assert keys() == {"label_events": [], "current_labels": []}
    assert layout() == (True, [["project_id", "seq"]])
    command.downgrade(cfg, "0009_label_storage")
    assert _stored_labels(engine) == expected
    assert keys() == {t: [("projects", "CASCADE")] for t in ("label_events", "current_labels")}
    assert layout() == (True, [["project_id", "seq"]])
    command.upgrade(cfg, "head")
    assert _stored_labels(engine) == expected


def test_current_label_keys_migration_keeps_every_label_and_only_rekeys_current_labels(fresh_url, engine):
    """0011 on data: events and current labels survive the upgrade and the downgrade unchanged; current_labels
    is keyed rater first with no other index (and gets its item-first key and (project, seq) index back on
    the downgrade); on SQLite it stays WITHOUT ROWID."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0010_label_project_keys")
    stamp = datetime(2026, 12, 1, 5, 45, 1, 123456, tzinfo=UTC)
    events = [
        {
            "project_id": p,
            "seq": s,
            "item_id": i,
            "rater_id": r,
            "criterion": c,
            "value": v,
            "batch_id": None,
            "created_at": stamp,
            "kind": "label",
        }
        for p, s, i, r, c, v in [
            ("p1", 1, 2, 1, "x", "a"),
            ("p1", 2, 1, 1, "x", "b"),
            ("p1", 3, 1, 1, "y", "a"),
            ("p2", 1, 3, 2, "x", "b"),
        ]
    ]
    current = [
        (2, 1, "x", "p1", "a", 1),
        (1, 1, "x", "p1", "b", 2),
        (1, 1, "y", "p1", "a", 3),
        (3, 2, "x", "p2", "b", 1),
    ]
    _store_labels(engine, events, current)

    def layout() -> tuple[bool, list, list]:
        insp = inspect(engine)
        key = insp.get_pk_constraint("current_labels")["constrained_columns"]
        index = [i["column_names"] for i in insp.get_indexes("current_labels")]
        if engine.dialect.name != "sqlite":
            return True, key, index
        with engine.connect() as conn:
            (ddl,) = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'current_labels'")).one()
        return "WITHOUT ROWID" in ddl, key, index

    expected = _stored_labels(engine)
    assert len(expected[0]) == 4 and len(expected[1]) == 4
    assert layout() == (True, ["item_id", "rater_id", "criterion"], [["project_id", "seq"]])
    command.upgrade(cfg, "0011_current_label_keys")
    assert _stored_labels(engine) == expected
    assert layout() == (True, ["rater_id", "item_id", "criterion"], [])
    command.downgrade(cfg, "0010_label_project_keys")
    assert _stored_labels(engine) == expected
    assert layout() == (True, ["item_id", "rater_id", "criterion"], [["project_id", "seq"]])
    command.upgrade(cfg, "head")
    assert _stored_labels(engine) == expected


def test_a_scale_or_role_outside_its_values_is_refused_by_the_schema(fresh_url, engine):
    """The CHECK constraints of the typed columns hold on the migrated database, not only in pydantic."""
    command.upgrade(alembic_config(fresh_url), "head")
    project = {
        "id": "p1",
        "name": "one",
        "labels": ["a", "b"],
        "criteria": ["default"],
        "allow_abstain": False,
        "decision": {},
        "target": {},
        "label_seq": 0,
        "item_count": 0,
    }
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO projects (id, name, labels, scale, criteria, allow_abstain, decision, target, "
                "label_seq, item_count, created_at) VALUES ('p0', 'x', '[]', 'ratio', '[]', false, '{}', "
                "'{}', 0, 0, CURRENT_TIMESTAMP)"
            )
        )
    with engine.begin() as conn:
        conn.execute(insert(Project), [{**project, "scale": "ordinal"}])
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            text("INSERT INTO api_keys (id, key_hash, role, created_at) VALUES ('k1', 'h', 'owner', CURRENT_TIMESTAMP)")
        )


@pytest.mark.skipif(bool(PG_URL), reason="rows without their webhook and event: SQLite without foreign keys")
def test_outbound_errors_migration_drops_stored_target_answers(fresh_url, engine):
    """Issue 30: the delivery log kept 300 characters of a target's answer; the migration keeps ours only."""
    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0011_current_label_keys")
    rows = [
        (1, 500, "HTTP 500: INTERNAL-SECRET root:x:0:0"),
        (2, None, "ConnectError: [Errno 111] Connection refused"),
        (3, None, "the host 'x' resolves to 127.0.0.1, a loopback address"),
        (4, None, None),
    ]
    import sqlite3

    raw = sqlite3.connect(engine.url.database)  # foreign keys off: rows without their webhook and event
    with raw:
        raw.executemany(
            "INSERT INTO webhook_deliveries (id, webhook_id, event_id, status, attempts, next_attempt_at, "
            "retry_until, last_status_code, last_error, created_at) VALUES (?, 'wh', 'ev', 'failed', 1, "
            "'2026-12-01', '2026-12-02', ?, ?, '2026-12-01')",
            rows,
        )
    raw.close()
    command.upgrade(cfg, "head")
    with engine.connect() as conn:
        stored = dict(conn.execute(text("SELECT id, last_error FROM webhook_deliveries")).all())
    assert stored == {
        1: "HTTP 500",
        2: "the request failed",
        3: "the host 'x' resolves to 127.0.0.1, a loopback address",
        4: None,
    }


def test_label_studio_links_migration_keeps_every_link_and_keys_it_by_criterion(fresh_url, engine):
    """0013 on data: every link survives the upgrade, its task and Label Studio project unknown; after it one
    annotation links a cell per criterion; the downgrade keeps one link per annotation (the lowest criterion)."""
    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0013_outbound_errors")
    old = [("p1", "annotation", 5, 1, 1, "x"), ("p1", "prediction", 6, 2, 1, "x"), ("p2", "annotation", 5, 3, 2, "x")]
    columns = "project_id, source, ls_id, item_id, rater_id, criterion"
    with engine.begin() as conn:
        _two_projects(conn)
        conn.execute(
            text(f"INSERT INTO label_studio_links ({columns}) VALUES (:p, :s, :l, :i, :r, :c)"),
            [dict(zip(("p", "s", "l", "i", "r", "c"), row, strict=True)) for row in old],
        )

    def links(extra: str = "") -> list[tuple]:
        with engine.connect() as conn:
            return sorted(tuple(r) for r in conn.execute(text(f"SELECT {columns}{extra} FROM label_studio_links")))

    command.upgrade(cfg, "0014_label_studio_links")
    assert links(", ls_task, ls_project") == sorted((*row, None, None) for row in old)
    pk = inspect(engine).get_pk_constraint("label_studio_links")["constrained_columns"]
    assert pk == ["project_id", "source", "ls_id", "criterion"]
    with engine.begin() as conn:  # annotation 5 of p1 under a second criterion: a second link, not an overwrite
        conn.execute(
            text(
                f"INSERT INTO label_studio_links ({columns}, ls_task, ls_project) "
                "VALUES ('p1', 'annotation', 5, 1, 1, 'y', 8, 1)"
            )
        )
    assert len(links()) == 4
    command.downgrade(cfg, "0013_outbound_errors")
    assert links() == sorted(old)
    assert inspect(engine).get_pk_constraint("label_studio_links")["constrained_columns"] == [
        "project_id",
        "source",
        "ls_id",
    ]
    command.upgrade(cfg, "head")
    assert links() == sorted(old)


def test_label_confidence_migration_keeps_every_label_with_no_confidence(fresh_url, engine):
    """0015 on data: events and current labels keep their rows, confidence null, and the downgrade drops only it."""
    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0014_label_studio_links")
    events = [
        {"project_id": "p1", "seq": 1, "item_id": 1, "rater_id": 1, "criterion": "x", "value": "a", "kind": "label"},
        {"project_id": "p1", "seq": 2, "item_id": 2, "rater_id": 1, "criterion": "x", "value": "b", "kind": "label"},
    ]
    current = [(1, 1, "x", "p1", "a", 1), (2, 1, "x", "p1", "b", 2)]
    with engine.begin() as conn:
        _two_projects(conn)
        conn.execute(
            text(
                "INSERT INTO label_events (project_id, seq, item_id, rater_id, criterion, value, created_at, kind) "
                "VALUES (:project_id, :seq, :item_id, :rater_id, :criterion, :value, CURRENT_TIMESTAMP, :kind)"
            ),
            events,
        )
        conn.execute(
            text(
                "INSERT INTO current_labels (item_id, rater_id, criterion, project_id, value, seq) "
                "VALUES (:i, :r, :c, :p, :v, :s)"
            ),
            [dict(zip("ircpvs", row, strict=True)) for row in current],
        )
    command.upgrade(cfg, "0015_label_confidence")
    with engine.connect() as conn:
        got = conn.execute(text("SELECT item_id, value, confidence FROM current_labels ORDER BY item_id")).all()
        n_events = conn.execute(text("SELECT count(*) FROM label_events WHERE confidence IS NULL")).scalar_one()
    assert [tuple(r) for r in got] == [(1, "a", None), (2, "b", None)] and n_events == 2
    command.downgrade(cfg, "0014_label_studio_links")
    assert "confidence" not in {c["name"] for c in inspect(engine).get_columns("current_labels")}
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM current_labels")).scalar_one() == 2
    command.upgrade(cfg, "head")


def test_numeric_scale_migration_admits_numeric_projects_and_downgrades_them_to_interval(fresh_url, engine):
    """0019: the scale constraint admits 'numeric', value_range is stored; a downgrade turns a numeric project
    into an interval one whose labels are the distinct numbers it was given, in numeric order."""
    command.upgrade(alembic_config(fresh_url), "head")
    project = {
        "id": "p1",
        "name": "ratings",
        "labels": [],
        "scale": "numeric",
        "value_range": {"min": 1.0, "max": 10.0, "step": None},
        "criteria": ["default"],
        "allow_abstain": True,
        "decision": {},
        "target": {},
        "label_seq": 4,
        "item_count": 0,
    }
    with engine.begin() as conn:
        conn.execute(insert(Project), [project])
        assert conn.execute(select(Project.value_range)).scalar_one() == {"min": 1.0, "max": 10.0, "step": None}
        for seq, value in enumerate(["10", "2.5", "CANNOT_ASSESS", "2.5", None], start=1):
            conn.execute(
                text(
                    "INSERT INTO label_events (project_id, seq, item_id, rater_id, criterion, value, created_at, kind) "
                    "VALUES ('p1', :seq, 1, 1, 'default', :value, CURRENT_TIMESTAMP, :kind)"
                ),
                {"seq": seq, "value": value, "kind": "label" if value else "retraction"},
            )
    command.downgrade(alembic_config(fresh_url), "0018_judge_versions")
    with engine.begin() as conn:
        scale, labels = conn.execute(text("SELECT scale, labels FROM projects")).one()
        assert scale == "interval" and (json.loads(labels) if isinstance(labels, str) else labels) == ["2.5", "10"]
        conn.execute(text("DELETE FROM label_events"))
        conn.execute(text("DELETE FROM projects"))
    command.upgrade(alembic_config(fresh_url), "head")


def test_pairwise_order_migration_keys_current_labels_by_order_and_downgrades_to_the_ab_label(fresh_url, engine):
    """0026 on data: every label keeps its row with order '' and every project is pointwise; a judge then holds
    a label per order, and the downgrade keeps the AB one current (the events all stay)."""
    cfg = alembic_config(fresh_url)
    command.upgrade(cfg, "0025_ls_user_raters")
    with engine.begin() as conn:
        _two_projects(conn)
        conn.execute(
            text(
                "INSERT INTO label_events (project_id, seq, item_id, rater_id, criterion, value, created_at, kind) "
                "VALUES ('p1', 1, 1, 1, 'x', 'a', CURRENT_TIMESTAMP, 'label')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO current_labels (item_id, rater_id, criterion, project_id, value, seq) "
                "VALUES (1, 1, 'x', 'p1', 'a', 1)"
            )
        )
    command.upgrade(cfg, "0026_pairwise_order")
    with engine.begin() as conn:
        assert conn.execute(text("SELECT DISTINCT kind FROM projects")).scalars().all() == ["pointwise"]
        assert conn.execute(text("SELECT item_id, value, shown_order FROM current_labels")).all() == [(1, "a", "")]
        assert conn.execute(text("SELECT shown_order FROM label_events")).scalars().all() == [""]
        conn.execute(text("UPDATE projects SET kind = 'pairwise' WHERE id = 'p2'"))
        for seq, order, value in ((2, "AB", "a"), (3, "BA", "b")):
            conn.execute(
                text(
                    "INSERT INTO label_events (project_id, seq, item_id, rater_id, criterion, value, created_at, "
                    "kind, shown_order) VALUES ('p2', :s, 3, 2, 'x', :v, CURRENT_TIMESTAMP, 'label', :o)"
                ),
                {"s": seq, "o": order, "v": value},
            )
            conn.execute(
                text(
                    "INSERT INTO current_labels (item_id, rater_id, criterion, project_id, value, seq, shown_order) "
                    "VALUES (3, 2, 'x', 'p2', :v, :s, :o)"
                ),
                {"s": seq, "o": order, "v": value},
            )
    with pytest.raises(IntegrityError), engine.begin() as conn:  # one label per (cell, order)
        conn.execute(
            text(
                "INSERT INTO current_labels (item_id, rater_id, criterion, project_id, value, seq, shown_order) "
                "VALUES (3, 2, 'x', 'p2', 'a', 4, 'BA')"
            )
        )
    command.downgrade(cfg, "0025_ls_user_raters")
    with engine.connect() as conn:
        got = conn.execute(text("SELECT item_id, value, seq FROM current_labels ORDER BY item_id")).all()
        assert [tuple(r) for r in got] == [(1, "a", 1), (3, "a", 2)]
        assert conn.execute(text("SELECT count(*) FROM label_events")).scalar_one() == 3
    assert "kind" not in {c["name"] for c in inspect(engine).get_columns("projects")}
    command.upgrade(cfg, "head")
