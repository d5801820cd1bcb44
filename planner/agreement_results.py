"""Results of the agreement coefficients and their resampling on item patterns (docs/method.md §2).

Every coefficient of ``planner.agreement`` and ``planner.rater_pairs`` returns one of these frozen
results: ``statistic``, ``n_items``, ``defined``, ``reason`` and a lazy
``confidence_interval(confidence_level=0.95, *, method, n_resamples=1000, rng=None)``. The bootstrap
resamples items grouped into distinct patterns: a replicate is a multinomial draw of pattern
multiplicities, a weighted sum over patterns, never a pass over items.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Literal

import numpy as np
from scipy.special import ndtri

from planner.bca import JACKKNIFE_MAX_PATTERNS, acceleration, bca_interval, pattern_jackknife
from planner.intervals import (
    AGREEMENT_BELOW_MINORITY,
    ConfidenceInterval,
    approximation_reason,
    optional_float,
    percentile_interval,
)
from planner.resampling import ItemResample, Reader
from planner.tables import (
    LevelOfMeasurement,
)

Weights = Literal["linear", "quadratic"] | None
Method = Literal["bootstrap", "bca", "percentile", "delta"]
METHODS = ("bootstrap", "bca", "percentile", "delta")
Scale = Literal["nominal", "ordinal", "interval"]
Rng = int | np.random.Generator | None

NO_COMMON = "no item labeled by both raters"
NO_PAIRABLE = "no item has two or more ratings"


def check_interval_options(confidence_level: float, method: str, n_resamples: int) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Resampling:
    """How a result's items are resampled: its statistic on pattern weights ``(B, U)``, the
    number of items of each pattern, and the ratings per label over those items. ``source``: the
    result's pattern of each row it was built from (``-1``: a row it leaves out), when it keeps or
    merges some of them; ``None`` when its patterns are those rows. ``cells``: when the statistic
    reads only sums of the weights, a sparse 0/1 map ``(K, U)`` of its rows to those sums and the
    statistic of the sums ``(B, K)`` (:func:`summary_table` reads several results in one product)."""

    statistic: Callable[[np.ndarray], np.ndarray]
    counts: np.ndarray
    label_counts: np.ndarray
    width: int = 0
    source: np.ndarray | None = None
    cells: tuple[Any, Callable[[np.ndarray], np.ndarray]] | None = None

    def reader(self, resample: ItemResample) -> Reader:
        """How this result reads ``resample`` of the rows it was built from (``joint_replicates``)."""
        own = resample if self.source is None else resample.merged(self.source, self.counts.size)
        return own, self.statistic, self.width

    def accel(self) -> float:
        return acceleration(*pattern_jackknife(self.statistic, self.counts))


def on_patterns(
    patterns: np.ndarray,
    frequency: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], np.ndarray],
    label_counts: np.ndarray,
    *,
    width: int = 0,
    source: np.ndarray | None = None,
    cells: tuple[Any, Callable[[np.ndarray], np.ndarray]] | None = None,
) -> Resampling:
    """Resampling of items grouped into distinct ``patterns`` with ``frequency`` items each."""
    return Resampling(partial(statistic, patterns), frequency, label_counts, width, source, cells)


@dataclass(frozen=True, kw_only=True)
class AgreementResult:
    """A coefficient, the number of items it used, and whether it is defined (docs/method.md §2)."""

    coefficient: str
    statistic: float
    n_items: int
    defined: bool
    reason: str
    _resampling: Resampling = field(repr=False, compare=False)

    def _standard_error(self) -> float:
        raise ValueError(f"no analytic variance for {self.coefficient}; use method='bootstrap'")

    @property
    def approximate(self) -> bool:
        """Whether an interval of this result falls short of its nominal coverage (``approximate_reason``)."""
        return bool(self.approximate_reason)

    @property
    def approximate_reason(self) -> str:
        """Why an interval of this result is approximate (``approximation_reason``, a minority under
        ``AGREEMENT_BELOW_MINORITY`` ratings); ``""`` when it is not."""
        counts = self._resampling.label_counts
        return approximation_reason(self.n_items, counts, minority_below=AGREEMENT_BELOW_MINORITY)

    def confidence_interval(
        self,
        confidence_level: float = 0.95,
        *,
        method: Method = "bootstrap",
        n_resamples: int = 1000,
        rng: Rng = None,
    ) -> ConfidenceInterval:
        """An item-bootstrap interval, or ``statistic +- z SE`` (delta) (docs/method.md §2, "Intervals").

        ``"bootstrap"`` is BCa (``planner.bca``) when the interval is ``approximate`` (fewer
        than 100 items or a minority label under 10), where it was measured to cover better,
        and percentile otherwise; ``"bca"`` and ``"percentile"`` ask for one. BCa needs the
        jackknife over at most 4,000 distinct item patterns; beyond that it is percentile.
        The interval says which it is (``method``). Both ends are NaN when the statistic is
        undefined.
        """
        check_interval_options(confidence_level, method, n_resamples)
        resampling = self._resampling

        def replicates() -> np.ndarray:
            own = ItemResample.draw(resampling.counts, int(resampling.counts.sum()), n_resamples, rng)
            return own.replicates(resampling.statistic, width=resampling.width)

        return self._interval(confidence_level, method, replicates)

    def _interval(
        self, confidence_level: float, method: Method, replicates: Callable[[], np.ndarray]
    ) -> ConfidenceInterval:
        """The interval of :meth:`confidence_interval` from bootstrap ``replicates()`` of the statistic
        (called only when the interval needs them)."""
        approximate = self.approximate
        if method == "delta":
            se = self._standard_error()
            if not self.defined:
                return ConfidenceInterval(np.nan, np.nan, approximate, "delta")
            half = float(ndtri(0.5 + confidence_level / 2.0)) * se
            return ConfidenceInterval(self.statistic - half, self.statistic + half, approximate, "delta")
        bca = method == "bca" or (method == "bootstrap" and approximate)
        bca = bca and self._resampling.counts.size <= JACKKNIFE_MAX_PATTERNS
        if not self.defined:
            return ConfidenceInterval(np.nan, np.nan, approximate, "bca" if bca else "percentile")
        drawn = replicates()
        if bca:
            interval = bca_interval(drawn, self.statistic, self._resampling.accel(), confidence_level)
        else:
            interval = percentile_interval(drawn, confidence_level)
        return replace(interval, approximate=approximate)


@dataclass(frozen=True, kw_only=True)
class KappaResult(AgreementResult):
    """Chance-corrected agreement of two raters from their ``L x L`` table (docs/method.md §2).

    ``p_o``/``p_e`` are the (weighted) observed and chance agreement; ``variance`` and
    ``standard_error`` the large-sample variance where one exists (Fleiss–Cohen–Everitt
    1969 for Cohen's kappa, binomial for PABAK), else NaN. ``table``: counts, rows rater 1.
    """

    p_o: float
    p_e: float
    variance: float
    standard_error: float
    weights: Weights
    table: np.ndarray = field(repr=False, compare=False)

    def _standard_error(self) -> float:
        if self.coefficient not in ("cohen_kappa", "pabak"):
            return super()._standard_error()
        return self.standard_error

    def confidence_interval(
        self,
        confidence_level: float = 0.95,
        *,
        method: Method | None = None,
        n_resamples: int = 1000,
        rng: Rng = None,
    ) -> ConfidenceInterval:
        """By default the delta-method interval, or BCa over the common items when the interval is
        ``approximate`` (at 30 items under a .9/.1 skew the delta interval of kappa covered .867 of
        a nominal .95, BCa .940; docs/method.md §2, "Intervals")."""
        if method is None:
            method = "bootstrap" if self.approximate else "delta"
        return super().confidence_interval(confidence_level, method=method, n_resamples=n_resamples, rng=rng)


@dataclass(frozen=True, kw_only=True)
class ChanceCorrectedResult(AgreementResult):
    """A multi-rater chance-corrected coefficient with its ``p_o`` and ``p_e`` (docs/method.md §2)."""

    p_o: float
    p_e: float


@dataclass(frozen=True, kw_only=True)
class AlphaResult(AgreementResult):
    """Krippendorff's alpha with ``D_o``, ``D_e`` and ``n_values`` pairable values (docs/method.md §2).

    ``n_items`` counts the pairable units (two or more values).
    """

    level_of_measurement: LevelOfMeasurement
    d_o: float
    d_e: float
    n_values: int


@dataclass(frozen=True, kw_only=True)
class BinaryAssociationResult(AgreementResult):
    """Phi of two binary raters, both positive rates and the 2x2 table (docs/method.md §2).

    On binary data phi equals Pearson r, Spearman rho, Kendall tau_b and MCC.
    """

    positive_rate_a: float
    positive_rate_b: float
    table: np.ndarray = field(repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class MeanKappaResult(AgreementResult):
    """Overlap-weighted mean of the defined pairwise Cohen's kappas (docs/method.md §2).

    ``n_items`` counts items with two or more ratings; ``n_pairs`` the defined pairs.
    """

    n_pairs: int
    weights: Weights


@dataclass(frozen=True, eq=False)
class PairwiseResult:
    """A two-rater coefficient over every rater pair (docs/method.md §2).

    ``statistic``, ``n_items`` (overlap of the pair), ``defined`` and ``reason`` are
    ``(n_raters, n_raters)`` arrays, symmetric; on the diagonal ``n_items`` is the number
    of items the rater labeled and the statistic is undefined. ``results[(j, k)]``
    (``j < k``) is the full result of a pair.
    """

    coefficient: str
    statistic: np.ndarray
    n_items: np.ndarray
    defined: np.ndarray
    reason: np.ndarray
    results: dict[tuple[int, int], AgreementResult] = field(repr=False, compare=False)

    def confidence_interval(
        self,
        confidence_level: float = 0.95,
        *,
        method: Method = "bootstrap",
        n_resamples: int = 1000,
        rng: Rng = None,
    ) -> dict[tuple[int, int], ConfidenceInterval]:
        """The interval of every pair ``(j, k)``, ``j < k``; a pair resamples its common items."""
        gen = np.random.default_rng(rng)
        return {
            pair: result.confidence_interval(confidence_level, method=method, n_resamples=n_resamples, rng=gen)
            for pair, result in self.results.items()
        }


@dataclass(frozen=True)
class Estimate:
    """A reported number: its result and the interval computed for it (docs/method.md §2, "Intervals")."""

    result: AgreementResult
    interval: ConfidenceInterval

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form: NaN becomes ``None``."""
        return {
            "coefficient": self.result.coefficient,
            "statistic": optional_float(self.result.statistic),
            "n_items": int(self.result.n_items),
            "defined": bool(self.result.defined),
            "reason": self.result.reason,
            "interval": self.interval.as_list(),
            "interval_method": self.interval.method,
            "approximate": self.interval.approximate,
            "approximate_reason": self.result.approximate_reason,
        }
