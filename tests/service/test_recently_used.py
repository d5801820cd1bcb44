"""service.core.caches: a worker's kept values are those of the last ``size`` keys put, the least
recent dropped first, also when several threads put at once."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from service.core.caches import RecentlyUsed


@given(keys=st.lists(st.integers(0, 12), max_size=60), size=st.integers(1, 5))
def test_the_values_kept_are_those_of_the_last_size_distinct_keys_put(keys: list[int], size: int) -> None:
    kept: RecentlyUsed[int, str] = RecentlyUsed(size)
    for step, key in enumerate(keys):
        kept.put(key, f"{key}@{step}")
    recent: list[int] = []  # by hand: distinct keys from the last put backwards
    for key in reversed(keys):
        if key not in recent:
            recent.append(key)
    last_put = {key: step for step, key in enumerate(keys)}
    for key in range(13):
        expected = f"{key}@{last_put[key]}" if key in recent[:size] else None
        assert kept.get(key) == expected


def test_a_put_makes_a_kept_key_the_most_recent() -> None:
    kept: RecentlyUsed[str, int] = RecentlyUsed(2)
    kept.put("a", 1)
    kept.put("b", 2)
    kept.put("a", 3)  # "b" is now the least recent
    kept.put("c", 4)
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (3, None, 4)


def test_threads_putting_at_once_leave_at_most_size_values() -> None:
    kept: RecentlyUsed[tuple[int, int], int] = RecentlyUsed(8)
    start = threading.Barrier(6)

    def put_many(thread: int) -> None:
        start.wait()
        for i in range(2_000):
            kept.put((thread, i % 20), i)

    threads = [threading.Thread(target=put_many, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    present = [(t, i) for t in range(6) for i in range(20) if kept.get((t, i)) is not None]
    assert len(present) == 8
