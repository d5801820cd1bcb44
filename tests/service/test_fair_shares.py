"""Fair sharing per project and per key (issue 30, item 4 and "What to build"): plans, Label Studio syncs
and simulations (synchronous runs and jobs) are bounded per project and per API key, so one project
cannot starve the others and one key, an admin key across many projects among them, cannot take every
slot. Each test keeps requests in flight as a client would (a computation held until the test lets it
go) and sends the next one meanwhile; past a share the answer is a 429 with ``Retry-After`` naming the
project or the key, and another key of the same project, or another project, still gets in."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from service.app import create_app
from service.core.fairness import Busy, Slots
from service.core.settings import Settings
from tests.conftest import ADMIN_KEY
from tests.factories import create_project
from tests.service.test_outbound import Target, label_studio

PLAN = {"p_h": 0.85, "p_j": 0.9, "design": "strat", "m": 6, "seed": 1}
SIMULATION = {"p_h": 0.85, "p_j": 0.9, "rho": [1.0], "design": "random", "trials": 2, "seed": 1}


# --- the slots themselves -----------------------------------------------------------------------


def test_slots_bound_each_project_and_each_key_and_are_freed() -> None:
    slots = Slots("plans", 2, 3)
    with slots.slot("a", "k"), slots.slot("a", "k"):
        with pytest.raises(Busy, match="this project already has 2 plans in flight") as busy:
            with slots.slot("a", "other"):
                pass
        assert busy.value.holder == ("project", "a") and busy.value.slots is slots
        with slots.slot("b", "k"):  # the key's third, in another project
            with pytest.raises(Busy, match=r"this key already has 3 plans in flight \(at most 3") as busy:
                with slots.slot("c", "k"):
                    pass
            assert busy.value.holder == ("key", "k")
            with pytest.raises(Busy, match="this key"):
                with slots.slot(None, "k"):  # a request outside any project holds the key's share only
                    pass
            with slots.slot("c", "other"):  # another key in another project is not held up
                pass
    assert not slots.full(("project", "a")) and not slots.full(("key", "k"))
    with pytest.raises(RuntimeError), slots.slot("a", "k"):
        raise RuntimeError("the computation failed")
    with slots.slot("a", "k"), slots.slot("a", "k"), slots.slot("b", "k"):  # all freed, the failed one too
        pass
    per_key_only = Slots("large computations", None, 1)
    with per_key_only.slot("a", "k"):  # a project named to slots bounded per key only is not counted
        with pytest.raises(Busy, match="this key"):
            with per_key_only.slot("b", "k"):
                pass
        with per_key_only.slot("a", "other"):
            pass


Step = tuple[bool, str, str, int]
"""(take a slot?, project, key, which held slot to free when not)."""


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    per_project=st.integers(1, 3),
    per_key=st.integers(1, 3),
    steps=st.lists(
        st.tuples(st.booleans(), st.sampled_from("ab"), st.sampled_from(["k1", "k2", "k3"]), st.integers(0, 20)),
        max_size=40,
    ),
)
def test_slots_grant_exactly_while_both_shares_have_room(per_project: int, per_key: int, steps: list[Step]) -> None:
    """Against a count kept here: a slot is granted iff its project and its key are both under their share."""
    slots = Slots("plans", per_project, per_key)
    held: list[tuple[str, str, AbstractContextManager[None]]] = []
    for take, project, key, which in steps:
        if take or not held:
            projects = sum(1 for p, _, _ in held if p == project)
            keys = sum(1 for _, k, _ in held if k == key)
            room = projects < per_project and keys < per_key
            block = slots.slot(project, key)
            try:
                block.__enter__()
            except Busy as busy:
                assert not room
                assert busy.holder == (("project", project) if projects >= per_project else ("key", key))
            else:
                assert room
                held.append((project, key, block))
        else:
            _, _, block = held.pop(which % len(held))
            block.__exit__(None, None, None)
        for p in "ab":
            assert slots.full(("project", p)) == (sum(1 for q, _, _ in held if q == p) >= per_project)
    for _, _, block in held:
        block.__exit__(None, None, None)
    assert slots._held == {}


# --- through the API, with computations held in flight ---------------------------------------------


class Held:
    """Stands for a computation the routes call: for the projects in ``held`` it waits until ``release``."""

    def __init__(self, real: Callable[..., Any], project_of: Callable[..., str]):
        self.real = real
        self.project_of = project_of
        self.held: set[str] = set()
        self.started: list[str] = []
        self.gate = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        project = self.project_of(*args, **kwargs)
        if project in self.held:
            self.started.append(project)
            assert self.gate.wait(30), "the test never released the computation"
        return self.real(*args, **kwargs)

    def wait_started(self, n: int) -> None:
        deadline = time.monotonic() + 30
        while len(self.started) < n:
            assert time.monotonic() < deadline, f"{len(self.started)} of {n} computations started"
            time.sleep(0.01)


@contextmanager
def app_client(settings: Settings, **update: Any) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"refusal_delay_seconds": 0, **update}))
    with TestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {ADMIN_KEY}"
        yield c


def pm_key(client: TestClient, pid: str) -> dict[str, str]:
    r = client.post(f"/projects/{pid}/keys", json={"role": "pm"})
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def projects(client: TestClient, n: int) -> list[str]:
    return [create_project(client, name=f"p{k}", items=[f"i{i}" for i in range(20)]) for k in range(n)]


def refused(r: Any, whose: str) -> None:
    assert r.status_code == 429 and int(r.headers["retry-after"]) > 0, r.text
    assert r.json()["error"] == "too_many_in_flight" and r.json()["detail"].startswith(whose), r.text


def test_one_key_cannot_hold_more_plans_than_its_share_across_projects(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin key plans projects a and b at once (its share: 2); its plan of c is refused while a pm
    key of c plans c; once one of the two ends, the admin key plans c."""
    import service.routes.plans as routes

    held = Held(routes.create_plan, lambda read, session, project_id, *a, **k: project_id)
    monkeypatch.setattr(routes, "create_plan", held)
    with app_client(settings, plans_per_key=2, plans_per_project=2) as c, ThreadPoolExecutor(2) as pool:
        a, b, other = projects(c, 3)
        held.held = {a, b}
        in_flight = [pool.submit(c.post, f"/projects/{pid}/plan", json=PLAN) for pid in (a, b)]
        held.wait_started(2)
        refused(c.post(f"/projects/{other}/plan", json=PLAN), "this key already has 2 plan computations")
        refused(c.post(f"/projects/{other}/plan", json=PLAN), "this key still has 2 plan computations")  # repeat
        assert c.post(f"/projects/{other}/plan", json=PLAN, headers=pm_key(c, other)).status_code == 201
        held.gate.set()
        assert [f.result().status_code for f in in_flight] == [201, 201]
        assert c.post(f"/projects/{other}/plan", json={**PLAN, "seed": 2}).status_code == 201


