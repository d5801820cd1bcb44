"""A plan's overlap recipe from priors or the pilot in hand: certification and ranking m (docs/method.md §4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from planner.estimator_check import raised_estimator_checks
from planner.intervals import optional_float
from planner.neyman import AllItemsVariances, moment_variances, prior_cells, prior_variances
from planner.patterns import ItemPatterns
from planner.plan_check import (
    needs_no_raise,
    true_prevalence,
)
from planner.ratio_moments import RATIO_COEFFICIENTS, RatioPrior, ratio_moments
from planner.recipes import Recipe, certify_recipe
from planner.xi_moments import XiLattice, advantage_moments, ladder_variance, pilot_moments, xi_lattice
from service.core.errors import Conflict, Invalid
from service.matrices.matrix import LabelMatrix
from service.planning.lists import primary_strata
from service.schemas.plans import PlanCreate
from service.schemas.projects import DecisionSettings

ESTIMATORS = ("paired", "ppi", "neyman")
CHECK_TRIALS = 1000


def _moments(
    body: PlanCreate, matrix: LabelMatrix, decision: DecisionSettings, n_resamples: int, pool_size: int
) -> dict[str, Any]:
    if body.source == "prior" and decision.rule == "margin" and decision.coefficient in RATIO_COEFFICIENTS:
        assert body.p_h is not None and body.p_j is not None
        return _ratio_prior(body.p_h, body.p_j, matrix, decision.coefficient, pool_size)
    if body.source == "prior":
        assert body.p_h is not None and body.p_j is not None
        lattice = xi_lattice(body.p_h, body.p_j, n_labels=matrix.n_labels, pool_size=pool_size)
        mu_d, sigma0_sq = lattice.mu_d, lattice.variance
        note = f"symmetric noise channel, {pool_size} held-in label(s) per overlap item (docs/method.md §4)"
        if decision.rule == "alt-test":
            mu_d, sigma0_sq = advantage_moments(*lattice.advantage)
            note += "; moments of W_f - W_h, the sign of xi"
        return {
            "source": "prior",
            "p_h": body.p_h,
            "p_j": body.p_j,
            "mu_d": mu_d,
            "sigma0_sq": sigma0_sq,
            "pool_size": pool_size,
            "note": note,
            "lattice": lattice,
        }
    judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
    if not judges or len(humans) < 2:
        raise Conflict("a pilot plan needs a judge and at least two human raters with labels", code="no_pilot")
    pilot = pilot_estimate(matrix.codes, matrix.n_labels, judges[0], humans, decision.rule, n_resamples)
    if pilot is None:
        raise Conflict(
            "no overlap in hand yet: a pilot plan needs items labeled by the judge and two humans", code="no_pilot"
        )
    note = "plug-in estimates from the labels in hand; their uncertainty is the interval"
    if decision.coefficient in RATIO_COEFFICIENTS:
        note += (
            f"; moments of the p_o margin: a pilot plan for {decision.coefficient} uses the p_o recipe "
            "(its delta-method constant is planned from priors, docs/method.md §4, item 4)"
        )
    return {**pilot, "note": note}


def _ratio_prior(p_h: float, p_j: float, matrix: LabelMatrix, coefficient: str, pool_size: int) -> dict[str, Any]:
    """Prior moments of a ratio coefficient's margin: the delta-method constant (docs/method.md §4, item 4)."""
    prevalence = true_prevalence_in_hand(matrix, p_h)
    try:
        mu_d, sigma0_sq = ratio_moments(
            p_h, p_j, n_labels=matrix.n_labels, coefficient=coefficient, prevalence=prevalence, pool_size=pool_size
        )
    except ValueError as error:  # a degenerate prior: every label the same
        raise Conflict(f"cannot plan {coefficient} from this prior: {error}", code="undefined_coefficient") from None
    return {
        "source": "prior",
        "p_h": p_h,
        "p_j": p_j,
        "mu_d": mu_d,
        "sigma0_sq": sigma0_sq,
        "pool_size": pool_size,
        "coefficient": coefficient,
        "prevalence": None if prevalence is None else prevalence.tolist(),
        "lattice": RatioPrior(  # small overlaps: the FR simulated, not the normal form's (§4, item 4)
            p_h, p_j, matrix.n_labels, coefficient, None if prevalence is None else tuple(prevalence), pool_size
        ),
        "note": f"delta-method variance of the {coefficient} margin under the symmetric noise channel, true label "
        f"shares from the primary's labels (uniform without any), {pool_size} held-in label(s) per overlap item "
        "(docs/method.md §4, item 4)",
    }


