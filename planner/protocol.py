"""A reported number under its protocol: handling of abstentions, costs, summary (docs/method.md §7).

INVALID pairs are counted and reported under every handling rule, never scored and never
recoded. Every result carries the :class:`Protocol` it was computed under.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from planner.agreement import kappa_from_table
from planner.agreement_results import Weights
from planner.bounds import binary_table, manski_bounds, sharp_bounds
from planner.codes import CANNOT_ASSESS, SPECIAL
from planner.intervals import (
    ConfidenceInterval,
    optional_float,
    optional_interval,
    percentile_interval,
)
from planner.tables import fce_variance, kappa_terms
from planner.verdicts import (
    VerdictTable,
    binary_metric,
    checked_labels,
    diagonal_share,
    positive_vs_rest,
    verdict_pair_codes,
)

HANDLING = ("exclude", "recode", "three_class")
STATISTICS = ("accuracy", "kappa", "f1_met", "phi")
_COSTS = ("nominal", "linear", "quadratic")
_INTERVALS = ("delta", "bootstrap")
_ONE_CATEGORY = "a side used a single scored category (kappa would be 0 whatever the other did)"


# --------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class Protocol:
    """The choices a reported number was computed under (docs/method.md §7, "Report").

    ``ordering`` lists the scored categories in the order ``cost_matrix`` refers to;
    ``aggregation`` is ``"criterion"`` for one criterion, else the aggregation level.
    """

    scale: str
    population: str
    handling: str
    labels: tuple[str, ...]
    positive: str
    recode_to: str | None
    costs: str
    ordering: tuple[str, ...]
    cost_matrix: tuple[tuple[float, ...], ...]
    aggregation: str
    resampling_unit: str


def _cost_matrix(costs: object, size: int) -> tuple[str, np.ndarray]:
    """Disagreement costs: nominal ``1[a!=b]``, linear, quadratic, or custom (docs/method.md §2, §7)."""
    if isinstance(costs, str):
        if costs not in _COSTS:
            raise ValueError(f"costs must be one of {_COSTS} or a square matrix, got {costs!r}")
        gap = np.abs(np.subtract.outer(np.arange(size), np.arange(size))) / (size - 1)
        power = {"nominal": 0, "linear": 1, "quadratic": 2}[costs]
        return costs, (gap > 0).astype(float) if power == 0 else gap**power
    matrix = np.asarray(costs, dtype=float)
    if matrix.shape != (size, size):
        raise ValueError(f"a custom cost matrix must have shape ({size}, {size}), got {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or np.any(matrix < 0) or np.any(np.diag(matrix) != 0):
        raise ValueError("a custom cost matrix must be finite, non-negative, with a zero diagonal")
    if not np.any(matrix > 0):
        raise ValueError("a custom cost matrix must have at least one positive cost")
    return "custom", matrix


def make_protocol(
    labels: tuple[str, ...],
    positive: object,
    handling: object,
    recode_to: object,
    costs: object,
    ordering: object,
) -> Protocol:
    if handling not in HANDLING:
        raise ValueError(f"handling must be one of {HANDLING}, got {handling!r}")
    if positive not in labels:
        raise ValueError(f"positive must be one of labels {labels}, got {positive!r}")
    if handling == "recode":
        negatives = [v for v in labels if v != positive]
        if recode_to is None and len(negatives) > 1:
            raise ValueError(f"recode_to is required when there are several negative labels {negatives}")
        recode_to = negatives[0] if recode_to is None else recode_to
        if recode_to not in negatives:
            raise ValueError(f"recode_to must be a negative label, one of {negatives}, got {recode_to!r}")
    elif recode_to is not None:
        raise ValueError(f"recode_to applies only to handling='recode', got handling={handling!r}")
    scored = labels + (CANNOT_ASSESS,) if handling == "three_class" else labels
    if ordering is None:
        ordering = scored
    elif not isinstance(ordering, Sequence) or isinstance(ordering, str) or sorted(ordering) != sorted(scored):
        raise ValueError(f"ordering must list each scored category {scored} once, got {ordering!r}")
    kind, matrix = _cost_matrix(costs, len(scored))
    base = (
        "binary"
        if len(labels) == 2 and handling != "three_class"
        else {"nominal": "nominal", "linear": "ordinal", "quadratic": "ordinal", "custom": "custom-cost"}[kind]
    )
    population = {
        "exclude": "pairs where both sides gave a label (CANNOT_ASSESS and INVALID dropped)",
        "recode": f"all pairs, CANNOT_ASSESS recoded to {recode_to!r} (INVALID dropped)",
        "three_class": "all pairs, CANNOT_ASSESS kept as a category (INVALID dropped)",
    }[handling]
    return Protocol(
        scale=base + ("-with-abstention" if handling == "three_class" else ""),
        population=population,
        handling=handling,
        labels=labels,
        positive=positive,
        recode_to=recode_to,
        costs=kind,
        ordering=tuple(ordering),
        cost_matrix=tuple(tuple(float(v) for v in row) for row in matrix),
        aggregation="criterion",
        resampling_unit="items",
    )


def _scoring_map(protocol: Protocol) -> np.ndarray:
    """0/1 matrix ``(n_scored, L+2)`` sending full-table categories to scored ones (docs/method.md §7)."""
    full = protocol.labels + SPECIAL
    out = np.zeros((len(protocol.ordering), len(full)))
    for row, category in enumerate(protocol.ordering):
        out[row, full.index(category)] = 1.0
        if category == protocol.recode_to:
            out[row, full.index(CANNOT_ASSESS)] = 1.0
    return out


def _scored_tables(tables: np.ndarray, protocol: Protocol) -> np.ndarray:
    """Tables ``(..., L+2, L+2)`` folded to the scored categories under the handling rule."""
    m = _scoring_map(protocol)
    return np.asarray(np.einsum("ea,...ab,fb->...ef", m, tables, m), dtype=float)


def _agreement_matrix(protocol: Protocol) -> np.ndarray:
    cost = np.array(protocol.cost_matrix)
    return np.asarray(1.0 - cost / cost.max(), dtype=float)


def _kappa_stack(tables: np.ndarray, protocol: Protocol) -> np.ndarray:
    """Kappa of scored tables ``(B, k, k)`` under the protocol's costs (docs/method.md §2, Cohen 1968)."""
    return kappa_terms(tables.astype(float), _agreement_matrix(protocol))[0]


