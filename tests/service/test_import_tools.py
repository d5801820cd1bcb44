"""Imports of other tools' files (issue 38): each fixture, written from the tool's documented
format (docs/integrations.md names the versions), gives the documented raters and labels; bad
files (wrong schema, unknown scorer, mixed scales) are a 422 naming the field, nothing written."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

FIXTURES = Path(__file__).parents[1] / "fixtures" / "integrations"


def ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, r.text
    return r


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def new_project(c: TestClient, labels: list[str], **settings: Any) -> str:
    return str(ok(c.post("/projects", json={"name": "tools", "labels": labels, **settings}), 201).json()["id"])


def post(c: TestClient, pid: str, source: str, body: Any, **params: Any) -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return c.post(f"/projects/{pid}/import/{source}", content=content, params=params)


def state(c: TestClient, pid: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, str, str]]]:
    raters = sorted((r["external_id"], r["kind"]) for r in ok(c.get(f"/projects/{pid}/raters")).json()["items"])
    labels = ok(c.get(f"/projects/{pid}/labels")).json()["items"]
    return raters, sorted((r["item"], r["rater"], r["criterion"], r["value"]) for r in labels)


def assert_nothing_written(c: TestClient, pid: str) -> None:
    assert state(c, pid) == ([], [])
    assert ok(c.get(f"/projects/{pid}/items")).json()["items"] == []


def test_promptfoo_results_give_a_judge_per_model_graded_assertion_and_the_human_ratings(client: TestClient) -> None:
    pid = new_project(client, ["pass", "fail"])
    summary = ok(post(client, pid, "promptfoo", fixture("promptfoo_results.json"), primary="promptfoo-human")).json()
    assert summary["items_created"] == 3 and summary["skipped"] == [
        {"scorer": "contains", "scores": 2, "reason": "a deterministic check, not a rater"}
    ]
    assert state(client, pid) == (
        [("promptfoo-human", "primary"), ("promptfoo-llm-rubric", "judge")],
        [
            ("0", "promptfoo-human", "default", "pass"),
            ("0", "promptfoo-llm-rubric", "default", "pass"),
            ("1", "promptfoo-human", "default", "pass"),
            ("1", "promptfoo-llm-rubric", "default", "fail"),
            ("2", "promptfoo-llm-rubric", "default", "pass"),
        ],
    )
    again = ok(post(client, pid, "promptfoo", fixture("promptfoo_results.json"), primary="promptfoo-human")).json()
    assert again["labels"]["accepted"] == 0 and again["labels"]["duplicates"] == 5 and again["items_created"] == 0


def test_promptfoo_with_several_providers_names_items_by_test_prompt_and_provider(client: TestClient) -> None:
    data = fixture("promptfoo_results.json")
    data["results"]["results"][2]["provider"] = {"id": "anthropic:claude", "label": "claude"}
    pid = new_project(client, ["pass", "fail"])
    ok(post(client, pid, "promptfoo", data))
    items = sorted(i["external_id"] for i in ok(client.get(f"/projects/{pid}/items")).json()["items"])
    assert items == ["0:0:openai:gpt-4o-mini", "1:0:openai:gpt-4o-mini", "2:0:claude"]


def inspect_eval_zip(log: dict[str, Any]) -> bytes:
    """The same log as a ``.eval`` file: a zip of its header and one JSON entry per sample."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("header.json", json.dumps({k: v for k, v in log.items() if k != "samples"}))
        for s in log["samples"]:
            z.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
    return buf.getvalue()


