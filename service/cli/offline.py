"""``annoplan plan`` and ``simulate``: the overlap recipe and the design simulations, offline."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.progress import Progress
from rich.table import Table

if TYPE_CHECKING:
    pass

from service.cli.common import console


def _codes_from_csv(path: Path, judge: str) -> tuple[np.ndarray, list[str], int, int]:
    """A label export CSV (item, rater, value columns) as a code matrix; the judge's column index."""
    from planner.codes import SPECIAL
    from service.core.csv_safety import restored_cell

    with path.open(newline="") as f:
        rows = [{k: restored_cell(v) for k, v in r.items()} for r in csv.DictReader(f)]
    if not rows or not {"item", "rater", "value"} <= set(rows[0]):
        raise typer.BadParameter("the CSV needs columns item, rater, value (a label export works)")
    items = sorted({r["item"] for r in rows})
    raters = sorted({r["rater"] for r in rows})
    labels = sorted({r["value"] for r in rows} - set(SPECIAL))
    if judge not in raters:
        raise typer.BadParameter(f"judge {judge!r} is not a rater in the CSV")
    item_of = {x: i for i, x in enumerate(items)}
    rater_of = {x: k for k, x in enumerate(raters)}
    code_of = {x: c for c, x in enumerate(labels)}
    codes = np.full((len(items), len(raters)), -1, dtype=np.int64)
    for r in rows:
        if r["value"] in code_of:
            codes[item_of[r["item"]], rater_of[r["rater"]]] = code_of[r["value"]]
    return codes, raters, rater_of[judge], max(len(labels), 2)


PLAN_DESIGNS = ("random", "disjoint", "seq-refined", "seq-coverage", "strat", "depth-first")
"""Designs ``annoplan plan`` takes: the service's, less ``auto`` (a simulated choice) and ``neyman`` (strata)."""


