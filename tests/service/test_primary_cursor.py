"""The primary's batches read the corpus through a cursor (issue 20): no list of one row per item,
labeled items skipped, returned and retracted items issued again, and the labeled-item counts
behind ``remaining`` kept equal to the labels in hand."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from service.app import create_app
from service.core.db import session_scope
from service.core.settings import Settings
from service.data.labels import retract_labels
from service.data.models import Assignment, CurrentLabel, Item, Project, Rater, RaterProgress
from service.documents.sessions import worker_sessionmaker
from tests.conftest import ADMIN_KEY
from tests.factories import create_project


@pytest.fixture
def c(database_url: str) -> Iterator[TestClient]:
    """An admin client of an app whose leases last one second."""
    settings = Settings(database_url=database_url, admin_key=ADMIN_KEY, lease_seconds=1)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield client


def corpus(c: TestClient, n_items: int, **settings: Any) -> str:
    pid = create_project(c, items=[f"i{i}" for i in range(n_items)], **settings)
    r = c.post(f"/projects/{pid}/plan", json={"p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 1, "m": 10})
    assert r.status_code == 201, r.text
    return pid


def batch(c: TestClient, pid: str, size: int) -> dict:
    r = c.post(f"/projects/{pid}/batches", json={"size": size, "rater": "prim"})
    assert r.status_code == 200, r.text
    return r.json()


def label(c: TestClient, pid: str, items: list[str], criterion: str | None = None) -> None:
    rows = [
        {"item": i, "rater": "prim", "value": "pass", **({"criterion": criterion} if criterion else {})} for i in items
    ]
    r = c.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 200 and r.json()["accepted"] == len(items), r.text


def retract(engine: Engine, pid: str, items: list[str], criterion: str = "default") -> int:
    """Retract the primary's labels of ``items`` the way a Label Studio deletion does."""
    with session_scope(worker_sessionmaker(engine), write=True) as s:
        project = s.get(Project, pid)
        assert project is not None
        prim = s.scalar(select(Rater.id).where(Rater.project_id == pid, Rater.external_id == "prim"))
        ids = s.scalars(select(Item.id).where(Item.project_id == pid, Item.external_id.in_(items))).all()
        return retract_labels(s, project, [(i, prim, criterion) for i in ids]).retracted


def primary_rows(engine: Engine, pid: str) -> int:
    with engine.connect() as conn:
        return (
            conn.scalar(
                select(func.count())
                .select_from(Assignment)
                .join(Rater, Rater.id == Assignment.rater_id)
                .where(Rater.project_id == pid, Rater.kind == "primary")
            )
            or 0
        )


def names(n: range) -> list[str]:
    return [f"i{i}" for i in n]


def test_the_primary_gets_corpus_order_without_a_row_per_item(c, engine):
    pid = corpus(c, 300)
    first = batch(c, pid, 5)
    assert first["items"] == names(range(5)) and first["remaining"] == 300 and not first["done"]
    assert primary_rows(engine, pid) == 5  # the 300-item list is not built
    label(c, pid, first["items"])
    second = batch(c, pid, 5)
    assert second["items"] == names(range(5, 10)) and second["remaining"] == 295
    assert primary_rows(engine, pid) == 5  # rows of labeled items are dropped: only the 5 out for labeling


def test_labeled_items_are_skipped_and_returned_ones_come_first(c, engine):
    pid = corpus(c, 40)
    label(c, pid, names(range(2, 30)))  # labeled outside any batch, ahead of the cursor
    a = batch(c, pid, 3)
    assert a["items"] == ["i0", "i1", "i30"] and a["remaining"] == 12
    b = batch(c, pid, 2)
    assert b["items"] == ["i31", "i32"]
    label(c, pid, ["i0"])
    time.sleep(1.1)  # a's and b's leases expire: their unlabeled items return, in corpus order, before new ones
    again = batch(c, pid, 6)
    assert again["items"] == ["i1", "i30", "i31", "i32", "i33", "i34"] and again["remaining"] == 11
    label(c, pid, again["items"])
    rest = batch(c, pid, 10)
    assert rest["items"] == names(range(35, 40)) and rest["remaining"] == 5
    label(c, pid, rest["items"])
    end = batch(c, pid, 10)
    assert end["items"] == [] and end["done"] is True and end["remaining"] == 0


def test_a_retracted_label_behind_the_cursor_is_issued_again(c, engine):
    pid = corpus(c, 20)
    out = batch(c, pid, 8)
    label(c, pid, out["items"])
    assert batch(c, pid, 2)["items"] == ["i8", "i9"]  # the cursor is past i0..i9
    assert retract(engine, pid, ["i3", "i5"]) == 2
    time.sleep(1.1)
    again = batch(c, pid, 5)
    # i8, i9 came back (lease expired); i3, i5 are unlabeled again, behind the cursor
    assert again["items"] == ["i8", "i9", "i3", "i5", "i10"] and again["remaining"] == 14