def pilot_estimate(
    codes: np.ndarray | ItemPatterns, n_labels: int, judge: int, humans: list[int], rule: str, n_resamples: int
) -> dict[str, Any] | None:
    """``mu_d``, ``sigma0^2`` from the overlap in hand in ``codes`` (a code matrix or its item patterns), with
    intervals (docs/method.md §4); None without overlap."""
    pilot = pilot_moments(
        codes, judge=judge, humans=humans, n_labels=n_labels, rule=rule, n_resamples=n_resamples, rng=0
    )
    if not (np.isfinite(pilot.mu_d) and np.isfinite(pilot.sigma0_sq)):
        return None
    return {
        "source": "pilot",
        "mu_d": pilot.mu_d,
        "sigma0_sq": pilot.sigma0_sq,
        "mu_d_ci": pilot.mu_d_ci.as_list(),
        "sigma0_sq_ci": pilot.sigma0_sq_ci.as_list(),
        "m_pilot": pilot.m,
        "n_raters_pilot": pilot.n_raters,
    }


def certification(
    decision: DecisionSettings,
    mu_d: float,
    sigma0_sq: float,
    *,
    n_items: int,
    n_humans: int,
    epsilon: float | None = None,
    pool_size: int = 1,
    lattice: XiLattice | RatioPrior | None = None,
    coefficient: str = "po",
    promise: str = "rater",
) -> Recipe:
    """The certification recipe under the project's decision settings, or another ``epsilon`` (docs/method.md §4).

    With a prior ``lattice`` the margin rule's FR is exact on the lattice; without one (a pilot) it is
    continuity-corrected for ``pool_size`` held-in labels per overlap item. ``coefficient``: what the
    moments are of (a ratio coefficient's come from ``ratio_moments`` and plan on the normal form).
    ``promise``: whose FR ``m`` keeps within ``alpha_sig/2``, each held-out human's or the judge's (§4, item 6).
    """
    margin = decision.rule == "margin"
    return certify_recipe(
        mu_d,
        sigma0_sq,
        n_items=n_items,
        n_humans=n_humans,
        rule=decision.rule,
        epsilon=decision.resolved_epsilon() if epsilon is None else epsilon,
        alpha_sig=decision.alpha_sig,
        q=decision.q,
        pool_size=lattice.pool_size if lattice is not None and margin else pool_size,
        lattice=lattice if margin else None,
        coefficient=coefficient,
        omega_threshold=decision.omega_threshold,
        promise=promise,
    )


def _slice_recipe(
    decision: DecisionSettings,
    moments: dict[str, Any],
    n_items: int,
    epsilon: float,
    *,
    n_humans: int,
    pool_size: int,
    lattice: XiLattice | RatioPrior | None,
) -> Recipe:
    """The certification recipe of one slice (docs/method.md §3b): the plan's moments on its items, its epsilon."""
    return certification(
        decision,
        moments["mu_d"],
        moments["sigma0_sq"],
        n_items=n_items,
        n_humans=n_humans,
        epsilon=epsilon,
        pool_size=pool_size,
        lattice=lattice,
        coefficient=moments.get("coefficient", "po"),
    )


def promise_iv(body: PlanCreate, decision: DecisionSettings) -> None:
    """Raise ``Invalid`` (a 422) when the request's judge-level promise does not apply under the project's
    decision settings (docs/method.md §4, item 6); the body's own fields are checked by ``PlanCreate``."""
    if body.promise != "judge":
        return
    needs = {
        "rule": ("margin", decision.rule),
        "coefficient": ("po", decision.coefficient),
        "estimator": ("paired", decision.estimator),
        "monitoring": ("fixed", decision.resolved_monitoring()),
    }
    wrong = [f"{name} {have!r}" for name, (want, have) in needs.items() if want != have]
    if not wrong:
        return
    anytime = (
        "; in anytime mode the plan's m is already the judge-level one: the monitored decision is the judge's "
        "(reject only when more than K - ceil(omega K) humans are certified lost), it rejects a judge within "
        "the margin with probability at most alpha_sig at every look whatever m, so no overlap buys a smaller "
        "false rejection, and m is sized by the power to pass (recipe.m_anytime, its FR under monitoring shown "
        "beside it): plan without a promise"
        if decision.resolved_monitoring() == "anytime"
        else ""
    )
    raise Invalid(
        "promise 'judge' sizes the fixed margin rule's one look on p_o with the paired estimator; this "
        f"project's decision has {', '.join(wrong)}: set decision rule 'margin', coefficient 'po', estimator "
        f"'paired' and monitoring 'fixed', or plan promise 'rater'{anytime}",
        code="promise_not_applicable",
    )


