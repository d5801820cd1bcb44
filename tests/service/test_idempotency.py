"""``Idempotency-Key`` (as README's upload example uses it): the same key and body replay the first response and
write nothing; the same key with another body is 409; distinct keys are distinct writes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from service.data.models import Base

LABELS_A = [{"item": "i1", "rater": "h2", "value": "pass"}, {"item": "i2", "rater": "h2", "value": "fail"}]
LABELS_B = [{"item": "i1", "rater": "h2", "value": "fail"}, {"item": "i2", "rater": "h2", "value": "fail"}]


def key(k: str) -> dict[str, str]:
    return {"Idempotency-Key": k}


def state(client: TestClient, engine: Engine, pid: str) -> dict:
    """Row counts of every table plus the label history and the project, for before/after checks."""
    with engine.connect() as conn:
        tables = {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one() for t in Base.metadata.sorted_tables
        }
    history = client.get(f"/projects/{pid}/labels", params={"history": "true", "limit": 1000}).json()
    return {
        "tables": tables,
        "history": history,
        "project": client.get(f"/projects/{pid}").json(),
        "items": client.get(f"/projects/{pid}/items", params={"limit": 1000}).json(),
        "raters": client.get(f"/projects/{pid}/raters").json(),
    }


def assert_replay(first, again) -> None:
    assert again.status_code == first.status_code, again.text
    assert again.json() == first.json()
    assert again.headers.get("idempotent-replayed") == "true"
    assert first.headers.get("idempotent-replayed") is None


def test_same_key_and_body_replays_labels_and_writes_nothing(client, project, engine):
    pid = project["id"]
    first = client.post(f"/projects/{pid}/labels", json=LABELS_A, headers=key("k1"))
    assert first.status_code == 200 and first.json() == {"accepted": 2, "duplicates": 0, "label_seq": 2}
    before = state(client, engine, pid)
    again = client.post(f"/projects/{pid}/labels", json=LABELS_A, headers=key("k1"))
    assert_replay(first, again)
    assert state(client, engine, pid) == before


def test_replay_returns_the_first_response_even_after_later_writes(client, project):
    pid = project["id"]
    first = client.post(f"/projects/{pid}/labels", json=LABELS_A, headers=key("k1"))
    assert client.post(f"/projects/{pid}/labels", json=LABELS_B).json()["accepted"] == 1
    again = client.post(f"/projects/{pid}/labels", json=LABELS_A, headers=key("k1"))
    assert_replay(first, again)
    assert again.json()["label_seq"] == 2  # the first response, not a recomputation (now 3)
    current = client.get(f"/projects/{pid}/labels", params={"rater": "h2"}).json()["items"]
    assert {r["item"]: r["value"] for r in current} == {"i1": "fail", "i2": "fail"}  # the replay did not re-apply A


def test_same_key_different_body_is_409_and_writes_nothing(client, project, engine):
    pid = project["id"]
    assert client.post(f"/projects/{pid}/labels", json=LABELS_A, headers=key("k1")).status_code == 200
    before = state(client, engine, pid)
    r = client.post(f"/projects/{pid}/labels", json=LABELS_B, headers=key("k1"))
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "idempotency_key_reused" and r.json()["detail"]
    csv_body = "item,rater,value\ni1,h2,pass\ni2,h2,fail\n"  # same rows, other bytes: another request
    r = client.post(f"/projects/{pid}/labels", content=csv_body, headers={**key("k1"), "content-type": "text/csv"})
    assert r.status_code == 409, r.text
    assert state(client, engine, pid) == before


def test_same_key_on_another_endpoint_is_409(client, project, engine):
    pid = project["id"]
    assert client.post(f"/projects/{pid}/items", json=[{"external_id": "n1"}], headers=key("k1")).status_code == 200
    before = state(client, engine, pid)
    r = client.post(f"/projects/{pid}/raters", json={"external_id": "n1", "kind": "human"}, headers=key("k1"))
    assert r.status_code == 409 and r.json()["error"] == "idempotency_key_reused", r.text
    other = client.post("/projects", json={"name": "x", "labels": ["a", "b"]}).json()["id"]
    r = client.post(f"/projects/{other}/items", json=[{"external_id": "n1"}], headers=key("k1"))
    assert r.status_code == 409, r.text  # same body, other project: a different request
    assert client.get(f"/projects/{other}/items").json()["items"] == []
    assert state(client, engine, pid)["items"] == before["items"]


def test_different_keys_are_different_writes(client, project):
    pid = project["id"]
    path = f"/projects/{pid}/labels"
    assert client.post(path, json=LABELS_A, headers=key("a1")).json() == {
        "accepted": 2,
        "duplicates": 0,
        "label_seq": 2,
    }
    # the same body under a new key is a new request: nothing new to write, so duplicates
    second = client.post(path, json=LABELS_A, headers=key("a2"))
    assert second.json() == {"accepted": 0, "duplicates": 2, "label_seq": 2}
    assert second.headers.get("idempotent-replayed") is None
    # corrections under new keys each append an event
    assert client.post(path, json=LABELS_B, headers=key("b1")).json() == {
        "accepted": 1,
        "duplicates": 1,
        "label_seq": 3,
    }
    assert client.post(path, json=LABELS_A, headers=key("a3")).json() == {
        "accepted": 1,
        "duplicates": 1,
        "label_seq": 4,
    }
    history = client.get(path, params={"history": "true", "rater": "h2"}).json()["items"]
    assert [(r["item"], r["value"]) for r in history] == [
        ("i1", "pass"),
        ("i2", "fail"),
        ("i1", "fail"),
        ("i1", "pass"),
    ]


def test_items_replay_the_first_counts(client, project, engine):
    pid = project["id"]
    rows = [{"external_id": "n1"}, {"external_id": "i0", "features": {"topic": "z"}}]
    first = client.post(f"/projects/{pid}/items", json=rows, headers=key("k"))
    assert first.json() == {"created": 1, "updated": 1, "unchanged": 0}
    before = state(client, engine, pid)
    assert_replay(first, client.post(f"/projects/{pid}/items", json=rows, headers=key("k")))
    assert state(client, engine, pid) == before
    # without the key the same upload is a new request and reports the items as unchanged
    assert client.post(f"/projects/{pid}/items", json=rows).json() == {"created": 0, "updated": 0, "unchanged": 2}


def test_rater_creation_replays_instead_of_conflicting(client, project, engine):
    pid = project["id"]
    body = {"external_id": "h9", "kind": "human", "name": "Nine"}
    first = client.post(f"/projects/{pid}/raters", json=body, headers=key("k"))
    assert first.status_code == 201, first.text
    before = state(client, engine, pid)
    assert_replay(first, client.post(f"/projects/{pid}/raters", json=body, headers=key("k")))
    assert state(client, engine, pid) == before
    assert client.post(f"/projects/{pid}/raters", json=body).status_code == 409  # without the key it is a conflict


def test_project_creation_and_patch_replay(client, project, engine):
    body = {"name": "twice", "labels": ["a", "b"]}
    first = client.post("/projects", json=body, headers=key("k"))
    assert first.status_code == 201, first.text
    before = state(client, engine, project["id"])
    assert_replay(first, client.post("/projects", json=body, headers=key("k")))
    names = [p["name"] for p in client.get("/projects").json()["items"]]
    assert names.count("twice") == 1
    assert state(client, engine, project["id"]) == before
    pid = first.json()["id"]
    patched = client.patch(f"/projects/{pid}", json={"name": "renamed"}, headers=key("p"))
    assert patched.status_code == 200
    assert client.patch(f"/projects/{pid}", json={"name": "third"}).status_code == 200
    assert_replay(patched, client.patch(f"/projects/{pid}", json={"name": "renamed"}, headers=key("p")))
    assert client.get(f"/projects/{pid}").json()["name"] == "third"


def test_a_failed_write_does_not_bind_its_key(client, project):
    pid = project["id"]
    path = f"/projects/{pid}/labels"
    bad = [{"item": "i1", "rater": "h2", "value": "nonsense"}]
    assert client.post(path, json=bad, headers=key("k")).status_code == 422
    assert client.post(path, json=bad, headers=key("k")).status_code == 422  # still evaluated, not replayed
    fixed = client.post(path, json=LABELS_A, headers=key("k"))
    assert fixed.status_code == 200 and fixed.json()["accepted"] == 2
    r = client.post(path, json=bad, headers=key("k"))
    assert r.status_code == 409 and r.json()["error"] == "idempotency_key_reused"


def test_conflict_inside_the_write_does_not_bind_its_key(client, project):
    pid = project["id"]
    assert client.post(f"/projects/{pid}/labels", json=LABELS_A).status_code == 200
    change = {"labels": ["pass", "fail", "skip"]}
    assert client.patch(f"/projects/{pid}", json=change, headers=key("k")).status_code == 409
    assert client.patch(f"/projects/{pid}", json=change, headers=key("k")).json()["error"] == "labels_exist"


def test_keys_are_scoped_to_the_api_key(client, project):
    pid = project["id"]
    pm = client.post(f"/projects/{pid}/keys", json={"role": "pm"}).json()["key"]
    path = f"/projects/{pid}/labels"
    assert client.post(path, json=LABELS_A, headers=key("shared")).json()["accepted"] == 2
    r = client.post(path, json=LABELS_B, headers={**key("shared"), "Authorization": f"Bearer {pm}"})
    assert r.status_code == 200, r.text  # another caller's key space: not a reuse
    assert r.json() == {"accepted": 1, "duplicates": 1, "label_seq": 3}


def test_idempotency_key_length_is_checked(client, project, engine):
    pid = project["id"]
    before = state(client, engine, pid)
    r = client.post(f"/projects/{pid}/labels", json=LABELS_A, headers=key("x" * 201))
    assert r.status_code == 422 and r.json()["error"] == "invalid_idempotency_key", r.text
    assert state(client, engine, pid) == before
    assert client.post(f"/projects/{pid}/labels", json=LABELS_A, headers=key("x" * 200)).status_code == 200


def test_concurrent_twins_write_once(client, project):
    """Eight simultaneous sends of one keyed request: one write, every answer the first one's."""
    pid = project["id"]
    rows = [{"item": f"i{k}", "rater": "h3", "value": "pass"} for k in range(20)]

    def send(_: int):
        return client.post(f"/projects/{pid}/labels", json=rows, headers=key("twin"))

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(8)))
    ok = [a for a in answers if a.status_code == 200]
    assert all(a.status_code in (200, 409) for a in answers), [a.text for a in answers]
    assert ok and all(a.json() == {"accepted": 20, "duplicates": 0, "label_seq": 20} for a in ok)
    assert sum(a.headers.get("idempotent-replayed") is None for a in ok) == 1
    history = client.get(f"/projects/{pid}/labels", params={"history": "true", "limit": 1000}).json()["items"]
    assert len(history) == 20
