"""Protocol-aware verdict reporting: abstentions, coverage bounds, rubric aggregation (SPEC.md §7).

Verdicts are 1-d sequences of label strings, one per item; ``"CANNOT_ASSESS"`` (an
abstention, CA) and ``"INVALID"`` (an unparseable output) are the special values. Tables
have rows = human, columns = judge, categories ``(*labels, CANNOT_ASSESS, INVALID)``.
INVALID pairs are counted and reported under every handling rule, never scored and never
recoded. Every result carries the :class:`Protocol` it was computed under.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import ndtri
from scipy.stats import binom

from planner.agreement import kappa_from_table
from planner.intervals import ConfidenceInterval, percentile_interval
from planner.tables import fce_variance, kappa_terms, phi_terms

CANNOT_ASSESS = "CANNOT_ASSESS"
INVALID = "INVALID"
SPECIAL = (CANNOT_ASSESS, INVALID)

_HANDLING = ("exclude", "recode", "three_class")
_COSTS = ("nominal", "linear", "quadratic")
_LEVELS = ("micro", "macro", "item")
_RULES = ("all", "any")
_INTERVALS = ("delta", "bootstrap")
_STATISTICS = ("accuracy", "kappa", "f1_met", "phi")
_BOUND_METRICS = ("accuracy", "kappa", "f1", "phi")
_GRID_CELLS = 1_000_000  # candidate (human positives, judge positives) pairs held at once
_ONE_CATEGORY = "a side used a single scored category (kappa would be 0 whatever the other did)"


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class VerdictTable:
    """Counts of (human, judge) verdict pairs: rows human, columns judge (SPEC.md §7)."""

    categories: tuple[str, ...]
    counts: tuple[tuple[int, ...], ...]

    @property
    def n(self) -> int:
        """Number of pairs in the table."""
        return int(sum(map(sum, self.counts)))

    def array(self) -> np.ndarray:
        """The counts as an int64 array ``(len(categories), len(categories))``."""
        size = len(self.categories)
        return np.array(self.counts, dtype=np.int64).reshape(size, size)


def _table(categories: Sequence[str], counts: np.ndarray) -> VerdictTable:
    return VerdictTable(tuple(categories), tuple(tuple(int(v) for v in row) for row in counts))


def _labels_iv(labels: object) -> tuple[str, ...]:
    if isinstance(labels, str) or not isinstance(labels, Sequence):
        raise ValueError(f"labels must be a sequence of label strings, got {labels!r}")
    out = tuple(labels)
    if len(out) < 2 or not all(isinstance(v, str) for v in out):
        raise ValueError(f"labels must be at least 2 label strings, got {out!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"labels must be distinct, got {out!r}")
    special = [v for v in out if v in SPECIAL]
    if special:
        raise ValueError(f"labels must not include the special values {SPECIAL}, got {special}")
    return out


def _verdict_codes(verdicts: object, categories: tuple[str, ...], side: str) -> np.ndarray:
    """Index of each verdict in ``categories``; unknown strings are an error."""
    arr = np.asarray(verdicts)
    if arr.ndim != 1:
        raise ValueError(f"{side} verdicts must be a 1-d sequence of label strings")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind != "U":
        raise ValueError(f"{side} verdicts must be label strings, got dtype {arr.dtype}")
    values, inverse = np.unique(arr, return_inverse=True)
    lookup = {c: i for i, c in enumerate(categories)}
    unknown = [str(v) for v in values if v not in lookup]
    if unknown:
        raise ValueError(
            f"{side} verdicts contain {unknown[:5]}, not in labels {categories[:-2]} "
            f"or {SPECIAL}"
        )
    return np.array([lookup[v] for v in values], dtype=np.int64)[inverse.ravel()]


def _pair_codes(
    human: object, judge: object, categories: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray]:
    h = _verdict_codes(human, categories, "human")
    j = _verdict_codes(judge, categories, "judge")
    if h.size != j.size:
        raise ValueError(f"human and judge must have the same length, got {h.size} and {j.size}")
    return h, j


def verdict_table(
    human: Sequence[str], judge: Sequence[str], *, labels: Sequence[str]
) -> VerdictTable:
    """Full contingency table of the verdict pairs, CA and INVALID included (SPEC.md §7).

    ``human``, ``judge``: verdicts of shape ``(n_items,)``; ``labels``: the regular labels.
    The table is ``(L+2) x (L+2)`` over ``(*labels, CANNOT_ASSESS, INVALID)``.

    >>> t = verdict_table(["MET", "MET", "CANNOT_ASSESS"], ["MET", "NOT_MET", "INVALID"],
    ...                   labels=["MET", "NOT_MET"])
    >>> t.categories
    ('MET', 'NOT_MET', 'CANNOT_ASSESS', 'INVALID')
    >>> t.counts[0], t.counts[2], t.n
    ((1, 1, 0, 0), (0, 0, 0, 1), 3)
    """
    categories = _labels_iv(labels) + SPECIAL
    h, j = _pair_codes(human, judge, categories)
    size = len(categories)
    return _table(categories, np.bincount(h * size + j, minlength=size * size).reshape(size, size))


# --------------------------------------------------------------------------- protocol


@dataclass(frozen=True)
class Protocol:
    """The choices a reported number was computed under (SPEC.md §7, "Report").

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
    """Disagreement costs: nominal ``1[a!=b]``, linear, quadratic, or custom (SPEC.md §2, §7)."""
    if isinstance(costs, str):
        if costs not in _COSTS:
            raise ValueError(f"costs must be one of {_COSTS} or a square matrix, got {costs!r}")
        gap = np.abs(np.subtract.outer(np.arange(size), np.arange(size))) / (size - 1)
        power = {"nominal": 0, "linear": 1, "quadratic": 2}[costs]
        return costs, (gap > 0).astype(float) if power == 0 else gap**power
    matrix = np.asarray(costs, dtype=float)
    if matrix.shape != (size, size):
        raise ValueError(
            f"a custom cost matrix must have shape ({size}, {size}), got {matrix.shape}"
        )
    if not np.all(np.isfinite(matrix)) or np.any(matrix < 0) or np.any(np.diag(matrix) != 0):
        raise ValueError("a custom cost matrix must be finite, non-negative, with a zero diagonal")
    if not np.any(matrix > 0):
        raise ValueError("a custom cost matrix must have at least one positive cost")
    return "custom", matrix


