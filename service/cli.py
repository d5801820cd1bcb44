"""The ``annoplan`` command line: serve, a job worker, migrate, keys, offline plans and simulations, a demo."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from service.client import Client

app = typer.Typer(
    help="annoplan: plan and check the human overlap that validates an LLM judge.",
    no_args_is_help=True,
    add_completion=False,
)
keys = typer.Typer(help="API keys.", no_args_is_help=True)
app.add_typer(keys, name="keys")
# Piped output is not cut at 80 columns: tables keep every column when redirected to a file.
console = Console(width=None if sys.stdout.isatty() else max(shutil.get_terminal_size().columns, 200))


class CliError(Exception):
    """A problem the person at the terminal can fix: printed as one line, exit status 1."""


def _migrated_engine() -> Engine:
    """An engine on the configured database, refusing one that holds no annoplan schema.

    A missing SQLite file is not created: ``annoplan keys create`` run in the wrong
    directory would otherwise leave an empty ``annoplan.db`` behind.
    """
    from sqlalchemy import inspect

    from service.core.db import make_engine
    from service.core.settings import get_settings

    url = get_settings().database_url
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.exists():
            raise CliError(
                f"no database at {path.resolve()}: run this where `make serve` ran, set "
                "ANNOPLAN_DATABASE_URL, or create it with `annoplan migrate`"
            )
    engine = make_engine(url)
    if not inspect(engine).has_table("api_keys"):
        engine.dispose()
        raise CliError(f"the database {url} has no annoplan schema: run `annoplan migrate` first")
    return engine


@app.command()
def serve() -> None:
    """Migrate the configured database and start the API, and a job worker beside it on PostgreSQL.

    On SQLite (the default) the API process runs the job queue itself; when it does not
    (ANNOPLAN_API_RUNS_JOBS, or PostgreSQL), a worker process is started and stopped with it.
    Example: ANNOPLAN_PORT=9000 annoplan serve
    """
    import signal
    import subprocess

    from service.__main__ import main
    from service.core.settings import api_runs_jobs, get_settings

    migrate()
    beside = None
    if not api_runs_jobs(get_settings()):
        beside = subprocess.Popen([sys.executable, "-m", "service", "worker"])

        # uvicorn stops on SIGTERM, then raises it again under the handler it found: this one, which
        # unwinds to the `finally` below (the default handler would end the process and leave the worker)
        def stopped(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, stopped)
    try:
        main()
    finally:
        if beside is not None:
            beside.terminate()
            try:
                beside.wait(timeout=30)
            except subprocess.TimeoutExpired:
                beside.kill()
                beside.wait()


@app.command()
def worker(
    check: Annotated[
        bool, typer.Option("--check", help="Run nothing: exit 0 when a job worker of this host is live, else 1.")
    ] = False,
) -> None:
    """Run a job worker on the configured database: it claims and runs queued simulations, serves nothing.

    Run one or more beside api processes that leave the queue to workers (docs/operations.md);
    `--check` is a worker container's healthcheck (its heartbeat in the database, within its lease).
    Example: ANNOPLAN_DATABASE_URL=postgresql+psycopg://u:p@db/annoplan annoplan worker
    """
    if check:
        from service.worker import check_worker

        raise typer.Exit(check_worker())
    _migrated_engine().dispose()
    from service.worker import run_worker

    run_worker()


@app.command()
def migrate() -> None:
    """Upgrade the configured database (ANNOPLAN_DATABASE_URL) to the newest schema.

    Example: ANNOPLAN_DATABASE_URL=postgresql+psycopg://u:p@localhost/annoplan annoplan migrate
    """
    from alembic import command

    from migrations import alembic_config

    command.upgrade(alembic_config(), "head")


@keys.command("create")
def keys_create(
    role: Annotated[str, typer.Option(help="admin, pm, annotator or viewer.")],
    project: Annotated[str | None, typer.Option(help="Project id (all roles but admin).")] = None,
    rater: Annotated[str | None, typer.Option(help="Rater external id (annotator keys).")] = None,
    name: Annotated[str | None, typer.Option(help="A note to recognise the key by.")] = None,
    expires_at: Annotated[
        str | None,
        typer.Option(help="When the key stops working: ISO 8601 with a timezone, e.g. 2027-01-31T00:00:00Z."),
    ] = None,
) -> None:
    """Create an API key in the configured database and print its secret (shown once).

    Example: annoplan keys create --role admin --expires-at 2027-01-31T00:00:00Z
    """
    from datetime import datetime

    from sqlalchemy import select

    from service.core.db import make_sessionmaker, session_scope
    from service.data.keys import create_key
    from service.data.models import Project, Rater
    from service.schemas import Role

    if role not in set(Role):
        raise typer.BadParameter(f"role must be one of {', '.join(Role)}")
    if (role == "admin") != (project is None):
        raise typer.BadParameter("admin keys take no --project; every other role needs one")
    if (role == "annotator") != (rater is not None):
        raise typer.BadParameter("--rater is required for annotator keys and only for them")
    expiry = None
    if expires_at is not None:
        try:
            expiry = datetime.fromisoformat(expires_at)
        except ValueError:
            raise typer.BadParameter(f"--expires-at {expires_at!r} is not an ISO 8601 moment") from None
        if expiry.tzinfo is None:
            raise typer.BadParameter("--expires-at needs a timezone, e.g. 2027-01-31T00:00:00Z")
        if expiry <= datetime.now(expiry.tzinfo):
            raise typer.BadParameter("--expires-at must be in the future")
    engine = _migrated_engine()
    with session_scope(make_sessionmaker(engine), write=True) as session:
        if project is not None and session.get(Project, project) is None:
            raise typer.BadParameter(f"no project {project!r}")
        rater_id = None
        if rater is not None:
            rater_id = session.scalar(select(Rater.id).where(Rater.project_id == project, Rater.external_id == rater))
            if rater_id is None:
                raise typer.BadParameter(f"no rater {rater!r} in project {project!r}")
        _, secret = create_key(
            session, role=Role(role), project_id=project, rater_id=rater_id, name=name, expires_at=expiry
        )
    engine.dispose()
    typer.echo(secret)


@keys.command("list")
def keys_list(
    all_keys: Annotated[bool, typer.Option("--all", help="Show revoked keys too.")] = False,
) -> None:
    """List the keys of the configured database (ids, roles, scope; never secrets).

    Example: annoplan keys list --all
    """
    from service.core.db import make_sessionmaker, session_scope
    from service.data.keys import listed_keys

    engine = _migrated_engine()
    with session_scope(make_sessionmaker(engine)) as session:
        rows = listed_keys(session, include_revoked=all_keys)
    engine.dispose()
    table = Table(title="annoplan API keys")
    for column in ("id", "role", "project", "rater", "name", "created", "revoked", "expires"):
        table.add_column(column)
    for key, rater in rows:
        table.add_row(
            key.id,
            key.role,
            key.project_id or "",
            rater or "",
            key.name or "",
            key.created_at.isoformat(timespec="seconds"),
            key.revoked_at.isoformat(timespec="seconds") if key.revoked_at else "",
            key.expires_at.isoformat(timespec="seconds") if key.expires_at else "",
        )
    console.print(table)


@keys.command("revoke")
def keys_revoke(key_id: Annotated[str, typer.Argument(help="The key's id, as `annoplan keys list` shows it.")]) -> None:
    """Revoke a key (admin keys too); it stops working at once.

    Example: annoplan keys revoke k_3f9a...
    """
    from service.core.db import make_sessionmaker, session_scope
    from service.core.errors import AppError
    from service.data.keys import revoke_key

    engine = _migrated_engine()
    try:
        with session_scope(make_sessionmaker(engine), write=True) as session:
            revoke_key(session, key_id)
    except AppError as exc:
        raise CliError(exc.detail) from None
    finally:
        engine.dispose()
    typer.echo(f"revoked {key_id}")


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


@app.command()
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


@app.command()
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


@app.command()
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
    from planner.simulate import synthetic_codes

    if not key:
        raise typer.BadParameter("pass --key or set ANNOPLAN_ADMIN_KEY")
    labels = ["pass", "fail"]
    codes = synthetic_codes(
        n_items, n_labels=2, accuracies=[0.9, 0.85, 0.85, 0.85, 0.85], prevalence=[0.7, 0.3], rng=seed
    )[0]
    names = ["judge", "ann-1", "ann-2", "ann-3", "ann-4"]
    kinds = ["judge", "primary", "human", "human", "human"]
    with _api(url, key, timeout=120) as c:
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
    from planner.simulate import synthetic_codes
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


sync = typer.Typer(help="Bring labels in from annotation tools.", no_args_is_help=True)
app.add_typer(sync, name="sync")


@sync.command("label-studio")
def sync_label_studio(
    project: Annotated[str, typer.Option(help="The annoplan project id.")],
    ls_project: Annotated[int, typer.Option(help="The Label Studio project id.")],
    ls_url: Annotated[str, typer.Option(envvar="LABEL_STUDIO_URL", help="Label Studio's base URL.")] = "",
    ls_token: Annotated[str, typer.Option(envvar="LABEL_STUDIO_TOKEN", help="A Label Studio API token.")] = "",
    token_type: Annotated[
        str, typer.Option(help="Token (a legacy API token), Personal (a personal access token) or Bearer.")
    ] = "Token",
    from_name: Annotated[str | None, typer.Option(help="The choices control, when the config is ambiguous.")] = None,
    primary: Annotated[str | None, typer.Option(help="Label Studio id or email of the primary annotator.")] = None,
    judge_prefix: Annotated[str, typer.Option(help="Prefix of the judges' external ids.")] = "",
    criterion: Annotated[
        str | None, typer.Option(help="The criterion the labels are for (a rubric: one sync per criterion).")
    ] = None,
    url: Annotated[str, typer.Option(envvar="ANNOPLAN_URL", help="The annoplan server.")] = "http://127.0.0.1:8000",
    key: Annotated[str, typer.Option(envvar="ANNOPLAN_KEY", help="An admin key or a pm key of the project.")] = "",
) -> None:
    """Reconcile an annoplan project with a full snapshot of a Label Studio project (adds,
    updates, retractions, judges from predictions) and print what changed; safe to rerun.

    Example: annoplan sync label-studio --project p_... --ls-project 3 --ls-url http://127.0.0.1:8080
    (with ANNOPLAN_KEY and LABEL_STUDIO_TOKEN set)
    """
    _require_credentials(key, ls_url, ls_token)
    body = {
        "url": ls_url,
        "project": ls_project,
        "token": ls_token,
        "token_type": token_type,
        "from_name": from_name,
        "primary": primary,
        "judge_prefix": judge_prefix,
        "criterion": criterion,
    }
    with _api(url, key, timeout=600) as c:
        done = c.sync_label_studio(project, **body).model_dump(mode="json")
    changes = done["changes"]
    typer.echo(
        f"{done['tasks']} tasks ({done['from_name']}): {changes['added']} added, "
        f"{changes['updated']} updated, {changes['retracted']} retracted, {changes['unchanged']} unchanged; "
        f"{len(done['unmapped'])} unmapped, {len(done['raters_created'])} raters created; "
        f"label_seq {done['labels']['label_seq']}"
    )
    if created := done["items"]["created"]:
        typer.echo(
            f"  {created} tasks were new to annoplan and became items (tasks added in Label Studio by hand): "
            "they are in no plan's lists until you plan again"
        )
    for u in done["unmapped"][:20]:
        typer.echo(f"  unmapped: task {u['task']} {u['rater']}: {u['value']!r}")
    if done.get("issues"):
        typer.echo(
            f"  {len(done['issues'])} annotations kept out of the labels, open in the inbox "
            f"(GET /projects/{project}/integrations/label-studio/issues)"
        )


IMPORT_SOURCES = ("generic", "promptfoo", "inspect", "langfuse", "langsmith")
"""The files ``annoplan import`` reads, as ``POST /projects/{pid}/import/<source>`` does (docs/integrations.md)."""
IMPORT_TYPES = {".csv": "text/csv", ".ndjson": "application/x-ndjson", ".jsonl": "application/x-ndjson"}
"""A generic file's content type by its suffix (otherwise JSON)."""


