"""Issue 2 items 4 and 6: bulk ingestion of items and labels as JSON, NDJSON and CSV.

Covers upsert counts, duplicate and correction semantics of the append-only label log, the
export filters, and multi-criteria and abstention projects.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

CSV = {"content-type": "text/csv"}
NDJSON = {"content-type": "application/x-ndjson"}


def ok(r, status: int = 200) -> dict:
    assert r.status_code == status, r.text
    return r.json()


def new_project(client: TestClient, **settings: object) -> str:
    """A project with judge j, primary p and human h; no items."""
    body = {"name": "t", "labels": ["yes", "no"], **settings}
    pid = ok(client.post("/projects", json=body), 201)["id"]
    for ext, kind in [("j", "judge"), ("p", "primary"), ("h", "human")]:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    return pid


def all_items(client: TestClient, pid: str) -> list[dict]:
    page = ok(client.get(f"/projects/{pid}/items", params={"limit": 1000}))
    assert page["next_cursor"] is None
    return page["items"]


def labels(client: TestClient, pid: str, **params: object) -> list[dict]:
    """Every export row (one page of up to 1000)."""
    page = ok(client.get(f"/projects/{pid}/labels", params={"limit": 1000, **params}))
    assert page["next_cursor"] is None
    return page["items"]


def cells(rows: list[dict]) -> dict[tuple[str, str, str], str]:
    """Export rows as {(item, rater, criterion): value}, refusing repeated cells."""
    out = {(r["item"], r["rater"], r["criterion"]): r["value"] for r in rows}
    assert len(out) == len(rows), "a cell appears twice in the current labels"
    return out


def label_seq(client: TestClient, pid: str) -> int:
    return ok(client.get(f"/projects/{pid}"))["label_seq"]


# --- items --------------------------------------------------------------------------------


def test_items_as_json_array(client):
    pid = new_project(client)
    rows = [
        {"external_id": "a", "features": {"topic": "x", "len": 12, "score": 0.5, "flag": True}, "text": "first"},
        {"external_id": "b", "features": {"topic": "y"}},
        {"external_id": "c"},
    ]
    assert ok(client.post(f"/projects/{pid}/items", json=rows)) == {"created": 3, "updated": 0, "unchanged": 0}
    got = all_items(client, pid)
    assert [(i["external_id"], i["features"], i["text"]) for i in got] == [
        ("a", {"topic": "x", "len": 12, "score": 0.5, "flag": True}, "first"),
        ("b", {"topic": "y"}, None),
        ("c", {}, None),
    ]
    assert [i["position"] for i in got] == sorted({i["position"] for i in got})
    assert len({i["id"] for i in got}) == 3
    assert ok(client.get(f"/projects/{pid}"))["n_items"] == 3


def test_items_as_ndjson(client):
    pid = new_project(client)
    body = '{"external_id": "a", "features": {"k": 1}}\n\n{"external_id": "b", "text": "t"}\n'
    assert ok(client.post(f"/projects/{pid}/items", content=body, headers=NDJSON)) == {
        "created": 2,
        "updated": 0,
        "unchanged": 0,
    }
    assert [(i["external_id"], i["features"], i["text"]) for i in all_items(client, pid)] == [
        ("a", {"k": 1}, None),
        ("b", {}, "t"),
    ]


def test_ndjson_media_type_aliases(client):
    pid = new_project(client)
    for n, media in enumerate(["application/ndjson", "application/jsonl", "application/x-ndjson; charset=utf-8"]):
        r = client.post(
            f"/projects/{pid}/items", content=f'{{"external_id": "a{n}"}}\n', headers={"content-type": media}
        )
        assert ok(r)["created"] == 1, media


def test_items_as_csv_extra_columns_become_features(client):
    pid = new_project(client)
    body = 'external_id,topic,text,lang\r\na,x,"hello, world\nsecond line",en\r\nb,y,,\r\n"c,1",z,"say ""hi""",fr\r\n'
    assert ok(client.post(f"/projects/{pid}/items", content=body.encode(), headers=CSV)) == {
        "created": 3,
        "updated": 0,
        "unchanged": 0,
    }
    assert [(i["external_id"], i["features"], i["text"]) for i in all_items(client, pid)] == [
        ("a", {"topic": "x", "lang": "en"}, "hello, world\nsecond line"),
        ("b", {"topic": "y"}, None),  # empty cells are absent, not empty strings
        ("c,1", {"topic": "z", "lang": "fr"}, 'say "hi"'),
    ]


