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
from planner.resampling import distinct_keys, distinct_rows

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
        raise ValueError("criteria were summarised under different protocols; aggregate one protocol at a time")
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


def _item_patterns(results: Sequence[Summary], aggregation: str, rule: str) -> tuple[np.ndarray, np.ndarray]:
    """Distinct per-item cell counts ``(n_patterns, (L+2)^2)`` and how many items have each.

    Micro or item aggregation (docs/method.md §7). The patterns come in lexicographic order,
    as the distinct rows of the ``(n_items, (L+2)^2)`` per-item counts would, which are never
    built: an item's counts are the multiset of its cells, one per criterion.
    """
    size = len(results[0].protocol.labels) + 2
    by_item = _cells_by_item(results)
    if aggregation == "item":
        if np.any(by_item < 0):
            raise ValueError("aggregation 'item' needs every criterion on the same items, each once")
        cells = _combined_cells(results[0].protocol, by_item, rule)[:, None]
    else:
        cells = np.sort(by_item, axis=1)
    if cells.shape[1] == 1:
        keys, multiplicity = distinct_keys(cells[:, 0])
        multisets = keys[:, None]
    else:
        multisets, multiplicity = distinct_rows(cells, size * size)
    patterns = np.zeros((multisets.shape[0], size * size), dtype=np.int64)
    row, column = np.nonzero(multisets >= 0)
    np.add.at(patterns, (row, multisets[row, column]), 1)
    order = np.lexsort(patterns.T[::-1])  # lexsort's last key is the primary one
    return patterns[order], multiplicity[order]


def _cells_by_item(results: Sequence[Summary]) -> np.ndarray:
    """Each item's full-table cell per criterion ``(n_items, n_criteria)``, -1 where it has no pair."""
    if len(results) == 1:
        return np.asarray(results[0].item_cells, dtype=np.int64)[:, None]
    ids = [np.asarray(s.item_ids) for s in results]
    if not all(v.dtype.kind in "iu" for v in ids):
        ids = [v.astype(str) for v in ids]
    every = np.concatenate(ids)
    if every.dtype.kind in "iu" and every.size and 0 <= every.min() and every.max() < 4 * every.size + 2**16:
        present = np.zeros(int(every.max()) + 1, dtype=bool)
        present[every] = True
        rank = np.cumsum(present) - 1  # an id's place among the distinct ids, as np.unique would give
        n_items, inverse = int(rank[-1]) + 1, rank[every]
    else:
        items, inverse = np.unique(every, return_inverse=True)
        n_items = items.size
    by_item = np.full((n_items, len(results)), -1, dtype=np.int64)
    criterion = np.repeat(np.arange(len(results)), [v.size for v in ids])
    by_item[inverse.ravel(), criterion] = np.concatenate([s.item_cells for s in results])
    return by_item


def _combined_cells(protocol: Protocol, by_item: np.ndarray, rule: str) -> np.ndarray:
    """One full-table cell per item: criteria combined by Kleene ``all`` / ``any`` (docs/method.md §7).

    ``all``: negative if any criterion is negative, else INVALID if any is INVALID, else CA
    if any is CA, else positive; ``any`` swaps positive and negative.
    """
    size = len(protocol.labels) + 2
    pos = protocol.labels.index(protocol.positive)
    decisive, default = (1 - pos, pos) if rule == "all" else (pos, 1 - pos)
    ca, invalid = size - 2, size - 1
    combined = []
    for side in (by_item // size, by_item % size):
        seen = np.bitwise_or.reduce(np.left_shift(1, side), axis=1)  # bit v: some criterion has value v
        combined.append(
            np.select([seen & (1 << v) > 0 for v in (decisive, invalid, ca)], [decisive, invalid, ca], default)
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
    patterns, multiplicity = _item_patterns(results, aggregation, rule)
    return _pattern_replicates(patterns, multiplicity, results[0].protocol, statistic, n_resamples, generator)


def _pattern_replicates(
    patterns: np.ndarray,
    multiplicity: np.ndarray,
    protocol: Protocol,
    statistic: str,
    n_resamples: int,
    generator: np.random.Generator,
) -> np.ndarray:
    """Replicates of ``statistic`` when items are drawn with replacement: pattern multiplicities
    ``Multinomial(n, multiplicity / n)`` (docs/method.md §2)."""
    size = len(protocol.labels) + 2
    share = multiplicity / multiplicity.sum()
    draws = generator.multinomial(multiplicity.sum(), share, size=n_resamples)
    tables = (draws @ patterns).reshape(n_resamples, size, size)
    return statistic_stack(tables, protocol, statistic)


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
        patterns, multiplicity = _item_patterns(results, aggregation, rule)
        table = (multiplicity @ patterns).reshape(size, size)
        if aggregation == "micro" and total == 1:  # pooling one criterion: its summary (bounds are costly)
            pooled = replace(
                results[0],
                protocol=protocol,
                kappa_interval=None,
                kappa_interval_method=None,
                item_ids=None,
                item_cells=np.zeros(0, dtype=np.int64),
            )
        else:
            pooled = summary_from_table(
                table, protocol, interval=None, item_ids=None, item_cells=np.zeros(0, dtype=np.int64)
            )
        values = {name: getattr(pooled, name) for name in STATISTICS}
        included = [(name, total, total) for name in STATISTICS]
        reasons = list(pooled.reasons)
    kappa_interval = None
    if aggregation == "macro" and included[STATISTICS.index("kappa")][1] == 1:
        reasons.append(("kappa_interval", "resampling criteria needs >= 2 criteria with kappa"))
    elif values["kappa"] is not None:
        generator = np.random.default_rng(rng)
        if aggregation == "macro":
            replicates = cluster_bootstrap(
                per_criterion_results, aggregation=aggregation, rule=rule, n_resamples=n_resamples, rng=generator
            )
        else:  # the patterns of the pooled table, drawn as cluster_bootstrap would
            replicates = _pattern_replicates(
                patterns, multiplicity, results[0].protocol, "kappa", n_resamples, generator
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
