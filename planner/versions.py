"""Judge versions: a paired comparison on shared items, the anchor panel's size, online drift.

A judge's new version (a new prompt or model) is compared with the old one on the items both
labelled, against one reference (the primary or the human majority); a frozen anchor panel
is sized to detect a drop in agreement (Connor 1987); a version labelling new items over time
is watched by a CUSUM e-detector on its agreement indicators (Shin, Ramdas & Rinaldo 2022).
Codes are int arrays of shape ``(n_items,)`` with ``-1`` where a label is missing
(docs/method.md §12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from planner.bounds import mcnemar_exact
from planner.intervals import ConfidenceInterval, is_approximate, percentile_interval


@dataclass(frozen=True)
class VersionComparison:
    """Two versions of one judge on the items where both and the reference have a label.

    ``lost``: items the old version gets right and the new one wrong (``b``); ``gained``:
    the reverse (``c``). ``change = (gained - lost) / n_items`` is the new version's
    agreement minus the old one's; ``flip_rate`` the share of items where the two versions
    give different labels. ``chi_square = (b - c)^2 / (b + c)`` and ``mcnemar_p`` (exact)
    are NaN / 1 when no pair is discordant. Undefined (NaN, ``reason``) with no shared item.
    """

    n_items: int
    old_agreement: float
    new_agreement: float
    version_agreement: float
    flip_rate: float
    lost: int
    gained: int
    change: float
    change_interval: ConfidenceInterval
    chi_square: float
    mcnemar_p: float
    defined: bool
    reason: str | None


def codes_iv(name: str, codes: object) -> np.ndarray:
    array = np.asarray(codes)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be a one-dimensional int array of codes (-1 missing)")
    if np.any(array < -1):
        raise ValueError(f"{name} holds codes below -1 (-1 is the missing code)")
    return array.astype(np.int64)


def compare_versions(
    reference: object,
    old: object,
    new: object,
    *,
    confidence_level: float = 0.95,
    n_resamples: int = 2000,
    rng: int | np.random.Generator | None = None,
) -> VersionComparison:
    """Paired comparison of two judge versions against ``reference`` (docs/method.md §12).

    On the ``n`` items where all three are labelled, with ``b`` = old right & new wrong and
    ``c`` = old wrong & new right: ``change = (c - b)/n``; McNemar (1947)
    ``chi^2 = (b - c)^2/(b + c)`` and its exact two-sided p from ``b ~ Bin(b + c, 1/2)``;
    the paired bootstrap interval of ``change`` resamples items, i.e. draws the four cells
    of the paired table ``Multinomial(n, table / n)``; it is approximate under 100 items or
    with a discordant cell under 10 (``is_approximate`` over ``(b, c)``).

    >>> r = compare_versions([0, 0, 1, 1], [0, 1, 1, 1], [0, 0, 0, 1], rng=0)
    >>> r.lost, r.gained, r.change, r.flip_rate
    (1, 1, 0.0, 0.5)
    """
    ref, before, after = (codes_iv(n, v) for n, v in (("reference", reference), ("old", old), ("new", new)))
    if not before.shape == after.shape == ref.shape:
        raise ValueError(f"reference, old and new differ in length: {ref.size}, {before.size}, {after.size}")
    if not 0.0 < confidence_level < 1.0:
        raise ValueError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples!r}")
    shared = (ref >= 0) & (before >= 0) & (after >= 0)
    n = int(shared.sum())
    if n == 0:
        nan = float("nan")
        return VersionComparison(
            0, nan, nan, nan, nan, 0, 0, nan, ConfidenceInterval(nan, nan), nan, 1.0, False, "no item has both versions"
        )
    old_right, new_right = before[shared] == ref[shared], after[shared] == ref[shared]
    # paired table cells: both right, old only (b), new only (c), neither
    table = np.bincount(2 * (~old_right).astype(np.int64) + (~new_right).astype(np.int64), minlength=4)
    b, c = int(table[1]), int(table[2])
    draws = np.random.default_rng(rng).multinomial(n, table / n, size=n_resamples)
    replicates = (draws[:, 2] - draws[:, 1]) / n
    interval = percentile_interval(replicates, confidence_level)
    approximate = is_approximate(n, np.array([b, c]))  # the change rests on the discordant cells
    return VersionComparison(
        n_items=n,
        old_agreement=float(old_right.mean()),
        new_agreement=float(new_right.mean()),
        version_agreement=float(np.mean(before[shared] == after[shared])),
        flip_rate=float(np.mean(before[shared] != after[shared])),
        lost=b,
        gained=c,
        change=(c - b) / n,
        change_interval=ConfidenceInterval(interval.low, interval.high, approximate=approximate),
        chi_square=(b - c) ** 2 / (b + c) if b + c else float("nan"),
        mcnemar_p=mcnemar_exact(b, c),
        defined=True,
        reason=None,
    )


def anchor_panel_size(drop: float, discordance: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Anchor items a new version must re-label to detect ``drop`` with ``power`` (docs/method.md §12).

    Connor (1987) for paired proportions, two-sided level ``alpha``: with ``psi`` the
    expected share of discordant items and ``delta`` the drop in agreement,
    ``n = ceil((z_{1-alpha/2} sqrt(psi) + z_{power} sqrt(psi - delta^2))^2 / delta^2)``.

    >>> anchor_panel_size(0.05, 0.2)
    626
    """
    if not 0.0 < drop < 1.0:
        raise ValueError(f"drop must be in (0, 1), got {drop!r}")
    if not drop <= discordance <= 1.0:
        raise ValueError(f"discordance must be in [drop, 1] (|p10 - p01| <= p10 + p01), got {discordance!r}")
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be in (0, 1), got {alpha!r}, {power!r}")
    z_alpha, z_power = float(ndtri(1.0 - alpha / 2.0)), float(ndtri(power))
    root = z_alpha * math.sqrt(discordance) + z_power * math.sqrt(discordance - drop * drop)
    return math.ceil(root * root / (drop * drop) - 1e-9)