def statistic_stack(tables: np.ndarray, protocol: Protocol, statistic: str) -> np.ndarray:
    """One statistic of full tables ``(B, L+2, L+2)`` under the handling rule (docs/method.md §7)."""
    scored = _scored_tables(tables, protocol)
    if statistic == "accuracy":
        return diagonal_share(scored)
    if statistic == "kappa":
        return _kappa_stack(scored, protocol)
    binary = positive_vs_rest(scored, protocol.ordering.index(protocol.positive))
    return binary_metric(binary, statistic)


def _kappa_point(scored: np.ndarray, protocol: Protocol) -> tuple[float, float, str]:
    """Kappa, its FCE standard error and the reason when undefined (docs/method.md §2, via agreement)."""
    if protocol.costs != "custom":
        weights: Weights = {"nominal": None, "linear": "linear", "quadratic": "quadratic"}[protocol.costs]
        r = kappa_from_table(scored, weights=weights)
        return r.statistic, r.standard_error, r.reason
    agree = _agreement_matrix(protocol)
    kappa, p_o, p_e = (float(v[0]) for v in kappa_terms(scored[None].astype(float), agree))
    if np.isnan(kappa):
        return np.nan, np.nan, _ONE_CATEGORY
    n = int(scored.sum())
    return kappa, float(np.sqrt(fce_variance(scored / n, agree, p_o, p_e, n))), ""


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Summary:
    """Agreement of a judge with a human under a declared protocol (docs/method.md §7).

    Rates are shares of all ``n_items`` pairs; ``coverage`` is the share where both sides
    gave a regular label. Statistics are computed on ``scored_table`` (``n_eff`` pairs),
    ``None`` where undefined with the cause in ``reasons``; ``f1_met``, ``phi`` and the
    positive rates are positive-vs-rest. ``accuracy_bounds`` (Manski)
    and the sharp ``*_bounds`` are for the full set of pairs and exist under ``exclude``
    (sharp ones for binary labels). ``item_ids``/``item_cells`` (read-only arrays: integer or
    string ids, and each pair's flat index into ``table``) keep the pairs for item-level
    aggregation and cluster resampling.
    """

    protocol: Protocol
    table: VerdictTable
    scored_table: VerdictTable
    n_items: int
    n_eff: int
    accuracy: float | None
    kappa: float | None
    kappa_se: float | None
    kappa_interval: ConfidenceInterval | None
    kappa_interval_method: str | None
    f1_met: float | None
    phi: float | None
    mean_cost: float | None
    human_positive_rate: float | None
    judge_positive_rate: float | None
    human_marginals: tuple[float, ...]
    judge_marginals: tuple[float, ...]
    human_abstain_rate: float | None
    judge_abstain_rate: float | None
    human_invalid_rate: float | None
    judge_invalid_rate: float | None
    coverage: float | None
    covered_accuracy: float | None
    accuracy_bounds: tuple[float, float] | None
    sharp_accuracy_bounds: tuple[float, float] | None
    kappa_bounds: tuple[float, float] | None
    f1_met_bounds: tuple[float, float] | None
    phi_bounds: tuple[float, float] | None
    reasons: tuple[tuple[str, str], ...]
    item_ids: np.ndarray | None
    item_cells: np.ndarray