def test_items_csv_with_utf8_bom_and_header_only(client):
    pid = new_project(client)
    body = "\ufeffexternal_id,topic\nb\u00e9,caf\u00e9\n".encode()
    assert ok(client.post(f"/projects/{pid}/items", content=body, headers=CSV))["created"] == 1
    assert [(i["external_id"], i["features"]) for i in all_items(client, pid)] == [("b\u00e9", {"topic": "caf\u00e9"})]
    assert ok(client.post(f"/projects/{pid}/items", content=b"external_id,topic\n", headers=CSV)) == {
        "created": 0,
        "updated": 0,
        "unchanged": 0,
    }


def test_csv_column_named_features_is_not_silently_dropped(client):
    """A CSV column named like the features field is kept as a feature or refused, never lost."""
    pid = new_project(client)
    r = client.post(f"/projects/{pid}/items", content="external_id,features\na,red\n", headers=CSV)
    if r.status_code == 200:
        assert all_items(client, pid)[0]["features"] == {"features": "red"}
    else:
        assert r.status_code == 422


def test_reupload_counts_created_updated_unchanged(client):
    pid = new_project(client)
    first = [{"external_id": e, "features": {"topic": "x"}, "text": "t"} for e in ("a", "b", "c", "d")]
    ok(client.post(f"/projects/{pid}/items", json=first))
    before = {i["external_id"]: i for i in all_items(client, pid)}
    second = [
        first[0],  # unchanged
        {**first[1], "features": {"topic": "y"}},  # feature changed
        {**first[2], "text": "new text"},  # text changed
        {"external_id": "d", "features": {"topic": "x"}},  # text dropped: updated
        {"external_id": "e"},  # new
        {"external_id": "e"},  # repeated identically: once
    ]
    assert ok(client.post(f"/projects/{pid}/items", json=second)) == {"created": 1, "updated": 3, "unchanged": 1}
    after = {i["external_id"]: i for i in all_items(client, pid)}
    assert after["b"]["features"] == {"topic": "y"} and after["c"]["text"] == "new text" and after["d"]["text"] is None
    for ext in "abcd":  # an update keeps the item's id and corpus position
        assert (after[ext]["id"], after[ext]["position"]) == (before[ext]["id"], before[ext]["position"])
    assert after["e"]["position"] > max(i["position"] for i in before.values())
    assert ok(client.get(f"/projects/{pid}"))["n_items"] == 5
    assert ok(client.post(f"/projects/{pid}/items", json=second)) == {"created": 0, "updated": 0, "unchanged": 5}


def test_a_bulk_upload_past_one_lookup_chunk_upserts_and_refuses_look_alikes(client):
    """Past service.core.sql.CHUNK ids the lookups scan the project once: the same counts, positions and 409s."""
    from service.core.sql import CHUNK

    pid = new_project(client)
    other = new_project(client)  # its items share the ids and must not count as existing
    n = CHUNK + 7
    rows = [{"external_id": f"i{k}", "features": {"k": k}} for k in range(n)]
    ok(client.post(f"/projects/{other}/items", json=rows[:10]))
    first = ok(client.post(f"/projects/{pid}/items", json=rows[: n - 2]))
    assert first == {"created": n - 2, "updated": 0, "unchanged": 0}
    again = [*rows[:5], {"external_id": "i5", "features": {"k": True}, "text": "t"}, *rows[6:]]
    assert ok(client.post(f"/projects/{pid}/items", json=again)) == {"created": 2, "updated": 1, "unchanged": n - 3}
    page = ok(client.get(f"/projects/{pid}/items", params={"limit": 3}))["items"]
    assert [(i["external_id"], i["position"]) for i in page] == [("i0", 0), ("i1", 1), ("i2", 2)]
    assert ok(client.get(f"/projects/{pid}"))["n_items"] == n
    # An NFKC twin of an existing id (i１ ~ i1), hidden among CHUNK + 1 new ids, names the existing one.
    twins = [{"external_id": f"j{k}"} for k in range(CHUNK)] + [{"external_id": "i\uff11"}]
    r = client.post(f"/projects/{pid}/items", json=twins)
    assert r.status_code == 409 and "'i1'" in r.json()["detail"], r.text
    assert ok(client.get(f"/projects/{pid}"))["n_items"] == n  # nothing written


