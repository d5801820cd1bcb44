"""Pairwise (A/B) judges: position consistency and bias, accuracy in both orders, Bradley-Terry.

An item is a prompt with two answers, A and B. A verdict is a code in the item's own answer
names, whatever order they were shown in: ``PREFER_A`` (0), ``PREFER_B`` (1), ``TIE`` (2),
``-1`` missing. ``shown_ab`` holds the judge's verdicts with A shown first, ``shown_ba`` with
B shown first, both of shape ``(n_items,)`` (docs/method.md §13).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.intervals import ConfidenceInterval, percentile_interval

PREFER_A, PREFER_B, TIE = 0, 1, 2


def _verdicts_iv(name: str, verdicts: object) -> np.ndarray:
    array = np.asarray(verdicts)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be a one-dimensional int array of verdicts (0 A, 1 B, 2 tie, -1 missing)")
    if np.any((array < -1) | (array > TIE)):
        raise ValueError(f"{name} holds verdicts outside -1..2")
    return array.astype(np.int64)


def _orders_iv(shown_ab: object, shown_ba: object) -> tuple[np.ndarray, np.ndarray]:
    ab, ba = _verdicts_iv("shown_ab", shown_ab), _verdicts_iv("shown_ba", shown_ba)
    if ab.shape != ba.shape:
        raise ValueError(f"shown_ab and shown_ba differ in length: {ab.size}, {ba.size}")
    return ab, ba


@dataclass(frozen=True)
class PositionConsistency:
    """A judge's verdicts on the items it saw in both orders (docs/method.md §13).

    ``consistent``: items with the same verdict in both orders. A *flip* picks a different
    answer in each order: ``first_favoured`` flips picked the answer shown first both times
    (A in AB, B in BA), ``second_favoured`` the one shown second. ``bias_rate`` is flips over
    items; ``bias_p`` the exact two-sided binomial p of ``first_favoured ~ Bin(flips, 1/2)``;
    ``bias_direction`` ``"first"``, ``"second"`` or ``None`` (equal counts). Undefined (NaN,
    ``reason``) with no item in both orders.
    """

    n_items: int
    consistent: int
    consistency: float
    first_favoured: int
    second_favoured: int
    bias_rate: float
    bias_direction: str | None
    bias_p: float
    defined: bool
    reason: str | None


def position_consistency(shown_ab: object, shown_ba: object) -> PositionConsistency:
    """Position consistency and position bias of a pairwise judge (docs/method.md §13).

    >>> r = position_consistency([0, 0, 1, 0], [0, 1, 1, 2])
    >>> r.consistent, r.first_favoured, r.second_favoured, r.bias_direction
    (2, 1, 0, 'first')
    """
    ab, ba = _orders_iv(shown_ab, shown_ba)
    both = (ab >= 0) & (ba >= 0)
    n = int(both.sum())
    if n == 0:
        nan = float("nan")
        return PositionConsistency(0, 0, nan, 0, 0, nan, None, 1.0, False, "no item was judged in both orders")
    ab, ba = ab[both], ba[both]
    first = int(np.sum((ab == PREFER_A) & (ba == PREFER_B)))
    second = int(np.sum((ab == PREFER_B) & (ba == PREFER_A)))
    from scipy.stats import binomtest  # deferred: scipy.stats costs seconds at import

    return PositionConsistency(
        n_items=n,
        consistent=int(np.sum(ab == ba)),
        consistency=float(np.mean(ab == ba)),
        first_favoured=first,
        second_favoured=second,
        bias_rate=(first + second) / n,
        bias_direction="first" if first > second else "second" if second > first else None,
        bias_p=float(binomtest(first, first + second, 0.5).pvalue) if first + second else 1.0,
        defined=True,
        reason=None,
    )


@dataclass(frozen=True)
class PairwiseAccuracy:
    """Agreement of a pairwise judge with a reference verdict (the human majority) per order.

    Over the ``n_items`` items with a reference and a verdict in both orders: ``right_ab``,
    ``right_ba`` the share right in each order, ``right_both`` the share right in both.
    """

    n_items: int
    right_ab: float
    right_ba: float
    right_both: float
    defined: bool
    reason: str | None


def pairwise_accuracy(reference: object, shown_ab: object, shown_ba: object) -> PairwiseAccuracy:
    """Accuracy against ``reference`` in each order and in both (docs/method.md §13).

    >>> pairwise_accuracy([0, 1, 2], [0, 1, 0], [0, 0, 2]).right_both
    0.3333333333333333
    """
    ab, ba = _orders_iv(shown_ab, shown_ba)
    ref = _verdicts_iv("reference", reference)
    if ref.shape != ab.shape:
        raise ValueError(f"reference and verdicts differ in length: {ref.size}, {ab.size}")
    keep = (ref >= 0) & (ab >= 0) & (ba >= 0)
    n = int(keep.sum())
    if n == 0:
        nan = float("nan")
        return PairwiseAccuracy(0, nan, nan, nan, False, "no item has a reference and both orders")
    hit_ab, hit_ba = ab[keep] == ref[keep], ba[keep] == ref[keep]
    return PairwiseAccuracy(n, float(hit_ab.mean()), float(hit_ba.mean()), float((hit_ab & hit_ba).mean()), True, None)


@dataclass(frozen=True)
class BradleyTerry:
    """Bradley-Terry strengths of ``n_systems`` systems from pairwise comparisons (docs/method.md §13).

    ``strengths``: log-strengths ``theta`` centred to mean 0 (``P(i beats j) =
    1/(1 + exp(theta_j - theta_i))``); ``intervals`` their percentile bootstrap intervals over
    resampled comparisons (``undefined_resamples``: resamples with no finite estimate);
    ``win_rates``: (wins + ties/2) / games, NaN for a system with no game. Undefined (NaN
    strengths, ``reason``) when the comparisons do not connect every system both ways.
    """

    n_comparisons: int
    strengths: np.ndarray
    intervals: tuple[ConfidenceInterval, ...]
    win_rates: np.ndarray
    undefined_resamples: int
    defined: bool
    reason: str | None


def _strongly_connected(wins: np.ndarray) -> np.ndarray:
    """Per matrix ``(B, K, K)`` of half-wins ``w_ij`` (i over j): whether every system reaches every other."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    return np.array([connected_components(csr_matrix(w > 0), connection="strong")[0] == 1 for w in wins])