def ranking_variance(
    moments: dict[str, Any], delta_min: float, *, n_labels: int, n_humans: int, n_judges: int = 2
) -> float:
    """Per-item variance of the adjacent pairs' margins that ``m_rank`` plans on (docs/method.md §4, item 3).

    From priors: the largest ``paired_variance`` over the ``n_judges - 1`` adjacent pairs of judges
    ``delta_min`` apart in ``d`` from the one at ``p_j`` down (``ladder_variance``; the lowest pair, nearest
    chance, varies most). From a pilot, which holds no second judge, the unpaired bound ``2 sigma0^2``.
    """
    if moments["source"] != "prior":
        return 2.0 * float(moments["sigma0_sq"])
    p_h, p_j = float(moments["p_h"]), float(moments["p_j"])
    try:
        variance, _ = ladder_variance(p_h, p_j, delta_min, n_labels=n_labels, n_humans=n_humans, n_judges=n_judges)
    except ValueError as error:
        raise Conflict(f"cannot plan this ranking: {error}", code="infeasible_ranking") from None
    return variance


EPSILON_STEPS = tuple(round(0.01 * k, 2) for k in range(1, 51))


def feasible_with(
    decision: DecisionSettings,
    mu_d: float,
    sigma0_sq: float,
    *,
    n_items: int,
    n_humans: int,
    m: int | None,
    pool_size: int = 1,
    coefficient: str = "po",
) -> dict[str, Any]:
    """What would let an infeasible certification fit the corpus: the smallest ``epsilon`` in steps of
    0.01 up to 0.5 whose recipe from the moments (for ``pool_size`` held-in labels) fits, None if none
    does, and the corpus size the recipe needs. The exact lattice recipe of a prior plan can ask a few
    items more than the moments (120 against 117 at the README's prior), so the epsilon is a guide."""

    def fits(epsilon: float) -> bool:
        # Far from fitting by the normal approximation m ~ sigma0^2 (2 / (mu_d + epsilon))^2: not computed
        # (the recipe's cost grows with m).
        if mu_d + epsilon <= 0 or sigma0_sq * (2.0 / (mu_d + epsilon)) ** 2 > 4 * n_items:
            return False
        return certification(
            decision,
            mu_d,
            sigma0_sq,
            n_items=n_items,
            n_humans=n_humans,
            epsilon=epsilon,
            pool_size=pool_size,
            coefficient=coefficient,
        ).feasible

    epsilon = next((e for e in EPSILON_STEPS if e > decision.resolved_epsilon() and fits(e)), None)
    return {"epsilon": epsilon, "n_items": m}


def recipe_dict(recipe: Recipe) -> dict[str, Any]:
    """A recipe as JSON: overlap, budget and the error curve."""
    plan = recipe.plan
    return {
        "goal": recipe.goal,
        "rule": recipe.rule,
        "m": recipe.m,
        "feasible": recipe.feasible,
        "reason": recipe.reason,
        "alpha_sig": recipe.alpha_sig,
        "rho": plan.rho if plan else None,
        "per_rater": list(plan.per_rater) if plan else None,
        "total_human_labels": plan.total_labels if plan else None,
        "false_rejection_curve": [{"m": m, "rate": r} for m, r in zip(recipe.m_grid, recipe.fr_rate, strict=True)],
    }


def judge_agreement(matrix: LabelMatrix) -> np.ndarray | None:
    """Per item ``1[judge = primary]``, ``-1`` where either label is missing; None without both raters."""
    judges, primary = matrix.columns("judge"), matrix.columns("primary")
    if not judges or not primary:
        return None
    j, p = matrix.codes[:, judges[0]], matrix.codes[:, primary[0]]
    return np.where((j < 0) | (p < 0), -1, (j == p).astype(np.int64))


def _variances(body: PlanCreate, moments: dict[str, Any], matrix: LabelMatrix) -> AllItemsVariances | None:
    """The all-items variance constants under the plan's source (docs/method.md §9); None when unknown."""
    if body.source == "prior":
        assert body.p_h is not None and body.p_j is not None
        return prior_variances(body.p_h, body.p_j, n_labels=matrix.n_labels)
    agree = judge_agreement(matrix)
    if agree is None or not (agree >= 0).any():
        return None
    try:
        return moment_variances(moments["mu_d"], moments["sigma0_sq"], judge_agreement=float(agree[agree >= 0].mean()))
    except ValueError:  # pilot moments from a larger pool need not fit the binary A, B law
        return None