def test_feature_type_change_from_number_to_bool_is_an_update(client):
    """true is not 1 in JSON, although True == 1 in Python."""
    pid = new_project(client)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "a", "features": {"flag": 1}}]))
    assert (
        ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "a", "features": {"flag": True}}]))["updated"]
        == 1
    )
    assert all_items(client, pid)[0]["features"] == {"flag": True}


def test_csv_reupload_is_unchanged(client):
    pid = new_project(client)
    body = "external_id,topic,text\na,x,hello\nb,y,\n"
    assert ok(client.post(f"/projects/{pid}/items", content=body, headers=CSV))["created"] == 2
    assert ok(client.post(f"/projects/{pid}/items", content=body, headers=CSV)) == {
        "created": 0,
        "updated": 0,
        "unchanged": 2,
    }
    same_as_json = [
        {"external_id": "a", "features": {"topic": "x"}, "text": "hello"},
        {"external_id": "b", "features": {"topic": "y"}},
    ]
    assert ok(client.post(f"/projects/{pid}/items", json=same_as_json)) == {"created": 0, "updated": 0, "unchanged": 2}


def test_items_of_two_projects_are_separate(client):
    p1, p2 = new_project(client), new_project(client)
    ok(client.post(f"/projects/{p1}/items", json=[{"external_id": "a", "text": "one"}]))
    assert ok(client.post(f"/projects/{p2}/items", json=[{"external_id": "a", "text": "two"}]))["created"] == 1
    assert all_items(client, p1)[0]["text"] == "one"
    assert all_items(client, p2)[0]["text"] == "two"


# --- labels -------------------------------------------------------------------------------


@pytest.fixture
def pid(client: TestClient) -> str:
    """A binary yes/no project with raters j (judge), p (primary), h (human) and items a..f."""
    pid = new_project(client)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": e} for e in "abcdef"]))
    return pid


def test_labels_as_json_ndjson_and_csv(client, pid):
    as_json = [{"item": "a", "rater": "j", "value": "yes"}, {"item": "a", "rater": "p", "value": "no"}]
    as_ndjson = (
        '{"item": "b", "rater": "j", "value": "no"}\n'
        '{"item": "b", "rater": "h", "value": "yes", "criterion": "default"}\n'
    )
    as_csv = "rater,item,value,criterion\np,c,yes,\nj,c,INVALID,default\nh,c,no,\n"
    assert ok(client.post(f"/projects/{pid}/labels", json=as_json)) == {"accepted": 2, "duplicates": 0, "label_seq": 2}
    assert ok(client.post(f"/projects/{pid}/labels", content=as_ndjson, headers=NDJSON)) == {
        "accepted": 2,
        "duplicates": 0,
        "label_seq": 4,
    }
    assert ok(client.post(f"/projects/{pid}/labels", content=as_csv, headers=CSV)) == {
        "accepted": 3,
        "duplicates": 0,
        "label_seq": 7,
    }
    rows = labels(client, pid)
    assert cells(rows) == {
        ("a", "j", "default"): "yes",
        ("a", "p", "default"): "no",
        ("b", "j", "default"): "no",
        ("b", "h", "default"): "yes",
        ("c", "p", "default"): "yes",
        ("c", "j", "default"): "INVALID",
        ("c", "h", "default"): "no",
    }
    assert [r["seq"] for r in rows] == list(range(1, 8))  # export order is seq order
    assert all(r["batch"] is None and r["created_at"] for r in rows)
    assert set(rows[0]) == {"item", "rater", "criterion", "value", "seq", "batch", "created_at", "retracted", "order"}
    assert label_seq(client, pid) == 7
    counts = {r["external_id"]: r["n_labels"] for r in ok(client.get(f"/projects/{pid}/raters"))["items"]}
    assert counts == {"j": 3, "p": 2, "h": 2}


def test_resubmitting_the_same_labels_writes_nothing(client, pid):
    rows = [{"item": e, "rater": r, "value": "yes"} for e in "abc" for r in ("j", "p")]
    assert ok(client.post(f"/projects/{pid}/labels", json=rows)) == {"accepted": 6, "duplicates": 0, "label_seq": 6}
    history = labels(client, pid, history="true")
    assert ok(client.post(f"/projects/{pid}/labels", json=rows)) == {"accepted": 0, "duplicates": 6, "label_seq": 6}
    csv_body = "item,rater,value\n" + "".join(f"{r['item']},{r['rater']},{r['value']}\n" for r in rows)
    assert ok(client.post(f"/projects/{pid}/labels", content=csv_body, headers=CSV)) == {
        "accepted": 0,
        "duplicates": 6,
        "label_seq": 6,
    }
    explicit = [{**r, "criterion": "default"} for r in rows]
    assert ok(client.post(f"/projects/{pid}/labels", json=explicit)) == {"accepted": 0, "duplicates": 6, "label_seq": 6}
    assert labels(client, pid, history="true") == history
    assert label_seq(client, pid) == 6