@app.command("import")
def import_file(
    source: Annotated[str, typer.Argument(help=f"The file's tool: {', '.join(IMPORT_SOURCES)}.")],
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The file, as the tool wrote it.")],
    project: Annotated[str, typer.Option(help="The annoplan project id.")],
    judge: Annotated[list[str] | None, typer.Option(help="A scorer to import as a judge (repeat it).")] = None,
    human: Annotated[list[str] | None, typer.Option(help="A scorer to import as a human (repeat it).")] = None,
    api_source: Annotated[
        str | None, typer.Option(help="The kind of API-sourced scores (Langfuse API, LangSmith api).")
    ] = None,
    score: Annotated[str | None, typer.Option(help="Import only the scores of this name (key).")] = None,
    criterion: Annotated[str | None, typer.Option(help="The criterion of scores whose name is not one.")] = None,
    primary: Annotated[str | None, typer.Option(help="External id of the human rater to make the primary.")] = None,
    url: Annotated[str, typer.Option(envvar="ANNOPLAN_URL", help="The annoplan server.")] = "http://127.0.0.1:8000",
    key: Annotated[str, typer.Option(envvar="ANNOPLAN_KEY", help="An admin key or a pm key of the project.")] = "",
) -> None:
    """Import a tool's file into a project, all or nothing, and print what it wrote; safe to rerun.

    Example: annoplan import promptfoo results.json --project p_... (with ANNOPLAN_KEY set)
    """
    if source not in IMPORT_SOURCES:
        raise typer.BadParameter(f"{source!r} is not one of {', '.join(IMPORT_SOURCES)}", param_hint="SOURCE")
    if not key:
        raise typer.BadParameter("pass --key (or ANNOPLAN_KEY)")
    content_type = IMPORT_TYPES.get(file.suffix.lower(), "application/json") if source == "generic" else None
    params = {
        "judges": judge or None,
        "humans": human or None,
        "api_source": api_source,
        "score": score,
        "criterion": criterion,
        "primary": primary,
    }
    kept = {k: v for k, v in params.items() if v is not None}
    body = file.read_bytes()
    with _api(url, key, timeout=600) as c:
        done = c.import_file(project, source, body, content_type or "application/json", **kept)
    labels = done.labels
    typer.echo(
        f"{labels.accepted} labels written, {labels.duplicates} unchanged (label_seq {labels.label_seq}); "
        f"{done.items_created} items and {len(done.raters_created)} raters created"
        + (f" ({', '.join(done.raters_created)})" if done.raters_created else "")
    )
    for skipped in done.skipped:
        typer.echo(f"  not imported: {skipped.scorer} ({skipped.scores} scores): {skipped.reason}")


