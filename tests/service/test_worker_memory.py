"""What a worker keeps resident (issue 37, docs/operations.md: a worker's memory): the matrix's usable codes are
its raw codes when they hold no CANNOT_ASSESS or INVALID, and the allocator's free pages go back to the system
after long requests."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import service.core.middleware as middleware
from service.core.allocator import TRIM_AFTER_SECONDS
from service.matrices.matrix import LabelMatrix
from tests.conftest import ROOT


def _matrix(raw: np.ndarray) -> LabelMatrix:
    raw.flags.writeable = False
    return LabelMatrix(raw, np.arange(raw.shape[0]), [], 2, 1, "default", np.full(raw.shape, 1, np.int32))


def test_the_usable_codes_are_the_raw_codes_when_none_is_special() -> None:
    raw = np.array([[0, 1], [-1, 1], [1, -1]], dtype=np.int8)
    assert _matrix(raw).codes is raw  # no second copy of the matrix


def test_special_codes_are_missing_in_a_copy() -> None:
    raw = np.array([[0, 2], [3, 1], [1, -1]], dtype=np.int8)  # 2: CANNOT_ASSESS, 3: INVALID (two labels)
    codes = _matrix(raw).codes
    assert codes is not raw and codes.dtype == np.int8 and not codes.flags.writeable
    np.testing.assert_array_equal(codes, [[0, -1], [-1, 1], [1, -1]])
    np.testing.assert_array_equal(raw, [[0, 2], [3, 1], [1, -1]])


# Each request thread allocates from a glibc arena of its own, below the mapping threshold: a thread fills one
# with 200 MiB of small blocks, keeps one block in 64, and frees the rest; the freed pages stay resident until
# ``returned_free_pages``. Prints the resident MiB kept before and after it.
FREED = """
import threading
from pathlib import Path
from service.core.allocator import returned_free_pages, returned_large_frees
returned_large_frees()
def rss():
    line = next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS"))
    return int(line.split()[1]) / 1024
kept = []
def fill():
    blocks = [bytes(4096) for _ in range(51_200)]
    kept.extend(blocks[::64])
before = rss()
thread = threading.Thread(target=fill)
thread.start()
thread.join()
held = rss() - before
returned_free_pages()
print(held, rss() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's arenas: Linux only")
def test_freed_small_blocks_stay_resident_until_the_free_pages_are_returned() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FREED], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    held, after = map(float, done.stdout.split())
    assert held > 150  # the freed 197 MiB stay (the test can fail: glibc keeps them)
    assert after < 30  # the kept 3 MiB and their pages' neighbours


def test_the_free_pages_are_returned_after_long_requests_only(monkeypatch: pytest.MonkeyPatch) -> None:
    returned: list[str] = []
    monkeypatch.setattr(middleware, "returned_free_pages", lambda: returned.append("trim") or True)
    long = 0.5  # a fast request this slow only under a stall of the machine
    assert TRIM_AFTER_SECONDS < long
    monkeypatch.setattr(middleware, "TRIM_AFTER_SECONDS", long)

    async def slow(request: object) -> PlainTextResponse:
        await asyncio.sleep(long)
        return PlainTextResponse("slow")

    def fast(request: object) -> PlainTextResponse:
        return PlainTextResponse("fast")

    app = Starlette(routes=[Route("/slow", slow), Route("/fast", fast)])
    app.add_middleware(middleware.ReturnedFreePages)
    with TestClient(app) as client:
        assert client.get("/fast").text == "fast"
        assert returned == []
        assert client.get("/slow").text == "slow"
        assert returned == ["trim"]