def plan(
    n_items: Annotated[int, typer.Option(help="Items in the corpus.")] = 2000,
    n_raters: Annotated[int, typer.Option(help="K humans, primary included.")] = 3,
    n_labels: Annotated[int, typer.Option(help="Labels in the label set.")] = 2,
    p_h: Annotated[float, typer.Option(help="Prior human accuracy.")] = 0.85,
    p_j: Annotated[float, typer.Option(help="Prior judge accuracy.")] = 0.90,
    epsilon: Annotated[float, typer.Option(help="Margin of the decision rule.")] = 0.05,
    alpha_sig: Annotated[float, typer.Option(help="Total false-rejection budget.")] = 0.05,
    purpose: Annotated[
        str, typer.Option(help="certify (is one judge as good as the humans?) or rank (order several judges).")
    ] = "certify",
    n_judges: Annotated[int, typer.Option(help="Judges to rank (--purpose rank).")] = 2,
    delta_min: Annotated[
        float, typer.Option(help="Smallest margin between judges to resolve (--purpose rank).")
    ] = 0.05,
    design: Annotated[
        str,
        typer.Option(
            help="Who labels the overlap: random, disjoint, seq-refined, seq-coverage hold one other human's label "
            "per overlap item; strat and depth-first a shared panel of K-1, which needs a smaller m (certify)."
        ),
    ] = "random",
    promise: Annotated[
        str,
        typer.Option(
            help="rater: false rejection <= alpha/2 for each held-out human; judge: for the judge as a whole "
            "(smaller; margin rule from priors, --design disjoint)."
        ),
    ] = "rater",
    as_json: Annotated[bool, typer.Option("--json", help="Print the recipe as JSON instead of a table.")] = False,
    labels_csv: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            readable=True,
            help="Plan from a label CSV (pilot) instead of priors: a label export, e.g. "
            "curl -H 'Authorization: Bearer KEY' 'URL/projects/PID/labels?format=csv' > export.csv",
        ),
    ] = None,
    judge: Annotated[str, typer.Option(help="The judge's rater id in --labels-csv.")] = "judge",
) -> None:
    """Print the overlap recipe (docs/method.md §4) as a table or JSON, from priors or from labels in hand.

    m is the overlap per secondary annotator: the items each secondary labels beside the judge and the
    primary (who label everything). A shared-panel design holds K-1 labels in per overlap item and needs
    a smaller m. POST /plan's recipe has this m for the same priors, corpus and design; the plan's own m
    can be higher when its simulated check raises it.

    Example: annoplan plan --n-items 2000 --n-raters 3 --p-h 0.85 --p-j 0.9 --design strat --json
    """
    from planner.designs import design_pool_size
    from planner.recipes import certify_recipe, rank_recipe
    from planner.xi_moments import XiLattice, pilot_moments, xi_lattice
    from service.core.errors import AppError
    from service.planning.sizing import ranking_variance, recipe_dict

    if purpose not in ("certify", "rank"):
        raise typer.BadParameter(f"--purpose must be certify or rank, not {purpose!r}")
    if design not in PLAN_DESIGNS:
        raise typer.BadParameter(f"--design must be one of {', '.join(PLAN_DESIGNS)}, not {design!r}")
    if promise not in ("rater", "judge"):
        raise typer.BadParameter(f"--promise must be rater or judge, not {promise!r}")
    if promise == "judge" and (purpose != "certify" or design != "disjoint" or labels_csv is not None):
        raise typer.BadParameter("--promise judge plans a certification from priors with --design disjoint")
    if purpose == "rank" and not (n_judges >= 2 and 0 < delta_min < 1):
        raise typer.BadParameter("--purpose rank needs --n-judges of at least 2 and --delta-min in (0, 1)")
    lattice: XiLattice | None = None
    if labels_csv is not None:
        codes, raters, j, n_labels = _codes_from_csv(labels_csv, judge)
        humans = [k for k in range(len(raters)) if k != j]
        pilot = pilot_moments(codes, judge=j, humans=humans, n_labels=n_labels, n_resamples=200, rng=0)
        mu_d, sigma0_sq, source = pilot.mu_d, pilot.sigma0_sq, f"pilot ({pilot.m} xi values)"
        n_items, n_raters = codes.shape[0], len(humans)
        if not np.isfinite(mu_d):
            raise typer.BadParameter("no overlap in the CSV: items need the judge and two humans")
        moments: dict[str, Any] = {"source": "pilot", "mu_d": mu_d, "sigma0_sq": sigma0_sq}
    pool_size = design_pool_size(design, n_raters)
    if labels_csv is None:
        lattice = xi_lattice(p_h, p_j, n_labels=n_labels, pool_size=pool_size)
        mu_d, sigma0_sq = lattice.mu_d, lattice.variance
        source = f"prior (p_h={p_h}, p_j={p_j}, L={n_labels})"
        moments = {"source": "prior", "p_h": p_h, "p_j": p_j, "mu_d": mu_d, "sigma0_sq": sigma0_sq}
    per_rater_m: int | None = None
    if purpose == "certify":

        def certified(promised: str) -> Any:
            return certify_recipe(
                mu_d,
                sigma0_sq,
                n_items=n_items,
                n_humans=n_raters,
                epsilon=epsilon,
                alpha_sig=alpha_sig,
                pool_size=pool_size,
                lattice=lattice,
                promise=promised,
            )

        recipe = certified(promise)
        if promise == "judge":
            per_rater_m = certified("rater").m
    else:
        try:
            variance = ranking_variance(moments, delta_min, n_labels=n_labels, n_humans=n_raters, n_judges=n_judges)
        except AppError as error:  # a ladder of judges reaching below chance
            raise typer.BadParameter(error.detail) from None
        moments["ranking_variance"] = variance
        recipe = rank_recipe(
            variance, delta_min, n_items=n_items, n_humans=n_raters, n_judges=n_judges, alpha_sig=alpha_sig
        )
    if as_json:
        document = {
            "purpose": purpose,
            "design": design,
            "pool_size": pool_size,
            "n_items": n_items,
            "n_humans": n_raters,
            **({"n_judges": n_judges, "delta_min": delta_min} if purpose == "rank" else {"epsilon": epsilon}),
            "moments": moments,
            "recipe": {
                **recipe_dict(recipe),
                **({"promise": recipe.promise, "m_per_rater": per_rater_m} if purpose == "certify" else {}),
            },
        }
        typer.echo(json.dumps(_finite(document), indent=2))
        return
    table = Table(title=f"annoplan {'certification' if purpose == 'certify' else 'ranking'} recipe")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("source", source),
        ("design", f"{design} ({pool_size} held-in label{'s' if pool_size > 1 else ''} per overlap item)"),
        ("mu_d", f"{mu_d:.4f}"),
        ("sigma0^2", f"{sigma0_sq:.4f}"),
    ]
    if purpose == "rank":
        rows += [("judges", str(n_judges)), ("delta_min", f"{delta_min:g}"), ("pair variance", f"{variance:.4f}")]
    if per_rater_m is not None:
        rows.append(("m for each held-out human", str(per_rater_m)))
    what = "m (overlap per secondary)" if per_rater_m is None else "m for the judge (served)"
    rows.append((what, str(recipe.m) if recipe.m is not None else "none suffices"))
    if recipe.plan is not None:
        rows += [("rho = m/n", f"{recipe.plan.rho:.3f}"), ("total human labels", f"{recipe.plan.total_labels:,}")]
    if recipe.reason:
        rows.append(("note", recipe.reason))
    for k, v in rows:
        table.add_row(k, v)
    console.print(table)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as null: JSON has no such numbers."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def simulate(
    n_items: Annotated[int, typer.Option()] = 500,
    n_humans: Annotated[int, typer.Option()] = 4,
    n_labels: Annotated[int, typer.Option()] = 2,
    p_h: Annotated[float, typer.Option()] = 0.85,
    p_j: Annotated[float, typer.Option()] = 0.90,
    rho: Annotated[list[float], typer.Option(help="Overlap rates (repeat the option for a grid).")] = [0.05, 0.1, 0.25],  # noqa: B006
    design: Annotated[list[str], typer.Option(help="Designs (repeatable).")] = ["random", "strat"],  # noqa: B006
    coefficient: Annotated[list[str], typer.Option(help="po, kappa, alpha (repeatable).")] = ["po"],  # noqa: B006
    trials: Annotated[int, typer.Option()] = 300,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path | None, typer.Option(help="Write the cells to this .csv or .json file.")] = None,
) -> None:
    """Simulate designs and overlap rates (docs/method.md §6) with a progress bar; print or write the cells.

    Example: annoplan simulate --rho 0.05 --rho 0.25 --design random --trials 300 --out sim.csv
    """
    from planner.simulate import simulate as run

    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("simulating", total=None)
        result = run(
            n_items=n_items,
            n_humans=n_humans,
            n_labels=n_labels,
            p_h=p_h,
            p_j=p_j,
            rho=rho,
            design=design,
            coefficient=coefficient,
            trials=trials,
            rng=seed,
            progress=lambda done, total: progress.update(task, completed=done, total=total),
        )
    cells = [c.as_dict() for c in result.cells]
    columns = [
        "design",
        "coefficient",
        "rho",
        "m",
        "bias",
        "std",
        "reliability",
        "false_rejection",
        "false_approval",
        "wrong_decision",
        "trials",
    ]
    if out is not None and out.suffix == ".json":
        out.write_text(json.dumps(result.as_dict(), indent=2))
    elif out is not None:
        with out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(cells)
    table = Table(title=f"simulation: n={n_items}, K={n_humans}, L={n_labels}, p_h={p_h}, {trials} trials")
    for c in columns[:-1]:
        table.add_column(c, justify="right")
    for cell in cells:
        table.add_row(*[f"{cell[c]:.3f}" if isinstance(cell[c], float) else str(cell[c]) for c in columns[:-1]])
    console.print(table)
    for curve in sorted({(str(c["design"]), str(c["coefficient"])) for c in cells}):
        found = result.min_rho(design=curve[0], coefficient=curve[1])
        console.print(
            f"{curve[0]}, {curve[1]}: smallest rho with reliability >= 0.95: "
            f"{'none on this grid' if found is None else found}"
        )
