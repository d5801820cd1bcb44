"""Agreement over rubric criteria at one aggregation level (docs/method.md §7, "Aggregation")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from planner.intervals import ConfidenceInterval, optional_interval, percentile_interval
from planner.protocol import (
    STATISTICS,
    Protocol,
    Summary,
    check_interval_options,
    statistic_stack,
    summary_from_table,
)
from planner.resampling import distinct_rows

AGGREGATIONS = ("micro", "macro", "item")
_RULES = ("all", "any")


def _nan_if_none(value: float | None) -> float:
    return np.nan if value is None else value


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class Aggregate:
    """Agreement over rubric criteria at one aggregation level (docs/method.md §7, "Aggregation").

    ``included`` gives, per statistic, how many criteria entered it out of how many
    (macro skips undefined criteria, never counts them as 0). ``pooled`` is the summary of
    the pooled (micro) or criteria-combined (item) table; ``None`` for macro.
    ``kappa_interval`` is a percentile cluster bootstrap over ``protocol.resampling_unit``.
    """

    protocol: Protocol
    rule: str | None
    criteria: tuple[str, ...]
    accuracy: float | None
    kappa: float | None
    f1_met: float | None
    phi: float | None
    kappa_interval: ConfidenceInterval | None
    included: tuple[tuple[str, int, int], ...]
    pooled: Summary | None
    reasons: tuple[tuple[str, str], ...]


def _results_iv(per_criterion_results: object, aggregation: object, rule: object) -> tuple[str, ...]:
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if rule not in _RULES:
        raise ValueError(f"rule must be one of {_RULES}, got {rule!r}")
    if not isinstance(per_criterion_results, Mapping) or not per_criterion_results:
        raise ValueError("per_criterion_results must be a non-empty mapping criterion -> Summary")
    if not all(isinstance(s, Summary) for s in per_criterion_results.values()):
        raise ValueError("per_criterion_results values must be Summary results of summarize()")
    protocols = {s.protocol for s in per_criterion_results.values()}
    if len(protocols) > 1:
        raise ValueError(
            "criteria were summarised under different protocols; aggregate one protocol at a time"
        )
    protocol = next(iter(protocols))
    if aggregation == "item" and len(protocol.labels) != 2:
        raise ValueError(f"aggregation 'item' combines binary verdicts; labels are {protocol.labels}")
    if aggregation != "macro":
        missing = [c for c, s in per_criterion_results.items() if s.item_ids is None]
        if missing:
            raise ValueError(
                f"aggregation {aggregation!r} resamples items: summarize every criterion with items= "
                f"(missing for {missing[:5]})"
            )
    return tuple(str(c) for c in per_criterion_results)


def _aggregated_protocol(protocol: Protocol, aggregation: str) -> Protocol:
    unit = {"micro": "items (criteria clustered)", "macro": "criteria", "item": "items"}[aggregation]
    return replace(protocol, aggregation=aggregation, resampling_unit=unit)


def _item_cell_counts(results: Sequence[Summary], aggregation: str, rule: str) -> np.ndarray:
    """Per-item counts over full-table cells ``(n_items, (L+2)^2)``: micro or item aggregation."""
    protocol = results[0].protocol
    size = len(protocol.labels) + 2
    ids = np.concatenate([np.asarray(s.item_ids, dtype=str) for s in results])
    cells = np.concatenate([np.asarray(s.item_cells, dtype=np.int64) for s in results])
    items, inverse = np.unique(ids, return_inverse=True)
    if aggregation == "item":
        cells = _combined_cells(results, items, inverse, cells, rule)
        inverse = np.arange(items.size)
    counts = np.bincount(inverse * size * size + cells, minlength=items.size * size * size)
    return counts.reshape(items.size, size * size)


def _combined_cells(
    results: Sequence[Summary], items: np.ndarray, inverse: np.ndarray, cells: np.ndarray, rule: str
) -> np.ndarray:
    """One full-table cell per item: criteria combined by Kleene ``all`` / ``any`` (docs/method.md §7).

    ``all``: negative if any criterion is negative, else INVALID if any is INVALID, else CA
    if any is CA, else positive; ``any`` swaps positive and negative.
    """
    protocol = results[0].protocol
    counts = np.bincount(inverse, minlength=items.size)
    if np.any(counts != len(results)):
        raise ValueError("aggregation 'item' needs every criterion on the same items, each once")
    size = len(protocol.labels) + 2
    order = np.argsort(inverse, kind="stable")
    by_item = cells[order].reshape(items.size, len(results))
    pos = protocol.labels.index(protocol.positive)
    decisive, default = (1 - pos, pos) if rule == "all" else (pos, 1 - pos)
    ca, invalid = size - 2, size - 1
    combined = []
    for side in (by_item // size, by_item % size):
        combined.append(
            np.select(
                [np.any(side == v, axis=1) for v in (decisive, invalid, ca)],
                [decisive, invalid, ca],
                default,
            )
        )
    return np.asarray(combined[0] * size + combined[1], dtype=np.int64)


def cluster_bootstrap(
    per_criterion_results: Mapping[str, Summary],
    *,
    aggregation: str,
    statistic: str = "kappa",
    rule: str = "all",
    n_resamples: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Bootstrap replicates ``(n_resamples,)`` of an aggregated statistic (docs/method.md §2, §7).

    The resampling unit matches the aggregation: whole items with all their criteria (micro,
    item) or whole criteria (macro, replicate = mean over the defined criteria drawn).
    Items sharing a pattern of cells are drawn together as multinomial multiplicities.
    Undefined replicates are NaN.

    >>> from planner.protocol import summarize
    >>> h = ["MET", "MET", "NOT_MET", "NOT_MET"]
    >>> half = summarize(h, ["MET", "NOT_MET", "NOT_MET", "NOT_MET"], labels=["MET", "NOT_MET"],
    ...                  positive="MET")
    >>> full = summarize(h, h, labels=["MET", "NOT_MET"], positive="MET")
    >>> reps = cluster_bootstrap({"a": half, "b": full}, aggregation="macro", n_resamples=200, rng=0)
    >>> sorted(set(reps.round(4).tolist()))
    [0.5, 0.75, 1.0]
    """
    _results_iv(per_criterion_results, aggregation, rule)
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {STATISTICS}, got {statistic!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    generator = np.random.default_rng(rng)
    results = list(per_criterion_results.values())
    if aggregation == "macro":
        values = np.array([_nan_if_none(getattr(s, statistic)) for s in results])
        defined = np.isfinite(values)
        share = np.full(len(results), 1.0 / len(results))
        draws = generator.multinomial(len(results), share, size=n_resamples)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray((draws @ np.where(defined, values, 0.0)) / (draws @ defined), dtype=float)
    rows = _item_cell_counts(results, aggregation, rule)
    patterns, multiplicity = distinct_rows(rows)
    size = len(results[0].protocol.labels) + 2
    share = multiplicity / multiplicity.sum()
    draws = generator.multinomial(multiplicity.sum(), share, size=n_resamples)
    tables = (draws @ patterns).reshape(n_resamples, size, size)
    return statistic_stack(tables, results[0].protocol, statistic)


def aggregate(
    per_criterion_results: Mapping[str, Summary],
    *,
    aggregation: str = "micro",
    rule: str = "all",
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> Aggregate:
    """Agreement over rubric criteria at ``aggregation`` (docs/method.md §7, "Aggregation").

    ``per_criterion_results``: criterion -> :func:`summarize` result, all under one
    protocol. ``"micro"`` pools every decision into one table; ``"macro"`` averages the
    per-criterion statistics over the criteria where each is defined (undefined criteria
    are excluded and counted in ``included``, never entered as 0); ``"item"`` first
    combines each item's criteria by ``rule`` (``"all"``: the item is positive when every
    criterion is; ``"any"``: when one is), then scores the item verdicts. The kappa
    interval comes from :func:`cluster_bootstrap` with the matching resampling unit.
    Never compare numbers across levels.

    >>> from planner.protocol import summarize
    >>> h = ["MET", "MET", "NOT_MET", "NOT_MET"]
    >>> a = summarize(h, ["MET", "NOT_MET", "NOT_MET", "NOT_MET"], labels=["MET", "NOT_MET"],
    ...               positive="MET", items=[1, 2, 3, 4])
    >>> b = summarize(h, ["MET", "MET", "MET", "MET"], labels=["MET", "NOT_MET"],
    ...               positive="MET", items=[1, 2, 3, 4])
    >>> m = aggregate({"clarity": a, "accuracy": b}, aggregation="macro", rng=0)
    >>> m.accuracy, m.kappa, m.included[1]
    (0.625, 0.5, ('kappa', 1, 2))
    """
    criteria = _results_iv(per_criterion_results, aggregation, rule)
    check_interval_options("bootstrap", confidence_level, n_resamples)
    results = list(per_criterion_results.values())
    protocol = _aggregated_protocol(results[0].protocol, aggregation)
    total = len(results)
    if aggregation == "macro":
        pooled = None
        values, included, reasons = {}, [], []
        for name in STATISTICS:
            defined = [getattr(s, name) for s in results if getattr(s, name) is not None]
            values[name] = float(np.mean(defined)) if defined else None
            included.append((name, len(defined), total))
            if not defined:
                reasons.append((name, f"{name} is undefined on every criterion"))
    else:
        size = len(protocol.labels) + 2
        if aggregation == "micro":
            table = np.sum([s.table.array() for s in results], axis=0)
        else:
            table = _item_cell_counts(results, aggregation, rule).sum(axis=0).reshape(size, size)
        pooled = summary_from_table(table, protocol, interval=None, item_ids=None, item_cells=())
        values = {name: getattr(pooled, name) for name in STATISTICS}
        included = [(name, total, total) for name in STATISTICS]
        reasons = list(pooled.reasons)
    kappa_interval = None
    if aggregation == "macro" and included[STATISTICS.index("kappa")][1] == 1:
        reasons.append(("kappa_interval", "resampling criteria needs >= 2 criteria with kappa"))
    elif values["kappa"] is not None:
        replicates = cluster_bootstrap(
            per_criterion_results, aggregation=aggregation, rule=rule, n_resamples=n_resamples, rng=rng
        )
        kappa_interval = optional_interval(percentile_interval(replicates, confidence_level))
    return Aggregate(
        protocol=protocol,
        rule=rule if aggregation == "item" else None,
        criteria=criteria,
        accuracy=values["accuracy"],
        kappa=values["kappa"],
        f1_met=values["f1_met"],
        phi=values["phi"],
        kappa_interval=kappa_interval,
        included=tuple(included),
        pooled=pooled,
        reasons=tuple(reasons),
    )

