"""The opening survives a lost background write (issue 28 item 3, docs/method.md §8.2): the first look's
``label_seq`` is stored best effort after the document is served; while the write has not landed, or after it
failed, this worker still reads the labels in hand at that look as the opening (not the next document's own),
and its next document stores the first look's seq."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

import service.documents.looks as looks
from tests.factories import create_project

RATERS = (("judge", "judge"), ("prim", "primary"), ("h2", "human"), ("h3", "human"))
N_ITEMS = 120


def _writes(seed: int) -> list[list[dict[str, str]]]:
    """Two writes of every rater's labels on half the items each (the judge .9 right, the humans .8)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, N_ITEMS)
    value = ("pass", "fail")
    rows = [
        {"item": f"i{k}", "rater": rater, "value": value[int(truth[k] if rng.random() < p else 1 - truth[k])]}
        for k in range(N_ITEMS)
        for rater, p in zip((r for r, _ in RATERS), (0.9, 0.8, 0.8, 0.8), strict=True)
    ]
    half = len(rows) // 2
    return [rows[:half], rows[half:]]


def _looked_twice(client: TestClient, writes: list[list[dict[str, str]]]) -> tuple[str, int, dict[str, Any]]:
    """A project given the first write, looked at, given the second and looked at again: its id, the first
    look's label_seq and the second document's monitoring."""
    pid = create_project(client, raters=RATERS, items=[f"i{k}" for k in range(N_ITEMS)], order_seed=7)
    assert client.post(f"/projects/{pid}/labels", json=writes[0]).status_code == 200
    first = client.get(f"/projects/{pid}/reliability").json()["label_seq"]
    client.app.state.documents.settle()  # type: ignore[attr-defined]
    assert client.post(f"/projects/{pid}/labels", json=writes[1]).status_code == 200
    monitoring = client.get(f"/projects/{pid}/reliability").json()["monitoring"]
    client.app.state.documents.settle()  # type: ignore[attr-defined]
    return pid, first, monitoring


def test_a_lost_opening_write_keeps_the_first_look_as_the_opening(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = _writes(3)
    stored, stored_first, stored_monitoring = _looked_twice(client, writes)
    assert client.get(f"/projects/{stored}").json()["opening_seq"] == stored_first
    with monkeypatch.context() as patched:
        patched.setattr(looks, "store_opening", lambda *args: None)  # every write of the opening lost
        lost, lost_first, lost_monitoring = _looked_twice(client, writes)
        assert client.get(f"/projects/{lost}").json()["opening_seq"] is None
    assert lost_monitoring == stored_monitoring  # the second look read the first look's opening from memory
    assert lost_monitoring["looks"] == stored_monitoring["looks"] > 1  # the second write is an arrival of its own
    # the next document built writes the first look's seq, not its own
    assert client.post(f"/projects/{lost}/labels", json=[{**writes[0][0], "value": "pass"}]).status_code == 200
    client.get(f"/projects/{lost}/reliability")
    client.app.state.documents.settle()  # type: ignore[attr-defined]
    assert client.get(f"/projects/{lost}").json()["opening_seq"] == lost_first
