"""Certificates over HTTP: issue (idempotent), list and read by role, the snapshot digest checked by an
independent canonicalisation of the label export, verification by any key, and the offline CLI."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.cli import app as cli
from tests.conftest import ROOT
from tests.factories import create_project

RATERS = [("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human")]


def make_project(client: TestClient, raters: list[tuple[str, str]] = RATERS) -> str:
    return create_project(client, name="cert", raters=raters, items=[f"i{i:02d}" for i in range(30)])


def write_labels(client: TestClient, pid: str, *, flip_every: int) -> None:
    rows = []
    for i in range(30):
        truth = "pass" if i % 3 else "fail"
        rows += [{"item": f"i{i:02d}", "rater": r, "value": truth} for r in ("prim", "h2")]
        rows.append({"item": f"i{i:02d}", "rater": "h3", "value": truth if i % 5 else "pass"})
        wrong = i % flip_every == 0
        judged = ("fail" if truth == "pass" else "pass") if wrong else truth
        rows.append({"item": f"i{i:02d}", "rater": "judge", "value": judged})
    assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200


@pytest.fixture
def pid(client: TestClient) -> str:
    pid = make_project(client)
    write_labels(client, pid, flip_every=4)
    write_labels(client, pid, flip_every=6)  # corrections: a history with superseded events
    plan = {"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "random"}  # a random 62-bit seed
    assert client.post(f"/projects/{pid}/plan", json=plan).status_code == 201
    return pid


def history(client: TestClient, pid: str) -> list[dict]:
    text = client.get(f"/projects/{pid}/labels", params={"history": "true", "format": "ndjson"}).text
    return [json.loads(line) for line in text.splitlines()]


def test_issue_is_idempotent_per_label_seq_and_settings(client: TestClient, pid: str) -> None:
    r = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 100})
    assert r.status_code == 201, r.text
    s = r.json()
    cid = s["predicate"]["certificate"]["id"]
    assert r.headers["location"] == f"/projects/{pid}/certificates/{cid}"
    assert s["_type"] == "https://in-toto.io/Statement/v1"
    assert s["predicateType"] == "https://annoplan.dev/validation-certificate/v1"
    assert [x["name"] for x in s["subject"]] == ["labels-snapshot", "report"]
    p = s["predicate"]
    assert p["label_seq"] == 127 and p["decision"]["epsilon"] == 0.05 and p["seeds"]["bit_generator"] == "PCG64"
    assert p["raters"] == dict(RATERS) and p["result"]["decision"] in ("pass", "reject", "inconclusive")
    assert p["plan"]["seed"] == str(client.get(f"/projects/{pid}/plan").json()["seed"])
    again = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 100})
    assert again.status_code == 200 and again.json() == s
    other = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 100, "seed": 5})
    assert other.status_code == 201 and other.json()["predicate"]["certificate"]["id"] != cid
    listed = client.get(f"/projects/{pid}/certificates").json()["items"]
    assert [c["id"] for c in listed] == [cid, other.json()["predicate"]["certificate"]["id"]]
    assert client.get(f"/projects/{pid}/certificates/{cid}").json() == s


def test_snapshot_digest_matches_an_independent_canonicalisation(client: TestClient, pid: str) -> None:
    """At an earlier label_seq: the latest event per cell up to it, sorted, hashed with json + hashlib."""
    cut = 123  # inside the corrections: some cells at their first value, some at their second
    s = client.post(f"/projects/{pid}/certificates", json={"label_seq": cut, "n_resamples": 50}).json()
    latest: dict = {}
    for row in history(client, pid):
        if row["seq"] <= cut:
            latest[(row["item"], row["rater"], row["criterion"])] = row
    rows = [{k: latest[c][k] for k in ("item", "rater", "criterion", "value", "seq")} for c in sorted(latest)]
    canonical = json.dumps(rows, sort_keys=True, separators=(",", ":")).encode()
    assert s["subject"][0]["digest"]["sha256"] == hashlib.sha256(canonical).hexdigest()
    assert s["predicate"]["snapshot"]["n_rows"] == 120 and 120 < max(r["seq"] for r in rows) <= cut


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"label_seq": 10_000}, 422, "invalid"),
        ({"criterion": "tone"}, 422, "invalid"),
        ({"seed": -1}, 422, "validation_error"),
        ({"seed": 2**53}, 422, "validation_error"),
        ({"colour": 1}, 422, "validation_error"),
        ({"n_resamples": 0}, 422, "validation_error"),
    ],
)
def test_bad_requests_write_nothing(client: TestClient, pid: str, body: dict, status: int, code: str) -> None:
    r = client.post(f"/projects/{pid}/certificates", json=body)
    assert r.status_code == status and r.json()["error"] == code, r.text
    assert client.get(f"/projects/{pid}/certificates").json()["items"] == []


def test_no_judge_and_too_few_humans_are_refused(client: TestClient) -> None:
    pid = make_project(client, [("prim", "primary"), ("h2", "human")])
    r = client.post(f"/projects/{pid}/certificates", json={})
    assert r.status_code == 409 and r.json()["error"] == "no_judge" and "judge" in r.json()["detail"]
    pid = make_project(client, [("judge", "judge"), ("prim", "primary")])
    r = client.post(f"/projects/{pid}/certificates", json={})
    assert r.status_code == 409 and r.json()["error"] == "too_few_humans"
    assert client.get(f"/projects/{pid}/certificates").json()["items"] == []


def key(client: TestClient, pid: str, role: str) -> dict:
    body = {"role": role, **({"rater": "h2"} if role == "annotator" else {})}
    return {"Authorization": f"Bearer {client.post(f'/projects/{pid}/keys', json=body).json()['key']}"}


def test_roles(client: TestClient, pid: str) -> None:
    pm, viewer, annotator = (key(client, pid, r) for r in ("pm", "viewer", "annotator"))
    made = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}, headers=pm)
    assert made.status_code == 201
    cid = made.json()["predicate"]["certificate"]["id"]
    assert client.post(f"/projects/{pid}/certificates", json={}, headers=viewer).status_code == 403
    assert client.get(f"/projects/{pid}/certificates", headers=viewer).status_code == 200
    assert client.get(f"/projects/{pid}/certificates/{cid}", headers=viewer).status_code == 200
    assert client.get(f"/projects/{pid}/certificates", headers=annotator).status_code == 403
    assert client.get(f"/projects/{pid}/certificates/nope", headers=viewer).status_code == 404
    other = make_project(client)
    assert client.get(f"/projects/{other}/certificates/{cid}").status_code == 404


def fields(body: dict) -> list[str]:
    return [m["field"] for m in body["mismatches"]]


def test_verify_endpoint_any_key(client: TestClient, pid: str) -> None:
    s = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    rows = history(client, pid)
    viewer = key(client, pid, "viewer")
    ok = client.post("/certificates/verify", json={"certificate": s, "labels": rows}, headers=viewer)
    assert ok.status_code == 200 and ok.json() == {"match": True, "mismatches": [], "notes": []}
    changed = [dict(r) for r in rows]
    changed[-1]["value"] = "pass" if changed[-1]["value"] == "fail" else "fail"
    bad = client.post("/certificates/verify", json={"certificate": s, "labels": changed}).json()
    assert not bad["match"] and bad["mismatches"][0]["field"] == "labels-snapshot"
    assert bad["mismatches"][0]["reason"].startswith("label changed")
    edited = json.loads(json.dumps(s))
    edited["predicate"]["decision"]["epsilon"] = 0.2
    bad = client.post("/certificates/verify", json={"certificate": edited, "labels": rows}).json()
    assert not bad["match"] and "decision.epsilon" in fields(bad)
    r = client.post("/certificates/verify", json={"certificate": {"_type": "x"}, "labels": rows})
    assert r.status_code == 422 and r.json()["error"] == "invalid_certificate"
    assert (
        client.post(
            "/certificates/verify", json={"certificate": s, "labels": rows}, headers={"Authorization": "Bearer nope"}
        ).status_code
        == 401
    )


def test_cli_verify_offline(client: TestClient, pid: str, tmp_path: Path) -> None:
    s = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(s))
    exported = client.get(f"/projects/{pid}/labels", params={"format": "csv"}).text
    labels = tmp_path / "labels.csv"
    labels.write_text(exported)
    runner = CliRunner()
    ok = runner.invoke(cli, ["verify", str(cert), str(labels)])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["match"] is True
    ndjson = tmp_path / "labels.ndjson"
    ndjson.write_text("\n".join(json.dumps(r) for r in history(client, pid)))
    assert runner.invoke(cli, ["verify", str(cert), str(ndjson)]).exit_code == 0
    rows = list(csv.DictReader(io.StringIO(exported)))
    removed = tmp_path / "removed.csv"
    with removed.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows[1:])
    bad = runner.invoke(cli, ["verify", str(cert), str(removed)])
    assert bad.exit_code == 1
    report = json.loads(bad.output)
    assert not report["match"] and report["mismatches"][0]["reason"].startswith("label removed")
    wrong = runner.invoke(cli, ["verify", str(labels), str(labels)])
    assert wrong.exit_code != 0 and "Traceback" not in wrong.output
    # as a person runs it (the script's entry point): the exit status says whether it matched
    for path, status in ((labels, 0), (removed, 1)):
        run = subprocess.run(
            [sys.executable, "-c", "from service.cli import main; main()", "verify", str(cert), str(path)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert run.returncode == status and json.loads(run.stdout)["match"] is (status == 0), run.stderr


def test_certificate_created_is_announced(client: TestClient, pid: str) -> None:
    from service.data.models import WebhookEvent

    client.app.state.settings = client.app.state.settings.model_copy(update={"webhook_allow_private": True})
    assert (
        client.post(
            f"/projects/{pid}/webhooks", json={"url": "http://127.0.0.1:9/x", "events": ["certificate.created"]}
        ).status_code
        == 201
    )
    s = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50})  # the same one: no second event
    with client.app.state.sessions() as session:
        events = session.query(WebhookEvent).filter_by(type="certificate.created").all()
    assert [e.payload["data"]["certificate"] for e in events] == [s["predicate"]["certificate"]["id"]]
    assert events[0].payload["data"]["report_sha256"] == s["subject"][1]["digest"]["sha256"]


# --- issue 30: the verifier's work is bounded before it starts, and large work leaves the worker ---


def test_verify_refuses_an_unbounded_resample_count_from_any_key(client: TestClient, pid: str) -> None:
    s = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    rows = history(client, pid)
    annotator = key(client, pid, "annotator")
    inflated = json.loads(json.dumps(s))
    inflated["predicate"]["seeds"]["n_resamples"] = 10_000_000
    r = client.post("/certificates/verify", json={"certificate": inflated, "labels": rows}, headers=annotator)
    assert r.status_code == 422 and r.json()["error"] == "invalid_certificate", r.text
    assert "n_resamples" in r.json()["detail"]


def test_verify_work_is_bounded_before_it_starts(client: TestClient, pid: str) -> None:
    s = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    rows = history(client, pid)
    inflated = json.loads(json.dumps(s))
    inflated["predicate"]["seeds"]["n_resamples"] = 100_000
    client.app.state.settings = client.app.state.settings.model_copy(update={"certificate_max_work": 1_000_000})
    r = client.post("/certificates/verify", json={"certificate": inflated, "labels": rows})
    assert r.status_code == 413 and r.json()["error"] == "certificate_too_large", r.text
    work = len(rows) * 100_000
    assert f"{len(rows):,} label rows x 100,000 resamples x 1 decisions is {work:,} units" in r.json()["detail"]
    assert "ANNOPLAN_CERTIFICATE_MAX_WORK" in r.json()["detail"]
    # the issuer shares the bound
    r = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 100_000})
    assert r.status_code == 413 and r.json()["error"] == "certificate_too_large", r.text
    assert client.post("/certificates/verify", json={"certificate": s, "labels": rows}).json()["match"] is True


def test_a_large_verification_in_a_child_process_matches(
    client: TestClient, pid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = client.post(f"/projects/{pid}/certificates", json={"n_resamples": 50}).json()
    rows = history(client, pid)
    monkeypatch.setattr("service.core.offload.INLINE_WORK", 0)
    ok = client.post("/certificates/verify", json={"certificate": s, "labels": rows})
    assert ok.status_code == 200 and ok.json() == {"match": True, "mismatches": [], "notes": []}