def independent_discordance(baseline: float, drop: float) -> float:
    """Expected share of discordant items when the versions err independently (docs/method.md §12).

    With the old version right with probability ``p0 = baseline`` and the new one with
    ``p1 = p0 - drop``, independently given the item: ``psi = p0 (1 - p1) + p1 (1 - p0)``.
    Versions that err on the same items are less discordant, so this sizes a panel on the safe side.

    >>> round(independent_discordance(0.8, 0.05), 12)
    0.35
    """
    if not 0.0 < drop < baseline < 1.0:
        raise ValueError(f"need 0 < drop < baseline < 1, got drop {drop!r}, baseline {baseline!r}")
    p0, p1 = baseline, baseline - drop
    return p0 * (1.0 - p1) + p1 * (1.0 - p0)


@dataclass(frozen=True)
class DriftDetection:
    """The CUSUM e-detector on agreement indicators, per stream (docs/method.md §12).

    ``alarm_at``: the 0-based index of the label at which the detector first reached
    ``threshold`` (-1: no alarm), shape ``(n_streams,)`` or a scalar array for one stream;
    ``log_detector``: ``log M_t`` after the last label. ``threshold = horizon / alpha`` bounds
    the chance of any false alarm within ``horizon`` labels by ``alpha`` while the agreement
    rate stays at or above ``baseline``; the mean time to a false alarm is at least ``threshold``.
    """

    alarm_at: np.ndarray
    log_detector: np.ndarray
    threshold: float
    baseline: float
    drop: float


def drift_detection(
    agreements: object, *, baseline: float, drop: float, horizon: int, alpha: float = 0.05
) -> DriftDetection:
    """CUSUM e-detector for a drop from ``baseline`` to ``baseline - drop`` (docs/method.md §12).

    ``agreements``: 0/1 (judge == primary) in arrival order, shape ``(n_labels,)`` or
    ``(n_streams, n_labels)``. With ``p0 = baseline``, ``p1 = baseline - drop`` and
    ``L_t = (p1/p0)^x_t ((1-p1)/(1-p0))^(1-x_t)`` (``E[L_t] <= 1`` whenever the agreement
    rate is ``>= p0``), ``M_t = max(M_{t-1}, 1) L_t`` (Shin, Ramdas & Rinaldo 2022); alarm at
    ``M_t >= horizon/alpha``. Computed as ``log M_t = S_t - min(0, min_{j<t} S_j)``.

    >>> drift_detection([0, 0, 0], baseline=0.9, drop=0.4, horizon=1, alpha=0.1).alarm_at
    array(1)
    """
    x = np.asarray(agreements)
    if x.ndim not in (1, 2) or x.shape[-1] == 0 or not np.all((x == 0) | (x == 1)):
        raise ValueError("agreements must be a non-empty 0/1 array of shape (n_labels,) or (n_streams, n_labels)")
    if not 0.0 < baseline < 1.0 or not 0.0 < drop < baseline:
        raise ValueError(f"need 0 < drop < baseline < 1, got baseline {baseline!r}, drop {drop!r}")
    if horizon < 1 or not 0.0 < alpha < 1.0:
        raise ValueError(f"horizon must be positive and alpha in (0, 1), got {horizon!r}, {alpha!r}")
    post = baseline - drop
    step = np.where(x == 1, math.log(post / baseline), math.log((1.0 - post) / (1.0 - baseline)))
    sums = np.cumsum(step, axis=-1)
    floor = np.minimum.accumulate(np.concatenate([np.zeros(x.shape[:-1] + (1,)), sums[..., :-1]], axis=-1), axis=-1)
    log_detector = sums - floor
    threshold = horizon / alpha
    crossed = log_detector >= math.log(threshold)
    alarm_at = np.where(crossed.any(axis=-1), np.argmax(crossed, axis=-1), -1)
    return DriftDetection(np.asarray(alarm_at), log_detector[..., -1], threshold, baseline, drop)
