"""Deleting the newer of one annotator's two annotations of a task gives the cell the older one's label at
once (issue 36), because a link remembers what its annotation gave.

The webhook bodies are the ones a real Label Studio 1.23.2 sent, in
tests/fixtures/label_studio_1_23_2/webhooks-two-annotations.ndjson: one user annotates task 1 twice
(annotation 1 `Positive`, then 2 `Negative`), deletes annotation 2, then annotation 1. Where a body is
changed (a skip, a rubric), the change is made here on a copy.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from tests.service.test_label_studio_real import (
    FIXTURES,
    current,
    deliver,
    history,
    label_seq,
    new_project,
    ok,
    post_import,
)

CELL = ("1", "ls-user-1")


def sent() -> list[dict[str, Any]]:
    lines = (FIXTURES / "webhooks-two-annotations.ndjson").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_the_captured_bodies_are_two_annotations_of_one_user_then_their_deletions() -> None:
    first, second, delete_second, delete_first = sent()
    assert [b["action"] for b in (first, second)] == ["ANNOTATION_CREATED"] * 2
    assert (first["annotation"]["id"], second["annotation"]["id"]) == (1, 2)
    assert first["annotation"]["completed_by"] == second["annotation"]["completed_by"] == 1
    assert first["annotation"]["task"] == second["annotation"]["task"] == 1
    assert delete_second == {**delete_second, "action": "ANNOTATIONS_DELETED", "annotations": [{"id": 2}]}
    assert delete_first["annotations"] == [{"id": 1}]


def test_deleting_the_newer_annotation_makes_the_older_current_at_once(client: TestClient) -> None:
    pid = new_project(client)
    first, second, delete_second, delete_first = sent()
    deliver(client, pid, first)
    deliver(client, pid, second)
    assert current(client, pid) == {CELL: "Negative"}
    r = deliver(client, pid, delete_second)
    assert (r["retracted"], r["restored"]) == (0, 1)
    assert current(client, pid) == {CELL: "Positive"}
    assert r["label_seq"] == label_seq(client, pid) == 3  # a correction event: the label_seq moves
    r = deliver(client, pid, delete_first)
    assert (r["retracted"], r.get("restored")) == (1, None)
    assert current(client, pid) == {}
    assert history(client, pid) == [
        (*CELL, "Positive", False),
        (*CELL, "Negative", False),
        (*CELL, "Positive", False),
        (*CELL, None, True),
    ]


def test_deleting_the_older_annotation_leaves_the_newer_label(client: TestClient) -> None:
    pid = new_project(client)
    first, second, _, delete_second = sent()  # the last body deletes annotation 1 (the older)
    deliver(client, pid, first)
    deliver(client, pid, second)
    seq = label_seq(client, pid)
    r = deliver(client, pid, delete_second)
    assert (r["retracted"], r.get("restored")) == (0, None)
    assert current(client, pid) == {CELL: "Negative"} and label_seq(client, pid) == seq


def test_the_older_annotation_skipped_leaves_no_label_once_the_newer_is_deleted(client: TestClient) -> None:
    pid = new_project(client)
    first, second, delete_second, _ = sent()
    skipped = copy.deepcopy(first)
    skipped["action"] = "ANNOTATION_UPDATED"
    skipped["annotation"].update(was_cancelled=True, result=[])
    deliver(client, pid, first)
    assert deliver(client, pid, skipped)["skipped"] == "cancelled"
    deliver(client, pid, second)
    assert current(client, pid) == {CELL: "Negative"}
    r = deliver(client, pid, delete_second)
    assert (r["retracted"], r.get("restored")) == (1, None)
    assert current(client, pid) == {}


def test_an_export_remembers_the_superseded_annotation_for_a_later_deletion(client: TestClient) -> None:
    """Both annotations in one export: the later wins, and deleting it by webhook gives back the earlier."""
    pid = new_project(client)
    first, second, delete_second, _ = sent()
    task = {
        **first["task"],
        "annotations": [first["annotation"], second["annotation"]],
        "predictions": [],
    }
    body = ok(post_import(client, pid, [task]))
    assert body["changes"]["added"] == 1 and current(client, pid) == {CELL: "Negative"}
    r = deliver(client, pid, delete_second)
    assert r["restored"] == 1 and current(client, pid) == {CELL: "Positive"}
    # the same export without annotation 2 now agrees with what the deletion left
    again = ok(post_import(client, pid, [{**task, "annotations": [first["annotation"]]}]))
    assert again["changes"] == {"added": 0, "updated": 0, "unchanged": 1, "retracted": 0}


def test_a_rubric_deletion_gives_every_criterion_the_older_label(client: TestClient) -> None:
    """One webhook per criterion: both annotations are linked under each; deleting the newer restores each."""
    r = client.post("/projects", json={"name": "rubric", "labels": ["Positive", "Negative"], "criteria": ["a", "b"]})
    pid = ok(r, 201)["id"]
    first, second, delete_second, _ = sent()
    for body in (first, second):
        for criterion in ("a", "b"):
            deliver(client, pid, body, criterion=criterion)
    r = deliver(client, pid, delete_second)
    assert (r["retracted"], r["restored"]) == (0, 2)
    assert current(client, pid, criterion="a") == current(client, pid, criterion="b") == {CELL: "Positive"}


def test_a_link_whose_value_was_not_kept_leaves_the_cell_until_a_sync(client: TestClient, engine: Engine) -> None:
    """Links made before values were kept (migration 0024 marks them unknown): a deletion changes nothing."""
    pid = new_project(client)
    first, second, delete_second, _ = sent()
    deliver(client, pid, first)
    deliver(client, pid, second)
    with engine.begin() as conn:
        conn.execute(text("UPDATE label_studio_links SET value = NULL, value_known = false WHERE ls_id = 1"))
    r = deliver(client, pid, delete_second)
    assert (r["retracted"], r.get("restored")) == (0, None)
    assert current(client, pid) == {CELL: "Negative"}
