"""Plans: the overlap recipe from priors or the pilot in hand, the design, and per-rater lists."""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from planner.codes import code_type
from planner.design_choice import choose_design
from planner.designs import design_pool_size, neyman, strat
from planner.estimator_check import raised_estimator_checks
from planner.intervals import optional_float
from planner.neyman import AllItemsVariances, moment_variances, prior_cells, prior_variances
from planner.overlap_samples import CHECK_DESIGNS
from planner.patterns import ItemPatterns
from planner.plan_check import (
    DesignCheck,
    check_design,
    fitted_channel,
    raised_check,
    raised_m,
    simulated_choice,
    true_prevalence,
)
from planner.ratio_moments import RATIO_COEFFICIENTS, RatioPrior, ratio_moments
from planner.recipes import Recipe, certify_recipe, rank_recipe
from planner.xi_moments import XiLattice, advantage_moments, ladder_variance, pilot_moments, xi_lattice
from service.core.errors import Conflict, Invalid
from service.core.offload import off_worker
from service.data.models import Assignment, CurrentLabel, Plan, Project, Rater, new_public_id
from service.data.projects import lock_project
from service.matrices.matrix import LabelMatrix
from service.matrices.store import current_matrix
from service.planning.lists import SEQUENTIAL, ListCorpus, ensure_assignments, monitoring_budget, primary_strata
from service.planning.monitoring_costs import plan_monitoring
from service.planning.score_plans import score_plan
from service.planning.slice_plans import slice_strata, sliced_panel
from service.planning.strata import feature_name, feature_strata, feature_stratum_sds
from service.schemas import DecisionSettings, PlanCreate

COVERAGE_AWARE = ("disjoint", "seq-coverage")  # a list depends on the lists already drawn
ESTIMATORS = ("paired", "ppi", "neyman")
CHECK_TRIALS = 1000
COMPARE_TRIALS = 500
"""Trials of each candidate design's check: enough to compare them; the chosen design's own check, at
``CHECK_TRIALS`` from a stream of its own, is the one the plan's promise rests on (docs/method.md §6)."""
CHECK_THREADS = 2
"""Threads that simulate a plan's checks at once (numpy releases the GIL in their array work)."""
SLOWEST_CHECK_FIRST = ("seq-coverage", "random", "disjoint", "strat")
T = TypeVar("T")
UNKNOWN_SD = 0.5  # S_h of a stratum with no judge-primary pair yet: the largest a share can have