def test_plans_per_key_can_be_below_the_projects_share(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """With one plan per key, a key's second plan of its own project is refused for the key, not the project:
    another pm key of the project still plans it."""
    import service.routes.plans as routes

    held = Held(routes.create_plan, lambda read, session, project_id, *a, **k: project_id)
    monkeypatch.setattr(routes, "create_plan", held)
    with app_client(settings, plans_per_key=1, plans_per_project=2) as c, ThreadPoolExecutor(1) as pool:
        (pid,) = projects(c, 1)
        held.held = {pid}
        first = pool.submit(c.post, f"/projects/{pid}/plan", json=PLAN)
        held.wait_started(1)
        refused(c.post(f"/projects/{pid}/plan", json={**PLAN, "seed": 2}), "this key already has 1 plan")
        held.held = set()
        assert c.post(f"/projects/{pid}/plan", json={**PLAN, "seed": 3}, headers=pm_key(c, pid)).status_code == 201
        held.gate.set()
        assert first.result().status_code == 201


def test_one_key_cannot_hold_more_syncs_than_its_share(settings: Settings) -> None:
    """A Label Studio whose export stays running holds the admin key's sync of a; its sync of b is refused
    before Label Studio is called, while a pm key of b syncs b."""
    with (
        Target(label_studio(export_status="running")) as target,
        app_client(settings, outbound_allow_private=True, label_studio_ready_seconds=1.0, syncs_per_key=1) as c,
        ThreadPoolExecutor(2) as pool,
    ):
        a, b = (c.post("/projects", json={"name": n, "labels": ["x", "y"]}).json()["id"] for n in "ab")
        body = {"url": target.url, "project": 7, "token": "t"}
        first = pool.submit(c.post, f"/projects/{a}/integrations/label-studio/sync", json=body)
        deadline = time.monotonic() + 10
        while not target.requests:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        r = c.post(f"/projects/{b}/integrations/label-studio/sync", json={**body, "project": 8})
        refused(r, "this key already has 1 Label Studio syncs")
        assert not any("/api/projects/8" in path for _, path in target.requests)  # refused before any call
        other: Future[Any] = pool.submit(
            c.post, f"/projects/{b}/integrations/label-studio/sync", json=body, headers=pm_key(c, b)
        )
        # both give up on the export that never completes: a 502 each, not a 429
        assert first.result().status_code == 502 and other.result().status_code == 502


def test_synchronous_simulations_are_bounded_per_project_and_per_key(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Simulations answered at once ran unbounded (12 at once slowed other projects 15-21x): one project, and
    one key, may now have only its share of them computing."""
    import service.routes.simulations as routes

    held = Held(routes.run_simulation, lambda spec: "all")
    monkeypatch.setattr(routes, "run_simulation", held)
    # held in this process (its events are not a child's): on a thread instead of the child process
    monkeypatch.setattr(routes, "run_while_connected", lambda request, fn, *args: asyncio.to_thread(fn, *args))
    with (
        app_client(settings, simulations_per_project=1, simulations_per_key=1) as c,
        ThreadPoolExecutor(1) as pool,
    ):
        a, b = projects(c, 2)
        pm_a, pm_b = pm_key(c, a), pm_key(c, b)
        held.held = {"all"}
        first = pool.submit(c.post, f"/projects/{a}/simulate", json=SIMULATION)
        held.wait_started(1)
        refused(c.post(f"/projects/{a}/simulate", json=SIMULATION, headers=pm_a), "this project already has 1")
        refused(c.post(f"/projects/{b}/simulate", json=SIMULATION), "this key already has 1 synchronous")
        held.held = set()
        served = c.post(f"/projects/{b}/simulate", json=SIMULATION, headers=pm_b)
        assert served.status_code == 200, served.text
        held.gate.set()
        assert first.result().status_code == 200


def test_one_key_cannot_hold_more_simulation_jobs_than_its_share(settings: Settings) -> None:
    """No job runner here, so jobs stay queued: the admin key's two jobs (in two projects) are its share;
    its third is refused, a pm key's job in the same project is queued, and cancelling one frees the key."""
    with app_client(
        settings,
        simulation_sync_limit=0,
        api_runs_jobs=False,
        simulations_per_project=4,
        simulations_per_key=2,
    ) as c:
        a, b = projects(c, 2)
        jobs = [c.post(f"/projects/{pid}/simulate", json=SIMULATION) for pid in (a, b)]
        assert [r.status_code for r in jobs] == [202, 202], jobs[-1].text
        r = c.post(f"/projects/{b}/simulate", json=SIMULATION)
        assert r.status_code == 429 and int(r.headers["retry-after"]) > 0, r.text
        assert r.json()["error"] == "too_many_simulations"
        assert r.json()["detail"].startswith("this key has 2 simulations queued or running"), r.text
        assert c.post(f"/projects/{b}/simulate", json=SIMULATION, headers=pm_key(c, b)).status_code == 202
        assert c.delete(jobs[0].json()["poll"]).status_code == 200
        assert c.post(f"/projects/{b}/simulate", json=SIMULATION).status_code == 202


AGREEMENT = {"labels": ["a", "b"], "matrix": [["a", "b"], ["a", "a"], ["b", "b"], ["b", "a"]], "n_resamples": 20}


@pytest.mark.parametrize("route", ["/agreement", "/pairwise"])
def test_one_key_has_at_most_its_share_of_large_computations(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    """The computations of no project (any key may ask) ran in as many child processes as a key sent requests:
    past its share of them a key's large one is refused, while its small ones (in a thread) and another
    key's large one are computed."""
    from service.core import offload
    from tests.service.test_pairwise_api import _ranked_body

    body = AGREEMENT if route == "/agreement" else _ranked_body()[0]
    (pid,) = projects(client, 1)
    made = client.post(f"/projects/{pid}/keys", json={"role": "viewer"}).json()
    viewer = {"Authorization": f"Bearer {made['key']}"}
    slots: Slots = client.app.state.computation_slots
    assert client.post(route, json=body, headers=viewer).status_code == 200  # small: in a thread, no slot
    monkeypatch.setattr(offload, "INLINE_WORK", 0)  # from here on every one is large: a child process each
    with slots.slot(None, made["id"]), slots.slot(None, made["id"]):  # the viewer's two in flight
        for _ in range(2):  # a repeat is refused again, by the route (a smaller body might not need a slot)
            refused(client.post(route, json=body, headers=viewer), "this key already has 2 large computations")
        assert client.post(route, json=body).status_code == 200  # the admin key's
        monkeypatch.setattr(offload, "INLINE_WORK", 10**12)
        assert client.post(route, json=body, headers=viewer).status_code == 200  # the viewer's small one
        monkeypatch.setattr(offload, "INLINE_WORK", 0)
    assert client.post(route, json=body, headers=viewer).status_code == 200  # its share free again