@pytest.mark.parametrize("probed", [0, 20_000])
def test_id_lookups_per_value_or_over_the_array_write_the_same(client, monkeypatch, probed):
    """service.core.sql.in_values on PostgreSQL looks up to PROBED_VALUES values one by one and more over one
    array (= ANY): items found, labels deduplicated and corrected alike either way (SQLite: one form)."""
    monkeypatch.setattr("service.core.sql.PROBED_VALUES", probed)
    pid = new_project(client)
    other = new_project(client)  # same item ids in another project: never found for this one
    ok(client.post(f"/projects/{other}/items", json=[{"external_id": e} for e in "abcd"]))
    assert ok(client.post(f"/projects/{pid}/items", json=[{"external_id": e} for e in "abc"])) == {
        "created": 3,
        "updated": 0,
        "unchanged": 0,
    }
    assert ok(client.post(f"/projects/{pid}/items", json=[{"external_id": e} for e in "abcd"])) == {
        "created": 1,
        "updated": 0,
        "unchanged": 3,
    }
    rows = [{"item": e, "rater": r, "value": "yes"} for e in "abcd" for r in ("j", "p")]
    assert ok(client.post(f"/projects/{pid}/labels", json=rows)) == {"accepted": 8, "duplicates": 0, "label_seq": 8}
    rows[0]["value"] = "no"
    assert ok(client.post(f"/projects/{pid}/labels", json=rows)) == {"accepted": 1, "duplicates": 7, "label_seq": 9}
    assert cells(labels(client, pid))[("a", "j", "default")] == "no"
    unknown = client.post(f"/projects/{pid}/labels", json=[{"item": "z", "rater": "j", "value": "yes"}])
    assert unknown.status_code == 422 and "'z'" in unknown.text, unknown.text


def test_partly_new_payload_counts_both(client, pid):
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": "a", "rater": "j", "value": "yes"}]))
    rows = [
        {"item": "a", "rater": "j", "value": "yes"},  # duplicate of the stored label
        {"item": "a", "rater": "h", "value": "no"},  # new
        {"item": "a", "rater": "h", "value": "no"},  # duplicate inside the payload
        {"item": "b", "rater": "j", "value": "no"},  # new
    ]
    assert ok(client.post(f"/projects/{pid}/labels", json=rows)) == {"accepted": 2, "duplicates": 2, "label_seq": 3}


def test_empty_payload_writes_nothing(client, pid):
    assert ok(client.post(f"/projects/{pid}/labels", json=[])) == {"accepted": 0, "duplicates": 0, "label_seq": 0}
    assert ok(client.post(f"/projects/{pid}/labels", content=b"", headers=NDJSON)) == {
        "accepted": 0,
        "duplicates": 0,
        "label_seq": 0,
    }


def test_a_correction_appends_an_event(client, pid):
    ok(
        client.post(
            f"/projects/{pid}/labels",
            json=[{"item": "a", "rater": "h", "value": "yes"}, {"item": "b", "rater": "h", "value": "yes"}],
        )
    )
    assert ok(client.post(f"/projects/{pid}/labels", json=[{"item": "a", "rater": "h", "value": "no"}])) == {
        "accepted": 1,
        "duplicates": 0,
        "label_seq": 3,
    }
    current = labels(client, pid)
    assert [(r["item"], r["value"], r["seq"]) for r in current] == [("b", "yes", 2), ("a", "no", 3)]
    history = labels(client, pid, history="true")
    assert [(r["item"], r["value"], r["seq"]) for r in history] == [("a", "yes", 1), ("b", "yes", 2), ("a", "no", 3)]
    # going back to the first value is a new event, not a duplicate of an old one
    assert (
        ok(client.post(f"/projects/{pid}/labels", json=[{"item": "a", "rater": "h", "value": "yes"}]))["accepted"] == 1
    )
    assert cells(labels(client, pid))[("a", "h", "default")] == "yes"
    assert [r["value"] for r in labels(client, pid, history="true") if r["item"] == "a"] == ["yes", "no", "yes"]
    counts = {r["external_id"]: r["n_labels"] for r in ok(client.get(f"/projects/{pid}/raters"))["items"]}
    assert counts["h"] == 2  # cells, not events