def current_plan(session: Session, project_id: str) -> Plan | None:
    """The plan in force: the project's newest."""
    return session.scalar(
        select(Plan).where(Plan.project_id == project_id).order_by(Plan.created_at.desc(), Plan.id.desc()).limit(1)
    )


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
    prevalence = _true_prevalence(matrix, p_h)
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
    if wrong:
        raise Invalid(
            "promise 'judge' sizes the fixed margin rule's one look on p_o with the paired estimator (in anytime "
            f"mode m is the monitor's); this project's decision has {', '.join(wrong)}: set decision rule "
            "'margin', coefficient 'po', estimator 'paired' and monitoring 'fixed', or plan promise 'rater'",
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


def plan_progress(session: Session, project: Project, plan: Plan | None) -> dict[str, Any] | None:
    """How far the secondaries are through the plan's lists: the least advanced, and labels still owed."""
    if plan is None:
        return None
    done = {
        rid: n
        for rid, n in session.execute(
            select(Assignment.rater_id, func.count())
            .join(
                CurrentLabel,
                (CurrentLabel.item_id == Assignment.item_id) & (CurrentLabel.rater_id == Assignment.rater_id),
            )
            .where(Assignment.project_id == project.id)
            .group_by(Assignment.rater_id)
        )
    }
    humans = session.execute(
        select(Rater.id, Rater.external_id)
        .where(Rater.project_id == project.id, Rater.kind == "human")
        .order_by(Rater.id)
    ).all()
    listed = dict(
        session.execute(
            select(Assignment.rater_id, func.count())
            .where(Assignment.project_id == project.id)
            .group_by(Assignment.rater_id)
        ).all()
    )
    target = plan.m or 0
    per = [done.get(rid, 0) for rid, _ in humans]
    held = [max(target, listed.get(rid, 0)) for rid, _ in humans]  # a list extended past m (§8.1) owes its extension
    return {
        "plan": plan.id,
        "m_target": plan.m,
        "m_budget": monitoring_budget(plan),
        "design": plan.design,
        "m_done_min": min(per) if per else 0,
        "remaining_labels": sum(max(0, h - n) for h, n in zip(held, per, strict=True)),
        "raters": [{"rater": name, "done": n, "listed": h} for (_, name), n, h in zip(humans, per, held, strict=True)],
    }


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
            "-epsilon as it is above, each estimator at its own m, raised while its FR breaks the promise by more "
            "than 2 Monte Carlo SE (docs/method.md §6, §9)",
            "estimators": {
                e: {
                    "m": c.m,
                    "raised_from": raised_from.get(e),
                    "fr": optional_float(c.fr),
                    "fr_se": optional_float(c.fr_se),
                    "fa": optional_float(c.fa),
                    "fa_se": optional_float(c.fa_se),
                    "keeps_promise": bool(not c.fr > promise + 2 * c.fr_se),
                }
                for e, c in checks.items()
            },
        }
        out["warnings"] = [
            f"simulated FR of the {e} estimate at m={sized[e]} is above the promise {promise} by more than 2 "
            f"Monte Carlo SE: m raised to {checks[e].m}"
            for e in raised_from
        ] + [
            f"simulated FR of the {e} estimate at m={c.m} is {c.fr:.3f}, still above the promise {promise}"
            for e, c in checks.items()
            if c.fr > promise + 2 * c.fr_se
        ]
    paired = m["paired"]
    out["human_labels_saved"] = {
        e: None if paired is None or m[e] is None else (paired - int(m[e] or 0)) * (n_humans - 1)
        for e in ("ppi", "neyman")
    }
    return out


