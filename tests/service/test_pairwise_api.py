"""POST /pairwise (issue 34): a pairwise judge's position consistency, bias and accuracy in both orders on
LLMBar's published GPT-4 figures, Bradley-Terry strengths as the planner computes them, and bad input 422."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from planner.preferences import bradley_terry

NAMES = ["A", "B", "tie"]


def _llmbar_body() -> dict:
    # LLMBar, GPT-4, Natural set, vanilla prompt: right with the first order 95, the second 96, in both 93 of 100
    ab = np.repeat([0, 0, 1, 1], [93, 2, 3, 2])
    ba = np.repeat([0, 1, 0, 1], [93, 2, 3, 2])
    verdicts = [{"item": f"q{i}", "order": "AB", "verdict": NAMES[v]} for i, v in enumerate(ab)]
    verdicts += [{"item": f"q{i}", "order": "BA", "verdict": NAMES[v]} for i, v in enumerate(ba)]
    reference = [{"item": f"q{i}", "verdict": "A"} for i in range(100)]
    return {"verdicts": verdicts, "reference": reference, "seed": 1, "n_resamples": 50}


def test_llmbar_figures_through_the_api(client: TestClient) -> None:
    r = client.post("/pairwise", json=_llmbar_body())
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["accuracy"] == {"n_items": 100, "right_ab": 0.95, "right_ba": 0.96, "right_both": 0.93, "reason": None}
    position = body["position"]
    assert (position["n_items"], position["consistency"]) == (100, 0.95)
    assert (position["first_favoured"], position["second_favoured"], position["bias_direction"]) == (2, 3, "second")
    assert body["rankings"] == []


def test_bradley_terry_of_the_judge_and_the_humans(client: TestClient) -> None:
    rng = np.random.default_rng(5)
    systems = ["sys-x", "sys-y", "sys-z"]
    pairs = [(i, (i + 1 + rng.integers(0, 2)) % 3) for i in rng.integers(0, 3, 80)]
    judge_ab, judge_ba, human = rng.integers(0, 3, 80), rng.integers(0, 3, 80), rng.integers(0, 3, 80)
    body = {
        "verdicts": [{"item": f"p{k}", "order": "AB", "verdict": NAMES[v]} for k, v in enumerate(judge_ab)]
        + [{"item": f"p{k}", "order": "BA", "verdict": NAMES[v]} for k, v in enumerate(judge_ba)],
        "reference": [{"item": f"p{k}", "verdict": NAMES[v]} for k, v in enumerate(human)],
        "systems": [{"item": f"p{k}", "a": systems[a], "b": systems[b]} for k, (a, b) in enumerate(pairs)],
        "seed": 3,
        "n_resamples": 40,
    }
    r = client.post("/pairwise", json=body)
    assert r.status_code == 200, r.text
    judge, humans = r.json()["rankings"]
    a, b = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    expected = bradley_terry(np.r_[a, a], np.r_[b, b], np.r_[judge_ab, judge_ba], n_systems=3, n_resamples=40, rng=3)
    assert judge["source"] == "judge" and judge["n_comparisons"] == 160
    assert [s["system"] for s in judge["systems"]] == systems
    assert [s["strength"] for s in judge["systems"]] == pytest.approx(expected.strengths.tolist())
    alone = bradley_terry(a, b, human, n_systems=3, n_resamples=40, rng=3)
    assert [s["strength"] for s in humans["systems"]] == pytest.approx(alone.strengths.tolist())
    assert [s["win_rate"] for s in humans["systems"]] == pytest.approx(alone.win_rates.tolist())


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b["verdicts"][0].update(order="BB"),  # an order other than AB/BA
        lambda b: b["verdicts"][0].update(verdict="C"),
        lambda b: b.update(
            allow_ties=False, verdicts=[*b["verdicts"], {"item": "q0", "order": "AB", "verdict": "tie"}]
        ),
        lambda b: b["verdicts"].append(dict(b["verdicts"][0])),  # a repeated (item, order)
        lambda b: b.update(systems=[{"item": "q0", "a": "x", "b": "x"}]),
        lambda b: b.update(systems=[{"item": "q0", "a": "x", "b": "y"}]),  # the other items have no systems
    ],
)
def test_bad_input_is_422(client: TestClient, change) -> None:
    body = _llmbar_body()
    change(body)
    assert client.post("/pairwise", json=body).status_code == 422


def test_ties_allowed_and_disallowed(client: TestClient) -> None:
    body = {"verdicts": [{"item": "q", "order": "AB", "verdict": "tie"}], "allow_ties": False}
    r = client.post("/pairwise", json=body)
    assert r.status_code == 422 and "tie" in r.text
    body["allow_ties"] = True
    position = client.post("/pairwise", json=body).json()["position"]
    assert position["n_items"] == 0 and position["consistency"] is None and position["reason"]


def test_openapi_documents_the_version_and_pairwise_endpoints_with_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths, schemas = spec["paths"], spec["components"]["schemas"]
    for path, method in [
        ("/pairwise", "post"),
        ("/projects/{pid}/raters/{rid}/versions", "post"),
        ("/projects/{pid}/raters/{rid}/drift-watch", "put"),
    ]:
        operation = paths[path][method]
        assert {"401", "422"} <= set(operation["responses"]), path
        name = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        assert schemas[name]["examples"], name
    for path in ("/projects/{pid}/raters/{rid}/versions/compare", "/projects/{pid}/raters/{rid}/drift"):
        assert {"401", "403", "404", "422"} <= set(paths[path]["get"]["responses"]), path
