"""Checks of the simulator's arguments (``planner.simulate``, ``planner.synthetic``): each returns the value
normalised or raises ``ValueError`` naming the argument (docs/method.md §6)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def positive_int(value: object, name: str) -> int:
    """``value`` as an int when it is a positive integer (not a bool)."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def label_count(n_labels: object) -> int:
    """The number of labels when it is an integer of at least 2."""
    if not isinstance(n_labels, (int, np.integer)) or isinstance(n_labels, bool) or n_labels < 2:
        raise ValueError(f"n_labels must be an integer >= 2, got {n_labels!r}")
    return int(n_labels)


def prevalence_shares(prevalence: Sequence[float] | None, n_labels: int) -> np.ndarray:
    """The true-label shares: ``prevalence`` checked (``n_labels`` shares summing to 1), uniform when None."""
    if prevalence is None:
        return np.full(n_labels, 1.0 / n_labels)
    share = np.asarray(prevalence, dtype=float)
    if share.shape != (n_labels,) or np.any(share < 0) or not np.isclose(share.sum(), 1.0):
        raise ValueError(f"prevalence must be {n_labels} non-negative shares summing to 1")
    return share


def choices_of(value: object, allowed: tuple[str, ...], name: str) -> list[str]:
    """``value`` (one name or several) as a non-empty list of names from ``allowed``."""
    items = [value] if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    if not items:
        raise ValueError(f"{name} must name at least one of {', '.join(allowed)}")
    for item in items:
        if item not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {item!r}")
    return items


def overlap_rates(rho: object, n_items: int) -> list[tuple[float, int]]:
    """Each overlap rate in (0, 1] with its overlap ``m = round(rho n_items)``, at least 1."""
    values = [rho] if isinstance(rho, (int, float, np.number)) else list(rho)  # type: ignore[call-overload]
    if not values:
        raise ValueError("rho must hold at least one overlap rate")
    out = []
    for value in values:
        if not isinstance(value, (int, float, np.number)) or not 0.0 < value <= 1.0:
            raise ValueError(f"rho must be overlap rates in (0, 1], got {value!r}")
        m = int(round(float(value) * n_items))
        if m < 1:
            raise ValueError(f"rho={value} gives no item per secondary with n_items={n_items}")
        out.append((float(value), m))
    return out


def probability(value: object, name: str) -> float:
    """``value`` as a float when it lies in [0, 1]."""
    if not isinstance(value, (int, float, np.number)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return float(value)


def accuracy_grid(p_h: object, n_humans: int) -> list[float | tuple[float, ...]]:
    """The human accuracies to simulate: each one accuracy, or one per human (``n_humans`` of them)."""
    values = [p_h] if isinstance(p_h, (int, float, np.number)) else list(p_h)  # type: ignore[call-overload]
    if not values:
        raise ValueError("p_h must hold at least one human accuracy")
    grid: list[float | tuple[float, ...]] = []
    for value in values:
        if isinstance(value, (int, float, np.number)):
            grid.append(probability(value, "p_h"))
        else:
            per_rater = tuple(probability(v, "p_h") for v in value)
            if len(per_rater) != n_humans:
                raise ValueError(f"rater-specific p_h needs {n_humans} accuracies, got {len(per_rater)}")
            grid.append(per_rater)
    return grid
