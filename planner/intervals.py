"""Confidence intervals shared by every planner result (SPEC.md §2, "Intervals")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConfidenceInterval:
    """A two-sided interval; both ends NaN when the statistic is undefined."""

    low: float
    high: float

    def as_list(self) -> list[float | None]:
        """The interval as ``[low, high]`` with ``None`` for undefined ends (JSON-friendly)."""
        return [None if np.isnan(v) else float(v) for v in (self.low, self.high)]


def percentile_interval(replicates: np.ndarray, level: float) -> ConfidenceInterval:
    """Percentile bootstrap interval over the finite replicates (SPEC.md §2, "Intervals")."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    finite = np.asarray(replicates, dtype=float)
    finite = finite[np.isfinite(finite)]
    if finite.size == 0:
        return ConfidenceInterval(np.nan, np.nan)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return ConfidenceInterval(float(low), float(high))