def _m_by_estimator(
    body: PlanCreate, decision: DecisionSettings, pilot: dict[str, Any] | None, matrix: LabelMatrix, n_humans: int
) -> dict[str, Any] | None:
    """m for the paired, PPI and Neyman estimates, and the human labels each saves (docs/method.md §9).

    ``pilot``: a pilot plan's moments; a prior plan reads the prior alone (whatever the design), so
    its simulated check can run beside the design checks (``plan_draft``)."""
    if body.purpose != "certify" or decision.rule != "margin":
        return None
    if body.source == "prior":
        assert body.p_h is not None and body.p_j is not None
        if decision.coefficient in RATIO_COEFFICIENTS:
            return None  # the PPI and Neyman estimates are of p_o margins
        agreement = float(np.trace(prior_cells(body.p_h, body.p_j, n_labels=matrix.n_labels)[0]))
        one = xi_lattice(body.p_h, body.p_j, n_labels=matrix.n_labels)  # §9 estimates: the primary is the pool
        mu_d, sigma_sq = one.mu_d, one.variance
    else:
        assert pilot is not None
        mu_d, sigma_sq = pilot["mu_d"], pilot["sigma0_sq"]
        agree = judge_agreement(matrix)
        if agree is None or not (agree >= 0).any():
            return None
        agreement = float(agree[agree >= 0].mean())
    n_items = matrix.raw.shape[0]
    m: dict[str, int | None] = {}
    for estimator in ESTIMATORS:
        try:
            recipe = certify_recipe(
                mu_d,
                sigma_sq,
                n_items=n_items,
                n_humans=n_humans,
                epsilon=decision.resolved_epsilon(),
                alpha_sig=decision.alpha_sig,
                estimator=estimator,
                judge_agreement=agreement,
            )
        except ValueError:
            return None
        m[estimator] = recipe.m
    out: dict[str, Any] = {"m": m, "judge_agreement": agreement}
    sized = {e: v for e, v in m.items() if v is not None and 4 <= v <= n_items}
    if body.source == "prior" and sized and n_items >= 4:
        assert body.p_h is not None and body.p_j is not None
        promise = decision.alpha_sig / 2
        checks = raised_estimator_checks(
            body.p_h,
            body.p_j,
            n_labels=matrix.n_labels,
            n_items=n_items,
            m=sized,
            promise=promise,
            epsilon=decision.resolved_epsilon(),
            trials=CHECK_TRIALS,
            rng=0,
        )
        raised_from = {e: sized[e] for e, c in checks.items() if c.m != sized[e]}
        m.update({e: c.m for e, c in checks.items()})
        out["check"] = {
            "trials": CHECK_TRIALS,
            "promise_fr": promise,
            "note": "simulated per-rater FR of the judge the prior describes, and FA of a judge as far below "
            "-epsilon as it is above, each estimator at its own m, raised until its FR keeps the promise with 2 "
            "Monte Carlo SE inside it (the recipe's own m stands unless shown broken; docs/method.md §6, §9)",
            "estimators": {
                e: {
                    "m": c.m,
                    "raised_from": raised_from.get(e),
                    "fr": optional_float(c.fr),
                    "fr_se": optional_float(c.fr_se),
                    "fa": optional_float(c.fa),
                    "fa_se": optional_float(c.fa_se),
                    "promise_status": c.promise_status,
                    "keeps_promise": c.promise_status == "kept",
                }
                for e, c in checks.items()
            },
        }
        out["warnings"] = [
            f"simulated FR of the {e} estimate at m={sized[e]} is above the promise {promise} by more than 2 "
            f"Monte Carlo SE: m raised to {checks[e].m}"
            for e in raised_from
        ] + [
            f"simulated FR of the {e} estimate at m={c.m} is {c.fr:.3f}: the promise {promise} is {c.promise_status}"
            for e, c in checks.items()
            if not needs_no_raise(c, sized[e])
        ]
    paired = m["paired"]
    out["human_labels_saved"] = {
        e: None if paired is None or m[e] is None else (paired - int(m[e] or 0)) * (n_humans - 1)
        for e in ("ppi", "neyman")
    }
    return out


def true_prevalence_in_hand(matrix: LabelMatrix, p_h: float) -> np.ndarray | None:
    """True label shares inverted from the primary's label shares under the prior (docs/method.md §6);
    None (uniform) before the primary has labels."""
    strata = primary_strata(matrix)
    shares = np.bincount(strata[strata < matrix.n_labels], minlength=matrix.n_labels)
    return true_prevalence(shares, p_h=p_h) if shares.sum() else None