def test_label_seq_is_per_project(client, pid):
    other = new_project(client)
    ok(client.post(f"/projects/{other}/items", json=[{"external_id": "a"}]))
    assert (
        ok(client.post(f"/projects/{pid}/labels", json=[{"item": e, "rater": "h", "value": "yes"} for e in "abc"]))[
            "label_seq"
        ]
        == 3
    )
    assert (
        ok(client.post(f"/projects/{other}/labels", json=[{"item": "a", "rater": "h", "value": "no"}]))["label_seq"]
        == 1
    )
    assert label_seq(client, pid) == 3
    assert [r["seq"] for r in labels(client, other, history="true")] == [1]
    assert len(labels(client, pid, history="true")) == 3


def test_created_at_is_timezone_aware_and_ordered_by_seq(client, pid):
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": "a", "rater": "h", "value": "yes"}]))
    ok(
        client.post(
            f"/projects/{pid}/labels",
            json=[{"item": "b", "rater": "h", "value": "yes"}, {"item": "a", "rater": "h", "value": "no"}],
        )
    )
    stamps = [datetime.fromisoformat(r["created_at"]) for r in labels(client, pid, history="true")]
    assert all(s.utcoffset() is not None and s.utcoffset().total_seconds() == 0 for s in stamps)
    assert stamps == sorted(stamps) and stamps[1] == stamps[2]  # one write, one timestamp


# --- export filters -----------------------------------------------------------------------


@pytest.fixture
def history_pid(client: TestClient) -> str:
    """Two criteria, three raters, some corrections: seq 1..14."""
    pid = new_project(client, criteria=["acc", "tone"])
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": e} for e in "abcd"]))
    first = [
        {"item": e, "rater": r, "criterion": c, "value": "yes"}
        for e in "ab"
        for r in ("j", "h")
        for c in ("acc", "tone")
    ]
    assert ok(client.post(f"/projects/{pid}/labels", json=first))["label_seq"] == 8
    second = [
        {"item": "a", "rater": "j", "criterion": "acc", "value": "no"},  # correction, seq 9
        {"item": "c", "rater": "p", "criterion": "acc", "value": "yes"},  # seq 10
        {"item": "c", "rater": "p", "criterion": "tone", "value": "no"},  # seq 11
        {"item": "b", "rater": "h", "criterion": "tone", "value": "no"},  # correction, seq 12
    ]
    assert ok(client.post(f"/projects/{pid}/labels", json=second))["label_seq"] == 12
    third = [
        {"item": "a", "rater": "j", "criterion": "acc", "value": "yes"},
        {"item": "d", "rater": "j", "criterion": "tone", "value": "no"},
    ]
    assert ok(client.post(f"/projects/{pid}/labels", json=third))["label_seq"] == 14
    return pid


def test_history_and_current_of_a_mixed_log(client, history_pid):
    history = labels(client, history_pid, history="true")
    assert [r["seq"] for r in history] == list(range(1, 15))
    current = labels(client, history_pid)
    # the current label of a cell is its latest event
    latest: dict = {}
    for r in history:
        latest[(r["item"], r["rater"], r["criterion"])] = r
    assert sorted(current, key=lambda r: r["seq"]) == current
    assert {(r["item"], r["rater"], r["criterion"]): r for r in current} == latest
    assert len(current) == 11  # 8 first labels, 2 new cells in the second write, 1 in the third


def test_since_seq_keeps_only_later_events(client, history_pid):
    for history in ("true", "false"):
        every = labels(client, history_pid, history=history)
        for since in (0, 1, 8, 9, 12, 13, 14, 99):
            got = labels(client, history_pid, history=history, since_seq=since)
            assert got == [r for r in every if r["seq"] > since], (history, since)


def test_rater_and_criterion_filters(client, history_pid):
    for history in ("true", "false"):
        every = labels(client, history_pid, history=history)
        for rater in ("j", "p", "h"):
            assert labels(client, history_pid, history=history, rater=rater) == [
                r for r in every if r["rater"] == rater
            ]
        for criterion in ("acc", "tone"):
            got = labels(client, history_pid, history=history, criterion=criterion)
            assert got == [r for r in every if r["criterion"] == criterion]
        both = labels(client, history_pid, history=history, rater="j", criterion="acc", since_seq=8)
        assert both == [r for r in every if r["rater"] == "j" and r["criterion"] == "acc" and r["seq"] > 8]
        assert both  # the filters select something, so the comparison can fail


