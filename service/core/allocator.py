"""The worker's allocator: a freed array of a megabyte or more goes back to the system at once.

glibc serves an allocation from its heaps below a threshold that it raises, up to 32 MiB, each time a
larger mapped block is freed. A worker allocates and frees arrays of 1-32 MiB in every document at a
million items (a column of the matrix, a resample's counts), so after the first large free they come
from the heaps, and what is freed there stays resident behind the blocks still in use: at 1M items
x 10 raters the worker kept about 290 MiB more than it held (``bench/million.py``). A fixed threshold
of 1 MiB maps every such array on its own and unmaps it when freed.

What is freed below the threshold stays in glibc's heaps: each request thread allocates from an arena of
its own, and the pages freed in the middle of an arena stay resident until ``malloc_trim`` hands them back.
After a 1M x 10 project's documents, dashboard, report, plan and batch that was about 155 MiB of a 531 MiB
worker (in process, ``bench/million.py``'s requests). :func:`returned_free_pages` is called after each
request that ran :data:`TRIM_AFTER_SECONDS` or longer (``service.core.middleware.ReturnedFreePages``) and
after each piece of a worker's background work (``DocumentCache.in_background``): a few milliseconds at
most at 1M items.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any

M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter of the mapping threshold (malloc.h); setting it stops the raising."""
MMAP_THRESHOLD = 1 << 20
"""Allocations of this many bytes or more are mapped on their own."""
TRIM_AFTER_SECONDS = 0.01
"""Requests that ran this long or longer hand the allocator's free pages back when they end (shorter ones
free too little to be worth the walk over the arenas)."""


def returned_large_frees() -> bool:
    """Fix this process's mapping threshold at :data:`MMAP_THRESHOLD`: whether it is set (False off glibc,
    whose allocators need no such setting or offer none)."""
    mallopt = getattr(_glibc(), "mallopt", None)
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def returned_free_pages() -> bool:
    """Hand the free pages of every glibc arena back to the system (``malloc_trim(0)``): whether any were
    (False off glibc)."""
    trim = getattr(_glibc(), "malloc_trim", None)
    return trim is not None and bool(trim(0))


@functools.cache
def _glibc() -> Any:
    """glibc, or None (another platform, or musl and other C libraries)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None
