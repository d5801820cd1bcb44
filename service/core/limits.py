"""Work limits in one place: every endpoint that computes states its work as a product of
factors and checks it against its setting before it starts (docs/operations.md, "Work limits")."""

from __future__ import annotations

import math
from collections.abc import Mapping

from service.core.errors import TooLarge

INLINE_WORK = 2_000_000
"""Units of work up to which a bounded computation runs in the request's thread; past it, in a child process."""


def bounded_work(factors: Mapping[str, int], limit: int, *, setting: str, code: str, advice: str) -> int:
    """The work ``factors`` multiply to; 413 ``code`` naming each factor, the product, the limit and what to lower.

    >>> bounded_work({"rows": 10, "resamples": 100}, 1_000, setting="X", code="c", advice="lower it")
    1000
    """
    work = math.prod(max(int(v), 0) for v in factors.values())
    if work > limit:
        shown = " x ".join(f"{v:,} {name}" for name, v in factors.items())
        raise TooLarge(
            f"{shown} is {work:,} units of work; the limit is {limit:,} (ANNOPLAN_{setting.upper()}): {advice}",
            code=code,
        )
    return work