def _mm_strengths(wins: np.ndarray, *, tol: float = 1e-10, max_iter: int = 20_000) -> np.ndarray:
    """Hunter's (2004) MM iteration for the Bradley-Terry MLE, batched over ``wins`` ``(B, K, K)``.

    ``pi_i <- W_i / sum_j N_ij / (pi_i + pi_j)``, ``W_i = sum_j w_ij``, ``N_ij = w_ij + w_ji``;
    returns centred log-strengths ``(B, K)``.
    """
    total, games = wins.sum(axis=2), wins + np.swapaxes(wins, 1, 2)
    pi = np.ones(total.shape)
    for _ in range(max_iter):
        updated = total / np.sum(games / (pi[:, :, None] + pi[:, None, :]), axis=2)
        updated /= np.exp(np.mean(np.log(updated), axis=1, keepdims=True))
        done = np.max(np.abs(np.log(updated) - np.log(pi))) < tol
        pi = updated
        if done:
            break
    return np.log(pi)


def bradley_terry(
    first: object,
    second: object,
    outcome: object,
    *,
    n_systems: int,
    confidence_level: float = 0.95,
    n_resamples: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> BradleyTerry:
    """Bradley-Terry strengths with bootstrap intervals (Hunter 2004; docs/method.md §13).

    ``first``, ``second``: the systems of each comparison ``(n_comparisons,)``; ``outcome``:
    0 first wins, 1 second wins, 2 tie (half a win each). The MLE exists iff the graph of
    "``i`` won or tied against ``j``" is strongly connected (Ford 1957). Resampling the
    comparisons is drawing the distinct (first, second, outcome) cells from a multinomial.

    >>> bradley_terry([0, 0, 1], [1, 1, 0], [0, 0, 0], n_systems=2, rng=0).strengths.round(4).tolist()
    [0.3466, -0.3466]
    """
    i, j, y = (np.asarray(v) for v in (first, second, outcome))
    if not (i.ndim == j.ndim == y.ndim == 1 and i.shape == j.shape == y.shape):
        raise ValueError("first, second and outcome must be one-dimensional arrays of one length")
    if not all(np.issubdtype(v.dtype, np.integer) for v in (i, j, y)):
        raise ValueError("first, second and outcome must be int arrays")
    if n_systems < 2:
        raise ValueError(f"n_systems must be at least 2, got {n_systems!r}")
    if np.any((i < 0) | (i >= n_systems) | (j < 0) | (j >= n_systems)) or np.any(i == j):
        raise ValueError(f"systems must be two different indices in 0..{n_systems - 1}")
    if np.any((y < 0) | (y > 2)):
        raise ValueError("outcome must be 0 (first wins), 1 (second wins) or 2 (tie)")
    if not 0.0 < confidence_level < 1.0 or n_resamples < 1:
        raise ValueError("confidence_level must be in (0, 1) and n_resamples positive")
    k = n_systems
    cells, counts = np.unique((i * k + j) * 3 + y, return_counts=True)
    cell_i, cell_j, cell_y = cells // 3 // k, cells // 3 % k, cells % 3
    # each cell's half-wins as a flat (K*K) row: w[i, j] += 1 (first wins), w[j, i] += 1 (second), both 1/2 (tie)
    contribution = np.zeros((cells.size, k * k))
    rows = np.arange(cells.size)
    np.add.at(contribution, (rows, cell_i * k + cell_j), np.select([cell_y == 0, cell_y == 2], [1.0, 0.5], 0.0))
    np.add.at(contribution, (rows, cell_j * k + cell_i), np.select([cell_y == 1, cell_y == 2], [1.0, 0.5], 0.0))
    observed = (counts @ contribution).reshape(1, k, k)
    games = observed[0].sum(axis=1) + observed[0].sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        win_rates = observed[0].sum(axis=1) / games
    nan = np.full(k, np.nan)
    if not _strongly_connected(observed)[0]:
        reason = "the comparisons do not connect every system both ways (some system never loses or never wins)"
        none = tuple(ConfidenceInterval(np.nan, np.nan) for _ in range(k))
        return BradleyTerry(int(counts.sum()), nan, none, win_rates, n_resamples, False, reason)
    strengths = _mm_strengths(observed)[0]
    draws = np.random.default_rng(rng).multinomial(int(counts.sum()), counts / counts.sum(), size=n_resamples)
    resampled = (draws @ contribution).reshape(n_resamples, k, k)
    usable = _strongly_connected(resampled)
    replicates = np.full((n_resamples, k), np.nan)
    if usable.any():
        replicates[usable] = _mm_strengths(resampled[usable])
    intervals = tuple(percentile_interval(replicates[:, s], confidence_level) for s in range(k))
    return BradleyTerry(int(counts.sum()), strengths, intervals, win_rates, int((~usable).sum()), True, None)
