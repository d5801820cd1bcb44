"""The dashboard's sentences: is the plan in force feasible (and for this rule), is the recipe from the
labels in hand, and how the decision may be read (the monitoring mode)."""

from __future__ import annotations

from typing import Any

from service.data.models import Plan
from service.schemas.documents import RecipeNow, ReliabilityDocument
from service.schemas.projects import DecisionSettings


def plan_verdict(plan: Plan | None, decision: DecisionSettings) -> str:
    """The plan in force in one sentence: its overlap, whether it fits the corpus and what would make it fit,
    and whether it was computed for another rule or goal than the project's decision."""
    if plan is None:
        return "No plan yet: POST /projects/{pid}/plan computes the overlap recipe and each annotator's list."
    recipe = plan.recipe
    moments = recipe.get("moments", {})
    head = (
        f"Plan in force ({recipe.get('purpose', plan.purpose)}, from {moments.get('source', plan.source)}, "
        f"design {plan.design})"
    )
    if recipe.get("feasible"):
        text = f"{head}: {plan.m} overlap items per secondary annotator of {recipe['n_items']}; feasible."
        text += _monitor_sizing(recipe)
    else:
        # The epsilon hint was computed with the plan, under the rule it was planned for.
        hint = recipe.get("feasible_with") if recipe.get("rule") == decision.rule else None
        text = infeasible_sentence(
            recipe.get("m"),
            recipe["n_items"],
            recipe.get("reason", ""),
            hint,
            decision,
            prior=moments.get("source") == "prior",
        )
        if recipe.get("m") is not None:
            text += " The plan lists every item meanwhile."
        text = f"{head} is {text}"
    if recipe.get("purpose") == "rank":
        text += (
            " This recipe is for ranking judges, not for certifying one: plan with purpose certify for the decision."
        )
    elif recipe.get("rule") != decision.rule:
        text += (
            f" This recipe was computed for the {recipe.get('rule')} rule, but the project now decides by the "
            f"{decision.rule} rule: plan again."
        )
    return text


def _monitor_sizing(recipe: dict[str, Any]) -> str:
    """The one-look and the monitor's overlap, and how far lists grow while the decision is open (§8.1)."""
    block = recipe.get("monitoring") or {}
    if not block.get("simulated") or "sentence" not in block:
        return ""
    text = f" Sized for {block['sized_for']} reading ({block['sentence']})"
    if block.get("budget_extends_lists"):
        text += f"; while the monitored decision is open the lists grow up to {block['budget']} items, then it is "
        text += "inconclusive"
    return text + "."


def recipe_now_verdict(recipe_now: RecipeNow, n_items: int, decision: DecisionSettings) -> str:
    """The certification recipe re-estimated from the labels in hand, in one sentence."""
    if recipe_now.m_cert is None and recipe_now.feasible is None:
        return f"Recipe from the labels in hand: not yet ({recipe_now.reason or 'no pilot'})."
    if recipe_now.feasible:
        return (
            f"Recipe from the labels in hand ({recipe_now.m_pilot} held-out comparisons over "
            f"{recipe_now.n_raters_pilot} humans, {decision.rule} rule): "
            f"{recipe_now.m_cert} overlap items per secondary annotator; "
            f"{recipe_now.more_overlap_needed} more needed."
        )
    hint = recipe_now.feasible_with
    sentence = infeasible_sentence(
        recipe_now.m_cert,
        n_items,
        recipe_now.reason,
        None if hint is None else hint.model_dump(),
        decision,
        prior=False,
    )
    return f"Recipe from the labels in hand ({decision.rule} rule) is {sentence}"


def infeasible_sentence(
    m: int | None, n_items: int, reason: str, hint: dict[str, Any] | None, decision: DecisionSettings, *, prior: bool
) -> str:
    """``infeasible: ...`` with what the recipe needs, what the corpus has, and what would make it feasible."""
    if m is not None:
        need = f"the recipe needs {m} items per annotator, the corpus has {n_items}"
    else:
        need = reason or "no overlap certifies this judge"
    fixes = []
    if hint and hint.get("epsilon") is not None:
        fixes.append(f"raise epsilon to {hint['epsilon']:g} (now {decision.resolved_epsilon():g})")
    if m is not None:
        fixes.append(f"a corpus of at least {m} items")
    if prior:
        fixes.append("a pilot: plan from the labels in hand once the judge and two humans share items")
    if m is None and not fixes:
        fixes.append("a better judge: at this agreement no overlap certifies it")
    return f"infeasible: {need} — what would make it feasible: {'; '.join(fixes)}."


def monitoring_note(doc: ReliabilityDocument) -> str:
    """How the decision may be read: anytime-valid, or fixed-sample (valid at the planned overlap, provisional
    before it)."""
    if doc.monitoring_mode == "anytime":
        return (
            "monitoring: anytime-valid. The decision may be read after every label and acted on at once: "
            "the chance that any look wrongly passes or rejects stays below alpha (docs/method.md §8)."
        )
    target, done = (doc.plan.m_target, doc.plan.m_done_min) if doc.plan else (None, 0)
    if not target:
        return (
            "monitoring: fixed-sample. The decision is for one look at the labels in hand; "
            "with no planned overlap yet it is provisional."
        )
    state = "reached: the decision may be read" if done >= target else "not reached: the decision is provisional"
    return (
        f"monitoring: fixed-sample. The decision is valid once, at the planned overlap of {target} items per "
        f"secondary annotator ({done} done by the least advanced): {state}."
    )
