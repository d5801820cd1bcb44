"""Which design to recommend from the primary's labels and the item features (docs/method.md §5, "Choosing")."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.codes import MISSING, check_codes
from planner.designs import joint_strata

ENTROPY_THRESHOLD_BITS = 0.5
"""Below this stratum entropy the primary's label is a weak stratum signal (docs/method.md §5)."""

DOMINANT_SHARE = 0.8
"""Share of items that at most ``DOMINANT_CLUSTERS`` clusters may hold before a warning."""

DOMINANT_CLUSTERS = 3


@dataclass(frozen=True)
class DesignChoice:
    """The recommended design with the stratum entropy and the reason (docs/method.md §5, "Choosing")."""

    design: str
    entropy: float
    reason: str
    warnings: tuple[str, ...] = field(default_factory=tuple)


def stratum_entropy(codes: object, *, n_labels: int) -> float:
    """Entropy ``H = -sum pi_l log2 pi_l`` of the primary's labels, in bits (docs/method.md §5, "Choosing").

    Missing codes (``-1``) are ignored; NaN when no label is observed.

    >>> stratum_entropy([0, 0, 1, 1], n_labels=2)
    1.0
    >>> round(stratum_entropy([0] * 9 + [1], n_labels=2), 4)
    0.469
    """
    arr = check_codes(codes, n_labels, ndim=1)
    labels = arr[arr != MISSING]
    if labels.size == 0:
        return float("nan")
    share = np.bincount(labels, minlength=n_labels) / labels.size
    share = share[share > 0]
    return float(max(0.0, -(share * np.log2(share)).sum()))


def _cluster_warnings(features: object, n_items: int) -> list[str]:
    arr = np.asarray(features)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2 or arr.shape[0] != n_items or arr.shape[1] == 0:
        raise ValueError(
            f"features must have shape ({n_items},) or ({n_items}, n_features), got {np.asarray(features).shape}"
        )
    groups = joint_strata(*arr.T)
    sizes = np.sort(np.bincount(groups))[::-1]
    top = sizes[:DOMINANT_CLUSTERS].sum() / n_items
    if top < DOMINANT_SHARE:
        return []
    few = min(DOMINANT_CLUSTERS, sizes.size)
    return [
        f"clustered strata: {few} feature cluster(s) hold {top:.0%} of the items; items in a "
        "cluster share difficulty, so stratify on the clusters (joint_strata) or raise the overlap"
    ]


def choose_design(primary_codes: object, *, n_labels: int, features: object = None) -> DesignChoice:
    """Recommend Strat or Seq-Coverage from the primary's stratum entropy (docs/method.md §5, "Choosing").

    ``features`` (optional, shape ``(n_items,)`` or ``(n_items, n_features)``) are per-item
    codes such as cluster ids; when a few clusters hold most items a warning says so.

    >>> choose_design([0, 1] * 50, n_labels=2).design
    'strat'
    >>> choose_design([0] * 95 + [1] * 5, n_labels=2).design
    'seq-coverage'
    """
    arr = check_codes(primary_codes, n_labels, ndim=1)
    if not np.any(arr != MISSING):
        raise ValueError("primary_codes must hold at least one observed label")
    entropy = stratum_entropy(arr, n_labels=n_labels)
    warnings = tuple(_cluster_warnings(features, arr.size)) if features is not None else ()
    if entropy < ENTROPY_THRESHOLD_BITS:
        return DesignChoice(
            "seq-coverage",
            entropy,
            f"stratum entropy {entropy:.3f} bits < {ENTROPY_THRESHOLD_BITS} bits: the primary's "
            "label is a weak stratum signal, so configure each rater from the labels in hand "
            "and spread coverage (consider more overlap too)",
            warnings,
        )
    return DesignChoice(
        "strat",
        entropy,
        f"stratum entropy {entropy:.3f} bits >= {ENTROPY_THRESHOLD_BITS} bits: stratify one "
        "shared panel on the primary's label",
        warnings,
    )
