"""Issue 16 item 5: large computations leave the web worker (service.cancellable.off_worker).

The documents a child process computes are the ones computed in place, exceptions cross back
with their status and code, and a child that dies is an error, never a hang.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from fastapi.testclient import TestClient

from service import cancellable
from service.cancellable import off_worker
from service.errors import Conflict
from service.reliability import DocumentCache
from tests.factories import create_project

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"), ("h4", "human"))


def _refuse(detail: str) -> None:
    raise Conflict(detail, code="no_pilot")


def _die() -> None:
    os._exit(3)


def test_off_worker_computes_in_place_below_the_threshold_and_in_a_child_from_it() -> None:
    here = os.getpid()
    assert off_worker(cancellable.OFF_WORKER_CELLS - 1, os.getpid) == here
    assert off_worker(cancellable.OFF_WORKER_CELLS, os.getpid) != here
    assert off_worker(10**9, np.add, np.arange(3), 1).tolist() == [1, 2, 3]


def test_a_childs_error_is_raised_in_the_request_with_its_code() -> None:
    with pytest.raises(Conflict) as caught:
        off_worker(10**9, _refuse, "no overlap yet")
    assert caught.value.code == "no_pilot" and caught.value.detail == "no overlap yet"
    assert "_refuse" in str(caught.value.__cause__)  # the child's traceback travels with it


def test_a_child_that_dies_is_an_error_not_a_hang() -> None:
    with pytest.raises(RuntimeError, match="exit code 3"):
        off_worker(10**9, _die)


def _labelled_project(client: TestClient, n_items: int) -> str:
    pid = create_project(client, raters=RATERS, items=[f"i{k}" for k in range(n_items)])
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 2, n_items)
    for rater, _ in RATERS:
        values = np.where(rng.random(n_items) < 0.85, truth, 1 - truth)
        rows = [{"item": f"i{k}", "rater": rater, "value": ("pass", "fail")[v]} for k, v in enumerate(values)]
        assert client.post(f"/projects/{pid}/labels", json=rows).status_code == 200
    return pid


def _documents(client: TestClient, pid: str) -> dict[str, object]:
    client.app.state.documents = DocumentCache()  # type: ignore[attr-defined]  # computed afresh
    out: dict[str, object] = {}
    for name, body in [("prior", {"source": "prior", "p_h": 0.85, "p_j": 0.9, "design": "strat", "seed": 5}),
                       ("pilot", {"source": "pilot", "design": "neyman", "seed": 5})]:
        r = client.post(f"/projects/{pid}/plan", json=body)
        assert r.status_code == 201, r.text
        out[f"plan {name}"] = r.json()["recipe"]
    for path in ("reliability", "ranking", "report"):
        r = client.get(f"/projects/{pid}/{path}")
        assert r.status_code == 200, r.text
        out[path] = r.json()
    out["reliability"]["plan"].pop("plan")  # type: ignore[index]  # the id of the newest plan, new each round
    return out


def test_plans_documents_and_reports_computed_off_the_worker_are_those_computed_in_place(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _labelled_project(client, 120)
    in_place = _documents(client, pid)
    monkeypatch.setattr(cancellable, "OFF_WORKER_CELLS", 0)
    children = _documents(client, pid)
    assert children == in_place
    assert in_place["report"]["judges"] and in_place["reliability"]["raters"]  # type: ignore[index]