def check_interval_options(interval: object, confidence_level: object, n_resamples: object) -> None:
    if interval not in _INTERVALS:
        raise ValueError(f"interval must be one of {_INTERVALS}, got {interval!r}")
    if not isinstance(confidence_level, float) or not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be a float in (0, 1), got {confidence_level!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")


def _items_iv(items: Sequence[object] | np.ndarray | None, n: int) -> np.ndarray | None:
    """Item ids as a read-only array: integers kept, anything else as its string."""
    if items is None:
        return None
    ids = np.asarray(items)
    if ids.ndim != 1 or ids.dtype.kind not in "iuU":
        ids = np.array([str(v) for v in items], dtype=str)
    if ids.size != n:
        raise ValueError(f"items must have one id per verdict pair ({n}), got {ids.size}")
    ordered = ids if np.all(ids[1:] > ids[:-1]) else np.sort(ids)  # ids in corpus order are often increasing
    if np.any(ordered[1:] == ordered[:-1]):
        raise ValueError("items must be distinct: one verdict pair per item and criterion")
    return _read_only(ids)


def codes_iv(codes: object, size: int, side: str) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"{side} codes must be a 1-d integer array")
    if arr.size and (arr.min() < 0 or arr.max() >= size):
        raise ValueError(f"{side} codes must lie in 0..{size - 1} (labels, CANNOT_ASSESS, INVALID)")
    return arr.astype(np.int64)


def _read_only(values: np.ndarray) -> np.ndarray:
    out = np.array(values)
    out.flags.writeable = False
    return out