@pytest.mark.parametrize("form", ["json", "eval"])
def test_inspect_logs_give_the_model_graded_scorer_as_a_judge(client: TestClient, form: str) -> None:
    log = fixture("inspect_log.json")
    pid = new_project(client, ["correct", "incorrect"])
    body = inspect_eval_zip(log) if form == "eval" else json.dumps(log).encode()
    summary = ok(post(client, pid, "inspect", body)).json()
    assert summary["skipped"] == [{"scorer": "match", "scores": 3, "reason": "a deterministic check, not a rater"}]
    assert state(client, pid) == (
        [("inspect-model_graded_fact", "judge")],
        [
            ("q1", "inspect-model_graded_fact", "default", "correct"),
            ("q2", "inspect-model_graded_fact", "default", "incorrect"),
            ("q3", "inspect-model_graded_fact", "default", "correct"),
        ],
    )


def test_inspect_custom_scorer_is_unknown_until_named(client: TestClient) -> None:
    log = fixture("inspect_log.json")
    for s in log["samples"]:
        s["scores"]["rubric_grader"] = {"value": "C"}
    pid = new_project(client, ["correct", "incorrect"])
    r = post(client, pid, "inspect", log)
    assert r.status_code == 422 and r.json()["error"] == "unknown_scorer", r.text
    assert "samples[0].scores.rubric_grader: unknown scorer 'rubric_grader'" in r.json()["detail"]
    assert_nothing_written(client, pid)
    ok(post(client, pid, "inspect", log, judges="rubric_grader"))
    assert ("inspect-rubric_grader", "judge") in state(client, pid)[0]


def test_langfuse_scores_map_eval_to_the_judge_and_annotations_to_humans(client: TestClient) -> None:
    pid = new_project(client, ["pass", "fail"])
    ok(client.patch(f"/projects/{pid}", json={"label_map": {"true": "pass", "false": "fail"}}))
    summary = ok(post(client, pid, "langfuse", fixture("langfuse_scores.json"))).json()
    assert summary["items_created"] == 2
    assert state(client, pid) == (
        [("langfuse-eval", "judge"), ("langfuse-user-user-7", "human"), ("langfuse-user-user-9", "human")],
        [
            ("trace-a", "langfuse-eval", "default", "pass"),
            ("trace-a", "langfuse-user-user-7", "default", "pass"),
            ("trace-b", "langfuse-eval", "default", "fail"),
            ("trace-b", "langfuse-user-user-7", "default", "pass"),
            ("trace-b", "langfuse-user-user-9", "default", "fail"),
        ],
    )


def test_langfuse_score_names_that_are_criteria_label_them(client: TestClient) -> None:
    data = fixture("langfuse_scores.json")
    data["data"][4]["name"] = "tone"
    pid = new_project(client, ["true", "false"], criteria=["correctness", "tone"])
    ok(post(client, pid, "langfuse", data))
    assert ("trace-b", "langfuse-user-user-9", "tone", "false") in state(client, pid)[1]
    other = new_project(client, ["true", "false"])
    r = post(client, other, "langfuse", data)
    assert r.status_code == 422 and r.json()["error"] == "several_score_names", r.text
    assert_nothing_written(client, other)
    ok(post(client, other, "langfuse", data, score="correctness"))
    assert len(state(client, other)[1]) == 4


def test_langsmith_feedback_maps_model_to_the_judge_and_app_to_humans(client: TestClient) -> None:
    pid = new_project(client, ["1", "0"])
    ok(post(client, pid, "langsmith", fixture("langsmith_feedback.json"), primary="langsmith-user-u-1"))
    assert state(client, pid) == (
        [("langsmith-model", "judge"), ("langsmith-user-u-1", "primary")],
        [
            ("run-a", "langsmith-model", "default", "1"),
            ("run-a", "langsmith-user-u-1", "default", "1"),
            ("run-b", "langsmith-model", "default", "0"),
            ("run-b", "langsmith-user-u-1", "default", "0"),
        ],
    )


def _drop(data: Any, path: list[Any]) -> Any:
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return data


