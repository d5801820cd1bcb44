"""The generic long format (issue 38): export -> import into a new project gives the same
/reliability; bad rows are a 422 naming the row with nothing written; resubmission writes nothing."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

LABELS = ["pass", "fail"]
PANEL = {"judge": "judge", "prim": "primary", "h2": "human", "h3": "human"}


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r


def labelled_project(c: TestClient, n_items: int = 40, seed: int = 3) -> str:
    """A binary project (abstention allowed) whose panel labels a seeded, partly overlapping subset; the
    raters are added in one order and label in the reverse one (the export's order is not the labels')."""
    pid = ok(c.post("/projects", json={"name": "src", "labels": LABELS, "allow_abstain": True}), 201).json()["id"]
    ok(c.post(f"/projects/{pid}/items", json=[{"external_id": f"it-{i}"} for i in range(n_items)]))
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    for ext, kind in PANEL.items():
        ok(c.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    for ext, kind in reversed(PANEL.items()):
        flips = rng.random(n_items) < 0.2
        seen = rng.random(n_items) < (1.0 if kind != "human" else 0.6)
        values = [LABELS[int(t ^ f)] for t, f in zip(truth, flips, strict=True)]
        rows = [{"item": f"it-{i}", "rater": ext, "value": v} for i, v in enumerate(values) if seen[i]]
        if kind == "judge":
            rows = [{**r, "confidence": 0.25 if k % 2 else 0.75} for k, r in enumerate(rows)]
        rows[0]["value"] = "CANNOT_ASSESS" if kind != "judge" else "INVALID"
        ok(c.post(f"/projects/{pid}/labels", json=rows))
    return pid


def comparable(document: Any) -> Any:
    """The reliability document without what names its project or its time, and without the anytime
    monitoring (its sequence follows the labels' arrival, which the format does not carry)."""
    if isinstance(document, dict):
        drop = {"project_id", "computed_at", "generated_at", "etag", "monitoring"}
        return {k: comparable(v) for k, v in document.items() if k not in drop}
    if isinstance(document, list):
        return [comparable(v) for v in document]
    return document


def test_round_trip_gives_the_same_reliability(client: TestClient) -> None:
    src = labelled_project(client)
    exported = ok(client.get(f"/projects/{src}/export/generic"))
    assert exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert set(rows[0]) == {"item", "rater", "kind", "value", "criterion", "confidence", "order"}
    assert {r["confidence"] for r in rows if r["rater"] == "judge"} == {"0.25", "0.75"}
    assert {r["confidence"] for r in rows if r["rater"] != "judge"} == {""}
    assert {r["rater"]: r["kind"] for r in rows} == PANEL
    dst = ok(client.post("/projects", json={"name": "dst", "labels": LABELS, "allow_abstain": True}), 201).json()["id"]
    body = exported.content
    summary = ok(client.post(f"/projects/{dst}/import/generic", content=body, headers={"content-type": "text/csv"}))
    assert summary.json()["labels"]["accepted"] == len(rows)
    assert sorted(summary.json()["raters_created"]) == sorted(PANEL)
    before = ok(client.get(f"/projects/{src}/reliability")).json()
    after = ok(client.get(f"/projects/{dst}/reliability")).json()
    assert comparable(after) == comparable(before)
    again = ok(client.get(f"/projects/{dst}/export/generic", params={"format": "ndjson"}))
    as_text = [
        tuple("" if v is None else str(v) for v in json.loads(line).values()) for line in again.text.splitlines()
    ]
    assert sorted(as_text) == sorted(tuple(r.values()) for r in rows)


def test_resubmission_writes_nothing_and_a_key_replays(client: TestClient) -> None:
    pid = ok(client.post("/projects", json={"name": "g", "labels": LABELS}), 201).json()["id"]
    body = [
        {"item": "a", "rater": "j", "kind": "judge", "value": "PASS", "confidence": 0.9},
        {"item": "a", "rater": "p", "kind": "primary", "value": "fail"},
        {"item": "b", "rater": "j", "kind": "judge", "value": "fail"},
    ]
    first = ok(client.post(f"/projects/{pid}/import/generic", json=body)).json()
    assert first["items_created"] == 2 and first["labels"]["accepted"] == 3
    second = ok(client.post(f"/projects/{pid}/import/generic", json=body)).json()
    assert second["labels"] == {**first["labels"], "accepted": 0, "duplicates": 3}
    assert second["items_created"] == 0 and second["raters_created"] == []
    keyed = [ok(client.post(f"/projects/{pid}/import/generic", json=body[:1], headers={"Idempotency-Key": "k1"}))]
    keyed.append(ok(client.post(f"/projects/{pid}/import/generic", json=body[:1], headers={"Idempotency-Key": "k1"})))
    assert keyed[0].json() == keyed[1].json()
    exported = ok(client.get(f"/projects/{pid}/export/generic", params={"format": "ndjson"})).text
    assert [json.loads(line)["confidence"] for line in exported.splitlines()] == [0.9, None, None]
    labels = ok(client.get(f"/projects/{pid}/labels")).json()["items"]
    assert sorted((r["item"], r["rater"], r["value"]) for r in labels) == [
        ("a", "j", "pass"),
        ("a", "p", "fail"),
        ("b", "j", "fail"),
    ]


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"kind": "robot"}, "row 3: kind"),
        ({"value": "maybe"}, "row 3: value 'maybe' maps to none"),
        ({"rater": "j", "kind": "human"}, "row 3: rater 'j' is a human rater here and a judge rater at row 1"),
        ({"criterion": "tone"}, "row 3: unknown criterion 'tone'"),
        ({"confidence": 1.5}, "row 3: confidence"),
        ({"confidence": 0.5}, "row 3: only a judge's label carries a confidence"),
        (
            {"item": "a", "rater": "j", "kind": "judge", "value": "fail"},
            "row 3: item 'a', rater 'j' has 'fail' here and 'pass' at row 1",
        ),
        ({"kind": "human", "value": "INVALID"}, "row 3: INVALID is only accepted from judges"),
    ],
)
def test_a_bad_row_is_a_422_naming_it_and_nothing_is_written(client: TestClient, bad: dict, needle: str) -> None:
    pid = ok(client.post("/projects", json={"name": "g", "labels": LABELS}), 201).json()["id"]
    body = [
        {"item": "a", "rater": "j", "kind": "judge", "value": "pass"},
        {"item": "b", "rater": "j", "kind": "judge", "value": "fail"},
        {"item": "c", "rater": "h", "kind": "human", "value": "pass", **bad},
    ]
    r = client.post(f"/projects/{pid}/import/generic", json=body)
    assert r.status_code == 422, r.text
    assert needle in r.json()["detail"], r.json()["detail"]
    assert ok(client.get(f"/projects/{pid}/items")).json()["items"] == []
    assert ok(client.get(f"/projects/{pid}/raters")).json()["items"] == []
    assert ok(client.get(f"/projects/{pid}/labels")).json()["items"] == []


