"""The values of the keys used most recently, at most a fixed number of them, shared by a worker's threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class RecentlyUsed(Generic[K, V]):
    """The last ``size`` values :meth:`put` (a put makes its key the most recent; the least recent
    beyond ``size`` is dropped), read and written under one lock."""

    def __init__(self, size: int = 8) -> None:
        self._size = size
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept under ``key``, or None."""
        with self._lock:
            return self._kept.get(key)

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` under ``key`` as the most recent, dropping the least recent beyond ``size``."""
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)
