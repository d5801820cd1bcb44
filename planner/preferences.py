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


def _comparisons_iv(
    first: object, second: object, outcome: object, n_systems: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    return i, j, y


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
    i, j, y = _comparisons_iv(first, second, outcome, n_systems)
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


@dataclass(frozen=True)
class PPIBradleyTerry:
    """Prediction-powered Bradley-Terry strengths from sparse human verdicts and a judge's verdicts
    (docs/method.md §13): centred log-strengths, their bootstrap intervals, and the data sizes."""

    n_labeled: int
    n_unlabeled: int
    lam: float
    strengths: np.ndarray
    intervals: tuple[ConfidenceInterval, ...]
    defined: bool
    reason: str | None


def _design(first: np.ndarray, second: np.ndarray, k: int) -> np.ndarray:
    """Rows ``e_first - e_second`` without the last system's column (its strength is fixed at 0)."""
    x = np.zeros((first.size, k))
    rows = np.arange(first.size)
    x[rows, first] += 1.0
    x[rows, second] -= 1.0
    return x[:, :-1]


def _outcome_share(outcome: np.ndarray) -> np.ndarray:
    """``y``: 1 when the first system wins, 0 when the second does, 1/2 for a tie."""
    return np.select([outcome == 0, outcome == 1], [1.0, 0.0], 0.5)


MAX_STRENGTH = 50.0
"""A log-strength difference past this is a diverging Newton iterate, not an estimate (odds of e^50)."""


def _ppi_newton(
    labeled: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    unlabeled: tuple[np.ndarray, np.ndarray, np.ndarray],
    lam: float,
) -> np.ndarray:
    """Newton's method on the PPI++ logistic loss (Angelopoulos, Duchi & Zrnic 2023), weights per row.

    ``labeled`` = ``(x, y, yhat, w)``, ``unlabeled`` = ``(x, yhat, w)``; the gradient is
    ``lam/N sum w x (s - yhat~) + 1/n sum w x ((1 - lam) s - y + lam yhat)``, ``s = sigmoid(x theta)``.
    NaN where the loss has no finite minimum: a singular Hessian, a strength past ``MAX_STRENGTH``, or
    no convergence in 100 steps (at ``lam = 1`` the humans enter through a linear term only, so the
    judge's own comparisons must bound every strength).
    """
    (x, y, yhat, w), (xu, yhatu, wu) = labeled, unlabeled
    n, big_n = w.sum(), wu.sum()
    theta = np.zeros(x.shape[1])
    undefined = np.full(theta.size + 1, np.nan)
    for _ in range(100):
        s, su = 1.0 / (1.0 + np.exp(-(x @ theta))), 1.0 / (1.0 + np.exp(-(xu @ theta)))
        grad = lam / big_n * xu.T @ (wu * (su - yhatu)) + x.T @ (w * ((1.0 - lam) * s - y + lam * yhat)) / n
        hess = lam / big_n * (xu * (wu * su * (1.0 - su))[:, None]).T @ xu
        hess += (1.0 - lam) / n * (x * (w * s * (1.0 - s))[:, None]).T @ x
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:  # a resample that leaves a system without a game
            return undefined
        theta -= step
        if not np.all(np.isfinite(theta)) or np.max(np.abs(theta), initial=0.0) >= MAX_STRENGTH:
            return undefined
        if np.max(np.abs(step)) < 1e-12:
            full = np.append(theta, 0.0)
            return np.asarray(full - full.mean(), dtype=float)
    return undefined


def ppi_bradley_terry(
    first: object,
    second: object,
    human: object,
    judge: object,
    first_unlabeled: object,
    second_unlabeled: object,
    judge_unlabeled: object,
    *,
    n_systems: int,
    lam: float = 1.0,
    confidence_level: float = 0.95,
    n_resamples: int = 200,
    rng: int | np.random.Generator | None = None,
) -> PPIBradleyTerry:
    """Bradley-Terry strengths powered by the judge's verdicts where the humans are sparse (docs/method.md §13).

    Comparisons ``(first, second)`` with a human ``outcome`` and the judge's on the same pair,
    and comparisons only the judge decided (``*_unlabeled``); outcomes as in
    :func:`bradley_terry`. The PPI++ estimate minimises
    ``lam L_judge(unlabeled) + L_human(labeled) - lam L_judge(labeled)`` for the logistic loss on
    ``x = e_first - e_second``; ``lam = 0`` is the humans alone, 1 plain PPI. Intervals:
    percentile bootstrap resampling labeled and unlabeled comparisons independently.
    Undefined when the human comparisons do not connect every system both ways.
    """
    i, j, y = _comparisons_iv(first, second, human, n_systems)
    _, _, yhat = _comparisons_iv(first, second, judge, n_systems)
    iu, ju, yhatu = _comparisons_iv(first_unlabeled, second_unlabeled, judge_unlabeled, n_systems)
    if not 0.0 <= lam <= 1.0 or not 0.0 < confidence_level < 1.0 or n_resamples < 1:
        raise ValueError("lam must be in [0, 1], confidence_level in (0, 1) and n_resamples positive")
    if i.size == 0 or iu.size == 0:
        raise ValueError("ppi_bradley_terry needs human comparisons and comparisons only the judge decided")
    k = n_systems
    wins = np.zeros((k, k))
    y_share = _outcome_share(y)
    np.add.at(wins, (i, j), y_share)
    np.add.at(wins, (j, i), 1.0 - y_share)
    if not _strongly_connected(wins[None])[0]:
        none = tuple(ConfidenceInterval(np.nan, np.nan) for _ in range(k))
        reason = "the human comparisons do not connect every system both ways"
        return PPIBradleyTerry(i.size, iu.size, lam, np.full(k, np.nan), none, False, reason)
    x, xu = _design(i, j, k), _design(iu, ju, k)
    labeled = (x, _outcome_share(y), _outcome_share(yhat))
    unlabeled = (xu, _outcome_share(yhatu))
    with np.errstate(over="ignore", invalid="ignore"):
        strengths = _ppi_newton((*labeled, np.ones(i.size)), (*unlabeled, np.ones(iu.size)), lam)
    if not np.all(np.isfinite(strengths)):
        none = tuple(ConfidenceInterval(np.nan, np.nan) for _ in range(k))
        reason = (
            "no finite estimate: the comparisons only the judge decided do not bound every strength "
            "(too few of them, or not connecting the systems both ways)"
        )
        return PPIBradleyTerry(i.size, iu.size, lam, strengths, none, False, reason)
    generator = np.random.default_rng(rng)
    w = generator.multinomial(i.size, np.full(i.size, 1.0 / i.size), size=n_resamples).astype(float)
    wu = generator.multinomial(iu.size, np.full(iu.size, 1.0 / iu.size), size=n_resamples).astype(float)
    with np.errstate(over="ignore", invalid="ignore"):  # a resample without a finite estimate diverges
        replicates = np.array([_ppi_newton((*labeled, w[b]), (*unlabeled, wu[b]), lam) for b in range(n_resamples)])
    replicates[~np.all(np.isfinite(replicates), axis=1)] = np.nan
    intervals = tuple(percentile_interval(replicates[:, s], confidence_level) for s in range(k))
    return PPIBradleyTerry(i.size, iu.size, lam, strengths, intervals, True, None)
