"""A plan is computed before the project's write lock (issue 20): a write racing a plan is not held
up by the plan's simulated check, and a plan whose inputs changed meanwhile is computed again from
the newer labels, not stored stale."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from service.planning import plans as planning
from tests.service.test_plans import PRIOR, make_plan, post_labels, setup_project

RACE_SECONDS = 10.0


def drafts_with(monkeypatch: pytest.MonkeyPatch, during: Callable[[int], object]) -> list[object]:
    """Patch the plan's computation so ``during(k)`` runs inside its ``k``-th draft; what each returned."""
    real = planning.plan_draft
    seen: list[object] = []

    def draft(*args: Any, **kwargs: Any) -> planning.PlanDraft:
        seen.append(during(len(seen)))
        return real(*args, **kwargs)

    monkeypatch.setattr(planning, "plan_draft", draft)
    return seen


def in_thread(write: Callable[[], object]) -> threading.Event:
    """``write`` started in another thread; the event is set when it is done."""
    done = threading.Event()

    def run() -> None:
        write()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done


def labelled_project(client: Any) -> str:
    pid = setup_project(client, 40)
    post_labels(client, pid, "prim", {f"i{i}": "fail" if i % 3 else "pass" for i in range(40)})
    return pid


def test_a_plan_without_racing_writes_is_drafted_once(client, monkeypatch):
    pid = labelled_project(client)
    seen = drafts_with(monkeypatch, lambda k: k)
    plan = make_plan(client, pid, **PRIOR, seed=1)
    assert seen == [0]
    assert plan["label_seq"] == client.get(f"/projects/{pid}").json()["label_seq"]


def test_a_replayed_plan_request_is_answered_without_computing_the_plan(client, monkeypatch):
    pid = labelled_project(client)
    seen = drafts_with(monkeypatch, lambda k: k)
    headers = {"Idempotency-Key": "plan-replay"}
    first = client.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": 5}, headers=headers)
    again = client.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": 5}, headers=headers)
    other = client.post(f"/projects/{pid}/plan", json={**PRIOR, "seed": 6}, headers=headers)
    assert first.status_code == again.status_code == 201 and again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert other.status_code == 409 and other.json()["error"] == "idempotency_key_reused", other.text
    assert seen == [0]


def test_a_label_write_completes_while_a_plan_is_drafted_and_the_plan_is_drafted_again(client, monkeypatch):
    pid = labelled_project(client)

    def during(k: int) -> bool | None:
        if k:
            return None
        done = in_thread(lambda: post_labels(client, pid, "judge", {"i0": "pass", "i1": "fail"}))
        return done.wait(RACE_SECONDS)  # under the project's write lock, the write would wait for the plan

    seen = drafts_with(monkeypatch, during)
    plan = make_plan(client, pid, **PRIOR, seed=2)
    assert seen[0] is True, "the label write waited for the plan's computation"
    assert len(seen) == 2, "the draft the write overtook was stored"
    project = client.get(f"/projects/{pid}").json()
    assert plan["label_seq"] == project["label_seq"] == 42


def test_drafts_overtaken_every_time_end_in_one_computed_under_the_lock(client, monkeypatch):
    """New items arrive during each draft outside the lock: the plan is drafted again, and after
    ``PLAN_ATTEMPTS`` such drafts it is computed under the lock (a write then waits for it)."""
    pid = labelled_project(client)
    waiting: list[threading.Event] = []

    def during(k: int) -> bool:
        done = in_thread(lambda: client.post(f"/projects/{pid}/items", json=[{"external_id": f"new{k}"}]))
        if k < planning.PLAN_ATTEMPTS:
            return done.wait(RACE_SECONDS)
        waiting.append(done)
        return done.wait(0.5)

    seen = drafts_with(monkeypatch, during)
    plan = make_plan(client, pid, **PRIOR, design="random", seed=3)
    assert seen == [True] * planning.PLAN_ATTEMPTS + [False]  # the last write waited for the locked draft
    assert waiting[0].wait(RACE_SECONDS)
    assert plan["recipe"]["n_items"] == 40 + planning.PLAN_ATTEMPTS  # the corpus when the plan was stored
    assert client.get(f"/projects/{pid}").json()["n_items"] == 40 + planning.PLAN_ATTEMPTS + 1


@pytest.mark.parametrize(
    "body",
    [
        {**PRIOR, "design": "auto"},
        {"source": "pilot", "design": "auto"},
        {**PRIOR, "design": "neyman", "strata": "labels"},
        {**PRIOR, "design": "strat", "purpose": "rank", "delta_min": 0.05},
    ],
)
def test_the_codes_sent_to_the_child_draft_the_same_plan(body):
    """``plan_draft`` on the int16 codes without arrival order equals it on the matrix as loaded."""
    import numpy as np

    from service.matrices.matrix import LabelMatrix, RaterColumn
    from service.schemas.plans import PlanCreate
    from service.schemas.projects import DecisionSettings

    gen = np.random.default_rng(5)
    n, labels = 3_000, 3
    truth = gen.integers(0, labels, n)
    raw = np.where(gen.random((n, 5)) < 0.85, truth[:, None], gen.integers(0, labels + 2, (n, 5)))
    raw[gen.random((n, 5)) < np.array([0, 0, 0.7, 0.7, 0.7])] = -1  # judge, primary on every item
    order = np.where(raw >= 0, np.arange(raw.size).reshape(raw.shape), -1)
    kinds = ["judge", "primary", "human", "human", "human"]
    raters = [RaterColumn(k + 1, f"r{k}", kind) for k, kind in enumerate(kinds)]
    matrix = LabelMatrix(
        raw=raw,
        item_ids=np.arange(10, 10 + n),
        raters=raters,
        n_labels=labels,
        label_seq=9,
        criterion="default",
        order=order,
    )
    request = PlanCreate(**body, seed=4)
    full = planning.plan_draft(request, DecisionSettings(), matrix, 4, None, n_resamples=100)
    sent = planning.plan_draft(request, DecisionSettings(), planning._drafting(matrix), 4, None, n_resamples=100)
    assert sent == full