def _protocol(
    labels: tuple[str, ...],
    positive: object,
    handling: object,
    recode_to: object,
    costs: object,
    ordering: object,
) -> Protocol:
    if handling not in _HANDLING:
        raise ValueError(f"handling must be one of {_HANDLING}, got {handling!r}")
    if positive not in labels:
        raise ValueError(f"positive must be one of labels {labels}, got {positive!r}")
    if handling == "recode":
        negatives = [v for v in labels if v != positive]
        if recode_to is None and len(negatives) > 1:
            raise ValueError(
                f"recode_to is required when there are several negative labels {negatives}"
            )
        recode_to = negatives[0] if recode_to is None else recode_to
        if recode_to not in negatives:
            raise ValueError(
                f"recode_to must be a negative label, one of {negatives}, got {recode_to!r}"
            )
    elif recode_to is not None:
        raise ValueError(f"recode_to applies only to handling='recode', got handling={handling!r}")
    scored = labels + (CANNOT_ASSESS,) if handling == "three_class" else labels
    if ordering is None:
        ordering = scored
    elif isinstance(ordering, str) or sorted(ordering) != sorted(scored):
        raise ValueError(f"ordering must list each scored category {scored} once, got {ordering!r}")
    kind, matrix = _cost_matrix(costs, len(scored))
    base = "binary" if len(labels) == 2 and handling != "three_class" else {
        "nominal": "nominal", "linear": "ordinal", "quadratic": "ordinal", "custom": "custom-cost"
    }[kind]
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
    """0/1 matrix ``(n_scored, L+2)`` sending full-table categories to scored ones (SPEC.md §7)."""
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
    return np.einsum("ea,...ab,fb->...ef", m, tables, m)


# --------------------------------------------------------------------------- statistics


def _two_by_two(t: np.ndarray, h: np.ndarray, j: np.ndarray, n: np.ndarray) -> np.ndarray:
    """2x2 tables ``(..., 2, 2)`` (index 1 = positive, rows human) from TP, both marginals, n."""
    return np.stack([n - h - j + t, j - t, h - t, t], axis=-1).reshape(*np.shape(t), 2, 2)


def _positive_vs_rest(tables: np.ndarray, pos: int) -> np.ndarray:
    """Tables ``(..., k, k)`` collapsed to positive-vs-rest 2x2 tables (index 1 = positive)."""
    t = tables[..., pos, pos]
    h = tables[..., pos, :].sum(axis=-1)
    j = tables[..., :, pos].sum(axis=-1)
    return _two_by_two(t, h, j, tables.sum(axis=(-2, -1)))


def _accuracy(tables: np.ndarray) -> np.ndarray:
    """Share of pairs on the diagonal of tables ``(..., k, k)``; NaN for an empty table."""
    n = tables.sum(axis=(-2, -1)).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, np.trace(tables, axis1=-2, axis2=-1) / n, np.nan)


