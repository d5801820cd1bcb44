"""The worker's allocator: a freed array of a megabyte or more goes back to the system at once.

glibc serves an allocation from its heaps below a threshold that it raises, up to 32 MiB, each time a
larger mapped block is freed. A worker allocates and frees arrays of 1-32 MiB in every document at a
million items (a column of the matrix, a resample's counts), so after the first large free they come
from the heaps, and what is freed there stays resident behind the blocks still in use: at 1M items
x 10 raters the worker kept about 290 MiB more than it held (``bench/million.py``). A fixed threshold
of 1 MiB maps every such array on its own and unmaps it when freed.
"""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter of the mapping threshold (malloc.h); setting it stops the raising."""
MMAP_THRESHOLD = 1 << 20
"""Allocations of this many bytes or more are mapped on their own."""


def returned_large_frees() -> bool:
    """Fix this process's mapping threshold at :data:`MMAP_THRESHOLD`: whether it is set (False off glibc,
    whose allocators need no such setting or offer none)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # musl and others: no glibc
        return False
    mallopt = getattr(libc, "mallopt", None)
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
