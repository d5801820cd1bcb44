"""Example request and response bodies of the API's operations, shown in `/docs` (Swagger UI pre-fills its
"Try it out" bodies with the requests); each request is posted by tests/service/test_openapi_examples.py and
gets its documented status.

They tell one story: the README's toxicity project (items q1, q2, ...; judge gpt-judge, primary ann-1,
secondaries ann-2, ann-3). The responses are that story's answers, recorded by tests/service/openapi_story.py
into response_examples.json beside this module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ExampleKey = tuple[str, str, str]
"""An operation's response: lower-case method, path template, status."""

REQUEST_EXAMPLES: dict[tuple[str, str], Any] = {
    ("post", "/projects"): {"name": "toxicity", "labels": ["ok", "toxic"], "scale": "nominal"},
    ("patch", "/projects/{pid}"): {"name": "toxicity (pilot)"},
    ("post", "/projects/{pid}/keys"): {"role": "annotator", "rater": "ann-2", "name": "Ann's laptop"},
    ("post", "/projects/{pid}/items"): [
        {"external_id": "q1", "text": "you are wonderful"},
        {"external_id": "q2", "text": "nobody asked you", "features": {"domain": "forum"}},
    ],
    ("post", "/projects/{pid}/raters"): {"external_id": "ann-2", "kind": "human", "name": "Ann Two"},
    ("patch", "/projects/{pid}/raters/{rid}"): {"name": "Ann Two (night shift)"},
    ("post", "/projects/{pid}/labels"): [
        {"item": "q1", "rater": "ann-2", "value": "ok"},
        {"item": "q2", "rater": "ann-2", "value": "toxic"},
    ],
    ("post", "/projects/{pid}/labels/retractions"): [{"item": "q2", "rater": "ann-2"}],
    ("post", "/projects/{pid}/import/generic"): [
        {"item": "q1", "rater": "gpt-judge", "kind": "judge", "value": "ok"},
        {"item": "q3", "rater": "ann-1", "kind": "primary", "value": "toxic", "criterion": "default"},
    ],
    ("post", "/projects/{pid}/plan"): {"purpose": "certify", "source": "prior", "p_h": 0.85, "p_j": 0.9},
    ("post", "/projects/{pid}/selective"): {"alpha": 0.1, "delta": 0.1, "judges": ["gpt-judge"]},
    ("post", "/projects/{pid}/batches"): {"rater": "ann-2", "size": 20},
    ("post", "/projects/{pid}/simulate"): {
        "trials": 20,
        "n_items": 200,
        "rho": 0.3,
        "design": "strat",
        "coefficient": "po",
        "seed": 1,
    },
    ("post", "/agreement"): {
        "labels": ["ok", "toxic"],
        "matrix": [["ok", "ok"], ["toxic", "ok"], ["toxic", "toxic"], ["ok", None]],
        "n_resamples": 200,
        "seed": 1,
    },
    ("post", "/projects/{pid}/webhooks"): {
        "url": "https://hooks.example.org/annoplan",
        "events": ["decision.changed", "plan.created"],
    },
    ("post", "/projects/{pid}/certificates"): {"n_resamples": 200, "seed": 1},
    ("post", "/projects/{pid}/raters/{rid}/versions"): {"name": "v2", "model": "gpt-4o-2024-08-06"},
    ("put", "/projects/{pid}/raters/{rid}/drift-watch"): {"baseline": 0.88, "drop": 0.05, "horizon": 10000},
    ("post", "/projects/{pid}/raters/{rid}/anchor-panel"): {"drop": 0.3, "power": 0.8, "discordance": 0.3},
    ("post", "/pairwise"): {
        "verdicts": [
            {"item": "q1", "order": "AB", "verdict": "A"},
            {"item": "q1", "order": "BA", "verdict": "A"},
            {"item": "q2", "order": "AB", "verdict": "A"},
            {"item": "q2", "order": "BA", "verdict": "B"},
        ],
        "reference": [{"item": "q1", "verdict": "A"}, {"item": "q2", "verdict": "B"}],
        "seed": 1,
    },
    ("post", "/projects/{pid}/import/label-studio"): [
        {
            "id": 101,
            "data": {"text": "User: How do I reset my password?\nAssistant: Open Settings > Security."},
            "annotations": [
                {
                    "id": 502,
                    "completed_by": 8,
                    "was_cancelled": False,
                    "result": [
                        {"from_name": "verdict", "to_name": "text", "type": "choices", "value": {"choices": ["Pass"]}}
                    ],
                }
            ],
            "predictions": [
                {
                    "id": 9001,
                    "model_version": "gpt-4o-judge-v2",
                    "result": [
                        {"from_name": "verdict", "to_name": "text", "type": "choices", "value": {"choices": ["Pass"]}}
                    ],
                }
            ],
        },
        {
            "id": 102,
            "data": {"text": "User: Cancel my order.\nAssistant: I can't help with that."},
            "annotations": [
                {
                    "id": 503,
                    "completed_by": 8,
                    "was_cancelled": False,
                    "result": [
                        {"from_name": "verdict", "to_name": "text", "type": "choices", "value": {"choices": ["Fail"]}}
                    ],
                }
            ],
            "predictions": [
                {
                    "id": 9002,
                    "model_version": "gpt-4o-judge-v2",
                    "result": [
                        {"from_name": "verdict", "to_name": "text", "type": "choices", "value": {"choices": ["Pass"]}}
                    ],
                }
            ],
        },
    ],
    ("post", "/projects/{pid}/webhooks/label-studio"): {
        "action": "ANNOTATION_CREATED",
        "annotation": {
            "id": 611,
            "completed_by": 12,
            "was_cancelled": False,
            "task": 201,
            "result": [{"from_name": "verdict", "to_name": "text", "type": "choices", "value": {"choices": ["Fail"]}}],
        },
        "task": {"id": 201, "data": {"text": "User: The app logs me out.\nAssistant: Clear your cookies."}},
        "project": {
            "id": 12,
            "label_config": '<View><Text name="text" value="$text"/><Choices name="verdict" toName="text">'
            '<Choice value="Pass"/><Choice value="Fail"/></Choices></View>',
        },
    },
    ("post", "/projects/{pid}/integrations/label-studio/sync"): {
        "url": "https://label-studio.example.org",
        "project": 7,
        "token": "<Label Studio token>",
    },
    ("post", "/projects/{pid}/integrations/label-studio/connect"): {
        "url": "https://label-studio.example.org",
        "project": 3,
        "token": "<Label Studio token>",
        "webhook_url": "https://annoplan.example.org",
        "annotators": {"7": "ann-1", "ana@example.com": "ann-2"},
    },
    ("post", "/projects/{pid}/integrations/label-studio/annotators"): {"annotators": {"12": "ann-1"}},
    ("post", "/certificates/verify"): json.loads(Path(__file__).with_name("verify_example.json").read_text()),
}
"""Per operation (lower-case method, path template), its example JSON request body. The Label Studio sync's
and connect's `url`, `project` and `token` stand for a Label Studio of yours (the story posts them pointed
at a stand-in); the certificate check's body is a certificate and its label export recorded by the story
(verify_example.json)."""