# --- criteria and abstention --------------------------------------------------------------


def test_multi_criteria_project_requires_the_criterion(client):
    pid = new_project(client, criteria=["accuracy", "tone"])
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "a"}, {"external_id": "b"}]))
    rows = [
        {"item": "a", "rater": "j", "criterion": "accuracy", "value": "yes"},
        {"item": "b", "rater": "j", "value": "yes"},
    ]
    r = client.post(f"/projects/{pid}/labels", json=rows)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid" and "criterion" in r.json()["detail"] and "row 2" in r.json()["detail"]
    assert label_seq(client, pid) == 0 and labels(client, pid, history="true") == []
    csv_body = "item,rater,value,criterion\na,j,yes,accuracy\nb,j,yes,\n"  # an empty cell is a missing criterion
    assert client.post(f"/projects/{pid}/labels", content=csv_body, headers=CSV).status_code == 422
    rows[1]["criterion"] = "tone"
    rows.append({"item": "a", "rater": "j", "criterion": "tone", "value": "no"})  # same item and rater, other criterion
    assert ok(client.post(f"/projects/{pid}/labels", json=rows)) == {"accepted": 3, "duplicates": 0, "label_seq": 3}
    assert cells(labels(client, pid)) == {
        ("a", "j", "accuracy"): "yes",
        ("b", "j", "tone"): "yes",
        ("a", "j", "tone"): "no",
    }
    assert [r["item"] for r in labels(client, pid, criterion="tone")] == ["b", "a"]


def test_criterion_names_fit_the_label_columns(client):
    """Criterion names are stored in 100-character columns: longer ones are refused up front."""
    r = client.post("/projects", json={"name": "long", "labels": ["yes", "no"], "criteria": ["c" * 101, "short"]})
    assert r.status_code == 422 and "at most 100 characters" in r.json()["detail"], r.text
    name = "c" * 100
    pid = ok(
        client.post("/projects", json={"name": "long", "labels": ["yes", "no"], "criteria": [name, "short"]}), 201
    )["id"]
    ok(client.post(f"/projects/{pid}/raters", json={"external_id": "h", "kind": "human"}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "a"}]))
    assert (
        ok(
            client.post(
                f"/projects/{pid}/labels", json=[{"item": "a", "rater": "h", "criterion": name, "value": "yes"}]
            )
        )["accepted"]
        == 1
    )
    assert [r["criterion"] for r in labels(client, pid)] == [name]


def test_single_criterion_project_accepts_its_criterion_by_name(client, pid):
    ok(
        client.post(
            f"/projects/{pid}/labels", json=[{"item": "a", "rater": "j", "criterion": "default", "value": "yes"}]
        )
    )
    assert (
        ok(client.post(f"/projects/{pid}/labels", json=[{"item": "a", "rater": "j", "value": "yes"}]))["duplicates"]
        == 1
    )


def test_abstention_project_accepts_cannot_assess(client):
    pid = new_project(client, allow_abstain=True)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "a"}, {"external_id": "b"}]))
    rows = [
        {"item": "a", "rater": "h", "value": "CANNOT_ASSESS"},
        {"item": "a", "rater": "p", "value": "CANNOT_ASSESS"},
        {"item": "a", "rater": "j", "value": "CANNOT_ASSESS"},
        {"item": "b", "rater": "j", "value": "INVALID"},
    ]
    assert ok(client.post(f"/projects/{pid}/labels", json=rows))["accepted"] == 4
    assert sorted(cells(labels(client, pid)).values()) == ["CANNOT_ASSESS"] * 3 + ["INVALID"]
    # abstention does not open INVALID to humans
    r = client.post(f"/projects/{pid}/labels", json=[{"item": "b", "rater": "h", "value": "INVALID"}])
    assert r.status_code == 422, r.text
    # an abstention can be corrected into a label like any value
    assert (
        ok(client.post(f"/projects/{pid}/labels", json=[{"item": "a", "rater": "h", "value": "yes"}]))["accepted"] == 1
    )