connect = typer.Typer(help="Set up annotation tools to work with a project.", no_args_is_help=True)
app.add_typer(connect, name="connect")


@connect.command("label-studio")
def connect_label_studio(
    project: Annotated[str, typer.Option(help="The annoplan project id.")],
    ls_project: Annotated[int, typer.Option(help="The Label Studio project id.")],
    webhook_url: Annotated[
        str, typer.Option(help="annoplan's base URL as Label Studio reaches it (the webhook posts there).")
    ],
    ls_url: Annotated[str, typer.Option(envvar="LABEL_STUDIO_URL", help="Label Studio's base URL.")] = "",
    ls_token: Annotated[str, typer.Option(envvar="LABEL_STUDIO_TOKEN", help="A Label Studio API token.")] = "",
    token_type: Annotated[
        str, typer.Option(help="Token (a legacy API token), Personal (a personal access token) or Bearer.")
    ] = "Token",
    hide_predictions: Annotated[
        bool,
        typer.Option(
            help="Turn Label Studio's show_collab_predictions off; --no-hide-predictions refuses instead "
            "while annotators would see the judge's predictions."
        ),
    ] = True,
    url: Annotated[str, typer.Option(envvar="ANNOPLAN_URL", help="The annoplan server.")] = "http://127.0.0.1:8000",
    key: Annotated[str, typer.Option(envvar="ANNOPLAN_KEY", help="An admin key or a pm key of the project.")] = "",
) -> None:
    """Set a Label Studio project up for this project (predictions hidden, maximum_annotations at the
    plan's panel, the webhook with a new secret, a Data Manager tab per secondary) and print what changed;
    a rerun changes only what drifted, and rotates the webhook's secret.

    Example: annoplan connect label-studio --project p_... --ls-project 3 --webhook-url http://127.0.0.1:8000
    (with ANNOPLAN_KEY, LABEL_STUDIO_URL and LABEL_STUDIO_TOKEN set)
    """
    _require_credentials(key, ls_url, ls_token)
    body = {
        "url": ls_url,
        "project": ls_project,
        "token": ls_token,
        "token_type": token_type,
        "webhook_url": webhook_url,
        "hide_predictions": hide_predictions,
    }
    with _api(url, key, timeout=600) as c:
        done = c.connect_label_studio(project, **body).model_dump(mode="json")
    for change in done["changed"]:
        typer.echo(f"- {change}")
    typer.echo(
        f"webhook {done['webhook_id']} (pm key {done['key_id']}), maximum_annotations {done['maximum_annotations']}"
    )
    for rater, view in sorted(done["views"].items()):
        typer.echo(f"  Data Manager tab {view} 'annoplan: {rater}' lists {rater}'s batches")


