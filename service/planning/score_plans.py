"""A numeric project's plan: the recipe from the pilot's per-item alignment differences, disjoint secondaries
stratified on the primary's score bin, the check that decides resampled pilot items (docs/method.md §4b), and in
anytime mode the monitoring budget the lists grow to while the monitored decision is open (§8b)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from planner.intervals import optional_float
from planner.recipes import rank_recipe
from planner.score_decision import ScoreRule
from planner.score_monitor import MAX_SIZING_CELLS, SIZING_TRIALS, ScoreMonitoring, monitor_scores, score_monitor_budget
from planner.score_ranking import SCORE_RANK_SHARE, score_rank_variance
from planner.score_recipes import (
    ScorePlanCheck,
    pilot_differences,
    raised_score_check,
    score_pilot,
    score_plan_check,
    score_recipe,
)
from planner.xi_moments import PilotMoments
from service.core.errors import Conflict, Invalid
from service.core.offload import off_worker
from service.data.models import Project
from service.matrices.matrix import LabelMatrix
from service.matrices.ratings import RatingsMatrix, load_ratings
from service.matrices.score_bins import score_bins
from service.planning.sizing import CHECK_TRIALS, recipe_dict
from service.schemas.plans import PlanCreate
from service.schemas.projects import DecisionSettings

SCORE_DESIGN = "disjoint"


def _refused(body: PlanCreate, decision: DecisionSettings) -> str | None:
    """Why a numeric project cannot have the plan ``body`` asks for (None: it can)."""
    if body.source != "pilot":
        return (
            "a numeric project is planned from the pilot (source 'pilot'): accuracies p_h, p_j do not describe "
            "scores; label a pilot overlap first"
        )
    if body.design not in ("auto", SCORE_DESIGN):
        return f"a numeric plan has disjoint secondaries (design 'auto' or 'disjoint'), not {body.design!r}"
    if body.budget is not None and decision.resolved_monitoring() != "anytime":
        return "in fixed mode a numeric plan is decided once, at m: it has no monitoring budget"
    return None


def _steps(value_range: dict[str, Any]) -> int | None:
    """``(max - min) / step`` when the ratings move in steps that divide the range, else None."""
    step = value_range.get("step")
    if not step:
        return None
    steps = (value_range["max"] - value_range["min"]) / step
    return round(steps) if abs(steps - round(steps)) < 1e-9 * max(1.0, steps) else None


def _moments_dict(pilot: PilotMoments, note: str) -> dict[str, Any]:
    return {
        "source": "pilot",
        "mu_d": pilot.mu_d,
        "sigma0_sq": pilot.sigma0_sq,
        "mu_d_se": optional_float(pilot.mu_d_se),
        "sigma0_sq_se": optional_float(pilot.sigma0_sq_se),
        "mu_d_ci": pilot.mu_d_ci.as_list(),
        "sigma0_sq_ci": pilot.sigma0_sq_ci.as_list(),
        "m": pilot.m,
        "n_raters": pilot.n_raters,
        "pool_size": 1,
        "note": note,
    }


def _check_block(
    check: ScorePlanCheck | None, reason: str, alpha_sig: float, raised_from: int | None
) -> dict[str, Any]:
    """The plan's ``check`` in the shape of every plan's (``PlanCheckRead``)."""
    if check is None or check.reason:
        return {"simulated": False, "reason": reason if check is None else check.reason}
    rates = ("fa", "wrong", "inconclusive")
    return {
        "simulated": True,
        "reason": "the fixed-sample decision on disjoint secondaries, each block of m items resampled from the "
        "pilot's items the judge, the primary and that secondary rated (docs/method.md §4b)",
        "channel": None,
        "promised": "rater_fr",
        "promise": alpha_sig / 2,
        "m_compared": None,
        "designs": {},
        "raised_from": raised_from,
        "plan": {
            "design": SCORE_DESIGN,
            "m": check.m,
            "trials": check.trials,
            "fr": check.fr,
            "fr_se": check.fr_se,
            "rater_fr": check.rater_fr,
            "rater_fr_se": check.rater_fr_se,
            **dict.fromkeys(rates),
            **{f"{rate}_se": None for rate in rates},
            "p_j_bad": None,
            "keeps_promise": check.keeps_promise,
            "promise_status": check.promise_status,
            "note": "the judge of the pilot: no mirror judge is simulated for scores, so fa and wrong are null",
        },
    }


def _monitoring_block(
    body: PlanCreate,
    decision: DecisionSettings,
    xi: np.ndarray,
    m: int | None,
    n_items: int,
    n_humans: int,
    seed: int,
) -> dict[str, Any]:
    """The plan's ``monitoring``: in anytime mode the budget the disjoint lists grow to while the monitored
    decision is open, the request's or the simulated one (docs/method.md §8b); in fixed mode the lists end at m."""
    mode = decision.resolved_monitoring()
    if mode != "anytime":
        return {"mode": mode, "simulated": False, "reason": "fixed mode: the decision is read once, at m"}
    if m is None or m == 0:
        return {"mode": mode, "simulated": False, "reason": "no overlap to monitor: the plan has no m"}
    if body.budget is not None and body.budget < m:
        raise Invalid(
            f"budget {body.budget} is below the plan's overlap m = {m} per secondary: the monitoring budget is where "
            "an open decision becomes inconclusive, at or after m",
            code="budget_below_m",
        )
    horizon = max(m, min(n_items, MAX_SIZING_CELLS // (SIZING_TRIALS * n_humans)))
    if SIZING_TRIALS * n_humans * horizon > MAX_SIZING_CELLS:  # the work bound: the budget is the request's or m
        return {
            "mode": mode,
            "simulated": False,
            "m": m,
            "budget": body.budget or m,
            "budget_extends_lists": True,
            "reason": f"{SIZING_TRIALS} runs x {n_humans} humans x m = {m} items exceed the {MAX_SIZING_CELLS:,} "
            "differences a sizing draws: the budget is the request's, else m",
        }
    sized = score_monitor_budget(
        xi,
        n_humans=n_humans,
        start=m,
        horizon=horizon,
        epsilon=decision.resolved_epsilon(),
        alpha=decision.alpha_sig,
        omega_threshold=decision.omega_threshold,
        power=decision.power,
        rng=np.random.default_rng([seed, 2]),
    )
    warnings = []
    budget = body.budget if body.budget is not None else sized.budget
    if budget is None:
        budget = horizon
        warnings.append(
            f"the simulated monitor decides fewer than {sized.level:g} of the runs by {horizon} items per secondary "
            f"(the corpus, or the simulation's work bound): the budget is {horizon}, where {sized.decided:.2f} decide"
        )
    return {
        "mode": mode,
        "simulated": True,
        "m": m,
        "budget": int(budget),
        "budget_extends_lists": True,
        "budget_level": sized.level,
        "sized_budget": sized.budget,
        "decided_by_budget": sized.decided,
        "passed_by_budget": sized.passed,
        "horizon": sized.horizon,
        "n_trials": sized.n_trials,
        "mc_se_max": sized.mc_se,
        "reason": "the pilot's pairwise differences resampled for every held-out human, the humans advancing "
        "together, each read under the monitor's confidence sequence; the budget is the overlap by which "
        "(1 + power)/2 of the runs decide, at least m (docs/method.md §8b)",
        "warnings": warnings,
    }


def score_plan_document(
    body: PlanCreate,
    decision: DecisionSettings,
    values: np.ndarray,
    judge: int,
    humans: list[int],
    value_range: dict[str, Any],
    seed: int,
    *,
    n_resamples: int,
) -> tuple[int | None, dict[str, Any]]:
    """The overlap and the plan document of a numeric project's ratings ``values`` (``humans[0]`` the
    primary); pure, so it may run off the web worker."""
    rule: ScoreRule = "alt-test" if decision.rule == "alt-test" else "margin"
    bounds = (value_range["min"], value_range["max"])
    epsilon = decision.resolved_epsilon()
    pilot = score_pilot(values, judge, humans, rule=rule, value_range=bounds, n_resamples=n_resamples, rng=seed)
    if pilot.m == 0:
        raise Conflict(
            "no overlap in hand yet: a pilot plan needs items rated by the judge and two humans", code="no_pilot"
        )
    n_items, n_humans = values.shape[0], body.n_raters or max(len(humans), 2)
    steps = _steps(value_range)
    recipe = score_recipe(
        pilot.mu_d,
        pilot.sigma0_sq,
        n_items=n_items,
        n_humans=n_humans,
        rule=rule,
        epsilon=epsilon,
        alpha_sig=decision.alpha_sig,
        q=decision.q,
        steps=steps,
    )
    m = body.m if body.m is not None else recipe.m
    warnings = []
    if m is not None and m > n_items:
        warnings.append(f"the recipe asks for {m} overlap items but the corpus has {n_items}: every item is planned")
        m = n_items
    check: ScorePlanCheck | None = None
    why_unchecked, raised_from = "no overlap suffices: the judge is expected to fail", None
    if m is not None:
        settings: dict[str, Any] = {
            "rule": rule,
            "value_range": bounds,
            "epsilon": epsilon,
            "alpha_sig": decision.alpha_sig,
            "q": decision.q,
            "omega_threshold": decision.omega_threshold,
            "trials": CHECK_TRIALS,
            "rng": np.random.default_rng([seed, 1]),
        }
        try:
            if body.m is not None:
                check = score_plan_check(values, judge, humans, m=m, **settings)
            else:
                check = raised_score_check(values, judge, humans, m=m, n_items=n_items, **settings)
        except ValueError as error:  # the work bound: the plan stands, unchecked
            why_unchecked = str(error)
        if check is not None and check.m != m:
            raised_from = m
            warnings.append(
                f"the simulated per-human FR at the recipe's m={m} broke the promise {decision.alpha_sig / 2} by "
                f"more than 2 Monte Carlo SE: m raised to {check.m}"
            )
            m = check.m
        if check is not None and not check.reason and not check.keeps_promise:
            warnings.append(f"the simulated per-human FR at m={check.m} is still above the promise")
    xi = pilot_differences(values, judge, humans, rule=rule, value_range=bounds)
    monitoring = _monitoring_block(body, decision, xi, m, n_items, n_humans, seed)
    warnings.extend(monitoring.get("warnings", []))
    note = "plug-in moments of xi against one other human at a time (the disjoint design's pool of one label)"
    if steps is not None and rule == "margin":
        note += f"; ratings in {steps} steps of the range: the lattice-corrected FR"
    document = {
        **recipe_dict(recipe),
        "scale": "numeric",
        "m_planned": m,
        "n_items": n_items,
        "n_humans": n_humans,
        "moments": _moments_dict(pilot, note),
        "design": SCORE_DESIGN,
        "design_reason": "numeric plans give secondaries disjoint lists stratified on the primary's score bin",
        "stratum_entropy": None,
        "warnings": warnings,
        "purpose": body.purpose,
        "check": _check_block(check, why_unchecked, decision.alpha_sig, raised_from),
        "monitoring": monitoring,
    }
    return m, document


def score_rank_document(
    body: PlanCreate,
    decision: DecisionSettings,
    values: np.ndarray,
    judges: list[int],
    humans: list[int],
    value_range: dict[str, Any],
) -> tuple[int | None, dict[str, Any]]:
    """The overlap per secondary and the plan document to rank a numeric project's judges ``delta_min`` apart
    in their ranking score (docs/method.md §4b, "Ranking score judges"); pure, so it may run off the web worker."""
    assert body.delta_min is not None  # PlanCreate asks for it with purpose 'rank'
    rule: ScoreRule = "alt-test" if decision.rule == "alt-test" else "margin"
    bounds = (value_range["min"], value_range["max"])
    variance = score_rank_variance(values, judges, humans, rule=rule, value_range=bounds)
    if not np.isfinite(variance) or variance <= 0:
        raise Conflict(
            "the pilot gives no variance of the judges' score margins: every human needs two items rated by the "
            "judges and another human, with ratings that differ",
            code="no_pilot",
        )
    n_items, n_humans = values.shape[0], body.n_raters or max(len(humans), 2)
    n_judges = body.n_judges or max(len(judges), 2)
    recipe = rank_recipe(
        variance,
        body.delta_min,
        n_items=n_items,
        n_humans=n_humans,
        n_judges=n_judges,
        alpha_sig=decision.alpha_sig,
        alpha_share=SCORE_RANK_SHARE,
    )
    m = body.m if body.m is not None else recipe.m
    warnings = []
    if m is not None and m > n_items:
        warnings.append(f"the recipe asks for {m} overlap items but the corpus has {n_items}: every item is planned")
        m = n_items
    pairs = "the largest over the pilot's judge pairs" if len(judges) > 1 else "twice one judge's (no pair in it)"
    moments = {
        "source": "pilot",
        "ranking_variance": variance,
        "n_judges": n_judges,
        "pool_size": 1,
        "note": f"the disjoint design's per-item variance of a judge pair's margin (docs/method.md §4b), {pairs}",
    }
    document = {
        **recipe_dict(recipe),
        "scale": "numeric",
        "m_planned": m,
        "n_items": n_items,
        "n_humans": n_humans,
        "moments": moments,
        "design": SCORE_DESIGN,
        "design_reason": "numeric plans give secondaries disjoint lists stratified on the primary's score bin",
        "stratum_entropy": None,
        "warnings": warnings,
        "purpose": "rank",
        "check": {"simulated": False, "reason": "ranking plans are not simulated"},
        "monitoring": {"mode": decision.resolved_monitoring(), "simulated": False, "reason": "a ranking plan"},
    }
    return m, document


def score_plan(
    session: Session, project: Project, body: PlanCreate, seed: int, *, n_resamples: int
) -> tuple[LabelMatrix, str, int | None, dict[str, Any]]:
    """A numeric project's plan from the ratings ``session`` sees: the score bins its lists are drawn from,
    the design, the overlap and the document (docs/method.md §4b); writes nothing."""
    refused = _refused(body, project.decision_settings)
    if refused is not None:
        raise Conflict(refused, code="numeric_scale")
    ratings = load_ratings(session, project, project.criteria[0])
    if ratings.values.shape[0] == 0:
        raise Conflict("the project has no items to plan for; upload items first", code="no_items")
    judges, primary = ratings.columns("judge"), ratings.columns("primary")
    humans = primary + ratings.columns("human")
    if not judges or not primary or len(humans) < 2:
        raise Conflict("a pilot plan needs a judge, the primary and another human with ratings", code="no_pilot")
    value_range = project.value_range or {}
    if body.purpose == "rank":
        m, document = off_worker(
            ratings.values.size,
            score_rank_document,
            body,
            project.decision_settings,
            np.asarray(ratings.values),
            judges,
            humans,
            value_range,
        )
        return score_bins(ratings, value_range), SCORE_DESIGN, m, document
    m, document = off_worker(
        ratings.values.size,
        score_plan_document,
        body,
        project.decision_settings,
        np.asarray(ratings.values),
        judges[0],
        humans,
        value_range,
        seed,
        n_resamples=n_resamples,
    )
    return score_bins(ratings, value_range), SCORE_DESIGN, m, document


def monitored_scores(matrix: RatingsMatrix, project: Project, budget: int | None) -> list[ScoreMonitoring]:
    """Each judge's anytime-monitored decision on the numbers in their arrival order, read up to the plan's
    monitoring ``budget`` (docs/method.md §8b): what ``/reliability`` shows and what the lists follow."""
    settings = project.decision_settings
    value_range = project.value_range or {}
    rule: ScoreRule = "alt-test" if settings.rule == "alt-test" else "margin"
    humans = matrix.columns("primary", "human")
    return [
        monitor_scores(
            matrix.values,
            matrix.order,
            judge,
            humans,
            rule=rule,
            value_range=(value_range["min"], value_range["max"]),
            epsilon=settings.resolved_epsilon(),
            alpha=settings.alpha_sig,
            omega_threshold=settings.omega_threshold,
            budget=budget,
        )
        for judge in matrix.columns("judge")
    ]