def _kappa_interval(
    full: np.ndarray,
    protocol: Protocol,
    kappa: float,
    se: float,
    method: str,
    level: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> ConfidenceInterval | None:
    """Delta-method (FCE SE) or percentile-bootstrap interval for kappa (docs/method.md §2, Intervals).

    The bootstrap resamples all pairs of the full table, so ``n_eff`` varies with the draw.
    """
    if method == "delta":
        half = float(ndtri(0.5 + level / 2.0)) * se
        return ConfidenceInterval(kappa - half, kappa + half, method="delta")
    n, size = int(full.sum()), full.shape[0]
    draws = rng.multinomial(n, full.ravel() / n, size=n_resamples).reshape(-1, size, size)
    return optional_interval(percentile_interval(statistic_stack(draws, protocol, "kappa"), level))


def summary_from_table(
    full: np.ndarray,
    protocol: Protocol,
    *,
    interval: tuple[str, float, int, np.random.Generator] | None,
    item_ids: np.ndarray | None,
    item_cells: np.ndarray,
) -> Summary:
    """Every reported quantity of one full verdict table under ``protocol`` (docs/method.md §7)."""
    n_labels = len(protocol.labels)
    scored = _scored_tables(full, protocol).round().astype(np.int64)
    n, n_eff = int(full.sum()), int(scored.sum())
    binary = positive_vs_rest(scored, protocol.ordering.index(protocol.positive))
    h, j = binary[1, :].sum(), binary[:, 1].sum()
    reasons: list[tuple[str, str]] = []

    def rate(count: float, total: int) -> float | None:
        return float(count) / total if total else None

    if n_eff == 0:
        reasons.append(("all", "no pair is scored under this handling rule"))
    kappa, kappa_se, reason = _kappa_point(scored, protocol) if n_eff else (np.nan, np.nan, "")
    if reason:
        reasons.append(("kappa", reason))
    f1 = float(binary_metric(binary[None], "f1_met")[0])
    if n_eff and np.isnan(f1):
        reasons.append(("f1_met", f"neither side uses the positive label {protocol.positive!r}"))
    phi = float(binary_metric(binary[None], "phi")[0])
    if n_eff and np.isnan(phi):
        reasons.append(("phi", f"a side has a constant {protocol.positive!r}-vs-rest verdict"))

    kappa_interval = None
    if interval is not None and np.isfinite(kappa):
        kappa_interval = _kappa_interval(full, protocol, kappa, kappa_se, *interval)

    covered = full[:n_labels, :n_labels]
    gamma = rate(covered.sum(), n)
    covered_accuracy = optional_float(float(diagonal_share(covered)))
    exclusion = protocol.handling == "exclude" and n > 0
    table = VerdictTable.of(protocol.labels + SPECIAL, full)
    sharp = ("accuracy", "kappa", "f1_met", "phi")
    if exclusion and n_labels == 2:
        bounds = sharp_bounds(binary_table(table, protocol.positive), sharp)
    else:
        bounds = dict.fromkeys(sharp)
    mean_cost = float(np.sum(scored * np.array(protocol.cost_matrix)) / n_eff) if n_eff else None
    return Summary(
        protocol=protocol,
        table=table,
        scored_table=VerdictTable.of(protocol.ordering, scored),
        n_items=n,
        n_eff=n_eff,
        accuracy=optional_float(float(diagonal_share(scored))),
        kappa=optional_float(kappa),
        kappa_se=optional_float(kappa_se),
        kappa_interval=kappa_interval,
        kappa_interval_method=None if kappa_interval is None or interval is None else interval[0],
        f1_met=optional_float(f1),
        phi=optional_float(phi),
        mean_cost=mean_cost,
        human_positive_rate=rate(h, n_eff),
        judge_positive_rate=rate(j, n_eff),
        human_marginals=tuple(float(v) / n_eff for v in scored.sum(axis=1)) if n_eff else (),
        judge_marginals=tuple(float(v) / n_eff for v in scored.sum(axis=0)) if n_eff else (),
        human_abstain_rate=rate(full[n_labels, :].sum(), n),
        judge_abstain_rate=rate(full[:, n_labels].sum(), n),
        human_invalid_rate=rate(full[n_labels + 1, :].sum(), n),
        judge_invalid_rate=rate(full[:, n_labels + 1].sum(), n),
        coverage=gamma,
        covered_accuracy=covered_accuracy,
        accuracy_bounds=manski_bounds(gamma, covered_accuracy) if exclusion and gamma is not None else None,
        sharp_accuracy_bounds=bounds["accuracy"],
        kappa_bounds=bounds["kappa"],
        f1_met_bounds=bounds["f1_met"],
        phi_bounds=bounds["phi"],
        reasons=tuple(reasons),
        item_ids=item_ids,
        item_cells=_read_only(item_cells),
    )


def summarize(
    human: Sequence[str] | np.ndarray,
    judge: Sequence[str] | np.ndarray,
    *,
    labels: Sequence[str],
    positive: str,
    handling: str = "exclude",
    recode_to: str | None = None,
    costs: str | Sequence[Sequence[float]] = "nominal",
    ordering: Sequence[str] | None = None,
    items: Sequence[object] | np.ndarray | None = None,
    interval: str = "delta",
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    rng: int | np.random.Generator | None = None,
) -> Summary:
    """Judge-vs-human agreement under a declared handling rule for CA (docs/method.md §7).

    ``human``, ``judge``: verdicts of shape ``(n_items,)``. ``handling``: ``"exclude"``
    (drop pairs where either side abstains), ``"recode"`` (CA -> ``recode_to``, a
    negative label; default the only negative label) or ``"three_class"`` (CA scored as
    its own category). ``costs``: disagreement costs over ``ordering`` (default: labels,
    then CA under ``three_class``): ``"nominal"``, ``"linear"``, ``"quadratic"`` or a
    custom square matrix; kappa is Cohen's weighted kappa with these costs. INVALID pairs
    are never scored. ``items``: optional item ids (needed by :func:`aggregate` at the
    ``micro`` and ``item`` levels). The kappa interval is ``"delta"`` (Fleiss–Cohen–
    Everitt SE via :func:`planner.agreement.kappa_from_table`) or ``"bootstrap"``
    (percentile, resampling all items).

    >>> h = ["MET"] * 6 + ["NOT_MET"] * 3 + ["CANNOT_ASSESS"]
    >>> j = ["MET"] * 5 + ["NOT_MET"] * 3 + ["MET", "MET"]
    >>> s = summarize(h, j, labels=["MET", "NOT_MET"], positive="MET")
    >>> s.n_eff, round(s.accuracy, 4), s.coverage, [round(v, 6) for v in s.accuracy_bounds]
    (9, 0.7778, 0.9, [0.7, 0.8])
    >>> round(s.f1_met, 4), s.judge_abstain_rate, s.protocol.scale
    (0.8333, 0.0, 'binary')
    """
    label_tuple = checked_labels(labels)
    protocol = make_protocol(label_tuple, positive, handling, recode_to, costs, ordering)
    check_interval_options(interval, confidence_level, n_resamples)
    h, j = verdict_pair_codes(human, judge, label_tuple + SPECIAL)
    resampling = (interval, confidence_level, n_resamples, np.random.default_rng(rng))
    return _summary_of_codes(h, j, protocol, items, resampling)


def summarize_codes(
    human: np.ndarray,
    judge: np.ndarray,
    *,
    labels: Sequence[str],
    positive: str,
    handling: str = "exclude",
    recode_to: str | None = None,
    costs: str | Sequence[Sequence[float]] = "nominal",
    ordering: Sequence[str] | None = None,
    items: Sequence[object] | np.ndarray | None = None,
    interval: str = "delta",
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    rng: int | np.random.Generator | None = None,
) -> Summary:
    """:func:`summarize` of verdicts given as codes: indices into ``(*labels, CANNOT_ASSESS, INVALID)``.

    >>> s = summarize_codes(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 0]), labels=["MET", "NOT_MET"],
    ...                     positive="MET")
    >>> s.n_eff, s.accuracy, s.coverage
    (3, 0.6666666666666666, 0.75)
    """
    label_tuple = checked_labels(labels)
    protocol = make_protocol(label_tuple, positive, handling, recode_to, costs, ordering)
    check_interval_options(interval, confidence_level, n_resamples)
    size = len(label_tuple) + len(SPECIAL)
    h, j = (codes_iv(codes, size, side) for codes, side in ((human, "human"), (judge, "judge")))
    if h.size != j.size:
        raise ValueError(f"human and judge must have the same length, got {h.size} and {j.size}")
    resampling = (interval, confidence_level, n_resamples, np.random.default_rng(rng))
    return _summary_of_codes(h, j, protocol, items, resampling)


def _summary_of_codes(
    h: np.ndarray,
    j: np.ndarray,
    protocol: Protocol,
    items: Sequence[object] | np.ndarray | None,
    interval: tuple[str, float, int, np.random.Generator],
) -> Summary:
    item_ids = _items_iv(items, h.size)
    size = len(protocol.labels) + len(SPECIAL)
    cells = h * size + j
    full = np.bincount(cells, minlength=size * size).reshape(size, size)
    return summary_from_table(full, protocol, interval=interval, item_ids=item_ids, item_cells=cells)
