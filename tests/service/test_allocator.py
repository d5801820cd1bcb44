"""A worker's freed arrays of a megabyte or more leave its resident memory (service.core.allocator,
issue 37): the same allocations, in two fresh processes, with and without the fixed threshold."""

from __future__ import annotations

import subprocess
import sys

import pytest

from service.core.allocator import returned_large_frees
from tests.conftest import ROOT

# After one 16 MiB array is freed glibc raises its threshold, so 2 MiB arrays come from its heap; a
# small object kept after each pins the heap, and freeing the arrays then returns nothing unless they
# were mapped on their own. Prints the resident MiB kept by the freed arrays.
FREED = """
import sys
from pathlib import Path
import numpy as np
from service.core.allocator import returned_large_frees
if sys.argv[1] == "fixed":
    assert returned_large_frees()
def rss():
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS"))
    return int(line.split()[1]) / 1024
big = np.ones(16 << 20, np.uint8)
del big
before = rss()
arrays, pins = [], []
for _ in range(150):
    arrays.append(np.ones(2 << 20, np.uint8))
    pins.append(bytes(512))
del arrays
print(rss() - before)
"""


def _kept_after_free(mode: str) -> float:
    done = subprocess.run(
        [sys.executable, "-c", FREED, mode], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's threshold: Linux only")
def test_freed_arrays_stay_resident_without_the_threshold_and_leave_with_it() -> None:
    assert returned_large_frees()
    default, fixed = _kept_after_free("default"), _kept_after_free("fixed")
    assert default > 200  # the 300 MiB freed stay resident (the test can fail: glibc's raising is real)
    assert fixed < 20