def _binary_metric(tables: np.ndarray, metric: str) -> np.ndarray:
    """``metric`` of 2x2 tables ``(B, 2, 2)``, index 1 = positive; NaN where undefined.

    F1 of the positive class ``2 TP / (2 TP + FP + FN)`` (SPEC.md §7); phi and kappa are
    SPEC.md §2 via ``planner.tables``.
    """
    tables = tables.astype(float)
    if metric == "accuracy":
        return _accuracy(tables)
    if metric == "kappa":
        return kappa_terms(tables, np.eye(2))[0]
    if metric == "phi":
        return phi_terms(tables)[0]
    either = tables[:, 1, :].sum(axis=1) + tables[:, :, 1].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(either > 0, 2.0 * tables[:, 1, 1] / either, np.nan)


def _agreement_matrix(protocol: Protocol) -> np.ndarray:
    cost = np.array(protocol.cost_matrix)
    return 1.0 - cost / cost.max()


def _kappa_stack(tables: np.ndarray, protocol: Protocol) -> np.ndarray:
    """Kappa of scored tables ``(B, k, k)`` under the protocol's costs (SPEC.md §2, Cohen 1968)."""
    return kappa_terms(tables.astype(float), _agreement_matrix(protocol))[0]


def _statistic_stack(tables: np.ndarray, protocol: Protocol, statistic: str) -> np.ndarray:
    """One statistic of full tables ``(B, L+2, L+2)`` under the handling rule (SPEC.md §7)."""
    scored = _scored_tables(tables, protocol)
    if statistic == "accuracy":
        return _accuracy(scored)
    if statistic == "kappa":
        return _kappa_stack(scored, protocol)
    binary = _positive_vs_rest(scored, protocol.ordering.index(protocol.positive))
    return _binary_metric(binary, "f1" if statistic == "f1_met" else "phi")


def _kappa_point(scored: np.ndarray, protocol: Protocol) -> tuple[float, float, str]:
    """Kappa, its FCE standard error and the reason when undefined (SPEC.md §2, via agreement)."""
    if protocol.costs != "custom":
        weights = None if protocol.costs == "nominal" else protocol.costs
        r = kappa_from_table(scored, weights=weights)
        return r.statistic, r.standard_error, r.reason
    agree = _agreement_matrix(protocol)
    kappa, p_o, p_e = (float(v[0]) for v in kappa_terms(scored[None].astype(float), agree))
    if np.isnan(kappa):
        return np.nan, np.nan, _ONE_CATEGORY
    n = int(scored.sum())
    return kappa, float(np.sqrt(fce_variance(scored / n, agree, p_o, p_e, n))), ""


def _nan_if_none(value: float | None) -> float:
    return np.nan if value is None else value