def test_a_kind_clash_with_the_project_is_a_409(client: TestClient) -> None:
    pid = ok(client.post("/projects", json={"name": "g", "labels": LABELS}), 201).json()["id"]
    ok(client.post(f"/projects/{pid}/raters", json={"external_id": "j", "kind": "judge"}), 201)
    r = client.post(
        f"/projects/{pid}/import/generic", json=[{"item": "a", "rater": "j", "kind": "human", "value": "pass"}]
    )
    assert r.status_code == 409 and r.json()["error"] == "rater_kind_clash", r.text
    assert ok(client.get(f"/projects/{pid}/items")).json()["items"] == []


def test_formula_like_values_survive_the_csv_round_trip(client: TestClient) -> None:
    pid = ok(client.post("/projects", json={"name": "g", "labels": ["=ok", "-bad"]}), 201).json()["id"]
    body = [
        {"item": "=a", "rater": "+j", "kind": "judge", "value": "=ok"},
        {"item": "b", "rater": "+j", "kind": "judge", "value": "-bad"},
    ]
    ok(client.post(f"/projects/{pid}/import/generic", json=body))
    exported = ok(client.get(f"/projects/{pid}/export/generic")).content
    assert b"'=ok" in exported
    dst = ok(client.post("/projects", json={"name": "h", "labels": ["=ok", "-bad"]}), 201).json()["id"]
    ok(client.post(f"/projects/{dst}/import/generic", content=exported, headers={"content-type": "text/csv"}))
    labels = ok(client.get(f"/projects/{dst}/labels")).json()["items"]
    assert sorted((r["item"], r["rater"], r["value"]) for r in labels) == [("=a", "+j", "=ok"), ("b", "+j", "-bad")]
