"""The application factory: settings, database, error handling, routers."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.staticfiles import StaticFiles
from pydantic import TypeAdapter
from sqlalchemy.exc import IntegrityError

from service.core.allocator import returned_large_frees
from service.core.db import make_engine, session_scope, writer_turn
from service.core.errors import ErrorBody, install_error_handlers
from service.core.fairness import Refusals, RefusedAgain, Slots, install_refusal_memory
from service.core.middleware import BodySizeLimit, ReturnedFreePages, SecurityHeaders
from service.core.offload import prestart
from service.core.settings import Settings, api_runs_jobs, get_settings
from service.data.database_health import DatabaseState, install_outage_handlers
from service.data.jobs import worker_name
from service.data.keys import ensure_admin_key
from service.data.table_statistics import StatisticsKeeper
from service.documents.history_keeper import HistoryKeeper
from service.documents.history_replays import HistoryReplayer
from service.documents.reliability import DocumentCache
from service.documents.sessions import worker_sessionmaker
from service.integrations.generic import GenericRow
from service.matrices.modal_strata import StrataWarmer
from service.matrices.snapshot_keeper import SnapshotKeeper
from service.matrices.snapshots import SnapshotTable, remove_orphan_snapshots, snapshot_place
from service.matrices.store import MatrixStore
from service.routes import (
    agreement,
    batches,
    certificates,
    dashboard,
    docs,
    health,
    integrations,
    items,
    keys,
    label_studio,
    labels,
    pairwise,
    plans,
    projects,
    raters,
    reliability,
    report,
    selective,
    simulations,
    versions,
    webhooks,
)
from service.schemas.examples import add_request_examples, add_response_examples
from service.schemas.items import ItemIn
from service.schemas.labels import LabelIn, RetractionIn
from service.simulations.jobs import SimulationRunner
from service.webhooks.sender import WebhookSender

log = logging.getLogger("annoplan")
STATIC = Path(__file__).parent / "static"

DESCRIPTION = """\
Plan, collect and re-estimate the human overlap needed to validate an LLM judge against
human annotators. Authenticate with `Authorization: Bearer <api key>`. Errors have the body
`{"error": "<code>", "detail": "<sentence>"}`. See docs/method.md for the statistics.
"""


PLAN_DRAFTS = 4
"""Plans drafted at once per worker process (each is CPU-bound for a second or two); more wait their turn."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """A configured application; the engine is built at startup, not at import."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Its state lives on the app: a second lifespan at once would replace the first's engine and
        # background threads, and the first's would then run on, unstopped, after both ended.
        if getattr(app.state, "serving", False):
            raise RuntimeError("this app is already serving: create another app for a second server")
        app.state.serving = True
        returned_large_frees()  # the worker's freed arrays leave its resident memory (service.core.allocator)
        try:
            if settings.computing_prestart:
                prestart()  # its imports run in its own process while this one starts
            engine = make_engine(settings.database_url)
            app.state.engine = engine
            snapshots = snapshot_place(settings.database_url, settings.matrix_snapshot_dir)
            # an api process that runs no jobs only reads snapshots: the job workers save them
            runs_jobs = api_runs_jobs(settings)
            matrices = MatrixStore(
                snapshots=snapshots, snapshot_min_cells=settings.matrix_snapshot_min_cells, saves=runs_jobs
            )
            app.state.sessions = worker_sessionmaker(engine, matrices)
            if snapshots is not None and not isinstance(snapshots, SnapshotTable):
                with session_scope(app.state.sessions) as session:
                    remove_orphan_snapshots(snapshots, session)
            app.state.writer_turn = writer_turn(engine)
            app.state.database.watch(engine)
            secret = None
            try:
                with session_scope(app.state.sessions, write=True) as session:
                    secret = ensure_admin_key(session, settings.admin_key)
            except IntegrityError:  # another worker registered the same admin key first
                pass
            if secret:
                print(f"annoplan: generated admin key (shown once): {secret}", flush=True)
            # Sync routes and dependencies share one thread pool (AnyIO's default is 40 threads);
            # write requests wait for their turn outside it (service.core.db.writer_turn).
            anyio.to_thread.current_default_thread_limiter().total_tokens = settings.worker_threads
            # Plans are drafted on threads of their own: a drafted plan waiting for its turn to be
            # stored then holds none of the pool's threads, which the turn's holder may need.
            app.state.plan_drafts = anyio.CapacityLimiter(PLAN_DRAFTS)
            # one project, or one key, may hold only part of them (and of the syncs and synchronous
            # simulations), so it cannot starve the others
            app.state.plan_slots = Slots("plan computations", settings.plans_per_project, settings.plans_per_key)
            app.state.sync_slots = Slots("Label Studio syncs", settings.syncs_per_project, settings.syncs_per_key)
            app.state.simulation_slots = Slots(
                "synchronous simulations",
                settings.simulations_per_project,
                settings.simulations_per_key,
                every_request=False,  # only those small enough to be answered at once
            )
            # large computations bounded per key (agreement, certificates, pairwise) in child processes
            app.state.computation_slots = Slots(
                "large computations", None, settings.computations_per_key, every_request=False
            )
            documents = app.state.documents = DocumentCache()
            # webhook deliveries are queue work: here only when this process runs the queue
            sender = WebhookSender(app.state.sessions, settings, documents)
            if settings.webhook_sender and runs_jobs:
                sender.start()
            warmer = app.state.strata_warmer = StrataWarmer(app.state.sessions)
            warmer.start()
            # the queue's periodic work (table statistics, snapshots, pool-score history) and simulations, here
            # too unless `annoplan worker` processes run them
            keeper = StatisticsKeeper(engine)
            if engine.dialect.name == "postgresql" and runs_jobs:
                keeper.start()
            snapshotter = SnapshotKeeper(
                app.state.sessions,
                matrices,
                poll_seconds=settings.matrix_snapshot_seconds,
                min_cells=settings.matrix_snapshot_min_cells,
            )
            if snapshots is not None and runs_jobs:
                snapshotter.start()
            replayer = HistoryReplayer(app.state.sessions, settings, owner=worker_name("api"))
            historian = HistoryKeeper(app.state.sessions, poll_seconds=settings.history_point_seconds)
            if runs_jobs:
                replayer.start()
                historian.start()
            runner = SimulationRunner(app.state.sessions, settings, owner=worker_name("api"))
            app.state.simulations = runner if runs_jobs else None
            if app.state.simulations is not None:
                runner.start()
            yield
            historian.stop()
            replayer.stop()
            snapshotter.stop()
            keeper.stop()
            warmer.stop()
            sender.stop()
            documents.close()
            runner.stop()
            matrices.flush()
            engine.dispose()
        finally:
            app.state.serving = False

    app = FastAPI(
        title="annoplan", version="0.1.0", description=DESCRIPTION, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    app.state.settings = settings
    app.state.database = DatabaseState()
    install_error_handlers(app)
    install_outage_handlers(app)
    refusals = Refusals()  # a key's too-early repeat of a request refused for its project's share: 429 at once
    install_refusal_memory(app, refusals)
    for module in (
        health,
        projects,
        items,
        raters,
        versions,
        labels,
        plans,
        batches,
        reliability,
        report,
        simulations,
        agreement,
        pairwise,
        dashboard,
        label_studio,
        integrations,
        docs,
        webhooks,
        certificates,
        keys,
        selective,
    ):
        app.include_router(module.router)
    app.mount(docs.DOCS_ASSETS, docs.docs_assets(), name="docs-assets")
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RefusedAgain, refusals=refusals, delay=settings.refusal_delay_seconds)
    app.add_middleware(SecurityHeaders)
    app.add_middleware(ReturnedFreePages)  # outermost: after the whole response

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {})
            for model in (ItemIn, LabelIn, RetractionIn, GenericRow):
                schema["components"]["schemas"][model.__name__] = TypeAdapter(model).json_schema()
            schema["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            schema["security"] = [{"bearer": []}]
            _document_validation_errors_as_error_body(schema)
            add_request_examples(schema)
            add_response_examples(schema)
            _document_malformed_bodies(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


def _document_validation_errors_as_error_body(schema: dict[str, Any]) -> None:
    """Every 422 is answered with the one error body (``install_error_handlers``), so the
    OpenAPI document says so wherever FastAPI would name its default validation error."""
    schemas = schema["components"]["schemas"]
    schemas.setdefault("ErrorBody", ErrorBody.model_json_schema())
    default = {"$ref": "#/components/schemas/HTTPValidationError"}
    for operation in (op for path in schema.get("paths", {}).values() for op in path.values()):
        response = operation.get("responses", {}).get("422", {})
        content = response.get("content", {}).get("application/json", {})
        if content.get("schema") == default:
            content["schema"] = {"$ref": "#/components/schemas/ErrorBody"}
    uses_default = '"#/components/schemas/HTTPValidationError"' in json.dumps(schema["paths"])
    if not uses_default:
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)


MALFORMED_BODY = (
    "Unprocessable Entity: a body that is not valid JSON (or CSV/NDJSON where accepted) is `malformed_body`; "
    "a well-formed body failing validation is `validation_error` or `invalid`. Nothing is written."
)
"""How every operation that takes a body documents its 422."""


def _document_malformed_bodies(schema: dict[str, Any]) -> None:
    """Every operation with a request body says in its 422 that a malformed body is answered there, with the
    one error body and an example."""
    example = {"error": "malformed_body", "detail": "body is not valid JSON: line 1 column 10 (char 9)"}
    error_body = {"$ref": "#/components/schemas/ErrorBody"}
    for operation in (op for path in schema.get("paths", {}).values() for op in path.values()):
        if "requestBody" not in operation:
            continue
        response = operation.setdefault("responses", {}).setdefault("422", {})
        response["description"] = MALFORMED_BODY
        content = response.setdefault("content", {}).setdefault("application/json", {"schema": error_body})
        content["examples"] = {"malformed_body": {"summary": "not valid JSON", "value": example}}
