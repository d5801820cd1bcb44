"""OpenAPI examples (issue 31): every example request body is accepted with its documented status, every
JSON response has an example that validates against its model and is what the story of
tests/service/openapi_story.py answers today, every schema field has a description, and every operation
with a JSON body has an example."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from service.app import create_app
from service.core.settings import Settings
from service.schemas.examples import REQUEST_EXAMPLES, ExampleKey, response_examples, response_variants
from tests.conftest import ADMIN_KEY
from tests.service.openapi_story import hooks_resolve_publicly, story_settings, tell


@pytest.fixture
def settings(database_url: str) -> Settings:
    return story_settings(database_url, ADMIN_KEY)


def _operations(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method, path): op for path, ops in spec["paths"].items() for method, op in ops.items()}


def test_every_operation_with_a_json_body_has_an_example(client: TestClient) -> None:
    ops = _operations(client.get("/openapi.json").json())
    with_body = {key for key, op in ops.items() if "application/json" in op.get("requestBody", {}).get("content", {})}
    media = {key: ops[key]["requestBody"]["content"]["application/json"] for key in with_body}
    missing = {key for key in with_body if not ({"example", "examples"} & set(media[key]))}
    assert missing == set(), "an operation with a JSON body needs an example (service/schemas/examples.py)"


def test_every_schema_field_has_a_description(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    bare = [
        f"{name}.{f}"
        for name, s in schemas.items()
        for f, v in s.get("properties", {}).items()
        if "description" not in v
    ]
    assert bare == [], "a field needs Field(description=...): a user reads it in /docs"


def _json_responses(spec: dict[str, Any]) -> set[ExampleKey]:
    return {
        (method, path, status)
        for (method, path), op in _operations(spec).items()
        for status, response in op["responses"].items()
        if status.startswith("2") and "application/json" in response.get("content", {})
    }


def test_every_json_response_has_an_example(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    ops = _operations(spec)
    bare = {
        (method, path, status)
        for method, path, status in _json_responses(spec)
        if not {"example", "examples"} & set(ops[(method, path)]["responses"][status]["content"]["application/json"])
    }
    assert bare == set(), "record the response examples: .venv/bin/python -m tests.service.openapi_story"
    assert set(response_examples()) == _json_responses(spec)


def _routes(routes: list[Any]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif hasattr(route, "original_router"):
            yield from _routes(route.original_router.routes)


def _response_models() -> dict[ExampleKey, Any]:
    """Per JSON response of every operation, the model the route declares for it."""
    models: dict[ExampleKey, Any] = {}
    for route in _routes(create_app(Settings(database_url="sqlite://", admin_key=ADMIN_KEY)).routes):
        for method in route.methods:
            models[(method.lower(), route.path, str(route.status_code or 200))] = route.response_model
            for status, extra in (route.responses or {}).items():
                if isinstance(extra, dict) and "model" in extra:
                    models[(method.lower(), route.path, str(status))] = extra["model"]
    return models


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_each_response_example_is_its_model_exactly() -> None:
    """Validated by the response model and dumped again, an example is unchanged: no required field it lacks,
    none the model does not know, every value of the field's type (a null and an absent field alike: routes
    that answer a JSONResponse of their own leave nulls out)."""
    models = _response_models()
    named = [(key, body) for key, variants in response_variants().items() for body in variants.values()]
    for key, example in [*response_examples().items(), *named]:
        adapter = TypeAdapter(models[key])
        dumped = adapter.dump_python(adapter.validate_python(example), mode="json", by_alias=True)
        assert _without_nulls(dumped) == _without_nulls(example), key


def test_a_pairwise_projects_reliability_is_an_example_of_its_own(client: TestClient) -> None:
    """The pairwise block (issue 34) is shown in /docs: /reliability answers the toxicity project and, named
    pairwise, a pairwise project with its judge's position consistency and the systems ranked."""
    media = client.get("/openapi.json").json()["paths"]["/projects/{pid}/reliability"]["get"]["responses"]["200"]
    examples = media["content"]["application/json"]["examples"]
    assert set(examples) == {"default", "pairwise", "sliced"} and "pairwise" not in examples["default"]["value"]
    block = examples["pairwise"]["value"]["pairwise"]
    [judge] = block["judges"]
    assert judge["position"]["n_items"] == 30 and 0 < judge["position"]["consistency"] < 1
    assert {r["source"] for r in judge["rankings"]} == {"judge", "humans", "humans+judge"}
    assert all(r["systems"] for r in judge["rankings"] if r["reason"] is None)


def test_a_sliced_reliability_is_an_example_of_its_own(client: TestClient) -> None:
    """/reliability?by=feature:<name> (issue 35) is shown in /docs, its anytime slices corrected by one e-BH over
    every slice's humans (docs/method.md §3b)."""
    media = client.get("/openapi.json").json()["paths"]["/projects/{pid}/reliability"]["get"]["responses"]["200"]
    block = media["content"]["application/json"]["examples"]["sliced"]["value"]["slices"]
    assert block["by"] == "feature:domain" and block["mode"] == "anytime" and block["correction"] == "e-bh-joint"
    assert {s["value"] for s in block["slices"]} == {"chat", "forum"}


def test_a_changed_example_fails_its_model() -> None:
    models = _response_models()
    key = ("get", "/projects/{pid}/plan", "200")
    example = {**response_examples()[key]}
    del example["m"]
    with pytest.raises(ValueError, match="m"):
        TypeAdapter(models[key]).validate_python(example)


def _shape(value: Any) -> Any:
    """A JSON value's keys, recursively (a list by the keys any of its elements has, so that which element
    comes first, as in a batch drawn at random, does not matter); leaves by JSON type, null apart."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_merged([_shape(v) for v in value])] if value else []
    return "number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__


def _merged(shapes: list[Any]) -> Any:
    """Shapes of a list's elements as one: objects by the union of their keys; other values by the first."""
    if not all(isinstance(shape, dict) for shape in shapes):
        return shapes[0]
    keys = sorted({k for shape in shapes for k in shape})
    return {k: _merged([shape[k] for shape in shapes if k in shape]) for k in keys}


@pytest.mark.slow  # about 15 s: sixty calls, a plan, a certificate and two Label Studio stand-ins
def test_the_story_posts_every_request_example_and_answers_as_the_response_examples_show(client: TestClient) -> None:
    """The story told again: each request example gets a success status its operation documents, and each
    answer has the shape of the recorded response example (re-record after a model change)."""
    spec = client.get("/openapi.json").json()
    ops = _operations(spec)
    with hooks_resolve_publicly():
        story = tell(client)
    assert story.examples_posted == set(REQUEST_EXAMPLES)
    for method, path, status in story.answers:
        assert status in ops[(method, path)]["responses"], (method, path, status)
    recorded = response_examples()
    assert set(story.answers) == set(recorded)
    for key, answer in story.answers.items():
        assert _shape(answer) == _shape(recorded[key]), key
    named = response_variants()
    assert {k: set(v) for k, v in story.variants.items()} == {k: set(v) for k, v in named.items()}
    for key, variants in story.variants.items():
        for name, answer in variants.items():
            assert _shape(answer) == _shape(named[key][name]), (key, name)