def _none(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def _interval_or_none(interval: ConfidenceInterval) -> ConfidenceInterval | None:
    return None if np.isnan(interval.low) and np.isnan(interval.high) else interval


# --------------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Summary:
    """Agreement of a judge with a human under a declared protocol (SPEC.md §7).

    Rates are shares of all ``n_items`` pairs; ``coverage`` is the share where both sides
    gave a regular label. Statistics are computed on ``scored_table`` (``n_eff`` pairs),
    ``None`` where undefined with the cause in ``reasons``; ``f1_met``, ``phi`` and the
    positive rates are positive-vs-rest. ``accuracy_bounds`` (Manski)
    and the sharp ``*_bounds`` are for the full set of pairs and exist under ``exclude``
    (sharp ones for binary labels). ``item_ids``/``item_cells`` (flat index into
    ``table``) keep the pairs for item-level aggregation and cluster resampling.
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
    kappa_bounds: tuple[float, float] | None
    f1_met_bounds: tuple[float, float] | None
    phi_bounds: tuple[float, float] | None
    reasons: tuple[tuple[str, str], ...]
    item_ids: tuple[str, ...] | None
    item_cells: tuple[int, ...]


def _interval_options_iv(interval: object, confidence_level: object, n_resamples: object) -> None:
    if interval not in _INTERVALS:
        raise ValueError(f"interval must be one of {_INTERVALS}, got {interval!r}")
    if not isinstance(confidence_level, float) or not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be a float in (0, 1), got {confidence_level!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")


def _items_iv(items: object, n: int) -> tuple[str, ...] | None:
    if items is None:
        return None
    ids = tuple(str(v) for v in items)
    if len(ids) != n:
        raise ValueError(f"items must have one id per verdict pair ({n}), got {len(ids)}")
    if len(set(ids)) != n:
        raise ValueError("items must be distinct: one verdict pair per item and criterion")
    return ids


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
    """Delta-method (FCE SE) or percentile-bootstrap interval for kappa (SPEC.md §2, Intervals).

    The bootstrap resamples all pairs of the full table, so ``n_eff`` varies with the draw.
    """
    if method == "delta":
        half = float(ndtri(0.5 + level / 2.0)) * se
        return ConfidenceInterval(kappa - half, kappa + half)
    n, size = int(full.sum()), full.shape[0]
    draws = rng.multinomial(n, full.ravel() / n, size=n_resamples).reshape(-1, size, size)
    return _interval_or_none(percentile_interval(_statistic_stack(draws, protocol, "kappa"), level))


def _summary_from_table(
    full: np.ndarray,
    protocol: Protocol,
    *,
    interval: tuple[str, float, int, np.random.Generator] | None,
    item_ids: tuple[str, ...] | None,
    item_cells: tuple[int, ...],
) -> Summary:
    """Every reported quantity of one full verdict table under ``protocol`` (SPEC.md §7)."""
    n_labels = len(protocol.labels)
    scored = _scored_tables(full, protocol).round().astype(np.int64)
    n, n_eff = int(full.sum()), int(scored.sum())
    binary = _positive_vs_rest(scored, protocol.ordering.index(protocol.positive))
    h, j = binary[1, :].sum(), binary[:, 1].sum()
    reasons: list[tuple[str, str]] = []

    def rate(count: float, total: int) -> float | None:
        return float(count) / total if total else None

    if n_eff == 0:
        reasons.append(("all", "no pair is scored under this handling rule"))
    kappa, kappa_se, reason = _kappa_point(scored, protocol) if n_eff else (np.nan, np.nan, "")
    if reason:
        reasons.append(("kappa", reason))
    f1 = float(_binary_metric(binary[None], "f1")[0])
    if n_eff and np.isnan(f1):
        reasons.append(("f1_met", f"neither side uses the positive label {protocol.positive!r}"))
    phi = float(_binary_metric(binary[None], "phi")[0])
    if n_eff and np.isnan(phi):
        reasons.append(("phi", f"a side has a constant {protocol.positive!r}-vs-rest verdict"))

    kappa_interval = None
    if interval is not None and np.isfinite(kappa):
        kappa_interval = _kappa_interval(full, protocol, kappa, kappa_se, *interval)

    covered = full[:n_labels, :n_labels]
    gamma = rate(covered.sum(), n)
    covered_accuracy = _none(float(_accuracy(covered)))
    exclusion = protocol.handling == "exclude" and n > 0
    table = _table(protocol.labels + SPECIAL, full)
    sharp = ("kappa", "f1", "phi")
    if exclusion and n_labels == 2:
        bounds = _allocation_bounds(_binary_table_iv(table, protocol.positive), sharp)
    else:
        bounds = dict.fromkeys(sharp)
    mean_cost = float(np.sum(scored * np.array(protocol.cost_matrix)) / n_eff) if n_eff else None
    return Summary(
        protocol=protocol,
        table=table,
        scored_table=_table(protocol.ordering, scored),
        n_items=n,
        n_eff=n_eff,
        accuracy=_none(float(_accuracy(scored))),
        kappa=_none(kappa),
        kappa_se=_none(kappa_se),
        kappa_interval=kappa_interval,
        kappa_interval_method=None if kappa_interval is None else interval[0],
        f1_met=_none(f1),
        phi=_none(phi),
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
        accuracy_bounds=manski_bounds(gamma, covered_accuracy) if exclusion else None,
        kappa_bounds=bounds["kappa"],
        f1_met_bounds=bounds["f1"],
        phi_bounds=bounds["phi"],
        reasons=tuple(reasons),
        item_ids=item_ids,
        item_cells=item_cells,
    )


def summarize(
    human: Sequence[str],
    judge: Sequence[str],
    *,
    labels: Sequence[str],
    positive: str,
    handling: str = "exclude",
    recode_to: str | None = None,
    costs: str | Sequence[Sequence[float]] = "nominal",
    ordering: Sequence[str] | None = None,
    items: Sequence[object] | None = None,
    interval: str = "delta",
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    rng: int | np.random.Generator | None = None,
) -> Summary:
    """Judge-vs-human agreement under a declared handling rule for CA (SPEC.md §7).

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
    label_tuple = _labels_iv(labels)
    protocol = _protocol(label_tuple, positive, handling, recode_to, costs, ordering)
    _interval_options_iv(interval, confidence_level, n_resamples)
    categories = label_tuple + SPECIAL
    h, j = _pair_codes(human, judge, categories)
    item_ids = _items_iv(items, h.size)
    size = len(categories)
    cells = h * size + j
    full = np.bincount(cells, minlength=size * size).reshape(size, size)
    return _summary_from_table(
        full,
        protocol,
        interval=(interval, confidence_level, n_resamples, np.random.default_rng(rng)),
        item_ids=item_ids,
        item_cells=tuple(int(c) for c in cells),
    )


# --------------------------------------------------------------------------- bounds


def manski_bounds(coverage: float, covered_accuracy: float | None) -> tuple[float, float]:
    """Worst-case full-set accuracy under exclusion (SPEC.md §7, "Coverage", Manski bound).

    ``[gamma A_cov, gamma A_cov + 1 - gamma]`` with ``gamma`` the joint coverage; with
    ``gamma = 0`` nothing is known and ``covered_accuracy`` may be ``None``.

    >>> [round(v, 6) for v in manski_bounds(0.8, 0.9)]
    [0.72, 0.92]
    >>> manski_bounds(0.0, None)
    (0.0, 1.0)
    """
    if not isinstance(coverage, (int, float)) or not 0.0 <= coverage <= 1.0:
        raise ValueError(f"coverage must be a number in [0, 1], got {coverage!r}")
    if coverage == 0:
        return 0.0, 1.0
    if not isinstance(covered_accuracy, (int, float)) or not 0.0 <= covered_accuracy <= 1.0:
        raise ValueError(f"covered_accuracy must be a number in [0, 1], got {covered_accuracy!r}")
    low = coverage * covered_accuracy
    return float(low), float(low + 1.0 - coverage)


def _binary_table_iv(table: object, positive: object) -> np.ndarray:
    """A binary verdict table as int counts ``(4, 4)`` ordered positive, negative, CA, INVALID."""
    if isinstance(table, VerdictTable):
        labels = table.categories[:-2]
        if len(labels) != 2 or table.categories[-2:] != SPECIAL:
            raise ValueError(
                f"allocation_bounds needs a binary verdict table (2 labels + {SPECIAL}), "
                f"got categories {table.categories}"
            )
        positive = labels[0] if positive is None else positive
        if positive not in labels:
            raise ValueError(f"positive must be one of {labels}, got {positive!r}")
        order = [labels.index(positive), 1 - labels.index(positive), 2, 3]
        return table.array()[np.ix_(order, order)]
    if positive is not None:
        raise ValueError("positive applies to a VerdictTable; an array is ordered positive first")
    arr = np.asarray(table, dtype=float)
    if arr.shape not in ((3, 3), (4, 4)):
        raise ValueError(
            "table must be a VerdictTable or a (3, 3) / (4, 4) count array ordered "
            f"positive, negative, CANNOT_ASSESS[, INVALID]; got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr != np.round(arr)):
        raise ValueError("table entries must be non-negative integer counts")
    out = np.zeros((4, 4), dtype=np.int64)
    out[: arr.shape[0], : arr.shape[1]] = arr.astype(np.int64)
    return out


def _tp_lines(h: np.ndarray, known: tuple[int, ...], groups: tuple[int, ...]) -> list[tuple]:
    """Bounds on TP as lines in the judge-positive count ``j``, for human-positive counts ``h``.

    Each line is ``(slope, intercept, divisor, upper)``: TP <= floor((slope j + intercept) /
    divisor) if ``upper`` else TP >= ceil(...). The completions form a Minkowski sum of
    simplices (one per unknown group), an M-convex set: exactly the integer cell vectors
    ``x >= 0`` with ``x(S) >= (pairs of groups whose cells lie inside S)`` for every set
    ``S`` of cells; with ``h`` and ``j`` fixed every cell is affine in TP, and these ten
    inequalities are all that remain (the others only bound ``h`` and ``j``).
    """
    a, b, c, d = known
    up, un, vp, vn, w = groups
    n = sum(known) + sum(groups)
    return [
        (0, h - b, 1, True),  # FN keeps its known pairs
        (0, a + up + vp + w, 1, True),  # TP gains at most the unknowns that can reach it
        (1, -c, 1, True),  # FP keeps its known pairs
        (1, un + vn + w + h + d - n, 1, True),  # TN gains at most the unknowns that reach it
        (1, h - b - c, 2, True),  # FN + FP keep their known pairs
        (0, a, 1, False),  # TP keeps its known pairs
        (0, h - b - up - vn - w, 1, False),  # FN gains at most the unknowns that reach it
        (1, h + d - n, 1, False),  # TN keeps its known pairs
        (1, -c - un - vp - w, 1, False),  # FP gains at most the unknowns that reach it
        (1, h + a + d - n, 2, False),  # TP + TN keep their known pairs
    ]


def _tp_limits(lines: list[tuple], j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest and largest feasible TP at judge-positive counts ``j`` (SPEC.md §7)."""
    low = np.full(j.shape, np.iinfo(np.int64).min // 4)
    high = np.full(j.shape, np.iinfo(np.int64).max // 4)
    for slope, intercept, divisor, upper in lines:
        value = slope * j + intercept
        if upper:
            high = np.minimum(high, value // divisor)
        else:
            low = np.maximum(low, -((-value) // divisor))
    return low, high


def _candidate_js(lines: list[tuple], h: np.ndarray, n: int, j_lo: int, j_hi: int) -> np.ndarray:
    """Judge-positive counts ``(len(h), K)`` where some metric can reach its extreme.

    For fixed ``h`` the extreme TP is piecewise linear in ``j`` (pieces end where two lines
    cross) and along each piece (and parity class, for the halved lines) accuracy, kappa
    and F1 are linear-fractional, hence monotone, and phi ``(alpha j + beta) /
    sqrt(j (n - j))`` has one stationary point ``j* = beta n / (alpha n + 2 beta)``. So
    the extremes lie within two of a crossing, a stationary point or an end of the range.
    """
    real = [(slope / divisor, intercept / divisor) for slope, intercept, divisor, _ in lines]
    points = [
        (q2 - q1) / (s1 - s2)
        for i, (s1, q1) in enumerate(real)
        for s2, q2 in real[i + 1 :]
        if s1 != s2
    ]
    halves = (-0.5, 0.0, 0.5)  # a halved line floors/ceils to one of these shifts per parity
    shifted = [(s, q + shift) for s, q in real for shift in (halves if s == 0.5 else (0.0,))]
    for s, q in shifted:
        alpha, beta = n * s - h, n * q
        with np.errstate(invalid="ignore", divide="ignore"):
            points.append(beta * n / (alpha * n + 2.0 * beta))
    base = np.floor(np.stack(np.broadcast_arrays(*points), axis=1))
    base = np.where(np.isfinite(base), np.clip(base, j_lo - 3, j_hi + 3), j_lo)
    near = (base[:, :, None] + np.arange(-2, 3)).reshape(h.size, -1)
    ends = np.broadcast_to(np.array([j_lo, j_lo + 1, j_hi - 1, j_hi, 1, n - 1]), (h.size, 6))
    return np.clip(np.concatenate([near, ends], axis=1), j_lo, j_hi).astype(np.int64)


def allocation_bounds(
    table: VerdictTable | Sequence[Sequence[int]],
    *,
    metric: str,
    positive: str | None = None,
) -> tuple[float, float] | None:
    """Sharp bounds of a binary metric over every allocation of the abstained cases (SPEC.md §7).

    Each pair with a CA or INVALID side is completed to a regular label on that side in
    every way compatible with the observed counts; the bounds are the min and max of
    ``metric`` (``"accuracy"``, ``"kappa"``, ``"f1"`` for the positive class, ``"phi"``)
    over the completed 2x2 tables where it is defined, ``None`` if no completion defines
    it. ``table``: a binary :class:`VerdictTable` (``positive`` defaults to its first
    label) or a count array ordered positive, negative, CA[, INVALID]. With both
    marginals fixed every metric increases with TP, so only the extreme TP of each
    feasible pair of marginals matters; the pairs that can be extreme are enumerated,
    vectorised over the human marginal (see ``_tp_lines`` and ``_candidate_js``).

    >>> allocation_bounds([[3, 1, 1], [0, 4, 0], [0, 1, 0]], metric="accuracy")
    (0.7, 0.9)
    >>> allocation_bounds([[0, 0, 2], [0, 0, 0], [0, 0, 0]], metric="phi") is None
    True
    """
    if metric not in _BOUND_METRICS:
        raise ValueError(f"metric must be one of {_BOUND_METRICS}, got {metric!r}")
    return _allocation_bounds(_binary_table_iv(table, positive), (metric,))[metric]


def _allocation_bounds(
    counts: np.ndarray, metrics: tuple[str, ...]
) -> dict[str, tuple[float, float] | None]:
    """:func:`allocation_bounds` of several metrics of one ``(4, 4)`` table, positive first."""
    n = int(counts.sum())
    known = tuple(int(v) for v in counts[:2, :2].ravel())  # TP, FN, FP, TN
    a, b, c, _ = known
    groups = (
        int(counts[0, 2:].sum()),  # human positive, judge unknown: TP or FN
        int(counts[1, 2:].sum()),  # human negative, judge unknown: FP or TN
        int(counts[2:, 0].sum()),  # human unknown, judge positive: TP or FP
        int(counts[2:, 1].sum()),  # human unknown, judge negative: FN or TN
        int(counts[2:, 2:].sum()),  # both unknown: any cell
    )
    up, un, vp, vn, w = groups
    h_all = np.arange(a + b + up, a + b + up + vp + vn + w + 1) if n else np.zeros(0, np.int64)
    j_lo, j_hi = a + c + vp, a + c + vp + up + un + w
    low = dict.fromkeys(metrics, np.inf)
    high = dict.fromkeys(metrics, -np.inf)
    rows = max(1, _GRID_CELLS // 256)
    for start in range(0, h_all.size, rows):
        h = h_all[start : start + rows]
        j = np.sort(_candidate_js(_tp_lines(h, known, groups), h, n, j_lo, j_hi), axis=1)
        distinct = np.ones(j.shape, dtype=bool)
        distinct[:, 1:] = j[:, 1:] != j[:, :-1]
        h, j = np.broadcast_to(h[:, None], j.shape)[distinct], j[distinct]
        t_low, t_high = _tp_limits(_tp_lines(h, known, groups), j)
        feasible = t_low <= t_high
        h, j = h[feasible], j[feasible]
        low_tables = _two_by_two(t_low[feasible], h, j, n)
        high_tables = _two_by_two(t_high[feasible], h, j, n)
        for metric in metrics:
            lows = _binary_metric(low_tables, metric)
            if np.any(np.isfinite(lows)):
                highs = _binary_metric(high_tables, metric)
                low[metric] = min(low[metric], float(np.nanmin(lows)))
                high[metric] = max(high[metric], float(np.nanmax(highs)))
    return {m: (low[m], high[m]) if np.isfinite(low[m]) else None for m in metrics}


# --------------------------------------------------------------------------- McNemar


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (SPEC.md §2; McNemar 1947).

    ``b``: pairs only the judge gets right, ``c``: pairs only the baseline gets right.
    Under H0 ``b ~ Binomial(b + c, 1/2)``; ``p = min(1, 2 P[X <= min(b, c)])``.

    >>> round(mcnemar_exact(1, 9), 6)
    0.021484
    >>> mcnemar_exact(0, 0)
    1.0
    """
    for name, value in (("b", b), ("c", c)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer count, got {value!r}")
    return float(min(1.0, 2.0 * binom.cdf(min(b, c), b + c, 0.5)))


# --------------------------------------------------------------------------- aggregation


@dataclass(frozen=True)
class Aggregate:
    """Agreement over rubric criteria at one aggregation level (SPEC.md §7, "Aggregation").

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


def _results_iv(per_criterion_results: object, level: object, rule: object) -> tuple[str, ...]:
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS}, got {level!r}")
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
    if level == "item" and len(protocol.labels) != 2:
        raise ValueError(f"level 'item' combines binary verdicts; labels are {protocol.labels}")
    if level != "macro":
        missing = [c for c, s in per_criterion_results.items() if s.item_ids is None]
        if missing:
            raise ValueError(
                f"level {level!r} resamples items: summarize every criterion with items= "
                f"(missing for {missing[:5]})"
            )
    return tuple(str(c) for c in per_criterion_results)


def _level_protocol(protocol: Protocol, level: str) -> Protocol:
    unit = {"micro": "items (criteria clustered)", "macro": "criteria", "item": "items"}[level]
    return replace(protocol, aggregation=level, resampling_unit=unit)


def _item_cell_counts(results: Sequence[Summary], level: str, rule: str) -> np.ndarray:
    """Per-item counts over full-table cells ``(n_items, (L+2)^2)``: micro or item level."""
    protocol = results[0].protocol
    size = len(protocol.labels) + 2
    ids = np.concatenate([np.asarray(s.item_ids, dtype=str) for s in results])
    cells = np.concatenate([np.asarray(s.item_cells, dtype=np.int64) for s in results])
    items, inverse = np.unique(ids, return_inverse=True)
    if level == "item":
        cells = _combined_cells(results, items, inverse, cells, rule)
        inverse = np.arange(items.size)
    counts = np.bincount(inverse * size * size + cells, minlength=items.size * size * size)
    return counts.reshape(items.size, size * size)


def _combined_cells(
    results: Sequence[Summary], items: np.ndarray, inverse: np.ndarray, cells: np.ndarray, rule: str
) -> np.ndarray:
    """One full-table cell per item: criteria combined by Kleene ``all`` / ``any`` (SPEC.md §7).

    ``all``: negative if any criterion is negative, else INVALID if any is INVALID, else CA
    if any is CA, else positive; ``any`` swaps positive and negative.
    """
    protocol = results[0].protocol
    counts = np.bincount(inverse, minlength=items.size)
    if np.any(counts != len(results)):
        raise ValueError("level 'item' needs every criterion on the same items, each once")
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
    return combined[0] * size + combined[1]


def cluster_bootstrap(
    per_criterion_results: Mapping[str, Summary],
    *,
    level: str,
    statistic: str = "kappa",
    rule: str = "all",
    n_resamples: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> np.ndarray:
    """Bootstrap replicates ``(n_resamples,)`` of an aggregated statistic (SPEC.md §2, §7).

    The resampling unit matches the level: whole items with all their criteria (micro,
    item) or whole criteria (macro, replicate = mean over the defined criteria drawn).
    Items sharing a pattern of cells are drawn together as multinomial multiplicities.
    Undefined replicates are NaN.

    >>> h = ["MET", "MET", "NOT_MET", "NOT_MET"]
    >>> half = summarize(h, ["MET", "NOT_MET", "NOT_MET", "NOT_MET"], labels=["MET", "NOT_MET"],
    ...                  positive="MET")
    >>> full = summarize(h, h, labels=["MET", "NOT_MET"], positive="MET")
    >>> reps = cluster_bootstrap({"a": half, "b": full}, level="macro", n_resamples=200, rng=0)
    >>> sorted(set(reps.round(4).tolist()))
    [0.5, 0.75, 1.0]
    """
    _results_iv(per_criterion_results, level, rule)
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {_STATISTICS}, got {statistic!r}")
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    generator = np.random.default_rng(rng)
    results = list(per_criterion_results.values())
    if level == "macro":
        values = np.array([_nan_if_none(getattr(s, statistic)) for s in results])
        defined = np.isfinite(values)
        share = np.full(len(results), 1.0 / len(results))
        draws = generator.multinomial(len(results), share, size=n_resamples)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (draws @ np.where(defined, values, 0.0)) / (draws @ defined)
    rows = _item_cell_counts(results, level, rule)
    patterns, multiplicity = np.unique(rows, axis=0, return_counts=True)
    size = len(results[0].protocol.labels) + 2
    share = multiplicity / multiplicity.sum()
    draws = generator.multinomial(multiplicity.sum(), share, size=n_resamples)
    tables = (draws @ patterns).reshape(n_resamples, size, size)
    return _statistic_stack(tables, results[0].protocol, statistic)


def aggregate(
    per_criterion_results: Mapping[str, Summary],
    *,
    level: str = "micro",
    rule: str = "all",
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> Aggregate:
    """Agreement over rubric criteria at ``level`` (SPEC.md §7, "Aggregation").

    ``per_criterion_results``: criterion -> :func:`summarize` result, all under one
    protocol. ``"micro"`` pools every decision into one table; ``"macro"`` averages the
    per-criterion statistics over the criteria where each is defined (undefined criteria
    are excluded and counted in ``included``, never entered as 0); ``"item"`` first
    combines each item's criteria by ``rule`` (``"all"``: the item is positive when every
    criterion is; ``"any"``: when one is), then scores the item verdicts. The kappa
    interval comes from :func:`cluster_bootstrap` with the matching resampling unit.
    Never compare numbers across levels.

    >>> h = ["MET", "MET", "NOT_MET", "NOT_MET"]
    >>> a = summarize(h, ["MET", "NOT_MET", "NOT_MET", "NOT_MET"], labels=["MET", "NOT_MET"],
    ...               positive="MET", items=[1, 2, 3, 4])
    >>> b = summarize(h, ["MET", "MET", "MET", "MET"], labels=["MET", "NOT_MET"],
    ...               positive="MET", items=[1, 2, 3, 4])
    >>> m = aggregate({"clarity": a, "accuracy": b}, level="macro", rng=0)
    >>> m.accuracy, m.kappa, m.included[1]
    (0.625, 0.5, ('kappa', 1, 2))
    """
    criteria = _results_iv(per_criterion_results, level, rule)
    _interval_options_iv("bootstrap", confidence_level, n_resamples)
    results = list(per_criterion_results.values())
    protocol = _level_protocol(results[0].protocol, level)
    total = len(results)
    if level == "macro":
        pooled = None
        values, included, reasons = {}, [], []
        for name in _STATISTICS:
            defined = [getattr(s, name) for s in results if getattr(s, name) is not None]
            values[name] = float(np.mean(defined)) if defined else None
            included.append((name, len(defined), total))
            if not defined:
                reasons.append((name, f"{name} is undefined on every criterion"))
    else:
        size = len(protocol.labels) + 2
        if level == "micro":
            table = sum(s.table.array() for s in results)
        else:
            table = _item_cell_counts(results, level, rule).sum(axis=0).reshape(size, size)
        pooled = _summary_from_table(table, protocol, interval=None, item_ids=None, item_cells=())
        values = {name: getattr(pooled, name) for name in _STATISTICS}
        included = [(name, total, total) for name in _STATISTICS]
        reasons = list(pooled.reasons)
    kappa_interval = None
    if level == "macro" and included[_STATISTICS.index("kappa")][1] == 1:
        reasons.append(("kappa_interval", "resampling criteria needs >= 2 criteria with kappa"))
    elif values["kappa"] is not None:
        replicates = cluster_bootstrap(
            per_criterion_results, level=level, rule=rule, n_resamples=n_resamples, rng=rng
        )
        kappa_interval = _interval_or_none(percentile_interval(replicates, confidence_level))
    return Aggregate(
        protocol=protocol,
        rule=rule if level == "item" else None,
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
