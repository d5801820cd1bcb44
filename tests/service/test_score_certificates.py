"""Certificates of numeric projects (docs/method.md §3d, §10): the fixed-sample decision on the numbers frozen
with the ratings, hand-checked on §3d's four items, equal to /reliability's, re-derived from the label export,
and every tampering (a rating, the range, the result, a setting) named by the verification."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

RATERS = [("j", "judge"), ("h1", "primary"), ("h2", "human"), ("h3", "human")]
CHECK = [[1, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]]  # docs/method.md §3d: judge, h1, h2, h3


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r.json()


def _project(client: TestClient, ratings: list[list[float]], **decision: Any) -> str:
    body = {"name": "c", "scale": "numeric", "value_range": {"min": 1, "max": 5, "step": 0.5}, "decision": decision}
    pid = ok(client.post("/projects", json=body), 201)["id"]
    for ext, kind in RATERS:
        ok(client.post(f"/projects/{pid}/raters", json={"external_id": ext, "kind": kind}), 201)
    ok(client.post(f"/projects/{pid}/items", json=[{"external_id": f"i{n:03d}"} for n in range(len(ratings))]))
    rows = [
        {"item": f"i{n:03d}", "rater": ext, "value": value}
        for n, row in enumerate(ratings)
        for (ext, _), value in zip(RATERS, row, strict=True)
    ]
    ok(client.post(f"/projects/{pid}/labels", json=rows))
    return pid


def _history(client: TestClient, pid: str) -> list[dict[str, Any]]:
    text = client.get(f"/projects/{pid}/labels", params={"history": "true", "format": "ndjson"}).text
    return [json.loads(line) for line in text.splitlines()]


def _verify(client: TestClient, statement: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    return ok(client.post("/certificates/verify", json={"certificate": statement, "labels": rows}))


def test_the_margin_decision_on_the_check_items_by_hand(client: TestClient) -> None:
    """§3d's check: d = .125, .125, 0 against h1, h2, h3 (range 1..5), all won at epsilon .05: pass, omega 1."""
    pid = _project(client, CHECK, rule="margin")
    statement = ok(client.post(f"/projects/{pid}/certificates", json={}), 201)
    predicate = statement["predicate"]
    assert predicate["protocol"]["scale"] == "numeric"
    assert predicate["protocol"]["value_range"] == {"min": 1.0, "max": 5.0, "step": 0.5}
    result = predicate["result"]
    assert (result["decision"], result["omega"], result["n_items"], result["n_labels"]) == ("pass", 1.0, 4, 16)
    (judge,) = result["judges"]
    assert [(r["rater"], r["m"], r["d"], r["won"]) for r in judge["raters"]] == [
        ("h1", 4, 0.125, True),
        ("h2", 4, 0.125, True),
        ("h3", 4, 0.0, True),
    ]
    assert judge["rho"] == pytest.approx(0.25 / 3, abs=1e-12)


@pytest.mark.parametrize("rule", ["alt-test", "margin"])
def test_the_certified_decision_is_reliabilitys_and_verifies(client: TestClient, rule: str) -> None:
    rng = np.random.default_rng(3)
    truth = rng.uniform(1, 5, 60)
    noise = (0.9, 0.6, 0.6, 0.6)
    ratings = [[float(np.clip(np.round(2 * (t + rng.normal(0, sd))) / 2, 1, 5)) for sd in noise] for t in truth]
    pid = _project(client, ratings, rule=rule)
    statement = ok(client.post(f"/projects/{pid}/certificates", json={}), 201)
    assert ok(client.post(f"/projects/{pid}/certificates", json={})) == statement  # idempotent: 200, the same
    result, document = statement["predicate"]["result"], ok(client.get(f"/projects/{pid}/reliability"))
    assert (result["decision"], result["omega"]) == (document["decision"], pytest.approx(document["omega"]))
    (judge,), (served,) = result["judges"], document["judges"]
    assert judge["rho"] == pytest.approx(served["rho"], abs=1e-11)
    by_rater = {r["rater"]: r for r in served["raters"]}
    for r in judge["raters"]:
        for field in ("d", "rho_f", "rho_h", "p_value"):
            assert r[field] == (
                None if by_rater[r["rater"]][field] is None else pytest.approx(by_rater[r["rater"]][field], abs=1e-11)
            )
        assert (r["m"], r["won"]) == (by_rater[r["rater"]]["m"], by_rater[r["rater"]]["won"])
    rows = _history(client, pid)
    assert _verify(client, statement, rows) == {"match": True, "mismatches": [], "notes": []}