BAD = [
    (
        "promptfoo",
        "promptfoo_results.json",
        ["pass", "fail"],
        lambda d: _drop(d, ["results", "results", 1, "testIdx"]),
        {},
        "results.results[1].testIdx: expected int, got missing",
    ),
    (
        "promptfoo",
        "promptfoo_results.json",
        ["pass", "fail"],
        lambda d: _drop(d, ["results", "results"]),
        {},
        "results.results: expected list",
    ),
    (
        "promptfoo",
        "promptfoo_results.json",
        ["pass", "fail"],
        lambda d: (
            d["results"]["results"][2]["gradingResult"]["componentResults"][0]["assertion"].update(type="my-grader")
            or d
        ),
        {},
        "results.results[2].gradingResult.componentResults[0]: unknown scorer 'my-grader'",
    ),
    (
        "promptfoo",
        "promptfoo_results.json",
        ["yes", "no"],
        lambda d: d,
        {},
        "value 'pass' maps to none of the project's labels",
    ),
    (
        "inspect",
        "inspect_log.json",
        ["correct", "incorrect"],
        lambda d: d["samples"][2]["scores"]["model_graded_fact"].update(value=0.5) or d,
        {},
        "mixed scales for 'inspect-model_graded_fact'",
    ),
    (
        "inspect",
        "inspect_log.json",
        ["correct", "incorrect"],
        lambda d: _drop(d, ["samples", 1, "id"]),
        {},
        "samples[1].id: expected str or int, got missing",
    ),
    (
        "langfuse",
        "langfuse_scores.json",
        ["true", "false"],
        lambda d: d["data"][3].update(source="API") or d,
        {},
        "data[3].source: an API score; say whose with api_source",
    ),
    (
        "langfuse",
        "langfuse_scores.json",
        ["true", "false", "1"],
        lambda d: d["data"][1].update(dataType="NUMERIC") or d,
        {},
        "data[3]: mixed scales for 'langfuse-user-user-7'",
    ),
    (
        "langfuse",
        "langfuse_scores.json",
        ["true", "false"],
        lambda d: _drop(d, ["data", 1, "authorUserId"]),
        {},
        "data[1].authorUserId: expected str, got missing",
    ),
    (
        "langsmith",
        "langsmith_feedback.json",
        ["1", "0", "good"],
        lambda d: d[3].update(value="good") or d,
        {},
        "feedback[3]: mixed scales for 'langsmith-user-u-1'",
    ),
    (
        "langsmith",
        "langsmith_feedback.json",
        ["1", "0"],
        lambda d: d[1]["feedback_source"].update(type="rlhf") or d,
        {},
        "feedback[1].feedback_source.type: unknown source 'rlhf'",
    ),
    (
        "langsmith",
        "langsmith_feedback.json",
        ["1", "0"],
        lambda d: d[2].update(run_id="r" * 201) or d,
        {},
        "feedback[2]: item id 'rrrr",
    ),
    (
        "langsmith",
        "langsmith_feedback.json",
        ["1", "0"],
        lambda d: d,
        {"primary": "langsmith-model"},
        "primary 'langsmith-model' is not a human rater",
    ),
]


@pytest.mark.parametrize(("source", "name", "labels", "spoil", "params", "needle"), BAD)
def test_a_bad_file_is_a_422_naming_the_field_and_nothing_is_written(
    client: TestClient, source: str, name: str, labels: list[str], spoil: Any, params: dict, needle: str
) -> None:
    pid = new_project(client, labels)
    r = post(client, pid, source, spoil(fixture(name)), **params)
    assert r.status_code == 422, r.text
    assert needle in r.json()["detail"], r.json()["detail"]
    assert_nothing_written(client, pid)


def test_malformed_bodies_are_422(client: TestClient) -> None:
    pid = new_project(client, ["pass", "fail"])
    assert post(client, pid, "promptfoo", b"{not json").json()["error"] == "malformed_body"
    assert post(client, pid, "inspect", b"PK\x03\x04broken").json()["error"] == "malformed_body"
    assert post(client, pid, "langsmith", {"runs": []}).status_code == 422
    assert_nothing_written(client, pid)
