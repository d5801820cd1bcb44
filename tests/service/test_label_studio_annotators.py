"""Label Studio users mapped to raters (issue 36): `POST .../integrations/label-studio/annotators`, against
the real 1.23.2 payloads in tests/fixtures/label_studio_1_23_2/.

Unmapped, LS user 1 is the rater `ls-user-1`; mapped to `ann-1`, its annotations are labels of `ann-1` on
every path (webhook, snapshot import, JSON_MIN, sync, inbox replay), and what it labelled before the mapping
is moved onto `ann-1`. Expected labels are the unmapped project's (the behaviour the other Label Studio tests
pin) with the rater renamed, or read off the fixtures by the independent reader of test_label_studio_real.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from tests.service.test_label_studio_real import (
    LABEL_CONFIG,
    current,
    deliver,
    deliveries,
    expected_human_labels,
    fixture,
    history,
    label_seq,
    new_project,
    ok,
    post_import,
)
from tests.service.test_label_studio_sync import FakeLabelStudio, label_studio, settings, sync

__all__ = ["label_studio", "settings"]  # the stand-in Label Studio on loopback, and the settings allowing it


def project_with(client: TestClient, raters: list[tuple[str, str]]) -> str:
    pid = new_project(client)
    for ext, kind in raters:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    return pid


def map_users(client: TestClient, pid: str, annotators: dict[str, str]) -> Any:
    return client.post(f"/projects/{pid}/integrations/label-studio/annotators", json={"annotators": annotators})


def renamed(labels: dict[tuple[str, str], str], names: dict[str, str]) -> dict[tuple[str, str], str]:
    """Labels with raters renamed (``ls-user-1`` -> ``ann-1``)."""
    return {(item, names.get(rater, rater)): value for (item, rater), value in labels.items()}


def raters(client: TestClient, pid: str) -> dict[str, str]:
    """The project's raters' kinds, by external id."""
    listed = ok(client.get(f"/projects/{pid}/raters", params={"limit": 1000}))["items"]
    return {r["external_id"]: r["kind"] for r in listed}


def with_completed_by(payload: dict, user: int) -> dict:
    out = copy.deepcopy(payload)
    out["annotation"]["completed_by"] = user
    return out


# --- every path writes the mapped rater -------------------------------------------------------


def test_webhooks_of_a_mapped_user_are_labels_of_its_rater(client: TestClient) -> None:
    """The real delivery sequence (user 1: create, update, delete, skip, unmapped choice, ...) leaves the
    same current labels as in an unmapped project, under `ann-1`; no rater `ls-user-1` is made."""
    plain = new_project(client)
    for payload in deliveries():
        deliver(client, plain, payload)
    pid = project_with(client, [("ann-1", "primary")])
    done = ok(map_users(client, pid, {"1": "ann-1"}))
    assert done["annotators"] == [{"ls_user": 1, "email": None, "rater": "ann-1"}] and done["moved"] == 0
    for payload in deliveries():
        deliver(client, pid, payload)
    expected = renamed(current(client, plain), {"ls-user-1": "ann-1"})
    assert expected and current(client, pid) == expected
    assert "ls-user-1" not in raters(client, pid)
    assert raters(client, pid)["ann-1"] == "primary"  # a webhook keeps the primary


def test_snapshot_json_min_and_sync_read_mapped_users_as_their_raters(
    client: TestClient, label_studio: FakeLabelStudio
) -> None:
    names = {"ls-user-2": "ann-2", "ls-user-3": "ann-3"}
    snapshot = fixture("snapshot-full-predictions.json")
    human = renamed(expected_human_labels(snapshot), names)
    for how in ("snapshot", "json_min", "sync"):
        pid = project_with(client, [("ann-2", "human"), ("ann-3", "human")])
        ok(map_users(client, pid, {"2": "ann-2", "3": "ann-3"}))
        if how == "snapshot":
            ok(post_import(client, pid, snapshot))
        elif how == "json_min":
            ok(post_import(client, pid, fixture("export-json-min.json"), label_config=LABEL_CONFIG))
        else:
            ok(sync(client, pid, label_studio))
        got = {cell: v for cell, v in current(client, pid).items() if cell[1].startswith(("ann-", "ls-user-"))}
        assert got == human, how
        assert not {"ls-user-2", "ls-user-3"} & set(raters(client, pid)), how
        assert {"ls-user-1", "ls-user-4"} <= set(raters(client, pid)), how  # unmapped users keep their own raters


# --- labels that arrived before the mapping ---------------------------------------------------


def test_labels_given_before_the_mapping_move_to_the_rater_and_deletions_follow(client: TestClient) -> None:
    """Webhooks recorded as `ls-user-1`, then 1 -> `ann-1`: each current label is retracted there and written
    for `ann-1` (history keeps both), the links follow (a later deletion retracts `ann-1`'s label), and a
    snapshot import afterwards changes nothing. Mapping again changes nothing."""
    pid = project_with(client, [("ann-1", "primary")])
    sequence = deliveries()
    for payload in sequence:
        deliver(client, pid, payload)
    before = current(client, pid)
    mine = {cell: v for cell, v in before.items() if cell[1] == "ls-user-1"}
    assert mine
    seq = label_seq(client, pid)
    retracted = [h for h in history(client, pid, rater="ls-user-1") if h[3]]
    done = ok(map_users(client, pid, {"1": "ann-1"}))
    assert done["moved"] == len(mine) and len(done["changed"]) == 2
    assert current(client, pid) == renamed(before, {"ls-user-1": "ann-1"})
    assert label_seq(client, pid) == seq + 2 * len(mine)  # one retraction and one label per cell
    moved_away = [h for h in history(client, pid, rater="ls-user-1") if h[3]]
    assert len(moved_away) == len(retracted) + len(mine)

    item = sorted(mine)[0][0]  # a label moved: its annotation, linked to ls-user-1 until the mapping
    annotation = [
        p["annotation"]["id"]
        for p in sequence
        if p["action"] in ("ANNOTATION_CREATED", "ANNOTATION_UPDATED") and str(p["annotation"]["task"]) == item
    ][-1]
    gone = deliver(client, pid, {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": annotation}]})
    assert gone["retracted"] == 1 and (item, "ann-1") not in current(client, pid)

    again = ok(map_users(client, pid, {"1": "ann-1"}))
    assert again["changed"] == [] and again["moved"] == 0


def test_labels_moved_by_a_mapping_are_what_a_fresh_import_gives(client: TestClient) -> None:
    """Snapshot imported unmapped, users 2 and 3 mapped by email (the snapshot's `completed_by` named them):
    the project holds what a mapped project importing the snapshot holds; the import again is all unchanged."""
    snapshot = fixture("snapshot-full-predictions.json")
    pid = project_with(client, [("ann-2", "human"), ("ann-3", "human")])
    ok(post_import(client, pid, snapshot))
    done = ok(map_users(client, pid, {"ann2@example.com": "ann-2", "ANN3@example.com": "ann-3"}))
    assert [(a["ls_user"], a["rater"]) for a in done["annotators"]] == [(2, "ann-2"), (3, "ann-3")]
    fresh = project_with(client, [("ann-2", "human"), ("ann-3", "human")])
    ok(map_users(client, fresh, {"2": "ann-2", "3": "ann-3"}))
    ok(post_import(client, fresh, snapshot))
    assert current(client, pid) == current(client, fresh)
    assert done["moved"] == sum(r.startswith(("ann-2", "ann-3")) for _, r in current(client, fresh))
    changes = ok(post_import(client, pid, snapshot))["changes"]
    assert (changes["added"], changes["updated"], changes["retracted"]) == (0, 0, 0)


def test_an_inbox_issue_filed_before_the_mapping_replays_as_the_rater(client: TestClient) -> None:
    pid = project_with(client, [("ann-1", "primary")])
    unmapped = next(
        p
        for p in deliveries()
        if p["action"] == "ANNOTATION_CREATED"
        and any(r["value"].get("choices") == ["Mixed"] for r in p["annotation"]["result"])
    )
    assert "issue" in deliver(client, pid, unmapped)
    ok(map_users(client, pid, {"1": "ann-1"}))
    ok(client.patch(f"/projects/{pid}", json={"label_map": {"Mixed": "Neutral"}}))
    replayed = ok(client.post(f"/projects/{pid}/integrations/label-studio/issues/replay"))
    assert len(replayed["resolved"]) == 1
    assert current(client, pid) == {(str(unmapped["annotation"]["task"]), "ann-1"): "Neutral"}


# --- refusals change nothing ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotators", "code"),
    [
        ({"1": "nobody"}, "unknown_rater"),
        ({"1": "judge-1"}, "judge_rater"),
        ({"1": "ls-user-2"}, "validation_error"),  # another user's own rater
        ({"ana": "ann-1"}, "validation_error"),  # neither an id nor an email
        ({"ghost@example.com": "ann-1"}, "unknown_ls_user"),  # no import or sync showed it
        ({"1": "ann-1", "2": "ann-1"}, "validation_error"),  # one rater for two people
        ({"1": "ann-1", "a@b.c": "ann-2"}, "validation_error"),  # user 1 by id and by email
    ],
)
def test_a_mapping_to_an_unknown_rater_or_a_judge_is_422_and_writes_nothing(
    client: TestClient, annotators: dict[str, str], code: str
) -> None:
    pid = project_with(client, [("judge-1", "judge"), ("ann-1", "primary"), ("ann-2", "human")])
    ok(post_import(client, pid, fixture("snapshot-full-predictions.json")))  # users 1..4 with their emails
    before, seq = current(client, pid), label_seq(client, pid)
    r = map_users(client, pid, annotators)
    assert r.status_code == 422 and r.json()["error"] == code, r.text
    assert ok(client.get(f"/projects/{pid}/integrations/label-studio/annotators"))["annotators"] == []
    assert current(client, pid) == before and label_seq(client, pid) == seq


def test_conflicting_mappings_are_409_and_write_nothing(client: TestClient) -> None:
    pid = project_with(client, [("ann-1", "primary"), ("ann-2", "human"), ("ann-3", "human")])
    first = deliveries()[0]  # user 1 labels task 8
    item = str(first["annotation"]["task"])
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": item}]))
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": item, "rater": "ann-1", "value": "Negative"}]))
    deliver(client, pid, first)
    assert current(client, pid)[(item, "ls-user-1")] == "Positive"
    seq = label_seq(client, pid)
    clash = map_users(client, pid, {"1": "ann-1"})
    assert clash.status_code == 409 and clash.json()["error"] == "labels_conflict", clash.text
    assert clash.json()["fields"] == [{"item": item, "criterion": "default"}]
    assert label_seq(client, pid) == seq and current(client, pid)[(item, "ann-1")] == "Negative"

    ok(map_users(client, pid, {"2": "ann-2"}))
    taken = map_users(client, pid, {"1": "ann-2"})
    assert taken.status_code == 409 and taken.json()["error"] == "rater_mapped"
    ok(map_users(client, pid, {"2": "ann-3"}))  # nothing came through ann-2 yet: a typo can be fixed
    deliver(client, pid, with_completed_by(first, 2))
    assert current(client, pid)[(item, "ann-3")] == "Positive"
    stays = map_users(client, pid, {"2": "ann-2"})
    assert stays.status_code == 409 and stays.json()["error"] == "already_mapped"
    listed = ok(client.get(f"/projects/{pid}/integrations/label-studio/annotators"))["annotators"]
    assert listed == [{"ls_user": 2, "email": None, "rater": "ann-3"}] and label_seq(client, pid) == seq + 1


# --- the mapped rater's batches ---------------------------------------------------------------


def test_labels_of_a_mapped_user_count_for_the_batch_issued_to_its_rater(client: TestClient) -> None:
    """A batch issued to the secondary `h2` goes to Label Studio as tasks; LS user 8 annotates them (the real
    ANNOTATION_CREATED body, on those tasks). Mapped 8 -> h2, the batch counts them; unmapped, it does not."""
    counted = {}
    for mapped in (False, True):
        pid = project_with(client, [("judge", "judge"), ("prim", "primary"), ("h2", "human")])
        ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{i}", "text": f"t{i}"} for i in range(40)]))
        plan = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "m": 10, "seed": 1}
        ok(client.post(f"/projects/{pid}/plan", json=plan), 201)
        batch = ok(client.post(f"/projects/{pid}/batches", json={"rater": "h2", "size": 3}))
        tasks = ok(client.get(f"/projects/{pid}/batches/{batch['id']}/label-studio"))
        if mapped:
            ok(map_users(client, pid, {"8": "h2"}))
        created = deliveries()[0]
        for n, task in enumerate(tasks):
            payload = with_completed_by(created, 8)
            payload["annotation"]["id"], payload["annotation"]["task"] = 500 + n, 300 + n
            payload["task"] = {**payload["task"], "id": 300 + n, "data": task["data"]}
            assert deliver(client, pid, payload)["rater"] == ("h2" if mapped else "ls-user-8")
        status = ok(client.get(f"/projects/{pid}/batches/{batch['id']}"))
        counted[mapped] = (status["labeled"], status["unlabeled"])
    assert counted[True] == (3, []) and counted[False][0] == 0


def test_mapping_roles_and_a_body_that_is_no_mapping(client: TestClient) -> None:
    pid = project_with(client, [("ann-1", "primary")])
    assert map_users(client, pid, {}).status_code == 200
    too_many = {str(n): "ann-1" for n in range(1, 202)}
    assert map_users(client, pid, too_many).status_code == 422
    assert client.post(f"/projects/{pid}/integrations/label-studio/annotators", json={"7": "ann-1"}).status_code == 422


# --- invariant: when the mapping is made does not matter -------------------------------------


@examples(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(split=st.integers(0, len(deliveries())))
def test_mapping_at_any_point_of_the_real_sequence_ends_as_mapping_first(client: TestClient, split: int) -> None:
    """The real deliveries, the mapping 1 -> ann-1 made after any number of them: the current labels and the
    replay of the history end as when the mapping came first."""
    sequence = deliveries()
    first = project_with(client, [("ann-1", "primary")])
    ok(map_users(client, first, {"1": "ann-1"}))
    for payload in sequence:
        deliver(client, first, payload)
    late = project_with(client, [("ann-1", "primary")])
    for n, payload in enumerate(sequence):
        if n == split:
            ok(map_users(client, late, {"1": "ann-1"}))
        deliver(client, late, payload)
    if split == len(sequence):
        ok(map_users(client, late, {"1": "ann-1"}))
    assert current(client, late) == current(client, first)
    replayed: dict[tuple[str, str], str] = {}
    for item, rater, value, retracted in history(client, late):
        if retracted:
            del replayed[(item, rater)]
        else:
            replayed[(item, rater)] = str(value)
    assert replayed == current(client, first)


def test_more_labels_to_move_than_one_request_writes_is_413_before_reading_them(database_url: str) -> None:
    """The move is bounded by max_rows, checked by a count before the cells are read; at the bound it passes."""
    from tests.service.test_bad_input import small_client

    with small_client(database_url, max_rows=4) as small:
        pid = project_with(small, [("ann-1", "primary")])
        for payload in deliveries():
            deliver(small, pid, payload)
        mine = [cell for cell in current(small, pid) if cell[1] == "ls-user-1"]
        assert len(mine) == 4
    with small_client(database_url, max_rows=3) as smaller:
        seq = label_seq(smaller, pid)
        r = map_users(smaller, pid, {"1": "ann-1"})
        assert r.status_code == 413 and r.json()["error"] == "too_many_rows", r.text
        assert label_seq(smaller, pid) == seq and map_users(smaller, pid, {}).json()["annotators"] == []
    with small_client(database_url, max_rows=4) as small:
        assert ok(map_users(small, pid, {"1": "ann-1"}))["moved"] == 4


# --- unmapping: the labels that came from Label Studio go back, nothing is lost ----------------


def unmap(client: TestClient, pid: str, user: int) -> Any:
    return client.delete(f"/projects/{pid}/integrations/label-studio/annotators/{user}")


def test_unmapping_moves_label_studio_labels_back_and_keeps_the_raters_own(client: TestClient) -> None:
    """Mapped 1 -> ann-1, the real deliveries, and one label of ann-1 uploaded by hand. Unmapped: the labels
    from Label Studio are `ls-user-1`'s again, exactly those of a project that was never mapped; the uploaded
    label stays with ann-1; a later deletion reaches `ls-user-1`; mapping again ends as mapping first."""
    sequence = deliveries()
    plain = project_with(client, [("ann-1", "primary")])
    for payload in sequence:
        deliver(client, plain, payload)
    pid = project_with(client, [("ann-1", "primary")])
    ok(map_users(client, pid, {"1": "ann-1"}))
    for payload in sequence:
        deliver(client, pid, payload)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "by-hand"}]))
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": "by-hand", "rater": "ann-1", "value": "Neutral"}]))
    mapped = current(client, pid)
    from_ls = {cell: v for cell, v in mapped.items() if cell[1] == "ann-1" and cell[0] != "by-hand"}
    assert from_ls and "ls-user-1" not in raters(client, pid)
    seq = label_seq(client, pid)

    done = ok(unmap(client, pid, 1))
    assert done["annotators"] == [] and done["moved"] == len(from_ls)
    assert current(client, pid) == {**current(client, plain), ("by-hand", "ann-1"): "Neutral"}
    assert raters(client, pid)["ls-user-1"] == "human"
    assert label_seq(client, pid) == seq + 2 * len(from_ls)  # one retraction and one label per cell: history kept

    item = sorted(from_ls)[0][0]
    annotation = [
        p["annotation"]["id"]
        for p in sequence
        if p["action"] in ("ANNOTATION_CREATED", "ANNOTATION_UPDATED") and str(p["annotation"]["task"]) == item
    ][-1]
    assert deliver(client, pid, sequence[0])["rater"] == "ls-user-1"  # deliveries are the user's own rater again
    gone = deliver(client, pid, {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": annotation}]})
    assert gone["retracted"] == 1 and (item, "ls-user-1") not in current(client, pid)

    ok(map_users(client, pid, {"1": "ann-1"}))
    again = project_with(client, [("ann-1", "primary")])
    ok(map_users(client, again, {"1": "ann-1"}))
    for payload in [*sequence, sequence[0], {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": annotation}]}]:
        deliver(client, again, payload)
    ok(client.post(f"/projects/{again}/items", json=[{"external_id": "by-hand"}]))
    ok(client.post(f"/projects/{again}/labels", json=[{"item": "by-hand", "rater": "ann-1", "value": "Neutral"}]))
    assert current(client, pid) == current(client, again)


def test_unmapping_lets_a_user_that_took_labels_be_mapped_to_another_rater(client: TestClient) -> None:
    """A user that took labels through ann-1 cannot be remapped (409 already_mapped); unmapped, then mapped to
    ann-2, its labels follow to ann-2."""
    pid = project_with(client, [("ann-1", "primary"), ("ann-2", "human")])
    ok(map_users(client, pid, {"1": "ann-1"}))
    first = deliveries()[0]
    deliver(client, pid, first)
    item = str(first["annotation"]["task"])
    assert map_users(client, pid, {"1": "ann-2"}).json()["error"] == "already_mapped"
    assert ok(unmap(client, pid, 1))["moved"] == 1
    done = ok(map_users(client, pid, {"1": "ann-2"}))
    assert done["moved"] == 1 and current(client, pid) == {(item, "ann-2"): "Positive"}


def test_unmapping_an_unmapped_user_is_404_and_a_clash_is_409_both_writing_nothing(client: TestClient) -> None:
    pid = project_with(client, [("ann-1", "primary")])
    missing = unmap(client, pid, 1)
    assert missing.status_code == 404 and missing.json()["error"] == "not_mapped", missing.text
    assert unmap(client, pid, 0).status_code == 422
    ok(map_users(client, pid, {"1": "ann-1"}))
    first = deliveries()[0]
    item = str(first["annotation"]["task"])
    deliver(client, pid, first)  # ann-1: Positive, through Label Studio
    ok(client.post(f"/projects/{pid}/raters", json={"external_id": "ls-user-1", "kind": "human"}), 201)
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": item, "rater": "ls-user-1", "value": "Negative"}]))
    before, seq = current(client, pid), label_seq(client, pid)
    clash = unmap(client, pid, 1)
    assert clash.status_code == 409 and clash.json()["error"] == "labels_conflict", clash.text
    assert clash.json()["fields"] == [{"item": item, "criterion": "default"}]
    assert current(client, pid) == before and label_seq(client, pid) == seq
    listed = ok(client.get(f"/projects/{pid}/integrations/label-studio/annotators"))["annotators"]
    assert listed == [{"ls_user": 1, "email": None, "rater": "ann-1"}]