def _require_credentials(key: str, ls_url: str, ls_token: str) -> None:
    """Refuse a Label Studio command missing the annoplan key, Label Studio's URL or its token."""
    if not (key and ls_url and ls_token):
        raise typer.BadParameter(
            "pass --key, --ls-url and --ls-token (or ANNOPLAN_KEY, LABEL_STUDIO_URL, LABEL_STUDIO_TOKEN)"
        )


@contextmanager
def _api(url: str, key: str, *, timeout: float) -> Iterator[Client]:
    """The annoplan API at ``url`` with ``key``, each request sent once; an error answer prints the request
    and the answer on stderr and exits 1, an unreachable server is a one-line error."""
    import httpx

    from service.client import ApiError, Client

    try:
        with Client(url, key, timeout=timeout, retries=0) as client:
            yield client
    except ApiError as error:
        r = error.response
        assert r is not None  # the client's errors are answers it received
        typer.echo(f"{r.request.method} {r.request.url}: {r.status_code} {r.text}", err=True)
        raise typer.Exit(1) from None
    except httpx.HTTPError as exc:
        raise CliError(f"annoplan at {url} could not be reached: {exc}") from None


def _label_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of a label export: CSV (a header row), NDJSON (one object a line) or a JSON array or page."""
    from service.core.csv_safety import restored_cell

    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":  # exports neutralise formula-like cells; read back the original text
        return [{k: restored_cell(v or "") for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]
    try:
        if path.suffix.lower() in (".ndjson", ".jsonl"):
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise typer.BadParameter(f"{path.name} is not valid JSON: {error}") from None
    rows = data.get("items") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise typer.BadParameter(f"{path.name} must hold label rows (an array, or a page with 'items')")
    return rows


@app.command()
def verify(
    certificate: Annotated[
        Path, typer.Argument(help="The certificate (an in-toto statement, JSON).", exists=True, dir_okay=False)
    ],
    labels: Annotated[
        Path,
        typer.Argument(
            help="A label export: .csv, .ndjson or .json (current labels or history).", exists=True, dir_okay=False
        ),
    ],
) -> None:
    """Re-derive a certificate offline from a label export; print {"match", "mismatches"} as JSON.

    Exit status 0 when it matches, 1 when it does not, 2 for unusable input.

    Example: annoplan verify cert.json labels.csv
    """
    from planner.certificate import verify_certificate

    try:
        statement = json.loads(certificate.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise typer.BadParameter(f"{certificate.name} is not valid JSON: {error}") from None
    try:
        check = verify_certificate(statement, _label_rows(labels))
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    typer.echo(
        json.dumps(
            {
                "match": check.match,
                "notes": list(check.notes),
                "mismatches": [
                    {"field": m.field, "reason": m.reason, "certified": m.certified, "found": m.found}
                    for m in check.mismatches
                ],
            },
            indent=2,
        )
    )
    if not check.match:
        raise typer.Exit(1)


def main() -> None:
    """Entry point of the ``annoplan`` script: errors a person can fix are one line, no traceback."""
    args = sys.argv[1:]
    if not args:
        app(args)  # prints the help
    try:
        code = app(args, standalone_mode=False)  # without standalone mode click returns typer.Exit's code
    except CliError as e:
        _fail(str(e))
    except typer.Abort:
        _fail("aborted")
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.TyperException as e:  # a usage error: unknown option, bad value, missing file
        _fail(e.format_message(), hint="add --help for the options")
    except (OSError, ValueError) as e:
        _fail(str(e))
    if isinstance(code, int) and code:
        sys.exit(code)


def _fail(message: str, *, hint: str | None = None) -> None:
    """Print ``annoplan: error: message`` (and a hint) on stderr and exit 1."""
    typer.echo(f"annoplan: error: {message}" + (f" ({hint})" if hint else ""), err=True)
    sys.exit(1 if hint is None else 2)


if __name__ == "__main__":
    main()
