"""Fair sharing (issue 30 item 4): a key that repeats a request refused for its project's share before the
project has a slot free is answered 429 by ``RefusedAgain`` without its key being looked up, so a loop of
refused requests no longer costs the worker what any authenticated request does (bench/fairness.py); and
answered only after a pause that costs no CPU (``refusal_delay_seconds``), so such a loop sends one request
per pause where it sent hundreds a second. The pause is recorded here, not waited for."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service import deps
from service.core import fairness
from service.core.fairness import MAX_REFUSALS, Busy, Refusals, Slots, refusal_of

PLAN = {"p_h": 0.85, "p_j": 0.9, "design": "strat", "m": 6, "seed": 1}


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The Authorization of every key lookup the app makes from now on."""
    seen: list[str | None] = []
    real = deps.principal_for

    def counted(session: Any, authorization: str | None) -> Any:
        seen.append(authorization)
        return real(session, authorization)

    monkeypatch.setattr(deps, "principal_for", counted)
    return seen


class Pauses:
    """Stands for ``asyncio`` in service.core.fairness: each pause is recorded (and ``then`` run) at once."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.then: Callable[[], None] = lambda: None

    async def sleep(self, seconds: float) -> None:
        self.seconds.append(seconds)
        self.then()


@pytest.fixture(autouse=True)
def pauses(monkeypatch: pytest.MonkeyPatch) -> Pauses:
    recorded = Pauses()
    monkeypatch.setattr(fairness, "asyncio", recorded)
    return recorded


@contextmanager
def full(client: TestClient, pid: str) -> Iterator[None]:
    """The project's plan slots all held, as by plans in flight of as many other keys."""
    slots: Slots = client.app.state.plan_slots
    with ExitStack() as stack:
        for k in range(slots.limits["project"]):
            stack.enter_context(slots.slot(pid, f"key-{k}"))
        yield


def test_a_repeat_before_a_slot_frees_is_429_without_a_key_lookup(
    client: TestClient, project: dict, lookups: list[str | None]
) -> None:
    pid = project["id"]
    path = f"/projects/{pid}/plan"
    with full(client, pid):
        first = client.post(path, json=PLAN)
        assert first.status_code == 429 and first.json()["error"] == "too_many_in_flight", first.text
        assert len(lookups) == 1
        again = [client.post(path, json=PLAN) for _ in range(3)]
        assert [r.status_code for r in again] == [429] * 3
        assert all(int(r.headers["retry-after"]) > 0 and r.json()["error"] == "too_many_in_flight" for r in again)
        assert "Retry-After" in again[0].json()["detail"]
        assert len(lookups) == 1  # answered before the key was looked up
        # Other requests of the same key, and the same request of another key, take the usual way.
        assert client.get(path).status_code in (200, 404) and len(lookups) == 2
        pm = client.post(f"/projects/{pid}/keys", json={"role": "pm"}).json()["key"]
        other = client.post(path, json=PLAN, headers={"Authorization": f"Bearer {pm}"})
        assert other.status_code == 429 and len(lookups) == 4  # looked up (the key create was one too)
    # A slot is free: the same request is computed again (whatever its outcome, not a refusal).
    freed = client.post(path, json=PLAN)
    assert freed.status_code != 429, freed.text
    assert len(lookups) == 5


def test_a_too_early_repeat_is_answered_after_the_pause(client: TestClient, project: dict, pauses: Pauses) -> None:
    pid = project["id"]
    delay = client.app.state.settings.refusal_delay_seconds
    assert delay > 0
    with full(client, pid):
        assert client.post(f"/projects/{pid}/plan", json=PLAN).status_code == 429
        assert pauses.seconds == []  # the first refusal is answered at once
        again = [client.post(f"/projects/{pid}/plan", json=PLAN) for _ in range(2)]
        assert [r.status_code for r in again] == [429, 429]
        assert pauses.seconds == [delay, delay]


def test_a_repeat_whose_slot_frees_during_the_pause_is_served(
    client: TestClient, project: dict, pauses: Pauses, lookups: list[str | None]
) -> None:
    pid = project["id"]
    with ExitStack() as held:
        held.enter_context(full(client, pid))
        assert client.post(f"/projects/{pid}/plan", json=PLAN).status_code == 429
        pauses.then = held.close  # the plans in flight end while the repeat waits
        served = client.post(f"/projects/{pid}/plan", json=PLAN)
    assert served.status_code != 429, served.text
    assert len(pauses.seconds) == 1 and len(lookups) == 2  # it took the usual way after its pause


def test_a_refusal_is_never_remembered_for_a_request_without_a_key(client: TestClient, project: dict) -> None:
    pid = project["id"]
    with full(client, pid):
        for _ in range(2):
            r = client.post(f"/projects/{pid}/plan", json=PLAN, headers={"Authorization": ""})
            assert r.status_code == 401, r.text


def test_refusals_are_forgotten_when_the_slots_free_and_bounded() -> None:
    slots = Slots("plans", 1, 1)
    refusals = Refusals()
    key = refusal_of(b"Bearer k", "POST", "/projects/a/plan")
    with slots.slot("a", "k1"):
        with pytest.raises(Busy) as caught:
            with slots.slot("a", "k2"):
                pass
        refusals.remember("Bearer k", "POST", "/projects/a/plan", caught.value)
        assert refusals.still_refused(key) == (slots, ("project", "a"))
        assert refusals.still_refused(refusal_of(b"Bearer k", "POST", "/projects/b/plan")) is None
        assert refusals.still_refused(refusal_of(b"Bearer other", "POST", "/projects/a/plan")) is None
    assert refusals.still_refused(key) is None and not refusals  # forgotten once a slot is free
    # A refusal with no project slots (the service-wide simulation bound) is not remembered.
    refusals.remember("Bearer k", "POST", "/projects/a/simulate", Busy("the service is full"))
    assert not refusals
    # Bounded: past MAX_REFUSALS nothing more is kept while every remembered project stays full.
    with slots.slot("a", "k1"):
        busy = Busy("full", slots=slots, holder=("project", "a"))
        for k in range(MAX_REFUSALS + 5):
            refusals.remember(f"Bearer {k}", "POST", "/projects/a/plan", busy)
        assert len(refusals._refused) == MAX_REFUSALS