def test_items_uploaded_later_join_the_end_of_the_primarys_list(c):
    pid = corpus(c, 10)
    label(c, pid, batch(c, pid, 10)["items"])
    assert batch(c, pid, 5)["done"] is True
    r = c.post(f"/projects/{pid}/items", json=[{"external_id": f"late{k}"} for k in range(3)])
    assert r.status_code == 200, r.text
    late = batch(c, pid, 5)
    assert late["items"] == ["late0", "late1", "late2"] and late["remaining"] == 3


def test_remaining_counts_an_item_once_across_criteria(c, engine):
    pid = corpus(c, 10, criteria=["acc", "tone"])
    label(c, pid, ["i0", "i1"], "acc")
    label(c, pid, ["i0"], "tone")
    assert batch(c, pid, 1)["remaining"] == 8
    retract(engine, pid, ["i0"], "acc")  # i0 still has its tone label
    assert batch(c, pid, 1)["remaining"] == 8
    retract(engine, pid, ["i0", "i1"], "tone")  # i1 had no tone label: nothing to retract there
    assert batch(c, pid, 1)["remaining"] == 9


def test_labeled_item_counts_equal_the_labels_in_hand_after_random_writes(c, engine):
    """Invariant: rater_progress = distinct items with a current label, per rater, after any mix of
    new labels, changed values, resubmissions and retractions over two criteria."""
    pid = corpus(c, 30, criteria=["acc", "tone"])
    rng = random.Random(20)
    for _ in range(25):
        items = rng.sample(names(range(30)), rng.randint(1, 8))
        criterion = rng.choice(["acc", "tone"])
        if rng.random() < 0.3:
            retract(engine, pid, items, criterion)
            continue
        rows = [
            {"item": i, "rater": r, "value": rng.choice(["pass", "fail"]), "criterion": criterion}
            for i in items
            for r in ("prim", "h2")
        ]
        assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    with engine.connect() as conn:
        truth = {
            r: n
            for r, n in conn.execute(
                select(CurrentLabel.rater_id, func.count(func.distinct(CurrentLabel.item_id)))
                .where(CurrentLabel.project_id == pid)
                .group_by(CurrentLabel.rater_id)
            )
        }
        counted = {
            r: n
            for r, n in conn.execute(
                select(RaterProgress.rater_id, RaterProgress.labeled_items)
                .join(Rater, Rater.id == RaterProgress.rater_id)
                .where(Rater.project_id == pid)
            )
        }
    assert len(truth) == 2 and all(truth.values())
    assert {r: n for r, n in counted.items() if n} == truth


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jumps_past_labels_in_hand_issue_what_the_plain_walk_issues(client, engine, monkeypatch, seed):
    """Two projects take the same random labels (outside batches, in any order), retractions,
    abstentions (not labels in hand: never jumped over), batches and labels of batches; one is served
    with 2-id windows, so its cursor jumps past the labels in hand (service.matrices.modal_strata), the other
    with one window over the corpus (the plain walk). Every batch is the same (leases outlast the test)."""
    import service.planning.batches as assignment

    c = client

    gen = random.Random(seed)
    twins = [corpus(c, 60, allow_abstain=True) for _ in range(2)]
    for step in range(14):
        labeled = gen.sample(range(60), gen.randint(0, 30)) if step % 3 == 0 else []  # in random order
        retracted = gen.sample(range(60), gen.randint(0, 5)) if step % 4 == 1 else []
        abstained = gen.sample(range(60), 2) if step == 5 else []
        size = gen.randint(1, 8)
        issued = []
        for window, pid in zip((2, 10**9), twins, strict=True):
            for value, items in (("pass", labeled), ("CANNOT_ASSESS", abstained)):
                rows = [{"item": f"i{i}", "rater": "prim", "value": value} for i in items]
                if rows:  # some are labeled already: duplicates
                    assert c.post(f"/projects/{pid}/labels", json=rows).status_code == 200
            if retracted:
                retract(engine, pid, [f"i{i}" for i in retracted])
            monkeypatch.setattr(assignment, "CURSOR_WINDOW", window)
            got = batch(c, pid, size)
            label(c, pid, got["items"][: size // 2])  # some of each batch labeled, the rest held
            issued.append((got["items"], got["remaining"], got["done"]))
        assert issued[0] == issued[1], (step, issued)
