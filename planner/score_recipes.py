"""Plans for numeric ratings: the overlap from the moments of the per-item alignment difference, and the
plan's check by resampling the pilot's items (docs/method.md §4b).

Ratings are floats of shape ``(n_items, n_raters)``, ``NaN`` for a rating not given, as in
``planner.score_decision``; ``humans[0]`` is the primary, the others are secondaries. The per-item
alignment difference ``xi`` of a held-out human is bounded whatever the ratings' scale: the margin
rule's ``S_f - S_h`` lies in ``[-1, 1]`` (its agreement is scaled by the declared range), the
alt-test's ``W_f - W_h`` in ``{-1, 0, 1}``; so §4's normal recipe applies to their moments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.alt_test_recipes import alt_test_quantile, m_alt_test
from planner.false_rejection import corrected_false_rejection_rate, enveloped_m, false_rejection_rate, m_cert
from planner.intervals import percentile_interval
from planner.plan_check import promise_status
from planner.recipes import Recipe, overlap_plan
from planner.resampling import bootstrap_sums
from planner.rules import ALT_TEST_MIN_ITEMS, DEFAULT_EPSILON
from planner.score_decision import SCORE_RULES, item_differences, validate_scores
from planner.xi_moments import PilotMoments

MAX_CHECK_CELLS = 100_000_000
"""The most rating cells a plan check simulates (trials x rows x raters), checked before it starts."""
CHECK_RAISES = 8
"""Times a plan check may raise ``m`` by 15% when its simulated promise fails."""


@dataclass(frozen=True, kw_only=True)
class ScorePlanCheck:
    """The plan's decision simulated at overlap ``m`` per secondary on items resampled from the pilot.

    ``fr``: share of trials in which the judge is rejected; ``rater_fr``: share of lost held-out
    humans, the secondaries pooled and the primary apart, the larger of the two; each with its Monte
    Carlo SE. NaN with ``reason`` when a secondary has no pilot item to resample.
    """

    m: int
    trials: int
    fr: float
    fr_se: float
    rater_fr: float
    rater_fr_se: float
    promise: float
    reason: str

    @property
    def promise_status(self) -> str:
        """The per-human rate against the promise with the Monte Carlo error inside it (docs/method.md §6)."""
        return promise_status(self.rater_fr, self.rater_fr_se, self.promise)

    @property
    def keeps_promise(self) -> bool:
        """The per-human rate is kept within the promise, 2 Monte Carlo SE inside it."""
        return self.promise_status == "kept"


def _ratings_iv(
    ratings: object, judge: int, humans: list[int], rule: str, value_range: tuple[float, float] | None
) -> tuple[np.ndarray, float]:
    array = np.asarray(ratings, dtype=float)
    if array.ndim != 2:
        raise ValueError(f"ratings must be 2-D (n_items, n_raters), got shape {array.shape}")
    columns = [judge, *humans]
    if len(set(columns)) != len(columns) or not all(0 <= c < array.shape[1] for c in columns):
        raise ValueError(f"judge and humans must be distinct columns in 0..{array.shape[1] - 1}")
    if len(humans) < 2:
        raise ValueError("a score plan needs at least two humans (the primary and a secondary)")
    if rule not in SCORE_RULES:
        raise ValueError(f"rule must be one of {SCORE_RULES}, got {rule!r}")
    if value_range is None:
        raise ValueError("value_range=(min, max) is needed: the plan is bounded by the declared range")
    low, high = (float(v) for v in value_range)
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"value_range must be finite (min, max) with min < max, got {value_range!r}")
    observed = array[:, columns]
    if np.any((observed < low) | (observed > high)):
        raise ValueError(f"ratings fall outside value_range {value_range!r}")
    return array, high - low


def _pairwise_differences(
    array: np.ndarray, judge: int, humans: list[int], rule: str, span: float
) -> tuple[list[np.ndarray], list[np.ndarray], list[int]]:
    """Per ordered pair ``(r_k, h)`` of humans: the rows the judge, ``r_k`` and ``h`` rated, ``xi`` of
    ``r_k`` against the pool ``{h}`` on them, and ``r_k``."""
    rows, xi, held_out = [], [], []
    for h in humans:
        for other in humans:
            if other != h:
                on, advantage = item_differences(array, judge, h, [other], rule=rule, span=span)
                rows.append(on)
                xi.append(advantage)
                held_out.append(h)
    return rows, xi, held_out


def pilot_differences(
    ratings: object, judge: int, humans: list[int], *, rule: str, value_range: tuple[float, float] | None
) -> np.ndarray:
    """The pooled per-item alignment differences ``xi`` whose moments :func:`score_pilot` estimates: for every
    ordered pair ``(r_k, h)`` of humans, ``xi`` of ``r_k`` against the pool ``{h}`` (docs/method.md §4b).

    >>> r = np.array([[1.0, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]])
    >>> pilot_differences(r, 0, [1, 2], rule="margin", value_range=(1, 5)).tolist()  # (|h - o| - |j - o|)/4
    [0.0, 0.25, 0.25, 0.0, 0.25, 0.0, 0.0, 0.25]
    """
    array, span = _ratings_iv(ratings, judge, humans, rule, value_range)
    return np.concatenate(_pairwise_differences(array, judge, humans, rule, span)[1])


def score_pilot(
    ratings: object,
    judge: int,
    humans: list[int],
    *,
    rule: str,
    value_range: tuple[float, float] | None,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    rng: int | np.random.Generator | None = None,
) -> PilotMoments:
    """``mu_d``, ``sigma0^2`` of the per-item alignment difference ``xi`` in the ratings in hand.

    The plan's design gives a held-out human one held-in label per item (disjoint secondaries), so
    ``xi`` is taken against one other human at a time: for every ordered pair ``(r_k, h)`` of humans, on
    the items the judge, ``r_k`` and ``h`` rated, ``xi`` of ``r_k`` with the pool ``{h}``
    (``score_decision.item_differences``). These are pooled; their plug-in mean and variance are the
    estimates, and an item bootstrap (items resampled with all their ``xi``) gives standard errors and
    percentile intervals (docs/method.md §4b).

    >>> r = np.array([[1.0, 1, 2, 1], [3, 2, 3, 3], [5, 4, 5, 5], [2, 2, 1, 2]])
    >>> p = score_pilot(r, 0, [1, 2, 3], rule="margin", value_range=(1, 5), n_resamples=20, rng=0)
    >>> round(p.mu_d, 6), round(p.sigma0_sq, 6), p.m  # 6 ordered pairs x 4 items
    (0.083333, 0.013889, 24)
    """
    array, span = _ratings_iv(ratings, judge, humans, rule, value_range)
    rows, xi, held_out = _pairwise_differences(array, judge, humans, rule, span)
    row, value = np.concatenate(rows), np.concatenate(xi)
    n_items = array.shape[0]
    features = np.column_stack(
        [
            np.bincount(row, minlength=n_items),
            np.bincount(row, value, minlength=n_items),
            np.bincount(row, value * value, minlength=n_items),
        ]
    ).astype(float)
    kept = features[:, 0] > 0
    reps = bootstrap_sums(
        features[kept], np.ones(int(kept.sum()), dtype=np.int64), n_items, n_resamples, np.random.default_rng(rng)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        rep_mu = reps[:, 1] / reps[:, 0]
        rep_var = np.maximum(reps[:, 2] / reps[:, 0] - rep_mu * rep_mu, 0.0)
    defined = value.size > 0
    mu = float(value.mean()) if defined else np.nan
    return PilotMoments(
        mu_d=mu,
        sigma0_sq=float(np.mean(value * value) - mu * mu) if defined else np.nan,
        mu_d_se=float(np.nanstd(rep_mu, ddof=1)) if defined else np.nan,
        sigma0_sq_se=float(np.nanstd(rep_var, ddof=1)) if defined else np.nan,
        mu_d_ci=percentile_interval(rep_mu, confidence_level),
        sigma0_sq_ci=percentile_interval(np.where(np.isfinite(rep_mu), rep_var, np.nan), confidence_level),
        m=int(value.size),
        n_raters=len({h for h, r in zip(held_out, rows, strict=True) if r.size}),
        rule=rule,
    )


def score_recipe(
    mu_d: float,
    sigma0_sq: float,
    *,
    n_items: int,
    n_humans: int,
    rule: str,
    epsilon: float | None = None,
    alpha_sig: float = 0.05,
    q: float = 0.05,
    steps: int | None = None,
) -> Recipe:
    """Overlap per secondary to certify a score judge, with its per-human FR curve (docs/method.md §4b).

    Margin: ``m = ceil(z_{1-alpha_sig/2}^2 sigma0^2 / (mu_d + eps)^2)`` and
    ``FR(m) = Phi(-(mu_d + eps) sqrt(m) / sigma0)``: ``xi`` is continuous on a range-scaled axis, so the
    plain normal form, unless the ratings move in steps: with ``steps = (max - min) / step`` an
    integer, ``steps xi`` is an integer, ``steps m d_k`` lives on a lattice, and the FR is §4's
    continuity-corrected form with ``s = steps`` and ``m`` its monotone envelope. Alt-test: ``xi = W_f - W_h`` and
    ``m = ceil((z_{1-alpha*} + z_{1-alpha_sig/2})^2 sigma0^2 / (mu_d + eps)^2)``, at least 30 items,
    ``FR(m) = Phi(z_{1-alpha*} - (mu_d + eps) sqrt(m) / sigma0)`` (§4, item 5). ``m`` is None when
    ``mu_d + eps <= 0``.

    >>> r = score_recipe(0.0, 0.01, n_items=1000, n_humans=3, rule="margin")
    >>> r.m, r.feasible  # ceil(1.96^2 0.01 / 0.05^2) = ceil(15.37)
    (16, True)
    >>> score_recipe(0.0, 0.01, n_items=1000, n_humans=3, rule="margin", steps=4).m  # 1..5 in steps of 1
    15

    (``c(15) = ceil(-3) - 1 = -4``, ``Phi(-3.5 / (0.4 sqrt(15))) = .012``; at 14, ``Phi(-2.5 / (0.4 sqrt(14)))
    = .047``; the rate stays below .025 from 15 on.)
    """
    if rule not in SCORE_RULES:
        raise ValueError(f"rule must be one of {SCORE_RULES}, got {rule!r}")
    if not (isinstance(n_items, (int, np.integer)) and n_items >= 1):
        raise ValueError(f"n_items must be an integer >= 1, got {n_items!r}")
    if not np.isfinite(mu_d):
        raise ValueError(f"mu_d must be a finite number (a pilot with overlap), got {mu_d!r}")
    epsilon = DEFAULT_EPSILON[rule] if epsilon is None else float(epsilon)
    if steps is not None and not (isinstance(steps, (int, np.integer)) and steps >= 1):
        raise ValueError(f"steps must be an integer >= 1 or None, got {steps!r}")
    if rule == "margin":
        m: int | float = m_cert(mu_d, sigma0_sq, epsilon=epsilon, alpha_sig=alpha_sig)
        critical_z = 0.0
        if steps is not None and math.isfinite(m):
            reach = np.arange(1, 2 * int(m) + 41)
            corrected = corrected_false_rejection_rate(reach, mu_d, sigma0_sq, epsilon=epsilon, pool_size=int(steps))
            m = enveloped_m(corrected, alpha_sig / 2.0)
    else:
        m = max(
            m_alt_test(mu_d, sigma0_sq, n_humans=n_humans, epsilon=epsilon, q=q, alpha_sig=alpha_sig),
            ALT_TEST_MIN_ITEMS,
        )
        critical_z = alt_test_quantile(n_humans, q=q)
    grid = np.unique(np.round(np.geomspace(1, n_items, 30)).astype(int))
    if math.isfinite(m) and m <= n_items:
        grid = np.union1d(grid, [int(m)])
    if rule == "margin" and steps is not None:
        rates = corrected_false_rejection_rate(grid, mu_d, sigma0_sq, epsilon=epsilon, pool_size=int(steps))
    else:
        rates = np.atleast_1d(false_rejection_rate(grid, mu_d, sigma0_sq, epsilon=epsilon, critical_z=critical_z))
    if math.isinf(m):
        feasible, reason, m_out = (
            False,
            f"the judge is expected to fail: mu_d + epsilon = {mu_d + epsilon:.4g} <= 0",
            None,
        )
    elif m > n_items:
        feasible, m_out = False, int(m)
        reason = f"needs m={int(m)} overlapping items but the project has only n_items={n_items}"
    else:
        feasible, reason, m_out = True, "", int(m)
    return Recipe(
        goal="certify",
        rule=rule,
        m=m_out,
        feasible=feasible,
        reason=reason,
        plan=overlap_plan(n_items, n_humans, m_out) if feasible and m_out is not None else None,
        m_grid=tuple(int(v) for v in grid),
        fr_rate=tuple(float(r) for r in rates),
        alpha_sig=float(alpha_sig),
    )


def _share(count: float, total: float) -> tuple[float, float]:
    if total <= 0:
        return np.nan, np.nan
    rate = count / total
    return float(rate), float(math.sqrt(rate * (1.0 - rate) / total))


def score_plan_check(
    ratings: object,
    judge: int,
    humans: list[int],
    *,
    m: int,
    rule: str,
    value_range: tuple[float, float] | None,
    epsilon: float | None = None,
    alpha_sig: float = 0.05,
    q: float = 0.05,
    omega_threshold: float = 0.5,
    trials: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> ScorePlanCheck:
    """The plan's decision simulated on disjoint secondaries at ``m`` items each (docs/method.md §4b).

    Each trial draws, for every secondary, ``m`` of the pilot's items that the judge, the primary
    (``humans[0]``) and that secondary rated (with replacement), stacks the blocks into one ratings
    matrix (a secondary rates its block only, the primary every block) and decides it with
    ``validate_scores``. The pilot's items stand for the population, so the rates are those of the
    judge the pilot shows.
    """
    array, _ = _ratings_iv(ratings, judge, humans, rule, value_range)
    if not (isinstance(m, (int, np.integer)) and m >= 1):
        raise ValueError(f"m must be an integer >= 1, got {m!r}")
    if not (isinstance(trials, (int, np.integer)) and trials >= 1):
        raise ValueError(f"trials must be an integer >= 1, got {trials!r}")
    secondaries = humans[1:]
    k = len(secondaries)
    cells = trials * k * m * (k + 2)
    if cells > MAX_CHECK_CELLS:
        raise ValueError(f"the check would simulate {cells:,} rating cells, more than the {MAX_CHECK_CELLS:,} allowed")
    promise = alpha_sig / 2.0
    rated = ~np.isnan(array)
    pools = [np.flatnonzero(rated[:, judge] & rated[:, humans[0]] & rated[:, s]) for s in secondaries]
    if any(p.size == 0 for p in pools):
        nan = float("nan")
        reason = "a secondary has no pilot item rated by it, the judge and the primary: nothing to resample"
        return ScorePlanCheck(
            m=int(m), trials=0, fr=nan, fr_se=nan, rater_fr=nan, rater_fr_se=nan, promise=promise, reason=reason
        )
    generator = np.random.default_rng(rng)
    block = np.full((k * m, k + 2), np.nan)  # columns: judge, primary, secondaries
    rejected = lost_secondary = used_secondary = lost_primary = used_primary = 0
    for _ in range(trials):
        for b, (s, pool) in enumerate(zip(secondaries, pools, strict=True)):
            drawn = pool[generator.integers(0, pool.size, m)]
            rows = slice(b * m, (b + 1) * m)
            block[rows, 0], block[rows, 1], block[rows, 2 + b] = (
                array[drawn, judge],
                array[drawn, humans[0]],
                array[drawn, s],
            )
        (decision,) = validate_scores(
            block,
            [0],
            list(range(1, k + 2)),
            rule=rule,  # type: ignore[arg-type]
            epsilon=epsilon,
            value_range=value_range,
            q=q,
            omega_threshold=omega_threshold,
        )
        rejected += decision.decision == "reject"
        for outcome in decision.raters:
            if outcome.won is None:
                continue
            if outcome.rater == 1:
                used_primary += 1
                lost_primary += not outcome.won
            else:
                used_secondary += 1
                lost_secondary += not outcome.won
    fr, fr_se = _share(rejected, trials)
    rates = [_share(lost_secondary, used_secondary), _share(lost_primary, used_primary)]
    rater_fr, rater_fr_se = max((r for r in rates if np.isfinite(r[0])), default=(np.nan, np.nan))
    return ScorePlanCheck(
        m=int(m),
        trials=int(trials),
        fr=fr,
        fr_se=fr_se,
        rater_fr=rater_fr,
        rater_fr_se=rater_fr_se,
        promise=promise,
        reason="",
    )


def raised_score_check(
    ratings: object,
    judge: int,
    humans: list[int],
    *,
    m: int,
    n_items: int,
    rule: str,
    value_range: tuple[float, float] | None,
    epsilon: float | None = None,
    alpha_sig: float = 0.05,
    q: float = 0.05,
    omega_threshold: float = 0.5,
    trials: int = 1000,
    rng: int | np.random.Generator | None = None,
) -> ScorePlanCheck:
    """``score_plan_check`` at ``m``, then at ``m`` raised by 15% (at most ``n_items``, at most ``CHECK_RAISES``
    times) while the check does not let the plan stand: the recipe's own ``m`` stands unless the simulated
    per-human rate is broken, a raised ``m`` must be kept (docs/method.md §6, "The promise and raising m")."""
    generator = np.random.default_rng(rng)
    check = score_plan_check(
        ratings,
        judge,
        humans,
        m=m,
        rule=rule,
        value_range=value_range,
        epsilon=epsilon,
        alpha_sig=alpha_sig,
        q=q,
        omega_threshold=omega_threshold,
        trials=trials,
        rng=generator,
    )
    for _ in range(CHECK_RAISES):
        stands = check.keeps_promise or (check.m == m and check.promise_status == "unresolved")
        if check.reason or stands or check.m >= n_items:
            break
        check = score_plan_check(
            ratings,
            judge,
            humans,
            m=min(n_items, math.ceil(1.15 * check.m)),
            rule=rule,
            value_range=value_range,
            epsilon=epsilon,
            alpha_sig=alpha_sig,
            q=q,
            omega_threshold=omega_threshold,
            trials=trials,
            rng=generator,
        )
    return check