def test_abstention_can_be_switched_on_after_labels_exist(client, pid):
    """allow_abstain is not one of the frozen settings (labels, scale)."""
    ok(client.post(f"/projects/{pid}/labels", json=[{"item": "a", "rater": "h", "value": "yes"}]))
    assert (
        client.post(f"/projects/{pid}/labels", json=[{"item": "b", "rater": "h", "value": "CANNOT_ASSESS"}]).status_code
        == 422
    )
    assert ok(client.patch(f"/projects/{pid}", json={"allow_abstain": True}))["allow_abstain"] is True
    assert (
        ok(client.post(f"/projects/{pid}/labels", json=[{"item": "b", "rater": "h", "value": "CANNOT_ASSESS"}]))[
            "accepted"
        ]
        == 1
    )


def test_labels_with_commas_and_quotes_round_trip_through_csv(client):
    pid = new_project(client, labels=["good, mostly", 'bad "really"', "n/a"])
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": "x,1"}, {"external_id": 'y"2'}]))
    body = 'item,rater,value\n"x,1",h,"good, mostly"\n"y""2",h,"bad ""really"""\n'
    assert ok(client.post(f"/projects/{pid}/labels", content=body, headers=CSV))["accepted"] == 2
    assert cells(labels(client, pid)) == {
        ("x,1", "h", "default"): "good, mostly",
        ('y"2', "h", "default"): 'bad "really"',
    }
    as_json = [{"item": "x,1", "rater": "h", "value": "good, mostly"}]
    assert (
        ok(
            client.post(
                f"/projects/{pid}/labels", content=json.dumps(as_json), headers={"content-type": "application/json"}
            )
        )["duplicates"]
        == 1
    )


@pytest.mark.parametrize("probed", [0, 20_000])
def test_tabs_backslashes_quotes_and_newlines_round_trip(client, monkeypatch, probed):
    """PostgreSQL writes through COPY's text format and looks ids up through array literals: tabs,
    newlines, backslashes, quotes, braces and a literal \\N in ids, texts, features and labels come back
    as sent, and are found again (a resubmission is a duplicate), by value or over the array."""
    monkeypatch.setattr("service.core.sql.PROBED_VALUES", probed)
    odd = ["c\\d", 'g"h', "{i,j}", "\\N", "\\.", "NULL", "l,m", "\u00e9\u2603"]  # ids: no control characters
    texts = ["a\tb", "e\nf\r", "\\t", "\\"]
    pid = new_project(client, labels=["x\ty", "back\\slash"])
    items = [
        {"external_id": e, "text": texts[k % 4] + e, "features": {"f": texts[-k % 4] + e}} for k, e in enumerate(odd)
    ]
    assert ok(client.post(f"/projects/{pid}/items", json=items))["created"] == len(odd)
    assert ok(client.post(f"/projects/{pid}/items", json=items))["unchanged"] == len(odd)
    got = {
        i["external_id"]: {"external_id": i["external_id"], "text": i["text"], "features": i["features"]}
        for i in all_items(client, pid)
    }
    assert got == {i["external_id"]: i for i in items}
    rows = [{"item": e, "rater": "h", "value": ["x\ty", "back\\slash"][k % 2]} for k, e in enumerate(odd)]
    assert ok(client.post(f"/projects/{pid}/labels", json=rows))["accepted"] == len(odd)
    assert ok(client.post(f"/projects/{pid}/labels", json=rows))["duplicates"] == len(odd)
    assert cells(labels(client, pid)) == {(r["item"], "h", "default"): r["value"] for r in rows}


@pytest.mark.parametrize("span", [0, 4, 10**9])
def test_current_labels_read_by_range_or_by_item_count_the_same(client, engine, monkeypatch, span):
    """service.data.labels reads a write's current labels over one range of item ids when the range is
    under SPAN times the items (span 0: never; 10**9: always), else item by item: the same duplicates,
    corrections and new cells, with another project's items and labels inside the range."""
    monkeypatch.setattr("service.data.labels.SPAN", span)
    pid, other = new_project(client), new_project(client)
    for k in range(6):  # interleaved ids: the other project's items sit inside this one's range
        ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{k}"}]))
        ok(client.post(f"/projects/{other}/items", json=[{"external_id": f"i{k}"}]))
    theirs = [{"item": f"i{k}", "rater": r, "value": "no"} for k in range(6) for r in ("j", "h")]
    ok(client.post(f"/projects/{other}/labels", json=theirs))
    first = [{"item": f"i{k}", "rater": "j", "value": "yes"} for k in (0, 2, 5)]
    assert ok(client.post(f"/projects/{pid}/labels", json=first))["accepted"] == 3
    again = [*first, {"item": "i5", "rater": "h", "value": "yes"}, {"item": "i3", "rater": "j", "value": "yes"}]
    again[1] = {"item": "i2", "rater": "j", "value": "no"}  # a correction
    assert ok(client.post(f"/projects/{pid}/labels", json=again)) == {"accepted": 3, "duplicates": 2, "label_seq": 6}
    assert cells(labels(client, pid)) == {
        ("i0", "j", "default"): "yes",
        ("i2", "j", "default"): "no",
        ("i3", "j", "default"): "yes",
        ("i5", "j", "default"): "yes",
        ("i5", "h", "default"): "yes",
    }
    with engine.connect() as conn:  # the raters' labeled-item counts follow the new cells only
        counts = conn.execute(
            text(
                "SELECT r.external_id, p.labeled_items FROM rater_progress p "
                "JOIN raters r ON r.id = p.rater_id WHERE r.project_id = :p"
            ),
            {"p": pid},
        ).all()
    assert dict(counts) == {"j": 4, "h": 1}


