"""The one interval type, and the one way an undefined number leaves the planner.

Inside the planner an undefined statistic is NaN next to a ``defined``/``reason`` pair
(never 0); at the JSON boundary it becomes ``None`` through :func:`optional_float`
(docs/vocabulary.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def optional_float(value: float | None) -> float | None:
    """``value`` as a float, or ``None`` when it is undefined (None, NaN or infinite).

    >>> optional_float(0.25), optional_float(float("nan")), optional_float(None)
    (0.25, None, None)
    """
    if value is None or not math.isfinite(value):
        return None
    return float(value)


APPROXIMATE_BELOW_ITEMS = 100
"""An interval from fewer items than this is flagged approximate (docs/method.md §2)."""
APPROXIMATE_BELOW_MINORITY = 10
"""... and so is one whose minority class has fewer items than this."""


AGREEMENT_BELOW_MINORITY = 50
"""An agreement coefficient's interval whose minority label has fewer ratings than this is approximate: at
100 items of two raters under a .1/.9 or .05/.95 skew (19-28 minority ratings) the item bootstrap of kappa
and alpha covered .921-.925 of a nominal .95 (docs/method.md §2, "Intervals")."""


def approximation_reason(
    n_items: int, class_counts: np.ndarray, *, minority_below: int = APPROXIMATE_BELOW_MINORITY
) -> str:
    """Why an interval from ``n_items`` items with these per-class counts is only approximate; ``""`` when it
    is not.

    Fewer than 100 items, or a minority class (the rarest label that occurs, or a single label
    throughout) under ``minority_below``: bootstrap coverage falls short of nominal there (docs/method.md
    §2, "Intervals").

    >>> approximation_reason(500, np.array([480, 20, 0])), approximation_reason(500, np.array([495, 5]))
    ('', 'the minority label has 5 ratings, fewer than 10')
    """
    present = class_counts[class_counts > 0]
    if n_items < APPROXIMATE_BELOW_ITEMS:
        return f"{n_items} items, fewer than {APPROXIMATE_BELOW_ITEMS}"
    if present.size < 2:
        return "a single label throughout"
    if present.min() < minority_below:
        return f"the minority label has {present.min():g} ratings, fewer than {minority_below}"
    return ""


def is_approximate(n_items: int, class_counts: np.ndarray) -> bool:
    """Whether an interval from ``n_items`` items with these per-class counts is only approximate
    (``approximation_reason`` at a minority of 10).

    >>> is_approximate(500, np.array([480, 20, 0])), is_approximate(500, np.array([495, 5]))
    (False, True)
    """
    return bool(approximation_reason(n_items, class_counts))


@dataclass(frozen=True)
class ConfidenceInterval:
    """A two-sided interval; both ends NaN when the statistic is undefined.

    ``approximate`` is True when it comes from too few items for its nominal coverage
    (``is_approximate``); ``method`` names how it was computed: ``"percentile"`` or ``"bca"``
    (item bootstraps, ``planner.bca``), ``"delta"`` (``estimate +- z SE``) or
    ``"confidence-sequence"`` (anytime-valid, docs/method.md §8).
    """

    low: float
    high: float
    approximate: bool = False
    method: str = "percentile"

    def as_list(self) -> list[float | None]:
        """The interval as ``[low, high]`` with ``None`` for undefined ends (JSON-friendly)."""
        return [optional_float(self.low), optional_float(self.high)]


def optional_interval(interval: ConfidenceInterval) -> ConfidenceInterval | None:
    """``interval``, or ``None`` when both ends are undefined (reports that omit it)."""
    return None if np.isnan(interval.low) and np.isnan(interval.high) else interval


def percentile_interval(replicates: np.ndarray, confidence_level: float) -> ConfidenceInterval:
    """Percentile bootstrap interval over the finite replicates (docs/method.md §2, "Intervals").

    >>> percentile_interval(np.arange(5.0), 0.5)
    ConfidenceInterval(low=1.0, high=3.0, approximate=False, method='percentile')
    """
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    finite = np.asarray(replicates, dtype=float)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return ConfidenceInterval(np.nan, np.nan)
    tail = (1.0 - confidence_level) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return ConfidenceInterval(float(low), float(high))