RESPONSE_EXAMPLES_PATH = Path(__file__).with_name("response_examples.json")


def _recorded() -> dict[tuple[str, str, str, str], Any]:
    """Per (method, path template, status, example name), a recorded body: the name is empty for an
    operation's first answer, else what follows the status in the file (`"200 pairwise"`)."""
    table: dict[str, dict[str, Any]] = json.loads(RESPONSE_EXAMPLES_PATH.read_text())
    return {
        (method, path, status, name): body
        for operation, answers in table.items()
        for method, path in [operation.split(" ", 1)]
        for key, body in answers.items()
        for status, _, name in [key.partition(" ")]
    }


def response_examples() -> dict[ExampleKey, Any]:
    """Per operation's response (method, path template, status), its example JSON body."""
    return {(method, path, status): body for (method, path, status, name), body in _recorded().items() if not name}


def response_variants() -> dict[ExampleKey, dict[str, Any]]:
    """Per operation's response, its further named example bodies (a pairwise project's `/reliability`)."""
    named: dict[ExampleKey, dict[str, Any]] = {}
    for (method, path, status, name), body in _recorded().items():
        if name:
            named.setdefault((method, path, status), {})[name] = body
    return named


def add_response_examples(schema: dict[str, Any]) -> None:
    """Put each response's example body into its JSON media type (one set by a route stays); a response with
    named examples besides gets them all as `examples`, the first as `default`."""
    variants = response_variants()
    for key, example in response_examples().items():
        method, path, status = key
        media = schema["paths"][path][method]["responses"][status]["content"]["application/json"]
        if "example" in media or "examples" in media:
            continue
        if key in variants:
            named = {"default": example, **variants[key]}
            media["examples"] = {
                name: {"summary": "the toxicity project" if name == "default" else f"a {name} project", "value": body}
                for name, body in named.items()
            }
        else:
            media["example"] = example


def add_request_examples(schema: dict[str, Any]) -> None:
    """Put each operation's example body into its JSON request body's media type (one set by a route stays)."""
    for (method, path), example in REQUEST_EXAMPLES.items():
        media = schema["paths"][path][method]["requestBody"]["content"]["application/json"]
        media.setdefault("example", example)
