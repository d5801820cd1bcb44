"""POST /pairwise (issue 34): a pairwise judge's position consistency, bias and accuracy in both orders on
LLMBar's published GPT-4 figures, Bradley-Terry strengths as the planner computes them, and bad input 422."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

import service.routes.pairwise as routes
from planner.preferences import bradley_terry
from service.core import offload

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


def _ranked_body(n_items: int = 80, n_systems: int = 3, seed: int = 5) -> tuple[dict, dict[str, np.ndarray]]:
    """Verdicts in both orders, a reference and the systems of ``n_items`` items; the codes behind them."""
    rng = np.random.default_rng(seed)
    systems = [f"sys-{s:02d}" for s in range(n_systems)]
    first = rng.integers(0, n_systems, n_items)
    second = (first + rng.integers(1, n_systems, n_items)) % n_systems
    judge_ab, judge_ba, human = (rng.integers(0, 3, n_items) for _ in range(3))
    body = {
        "verdicts": [{"item": f"p{k}", "order": "AB", "verdict": NAMES[v]} for k, v in enumerate(judge_ab)]
        + [{"item": f"p{k}", "order": "BA", "verdict": NAMES[v]} for k, v in enumerate(judge_ba)],
        "reference": [{"item": f"p{k}", "verdict": NAMES[v]} for k, v in enumerate(human)],
        "systems": [{"item": f"p{k}", "a": systems[a], "b": systems[b]} for k, (a, b) in enumerate(zip(first, second))],
        "seed": 3,
        "n_resamples": 40,
    }
    return body, {"first": first, "second": second, "judge_ab": judge_ab, "judge_ba": judge_ba, "human": human}


def test_bradley_terry_of_the_judge_and_the_humans(client: TestClient) -> None:
    body, codes = _ranked_body()
    systems = ["sys-00", "sys-01", "sys-02"]
    a, b = codes["first"], codes["second"]
    judge_ab, judge_ba, human = codes["judge_ab"], codes["judge_ba"], codes["human"]
    r = client.post("/pairwise", json=body)
    assert r.status_code == 200, r.text
    judge, humans = r.json()["rankings"]
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


# --- issue 30: the rankings' work is bounded before it starts, and large work leaves the worker ----


def test_pairwise_work_is_bounded_before_it_starts(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    body, _ = _ranked_body()  # 3 systems, 160 verdicts, a reference: two rankings of 40 resamples
    work = 2 * 40 * min(160, 3 * 3 * 3) * 3 * 3  # rankings x resamples x comparison cells x systems squared
    assert work == 19_440
    client.app.state.settings = client.app.state.settings.model_copy(update={"pairwise_max_work": work - 1})
    computed: list[object] = []
    real = routes.pairwise_document
    monkeypatch.setattr(routes, "pairwise_document", lambda b: computed.append(b) or real(b))
    r = client.post("/pairwise", json=body)
    assert r.status_code == 413 and r.json()["error"] == "pairwise_too_large", r.text
    detail = r.json()["detail"]
    assert "2 rankings x 40 resamples x 27 comparison cells x 9 systems squared is 19,440 units" in detail
    assert "ANNOPLAN_PAIRWISE_MAX_WORK" in detail and "at most 39 resamples" in detail
    assert computed == []
    client.app.state.settings = client.app.state.settings.model_copy(update={"pairwise_max_work": work})
    assert client.post("/pairwise", json=body).status_code == 200 and len(computed) == 1


def test_the_red_teams_ranking_of_fifty_systems_is_refused_at_once_for_any_key(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """50 systems x 2,000 resamples over 5,000 items took 12 s and 570 MB of a worker per ranking, in its
    thread and to the end whoever had left; now 413 with the default bound, nothing computed."""
    pid = client.post("/projects", json={"name": "p", "labels": ["a", "b"]}).json()["id"]
    client.post(f"/projects/{pid}/raters", json={"external_id": "h", "kind": "human"})
    made = client.post(f"/projects/{pid}/keys", json={"role": "annotator", "rater": "h"})
    assert made.status_code == 201, made.text
    body, _ = _ranked_body(n_items=5_000, n_systems=50)
    body["n_resamples"] = 2_000
    monkeypatch.setattr(routes, "pairwise_document", lambda b: pytest.fail("computed past the bound"))
    r = client.post("/pairwise", json=body, headers={"Authorization": f"Bearer {made.json()['key']}"})
    assert r.status_code == 413 and r.json()["error"] == "pairwise_too_large", r.text


def test_a_large_pairwise_in_a_child_process_equals_the_one_in_place(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    body, _ = _ranked_body(n_items=200, n_systems=4, seed=9)
    in_place = client.post("/pairwise", json=body)
    assert in_place.status_code == 200, in_place.text
    children: list[object] = []
    real = offload.run_while_connected

    async def counted(*args: object, **kwargs: object) -> object:
        children.append(args[1])
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(offload, "INLINE_WORK", 0)
    monkeypatch.setattr(offload, "run_while_connected", counted)
    in_child = client.post("/pairwise", json=body)
    assert in_child.status_code == 200, in_child.text
    assert children == [routes.pairwise_document] and in_child.json() == in_place.json()
