"""``annoplan demo``: a synthetic project through the API, or the same story offline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer

if TYPE_CHECKING:
    pass

from service.cli.common import api_client


def demo(
    url: Annotated[str, typer.Option(help="A running annoplan server.")] = "http://127.0.0.1:8000",
    key: Annotated[str, typer.Option(envvar="ANNOPLAN_ADMIN_KEY", help="An admin key.")] = "",
    n_items: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
    offline: Annotated[
        bool, typer.Option("--offline", help="No server: plan, label and decide on synthetic labels in this process.")
    ] = False,
) -> None:
    """Create a synthetic project (judge, primary, three secondaries) through the API, plan it,
    and label the planned batches, so every endpoint and the dashboard have data. With --offline,
    the same story without a server: the recipe's m, each secondary's m random items, the decision.

    Example: annoplan demo --url http://127.0.0.1:8000 --key $ANNOPLAN_ADMIN_KEY   (or: annoplan demo --offline)
    """
    if offline:
        _offline_demo(n_items, seed)
        return
    from planner.synthetic import synthetic_codes

    if not key:
        raise typer.BadParameter("pass --key or set ANNOPLAN_ADMIN_KEY")
    labels = ["pass", "fail"]
    codes = synthetic_codes(
        n_items, n_labels=2, accuracies=[0.9, 0.85, 0.85, 0.85, 0.85], prevalence=[0.7, 0.3], rng=seed
    )[0]
    names = ["judge", "ann-1", "ann-2", "ann-3", "ann-4"]
    kinds = ["judge", "primary", "human", "human", "human"]
    with api_client(url, key, timeout=120) as c:
        pid = c.create_project("demo: toxicity judge", labels).id
        for name, kind in zip(names, kinds, strict=True):
            c.add_rater(pid, name, kind)
        c.upsert_items(pid, [{"external_id": f"item-{i:05d}"} for i in range(n_items)])
        first = [
            {"item": f"item-{i:05d}", "rater": names[k], "value": labels[codes[i, k]]}
            for k in (0, 1)
            for i in range(n_items)
        ]
        c.upload_labels(pid, first)
        c.create_plan(pid, source="prior", p_h=0.85, p_j=0.9, seed=seed)
        for k in (2, 3, 4):
            while items := c.create_batch(pid, rater=names[k], size=100).items:
                rows = [{"item": it, "rater": names[k], "value": labels[codes[int(it[5:]), k]]} for it in items]
                c.upload_labels(pid, rows)
        document = c.reliability(pid).document
        assert document is not None  # no ETag was sent: the document is always there
        doc = document.model_dump()
    typer.echo(f"project {pid}: decision {doc['decision']} (omega {doc['omega']})")
    typer.echo(f"dashboard: {url}/projects/{pid}/dashboard   docs: {url}/docs")


DEMO_ACCURACIES = (0.9, 0.85, 0.85, 0.85, 0.85)
"""The demo's raters: the judge, then the primary and three secondary humans (synthetic accuracies)."""


def _offline_demo(n_items: int, seed: int) -> None:
    """``annoplan demo --offline``: synthetic labels, the prior recipe, random overlap lists, the decision."""
    from planner.decision import validate_judge
    from planner.recipes import certify_recipe
    from planner.synthetic import synthetic_codes
    from planner.xi_moments import xi_lattice

    if n_items < 10:
        raise typer.BadParameter("--n-items must be at least 10")
    p_j, p_h = DEMO_ACCURACIES[0], DEMO_ACCURACIES[1]
    n_humans = len(DEMO_ACCURACIES) - 1
    lattice = xi_lattice(p_h, p_j, n_labels=2)
    recipe = certify_recipe(lattice.mu_d, lattice.variance, n_items=n_items, n_humans=n_humans, lattice=lattice)
    m = min(recipe.m if recipe.m is not None else n_items, n_items)
    rng = np.random.default_rng(seed)
    codes = synthetic_codes(n_items, n_labels=2, accuracies=DEMO_ACCURACIES, prevalence=[0.7, 0.3], rng=rng)[0]
    labeled = codes.copy()
    for k in range(2, len(DEMO_ACCURACIES)):  # the judge and the primary label every item; a secondary its list
        unlisted = np.ones(n_items, dtype=bool)
        unlisted[rng.choice(n_items, size=m, replace=False)] = False
        labeled[unlisted, k] = -1
    result = validate_judge(labeled, judge=0, humans=list(range(1, len(DEMO_ACCURACIES))), n_labels=2, rng=seed)
    typer.echo(
        f"offline demo: {n_items} synthetic items, a judge of accuracy {p_j}, a primary and "
        f"{n_humans - 1} secondaries of accuracy {p_h}"
    )
    typer.echo(
        f"plan (prior, design random): m = {m} overlap items per secondary, "
        f"{n_items + (n_humans - 1) * m:,} human labels in all"
    )
    names = ["judge", "ann-1 (primary)", *(f"ann-{k}" for k in range(2, len(DEMO_ACCURACIES)))]
    for outcome in result.raters:
        verdict = {True: "won", False: "lost", None: "open"}[outcome.won]
        typer.echo(f"  {names[outcome.rater]} held out: {outcome.m} items, d = {outcome.d:+.3f}, {verdict}")
    typer.echo(
        f"decision {result.decision} (omega {result.omega:.2f})" + (f": {result.reason}" if result.reason else "")
    )