@pytest.mark.parametrize("run", [0, 2])
def test_bulk_item_ids_found_over_an_index_range_or_one_by_one_alike(client, monkeypatch, run):
    """Past CHUNK ids (a few of a larger corpus) service.data.items reads one range of the external-id
    index when it holds at most RUN times the ids (run 0: never), else looks each id up: the same ids
    found either way, for a run of the corpus and for scattered ids, and an unknown id is still a 422."""
    monkeypatch.setattr("service.data.items.CHUNK", 2)
    monkeypatch.setattr("service.data.items.RUN", run)
    pid, other = new_project(client), new_project(client)
    corpus = [{"external_id": f"i{k:02d}"} for k in range(30)]
    ok(client.post(f"/projects/{other}/items", json=corpus))  # the same ids, never this project's
    ok(client.post(f"/projects/{pid}/items", json=corpus))
    run_of = [{"item": f"i{k:02d}", "rater": "j", "value": "yes"} for k in range(10, 16)]
    scattered = [{"item": f"i{k:02d}", "rater": "h", "value": "no"} for k in (0, 9, 17, 29, 3)]
    assert ok(client.post(f"/projects/{pid}/labels", json=run_of))["accepted"] == 6  # i10 .. i15: 6 rows
    assert ok(client.post(f"/projects/{pid}/labels", json=scattered))["accepted"] == 5  # i00 .. i29: 30 rows
    assert cells(labels(client, pid)) == {(r["item"], r["rater"], "default"): r["value"] for r in run_of + scattered}
    assert ok(client.post(f"/projects/{pid}/labels", json=scattered + run_of))["duplicates"] == 11
    unknown = [*run_of[:5], {"item": "i10x", "rater": "j", "value": "yes"}]
    r = client.post(f"/projects/{pid}/labels", json=unknown)
    assert r.status_code == 422 and "'i10x'" in r.text, r.text
    assert label_seq(client, pid) == 11


# --- concurrent writers -------------------------------------------------------------------


def test_concurrent_identical_label_uploads_write_each_cell_once(client, pid):
    """Duplicate checks must see the other writers' labels (PostgreSQL: lock the project row first)."""
    rows = [{"item": e, "rater": r, "value": "yes"} for e in "abcdef" for r in ("j", "p", "h")]

    def send(_: int):
        return client.post(f"/projects/{pid}/labels", json=rows)

    with ThreadPoolExecutor(6) as pool:
        answers = [ok(a) for a in pool.map(send, range(6))]
    assert sum(a["accepted"] for a in answers) == len(rows)
    assert sum(a["duplicates"] for a in answers) == 5 * len(rows)
    assert len(labels(client, pid, history="true")) == len(rows)
    assert label_seq(client, pid) == len(rows)


def test_concurrent_identical_item_uploads_create_each_item_once(client):
    """Racing uploads of the same new items: one creates them, the others see them unchanged (no 500)."""
    pid = new_project(client)
    rows = [{"external_id": f"x{k}"} for k in range(50)]

    def send(_: int):
        return client.post(f"/projects/{pid}/items", json=rows)

    with ThreadPoolExecutor(6) as pool:
        answers = [ok(a) for a in pool.map(send, range(6))]
    assert sum(a["created"] for a in answers) == 50
    assert sum(a["unchanged"] for a in answers) == 5 * 50
    assert len(all_items(client, pid)) == 50
    assert ok(client.get(f"/projects/{pid}"))["n_items"] == 50
