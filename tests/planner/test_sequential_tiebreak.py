"""``tiebreak`` of planner.sequential.monitor_judge and kept_monitoring: entries of equal arrival rank are read
in the order of their keys (docs/method.md §8.2), the same as the rows permuted into that order."""

from __future__ import annotations

import numpy as np
import pytest

from planner.sequential import Monitoring, kept_monitoring, monitor_judge


def _panel(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A judge and three humans on ``n`` items, every label in one of four writes (ranks 1..4, many ties)."""
    truth = rng.integers(0, 2, n)
    p = np.array([0.93, 0.85, 0.85, 0.85])
    codes = np.where(rng.random((n, 4)) < p, truth[:, None], 1 - truth[:, None])
    codes[rng.random((n, 4)) < 0.1] = -1
    order = np.where(codes >= 0, rng.integers(1, 5, (n, 4)), -1)
    return codes, order


def _summary(m: Monitoring) -> tuple[object, ...]:
    return m.decision, m.decided_at, m.looks, [(r.status, r.n, r.e_value, r.e_value_lost, r.cs.low) for r in m.raters]


@pytest.mark.parametrize("seed", range(4))
def test_keys_order_ties_as_a_permutation_of_the_rows_would(seed: int) -> None:
    rng = np.random.default_rng(seed)
    codes, order = _panel(rng, 400)
    keys = rng.permutation(400).astype(np.uint64) * np.uint64(2**40)
    rows = np.argsort(keys)
    options = {"judge": 0, "humans": [1, 2, 3], "n_labels": 2}
    keyed = monitor_judge(codes, order=order, tiebreak=keys, **options)
    permuted = monitor_judge(codes[rows], order=order[rows], **options)
    assert _summary(keyed) == _summary(permuted)
    # not vacuous: the row order gives other numbers
    assert _summary(monitor_judge(codes, order=order, **options)) != _summary(keyed)


def test_a_kept_monitoring_with_keys_is_the_fresh_one() -> None:
    rng = np.random.default_rng(9)
    codes, order = _panel(rng, 300)
    keys = rng.integers(0, 2**62, 300)
    options = {"judge": 0, "humans": [1, 2, 3], "n_labels": 2, "tiebreak": keys}
    early = np.where(order <= 2, codes, -1)
    _, state = kept_monitoring(early, previous=None, order=np.where(early >= 0, order, -1), **options)
    kept, _ = kept_monitoring(codes, previous=state, order=order, **options)
    assert _summary(kept) == _summary(monitor_judge(codes, order=order, **options))


def test_keys_of_another_shape_are_refused() -> None:
    codes, order = _panel(np.random.default_rng(1), 50)
    with pytest.raises(ValueError, match="one integer key per item"):
        monitor_judge(codes, judge=0, humans=[1, 2, 3], n_labels=2, order=order, tiebreak=np.arange(49))
    with pytest.raises(ValueError, match="one integer key per item"):
        monitor_judge(codes, judge=0, humans=[1, 2, 3], n_labels=2, order=order, tiebreak=np.zeros(50))