def _neyman_panel(
    body: PlanCreate,
    moments: dict[str, Any],
    matrix: LabelMatrix,
    m: int,
    seed: int,
    features: tuple[np.ndarray, list[str]] | None,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The Neyman panel over the request's strata, its inclusion probabilities and a summary."""
    agree = judge_agreement(matrix)
    feature = feature_name(body.strata)
    extra: dict[str, Any] = {}
    if feature is not None:
        assert features is not None  # read by the request (feature_strata)
        strata, names = features
        sds, source = feature_stratum_sds(body, matrix, strata, agree)
        extra = {"feature": feature, "sd_source": source}
    elif agree is None or not (agree >= 0).any():
        raise Conflict(
            "the neyman design stratifies on judge-primary agreement: load the judge's and the primary's labels first",
            code="no_strata",
        )
    elif (variances := _variances(body, moments, matrix)) is None:
        raise Conflict("the pilot moments give no stratum spread; plan the neyman design from priors", code="no_strata")
    elif body.strata == "labels":
        assert body.p_h is not None and body.p_j is not None
        n_labels = matrix.n_labels
        judge, primary = matrix.codes[:, matrix.columns("judge")[0]], matrix.codes[:, matrix.columns("primary")[0]]
        strata = np.where(agree < 0, n_labels * n_labels, primary * n_labels + judge)
        b_rate = prior_cells(body.p_h, body.p_j, n_labels=n_labels)[1].ravel()
        sds = [*np.sqrt(b_rate * (1 - b_rate)).tolist(), UNKNOWN_SD]
        names = [f"primary label {a}, judge label {b}" for a in range(n_labels) for b in range(n_labels)]
        names.append("judge or primary label missing")
    else:
        strata = np.where(agree < 0, 2, agree)
        sds = [*variances.stratum_sd, UNKNOWN_SD]
        names = ["judge and primary disagree", "judge and primary agree", "judge or primary label missing"]
    sizes = np.bincount(strata, minlength=len(sds))
    if m < int(np.minimum(sizes, 2).sum()):
        raise Conflict(f"m={m} is too small for a Neyman panel: every stratum needs 2 items", code="m_too_small")
    lists, inclusion = neyman(strata, m, sds=sds, raters=["panel"], rng=seed)
    panel = lists["panel"]
    taken = np.bincount(strata[panel], minlength=len(sds))
    summary = {
        "strata": names,
        "stratum_sizes": sizes.tolist(),
        "stratum_sd": sds,
        "allocation": taken.tolist(),
        "weighting": "ht",
        **extra,
    }
    return panel, inclusion[panel], summary


def _entropy_design(body: PlanCreate, matrix: LabelMatrix) -> tuple[str, float | None, str, list[str]]:
    """The design by the stratum-entropy rule (or the request's), the entropy, why, and warnings."""
    strata = primary_strata(matrix)
    observed = strata[strata < matrix.n_labels]
    if body.design != "auto":
        entropy = None
        if observed.size:
            entropy = choose_design(observed, n_labels=matrix.n_labels).entropy
        return body.design, entropy, "chosen by the request", []
    if observed.size == 0:
        return "strat", None, "no primary labels yet: a shared panel drawn uniformly (Strat with one stratum)", []
    choice = choose_design(observed, n_labels=matrix.n_labels)
    return choice.design, choice.entropy, choice.reason, list(choice.warnings)


def _true_prevalence(matrix: LabelMatrix, p_h: float) -> np.ndarray | None:
    """True label shares inverted from the primary's label shares under the prior (docs/method.md §6);
    None (uniform) before the primary has labels."""
    strata = primary_strata(matrix)
    shares = np.bincount(strata[strata < matrix.n_labels], minlength=matrix.n_labels)
    return true_prevalence(shares, p_h=p_h) if shares.sum() else None


def _check_settings(
    decision: DecisionSettings, matrix: LabelMatrix, n_humans: int, p_h: float, p_j: float
) -> dict[str, Any]:
    """The plan check's settings (docs/method.md §6): the project's n, K, L, true prevalence
    (inverted from the primary's label shares; uniform without them), coefficient, rule and channel."""
    return {
        "n_items": matrix.raw.shape[0],
        "n_humans": n_humans,
        "n_labels": matrix.n_labels,
        "p_h": p_h,
        "p_j": p_j,
        "prevalence": _true_prevalence(matrix, p_h),
        "coefficient": decision.coefficient,
        "rule": decision.rule,
        "epsilon": decision.resolved_epsilon(),
        "alpha_sig": decision.alpha_sig,
        "omega_threshold": decision.omega_threshold,
        "q": decision.q,
        "trials": CHECK_TRIALS,
    }


def _check_dict(check: DesignCheck) -> dict[str, Any]:
    """A design's check as JSON (NaN -> null)."""
    rates = ("fr", "rater_fr", "fa", "wrong", "inconclusive")
    out: dict[str, Any] = {"design": check.design, "m": check.m, "trials": check.trials}
    for rate in rates:
        out[rate] = optional_float(getattr(check, rate))
        out[f"{rate}_se"] = optional_float(getattr(check, f"{rate}_se"))
    out["p_j_bad"] = optional_float(check.p_j_bad)
    out["keeps_promise"] = check.keeps_promise
    out["note"] = check.reason
    return out


def _unchecked(reason: str) -> dict[str, Any]:
    return {"simulated": False, "reason": reason}


@dataclass(frozen=True)
class _Candidates:
    """Every candidate design's check at ``m`` (the design-free recipe's overlap), that recipe, or
    no checks and why (docs/method.md §6)."""

    checks: dict[str, DesignCheck]
    m: int | None
    reason: str
    recipe: Recipe | None = None
    settings: dict[str, Any] | None = None
    final: Future[DesignCheck] | None = None  # the request's design at the request's m (_plan_check's)


def _candidate_checks(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    n_humans: int,
    n_resamples: int,
    seed: int,
    threads: Executor,
) -> _Candidates:
    """Every candidate design simulated at the design-free recipe's overlap (one held-in label per
    item, valid for every design), or no checks and why (docs/method.md §6).

    The designs are simulated on ``threads`` at once, each from its own stream of ``seed``, so the
    checks are the same whatever the threads' timing (the monitoring is sized after the design is
    chosen: ``_sized_for_monitoring``). A request fixing both the design and ``m`` has its plan's check
    queued beside
    the candidates (``_plan_check`` reads it)."""
    if body.purpose != "certify":
        return _Candidates({}, None, "ranking plans are not simulated")
    if body.source == "prior":
        assert body.p_h is not None and body.p_j is not None
        channel = (body.p_h, body.p_j)
    else:
        judges, humans = matrix.columns("judge"), matrix.columns("primary", "human")
        fitted = None
        if judges:
            fitted = fitted_channel(matrix.codes, judge=judges[0], humans=humans, n_labels=matrix.n_labels)
        if fitted is None:
            return _Candidates(
                {}, None, "the pilot's humans agree no better than chance: no noise channel to simulate from"
            )
        channel = fitted
    moments = _moments(body, matrix, decision, n_resamples, 1)
    recipe = certification(
        decision,
        moments["mu_d"],
        moments["sigma0_sq"],
        n_items=matrix.raw.shape[0],
        n_humans=n_humans,
        lattice=moments.get("lattice"),
        coefficient=moments.get("coefficient", "po"),
        promise=body.promise,
    )
    m = body.m if body.m is not None else recipe.m
    if m is None:
        return _Candidates({}, None, "the recipe finds no overlap that certifies this judge", recipe)
    m = min(int(m), matrix.raw.shape[0])
    settings = _check_settings(decision, matrix, n_humans, *channel)
    streams = dict(zip(CHECK_DESIGNS, np.random.SeedSequence(seed).spawn(len(CHECK_DESIGNS)), strict=True))
    final, running = None, {}
    compared = {**settings, "trials": COMPARE_TRIALS}
    for d in SLOWEST_CHECK_FIRST:
        if d == body.design and body.m is not None:  # the plan's own check needs no candidate's result
            final = threads.submit(check_design, d, m=m, rng=np.random.default_rng([seed, 1]), **settings)
        running[d] = threads.submit(check_design, d, m=m, rng=np.random.default_rng(streams[d]), **compared)
    checks = {d: _promised(body, running[d].result()) for d in CHECK_DESIGNS}
    return _Candidates(checks, m, "", recipe, settings, final)


def _promised(body: PlanCreate, check: DesignCheck) -> DesignCheck:
    """``check`` judged by the request's promise: under ``promise="judge"`` the promised rate is ``fr``, the
    good judge rejected (``omega < omega_threshold``), not each held-out human's (docs/method.md §4, item 6)."""
    if body.promise != "judge":
        return check
    return replace(check, promised="fr", keeps_promise=bool(check.fr <= check.promise + 2 * check.fr_se))


def _design(
    body: PlanCreate, by_entropy: tuple[str, float | None, str, list[str]], checks: dict[str, DesignCheck]
) -> tuple[str, float | None, str, list[str]]:
    """The plan's design: the request's, else the lowest simulated wrong-decision rate (ties and no
    simulation: the stratum-entropy rule's pick ``by_entropy``, from ``_entropy_design``), with the
    entropy, why, and warnings (docs/method.md §5)."""
    design, entropy, why, warnings = by_entropy
    if body.design != "auto" or not checks:
        return design, entropy, why, warnings
    pick, reason = simulated_choice(checks, preferred=design)
    return pick, entropy, reason, warnings


def _plan_check(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    n_humans: int,
    design: str,
    m: int | None,
    candidates: _Candidates,
    seed: int,
) -> tuple[dict[str, Any], int | None, list[str]]:
    """The ``check`` block, the overlap after any raise, and notes (docs/method.md §6): the chosen
    design at the recipe's ``m``; when its simulated promise fails, ``m`` grows until it holds
    (not when the request fixed ``m``)."""
    checks, m_compared = candidates.checks, candidates.m
    if not checks:
        return _unchecked(candidates.reason), m, []
    block: dict[str, Any] = {
        "simulated": True,
        "reason": "each candidate design at m_compared, the design-free recipe's overlap; FR for the judge of the "
        "channel (the prior's, or fitted to the pilot's agreement), FA for the mirror judge as far below -epsilon "
        "(docs/method.md §6)",
        "channel": {"p_h": candidates.settings["p_h"], "p_j": candidates.settings["p_j"], "source": body.source}
        if candidates.settings
        else None,
        "promised": next(iter(checks.values())).promised,
        "promise": decision.alpha_sig / 2,
        "m_compared": m_compared,
        "designs": {d: _check_dict(c) for d, c in checks.items()},
        "raised_from": None,
    }
    if design not in CHECK_DESIGNS or m is None or candidates.settings is None:
        block["plan"] = None
        return block, m, []
    settings = candidates.settings
    rng = np.random.default_rng([seed, 1])
    if candidates.final is not None:
        final = candidates.final.result()  # check_design at the request's design and m, beside the candidates
    elif body.m is not None:
        final = check_design(design, m=m, rng=rng, **settings)
    elif body.promise == "judge":

        def judged_at(size: int) -> DesignCheck:
            return _promised(body, check_design(design, m=size, rng=rng, **settings))

        final, _ = raised_m(
            judged_at, m, n_items=settings["n_items"], keeps=lambda c: c.keeps_promise or math.isnan(c.fr)
        )
    else:
        final = raised_check(design, m=m, rng=rng, **settings)
    final = _promised(body, final)
    block["plan"] = _check_dict(final)
    notes = []
    if final.m != m:
        block["raised_from"] = m
        notes.append(
            f"the simulated {final.promised} of {design} at the recipe's m={m} broke the promise "
            f"{decision.alpha_sig / 2} by more than 2 Monte Carlo SE: m raised to {final.m}"
        )
    if not final.keeps_promise:
        notes.append(f"the simulated {final.promised} of {design} at m={final.m} is still above the promise")
    return block, final.m, notes


def _sized_for_monitoring(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    n_humans: int,
    design: str,
    m_fixed: int,
    candidates: _Candidates,
    seed: int,
    document: dict[str, Any],
) -> int:
    """The plan's overlap for the decision mode in force, with the ``monitoring`` block and the one-look
    ``m_fixed`` in ``document`` (docs/method.md §8.1): in anytime mode the monitor's ``m_anytime``,
    simulated in the service's order from the check's channel (the prior's or the pilot's)."""
    settings = candidates.settings
    channel = None if settings is None else (float(settings["p_h"]), float(settings["p_j"]))
    block = plan_monitoring(
        decision,
        channel,
        n_labels=matrix.n_labels,
        n_humans=n_humans,
        n_items=matrix.raw.shape[0],
        design=design,
        m_fixed=m_fixed,
        m_request=body.m,
        budget_request=body.budget,
        seed=seed,
    )
    document["monitoring"] = block
    document["m_fixed"] = m_fixed
    document["m_anytime"] = block.get("m_anytime")
    if not block["simulated"]:
        if body.budget is not None and body.budget < m_fixed:
            raise Invalid(f"budget {body.budget} is below the plan's overlap m = {m_fixed}", code="budget_below_m")
        return m_fixed
    m = int(min(block["m"], matrix.raw.shape[0]))
    document["m_planned"] = m
    document["warnings"] = document["warnings"] + block["warnings"]
    return m


@dataclass(frozen=True)
class PlanDraft:
    """What a plan computes from the labels in hand, before it is stored."""

    design: str
    m: int | None
    document: dict[str, Any]
    panel: list[int]
    panel_inclusion: list[float]


PLAN_ATTEMPTS = 2
"""Drafts computed outside the project lock; when the project moved on under each, the next is computed
under it (``create_plan``)."""


class StaleDraft(Exception):
    """The project's labels, corpus, raters or settings changed while its plan was drafted."""


@dataclass(frozen=True)
class DraftedPlan:
    """A plan's draft, the matrix it was computed from and what the project was then (``plan_inputs``)."""

    inputs: tuple[Any, ...]
    matrix: LabelMatrix
    draft: PlanDraft


def plan_inputs(session: Session, project: Project) -> tuple[Any, ...]:
    """What a plan is computed from: the labels in hand (``label_seq``), the corpus, the raters and the
    settings. Equal inputs give the same plan for the same seed."""
    raters = session.execute(
        select(Rater.id, Rater.kind).where(Rater.project_id == project.id).order_by(Rater.id)
    ).all()
    return (
        project.label_seq,
        project.item_count,
        tuple(project.labels),
        tuple(project.criteria),
        sorted(project.decision.items()),
        tuple(map(tuple, raters)),
    )


def drafted_plan(session: Session, project: Project, body: PlanCreate, seed: int, *, n_resamples: int) -> DraftedPlan:
    """The plan computed from the project's labels as ``session`` sees them; writes nothing, takes no lock.

    The computation runs off the web worker for a large project (``service.core.offload.off_worker``),
    which receives the codes alone (``_drafting``).
    """
    promise_iv(body, project.decision_settings)
    inputs = plan_inputs(session, project)
    if project.scale == "numeric":
        matrix, design, m, document = score_plan(session, project, body, seed, n_resamples=n_resamples)
        return DraftedPlan(inputs, matrix, PlanDraft(design, m, document, [], []))
    matrix = current_matrix(session, project, project.criteria[0])
    if matrix.raw.shape[0] == 0:
        raise Conflict("the project has no items to plan for; upload items first", code="no_items")
    feature = feature_name(body.strata)
    features = None if feature is None else feature_strata(session, matrix, feature)
    if body.slices is not None:  # a per-slice plan's strata are its slices (it is a strat plan: no neyman strata)
        features = slice_strata(session, matrix, body.slices)
    decision = project.decision_settings
    draft = off_worker(
        matrix.raw.size, plan_draft, body, decision, _drafting(matrix), seed, features, n_resamples=n_resamples
    )
    return DraftedPlan(inputs, matrix, draft)


def _drafting(matrix: LabelMatrix) -> LabelMatrix:
    """What ``plan_draft`` reads of ``matrix``: the codes in their compact type, without the arrival order;
    a tenth of the bytes to send to a child process."""
    return replace(matrix, raw=matrix.codes.astype(code_type(matrix.n_labels)), order=np.empty((0, 0), dtype=np.int64))


def create_plan(
    read: Session,
    write: Session,
    project_id: str,
    body: PlanCreate,
    *,
    n_resamples: int,
    commit: Callable[[Callable[[], Plan]], T],
) -> T:
    """Compute the plan from the labels in hand, then store it; ``commit(store)`` runs the write unit
    (e.g. an idempotent write) around ``store``, which returns the stored plan.

    The draft (recipe, simulated check, design, panel) is computed from ``read`` before any lock,
    so writers of the project are not held up by it. ``store`` takes the project lock, re-reads
    the project and stores the draft only if nothing it was computed from changed (``plan_inputs``);
    else the write unit is rolled back and the plan drafted again from the newer labels, and after
    ``PLAN_ATTEMPTS`` drafts overtaken that way, computed under the lock. A stored plan is always
    the plan of the labels in hand when it was stored (its ``label_seq``).
    """
    seed = body.seed if body.seed is not None else secrets.randbelow(2**62)
    for attempt in range(PLAN_ATTEMPTS + 1):
        drafted: DraftedPlan | None = None
        if attempt < PLAN_ATTEMPTS:
            project = read.get(Project, project_id, populate_existing=True)
            assert project is not None
            drafted = drafted_plan(read, project, body, seed, n_resamples=n_resamples)
            read.commit()  # end the read snapshot: the next draft sees the labels written meanwhile

        def store(drafted: DraftedPlan | None = drafted) -> Plan:
            lock_project(write, project_id)
            project = write.get(Project, project_id, populate_existing=True)
            assert project is not None
            if drafted is None:
                drafted = drafted_plan(write, project, body, seed, n_resamples=n_resamples)
            elif drafted.inputs != plan_inputs(write, project):
                raise StaleDraft
            return _stored_plan(write, project, body, seed, drafted)

        try:
            return commit(store)
        except StaleDraft:
            write.rollback()  # releases the lock; the project moved on: draft again
    raise AssertionError("the last attempt computes under the lock")  # pragma: no cover


def _stored_plan(session: Session, project: Project, body: PlanCreate, seed: int, drafted: DraftedPlan) -> Plan:
    """Store ``drafted`` as the plan in force (the caller holds the project lock); lists of existing
    secondaries are drawn now (non-sequential designs)."""
    draft = drafted.draft
    plan = Plan(
        id=new_public_id("plan"),
        project_id=project.id,
        purpose=body.purpose,
        source=body.source,
        design=draft.design,
        seed=seed,
        m=draft.m,
        recipe=draft.document,
        label_seq=project.label_seq,
        params={**body.model_dump(), "panel": draft.panel, "panel_inclusion": draft.panel_inclusion},
    )
    session.add(plan)
    session.flush()
    if draft.m is not None and draft.design not in SEQUENTIAL:
        corpus = ListCorpus(drafted.matrix)
        for rater in session.scalars(select(Rater).where(Rater.project_id == project.id, Rater.kind == "human")):
            ensure_assignments(session, plan, rater, corpus)
    return plan


def plan_draft(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    seed: int,
    features: tuple[np.ndarray, list[str]] | None,
    *,
    n_resamples: int,
) -> PlanDraft:
    """The plan's recipe, design, document and panel from the labels in hand (docs/method.md §4–5); pure.

    ``features`` are the strata of the feature the request stratifies on, if any (``feature_strata``).
    The simulated checks run on ``CHECK_THREADS`` threads; the document is the same for a seed.
    """
    threads = ThreadPoolExecutor(CHECK_THREADS)
    try:
        return _draft(body, decision, matrix, seed, features, n_resamples=n_resamples, threads=threads)
    finally:
        threads.shutdown(cancel_futures=True)


def _draft(
    body: PlanCreate,
    decision: DecisionSettings,
    matrix: LabelMatrix,
    seed: int,
    features: tuple[np.ndarray, list[str]] | None,
    *,
    n_resamples: int,
    threads: Executor,
) -> PlanDraft:
    """``plan_draft`` with its simulations on ``threads``: a prior plan's estimator check runs beside
    the design checks (it does not depend on the design)."""
    n_items = matrix.raw.shape[0]
    humans = matrix.columns("primary", "human")
    n_humans = body.n_raters or max(len(humans), 2)
    by_estimator = None
    if body.source == "prior":
        by_estimator = threads.submit(_m_by_estimator, body, decision, None, matrix, n_humans)
    by_entropy = _entropy_design(body, matrix)
    candidates = _candidate_checks(body, decision, matrix, n_humans, n_resamples, seed, threads)
    design, entropy, why, warnings = _design(body, by_entropy, candidates.checks)
    # A design chosen by its simulated rate at the compared overlap is served at that overlap: re-planned at
    # its own (a shared panel's smaller) m it would be served where it was never compared (issue 29).
    chosen_at_compared = body.design == "auto" and bool(candidates.checks) and candidates.recipe is not None
    pool_size = 1 if chosen_at_compared else design_pool_size(design, n_humans)
    moments = _moments(body, matrix, decision, n_resamples, pool_size)
    lattice = moments.pop("lattice", None)
    if body.purpose == "certify" and pool_size == 1 and candidates.recipe is not None:
        recipe = candidates.recipe  # the design-free recipe: this design's, or the one it was compared at
    elif body.purpose == "certify":
        recipe = certification(
            decision,
            moments["mu_d"],
            moments["sigma0_sq"],
            n_items=n_items,
            n_humans=n_humans,
            pool_size=pool_size,
            lattice=lattice,
            coefficient=moments.get("coefficient", "po"),
        )
    else:
        n_judges = body.n_judges or max(len(matrix.columns("judge")), 2)
        assert body.delta_min is not None
        variance = ranking_variance(
            moments, body.delta_min, n_labels=matrix.n_labels, n_humans=n_humans, n_judges=n_judges
        )
        moments["ranking_variance"] = variance
        recipe = rank_recipe(
            variance,
            body.delta_min,
            n_items=n_items,
            n_humans=n_humans,
            n_judges=n_judges,
            alpha_sig=decision.alpha_sig,
        )
    m = body.m if body.m is not None else recipe.m
    notes = []
    if m is not None and m > n_items:
        notes.append(f"the recipe asks for {m} overlap items but the corpus has {n_items}: every item is planned")
        m = n_items
    check, m, raised = _plan_check(body, decision, matrix, n_humans, design, m, candidates, seed)
    notes += raised
    document = {
        **recipe_dict(recipe),
        "m_planned": m,
        "n_items": n_items,
        "n_humans": n_humans,
        "moments": moments,
        "design": design,
        "design_reason": why,
        "stratum_entropy": entropy,
        "warnings": warnings + notes,
        "purpose": body.purpose,
        "by_estimator": by_estimator.result()
        if by_estimator is not None
        else _m_by_estimator(body, decision, moments, matrix, n_humans),
        "check": check,
    }
    if body.purpose == "certify":
        document["promise"] = body.promise
    if body.promise == "judge":  # both promises' m shown (docs/method.md §4, item 6)
        document["m_per_rater"] = certification(
            decision, moments["mu_d"], moments["sigma0_sq"], n_items=n_items, n_humans=n_humans, lattice=lattice
        ).m
    if body.purpose == "certify" and not recipe.feasible:
        document["feasible_with"] = feasible_with(
            decision,
            moments["mu_d"],
            moments["sigma0_sq"],
            n_items=n_items,
            n_humans=n_humans,
            m=recipe.m,
            pool_size=pool_size,
            coefficient=moments.get("coefficient", "po"),
        )
    if body.purpose == "certify" and m is not None:
        m = _sized_for_monitoring(body, decision, matrix, n_humans, design, m, candidates, seed, document)
    panel: list[int] = []
    panel_inclusion: list[float] = []
    if m is not None and body.slices is not None:
        assert features is not None  # slice_strata, read by the request
        slice_recipe = partial(
            _slice_recipe, decision, moments, n_humans=n_humans, pool_size=pool_size, lattice=lattice
        )
        agree = judge_agreement(matrix)
        m, panel, panel_inclusion, document["slices"] = sliced_panel(
            body, decision, matrix, seed, features, slice_recipe, agree
        )
        document["m_planned"] = m
    elif m is not None and design == "strat":
        strata = primary_strata(matrix)
        index = strat(strata, m, raters=["panel"], rng=seed)["panel"]
        drawn = np.bincount(strata[index], minlength=strata.max() + 1)
        share = drawn[strata[index]] / np.bincount(strata)[strata[index]]  # strata the panel drew from only
        panel, panel_inclusion = matrix.item_ids[index].tolist(), share.tolist()
    elif m is not None and design == "neyman":
        index, probability, document["neyman"] = _neyman_panel(body, moments, matrix, m, seed, features)
        panel, panel_inclusion = matrix.item_ids[index].tolist(), probability.tolist()
    return PlanDraft(design, m, document, panel, panel_inclusion)