def test_a_tampered_numeric_certificate_is_named(client: TestClient) -> None:
    pid = _project(client, CHECK, rule="margin")
    statement = ok(client.post(f"/projects/{pid}/certificates", json={}), 201)
    rows = _history(client, pid)

    changed = [dict(r) for r in rows]
    judge_row = next(r for r in changed if r["rater"] == "j" and r["item"] == "i000")
    judge_row["value"] = "4"  # the judge's 1 on item 0: h1's xi there falls from 0 to (.5 - 2.5)/4
    bad = _verify(client, statement, changed)
    fields = [m["field"] for m in bad["mismatches"]]
    assert not bad["match"] and fields[0] == "labels-snapshot" and "label changed" in bad["mismatches"][0]["reason"]
    assert "result.judges[0].raters[0].d" in fields

    edited = json.loads(json.dumps(statement))
    edited["predicate"]["protocol"]["value_range"]["max"] = 9  # a wider range shrinks every d
    bad = _verify(client, edited, rows)
    fields = [m["field"] for m in bad["mismatches"]]
    assert not bad["match"] and "report" in fields and "result.judges[0].raters[0].d" in fields

    edited = json.loads(json.dumps(statement))
    edited["predicate"]["result"]["judges"][0]["raters"][2]["won"] = False
    bad = _verify(client, edited, rows)
    assert {m["field"] for m in bad["mismatches"]} == {"report", "result.judges[0].raters[2].won"}

    edited = json.loads(json.dumps(statement))
    edited["predicate"]["decision"]["epsilon"] = 0.01
    bad = _verify(client, edited, rows)
    assert not bad["match"] and "decision.epsilon" in [m["field"] for m in bad["mismatches"]]

    outside = [dict(r) for r in rows]
    next(r for r in outside if r["rater"] == "h2")["value"] = "7"  # outside the certified range
    bad = _verify(client, statement, outside)
    assert any(m["field"] == "result" and "cannot be recomputed" in m["reason"] for m in bad["mismatches"])


def test_a_sliced_numeric_project_certifies_reliabilitys_slices_and_verifies(client: TestClient) -> None:
    """The two-slice panel of tests/service/test_score_slices.py (slice b: d = -.625, -.5625, -.625, rejects; a
    passes): the certificate freezes each item's slice and the fixed-mode slices /reliability?by= shows; moving
    an item to the other slice is named."""
    from tests.service.test_score_slices import PANEL, TOPIC
    from tests.service.test_score_slices import _project as sliced_project

    pid = sliced_project(client, PANEL, TOPIC, monitoring="fixed", slices="feature:topic")
    shown = ok(client.get(f"/projects/{pid}/reliability"))["slices"]
    statement = ok(client.post(f"/projects/{pid}/certificates", json={}), 201)
    certified = statement["predicate"]["result"]["slices"]
    assert certified["headline"] == shown["headline"] == "fails overall; fails on slice b (omega 0.00, d -0.60)"
    assert certified["correction"] == shown["correction"] == "none" and certified["failing"] == ["b"]
    assert [(o["value"], o["n_items"], o["decision"], o["omega"]) for o in certified["slices"]] == [
        (o["value"], o["n_items"], o["decision"], o["omega"]) for o in shown["slices"]
    ]
    assert certified["slices"][0]["d"] == pytest.approx(-1.8125 / 3, abs=1e-12)
    rows = _history(client, pid)
    assert _verify(client, statement, rows)["match"]
    edited = json.loads(json.dumps(statement))
    items = sorted({r["item"] for r in rows if r["value"] not in (None, "")})  # certified items, by place
    values = edited["predicate"]["slices"]["values"]
    assert [items.index("i0"), "a"] in values
    values[values.index([items.index("i0"), "a"])][1] = "b"  # an item of slice a moved to b
    bad = _verify(client, edited, rows)
    assert not bad["match"] and any(m["field"].startswith("result.slices") for m in bad["mismatches"]), bad
