"""A plan's design and simulated check: candidates compared, the chosen one checked and raised (docs/method.md §6)."""

from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from planner.design_choice import choose_design
from planner.intervals import optional_float
from planner.overlap_samples import CHECK_DESIGNS
from planner.plan_check import (
    DesignCheck,
    check_design,
    fitted_channel,
    needs_no_raise,
    promise_status,
    raised_check,
    raised_m,
    simulated_choice,
)
from planner.recipes import Recipe
from service.core.errors import Invalid
from service.matrices.matrix import LabelMatrix
from service.planning.lists import primary_strata
from service.planning.monitoring_costs import plan_monitoring
from service.planning.sizing import (
    CHECK_TRIALS,
    _moments,
    certification,
    true_prevalence_in_hand,
)
from service.schemas.plans import PlanCreate
from service.schemas.projects import DecisionSettings

COMPARE_TRIALS = 500
"""Trials of each candidate design's check: enough to compare them; the chosen design's own check, at
``CHECK_TRIALS`` from a stream of its own, is the one the plan's promise rests on (docs/method.md §6)."""
SLOWEST_CHECK_FIRST = ("seq-coverage", "random", "disjoint", "strat")


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
        "prevalence": true_prevalence_in_hand(matrix, p_h),
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
    out["promise_status"] = check.promise_status
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
    return replace(check, promised="fr", promise_status=promise_status(check.fr, check.fr_se, check.promise))


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

        final, _ = raised_m(judged_at, m, n_items=settings["n_items"], keeps=lambda c: needs_no_raise(c, m))
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
            + (", where it keeps it with the Monte Carlo error inside" if final.keeps_promise else "")
        )
    served_recipe = candidates.recipe if final.m == m and body.m is None else None
    notes.extend(_status_notes(final, design, served_recipe))
    return block, final.m, notes


def _status_notes(final: DesignCheck, design: str, recipe: Recipe | None) -> list[str]:
    """What the plan says when its check does not confirm the promise (docs/method.md §6, "The promise and
    raising m"): still broken, or within 2 Monte Carlo SE of it, then with the recipe's own rate at ``m``
    when ``recipe`` is given (the plan is served at the recipe's ``m``)."""
    rate, rate_se = (final.fr, final.fr_se) if final.promised == "fr" else (final.rater_fr, final.rater_fr_se)
    head = f"the simulated {final.promised} of {design} at m={final.m} is {rate:.4f} (Monte Carlo SE {rate_se:.4f})"
    if final.promise_status == "broken":
        return [f"{head}, still above the promise {final.promise} by more than 2 Monte Carlo SE"]
    if final.promise_status != "unresolved":
        return []
    head += f": within 2 Monte Carlo SE of the promise {final.promise}, so {final.trials} trials neither confirm "
    head += "nor refute it"
    if recipe is None:
        return [head]
    own = ""
    if final.m in recipe.m_grid and recipe.promise == "rater" and final.promised == "rater_fr":
        own = f" (its own per-rater FR there is {recipe.fr_rate[recipe.m_grid.index(final.m)]:.4f})"
    return [f"{head}; the recipe's m stands on the recipe's own computation{own}"]


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
