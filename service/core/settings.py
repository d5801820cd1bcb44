"""Service configuration read from ``ANNOPLAN_*`` environment variables."""

from __future__ import annotations

import hashlib
import secrets
from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything the service can be told from its environment."""

    model_config = SettingsConfigDict(env_prefix="ANNOPLAN_", extra="ignore")

    database_url: str = "sqlite:///./annoplan.db"
    host: str = "127.0.0.1"
    port: int = 8000
    workers: int = Field(
        1, ge=1, le=64, description="Worker processes of `annoplan serve` (uvicorn --workers); several need PostgreSQL."
    )
    forwarded_allow_ips: str = Field(
        "127.0.0.1",
        description="Comma-separated addresses (or *) of reverse proxies whose X-Forwarded-For/-Proto headers "
        "are believed: the client address and https scheme they report (docs/operations.md).",
    )
    admin_key: str | None = None
    secret_key: str | None = Field(
        None,
        description="The server's signing secret (login CSRF tokens). Unset: derived from the admin key and "
        "database URL, or random per process without an admin key (then set it when running several workers).",
    )
    login_max_age_seconds: int = Field(
        8 * 3600,
        ge=60,
        le=30 * 24 * 3600,
        description="How long a dashboard login lasts (its cookie and its row); logout ends it sooner.",
    )
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    max_rows: int = Field(100_000, ge=1)
    max_batch_size: int = Field(1_000, ge=1)
    max_page_size: int = Field(1_000, ge=1)
    lease_seconds: int = Field(2 * 3600, ge=1)
    simulation_sync_limit: int = Field(200_000, ge=0)
    simulation_max_work: int = Field(50_000_000, ge=1)
    simulation_workers: int = Field(1, ge=1, description="Simulations one job worker runs at once (its process pool).")
    simulation_attempts: int = Field(
        3, ge=1, description="Claims a simulation job may spend (its worker died or failed) before it is failed."
    )
    api_runs_jobs: bool | None = Field(
        None,
        description="Run the job queue (simulations) in each api process too; unset: yes on SQLite (the "
        "embedded default, one process does everything), no on PostgreSQL (run `annoplan worker`).",
    )
    job_lease_seconds: float = Field(
        30.0, gt=0, description="How long a claimed job stays a worker's without a renewal (renewed every third)."
    )
    job_poll_seconds: float = Field(1.0, gt=0, description="How often an idle job worker looks for due jobs.")
    job_retry_base_seconds: float = Field(5.0, gt=0, description="Backoff after a job's first failed attempt.")
    job_retry_cap_seconds: float = Field(300.0, gt=0, description="The longest backoff between two attempts.")
    agreement_max_work: int = Field(50_000_000, ge=1)
    pairwise_max_work: int = Field(
        5_000_000_000,
        ge=1,
        description="Most work of POST /pairwise: rankings x resamples x comparison cells x systems squared.",
    )
    certificate_max_work: int = Field(
        200_000_000, ge=1, description="Most label rows x resamples x judges one certificate computes or verifies."
    )
    bootstrap_resamples: int = Field(1_000, ge=0)
    dashboard_wait_seconds: float = Field(
        0.1,
        ge=0,
        description="How long a dashboard view waits for the fresh document before it shows the newest "
        "computed one (marked as such) while a background thread computes the fresh one.",
    )
    matrix_snapshot_dir: str | None = Field(
        None,
        description="Directory of the label-matrix snapshots that starting workers load (docs/operations.md); "
        "unset: beside a SQLite database file, the database's matrix_snapshots table on PostgreSQL; empty: none.",
    )
    matrix_snapshot_min_cells: int = Field(100_000, ge=0, description="Smallest matrix (items x raters) saved.")
    matrix_snapshot_seconds: float = Field(
        10.0,
        gt=0,
        description="How often one job-running process of the deployment saves the snapshot most behind.",
    )
    history_point_seconds: float = Field(
        5.0,
        gt=0,
        description="How often one job-running process of the deployment stores the dashboard's pool-score "
        "point of the projects whose labels moved (reads store none).",
    )
    computing_prestart: bool = Field(
        True,
        description="Start the process that forks heavy computations (plans, fresh documents) at startup: "
        "its imports take seconds, which the worker's first such request would otherwise wait for.",
    )
    refusal_delay_seconds: float = Field(
        1.0,
        ge=0,
        le=30,
        description="How long a key's repeat of a request refused for its project's share, sent before a slot "
        "freed, waits for its 429 (no CPU while it waits; 0: at once).",
    )
    plans_per_project: int = Field(
        2, ge=1, description="Plan computations one project may have in flight per worker process (429 past it)."
    )
    syncs_per_project: int = Field(
        1, ge=1, description="Label Studio syncs one project may have in flight per worker process (429 past it)."
    )
    simulations_per_project: int = Field(
        2,
        ge=1,
        description="Simulation jobs one project may have queued or running, service-wide, and synchronous "
        "simulations in flight per worker process (429 past either).",
    )
    plans_per_key: int = Field(
        2, ge=1, description="Plan computations one API key may have in flight per worker process, in all its projects."
    )
    syncs_per_key: int = Field(
        2,
        ge=1,
        description="Label Studio syncs one API key may have in flight per worker process, in all its projects.",
    )
    simulations_per_key: int = Field(
        2,
        ge=1,
        description="Simulation jobs one API key may have queued or running, service-wide, and synchronous "
        "simulations in flight per worker process, in all its projects (429 past either).",
    )
    computations_per_key: int = Field(
        2,
        ge=1,
        description="Large computations bounded per key (agreement, certificate issue and verification, pairwise: "
        "those past the inline size, in a child process) one API key may have at once per worker process "
        "(429 past it).",
    )
    worker_threads: int = Field(256, ge=8, description="Threads for sync requests, per worker process.")
    # Label Studio servers a sync may call (JSON list of base URLs), at any address; empty: any
    # at a public address (docs/operations.md, "Outbound requests").
    label_studio_urls: list[str] = Field(default_factory=list)
    label_studio_timeout_seconds: float = Field(30.0, gt=0, description="Timeout of each call to Label Studio.")
    label_studio_ready_seconds: float = Field(
        120.0, gt=0, description="How long a sync waits for Label Studio's snapshot export to be ready."
    )
    label_studio_max_calls: int = Field(60, ge=4, description="Most requests one sync sends to Label Studio.")
    outbound_allow_private: bool = Field(
        False,
        description="Allow outbound requests (webhooks, Label Studio) to loopback, private and reserved addresses; "
        "for tests and single-host setups only.",
    )
    webhook_sender: bool = Field(
        True, description="Run the outbound webhook sender in this process when it runs the job queue."
    )
    webhook_allow_private: bool = Field(
        False, description="Allow webhook targets on loopback or private networks (as outbound_allow_private does)."
    )
    webhook_poll_seconds: float = Field(1.0, gt=0)
    webhook_decision_seconds: float = Field(
        5.0, ge=0, description="Least time between two re-reads of a project's decision for decision.changed."
    )
    webhook_watch_seconds: float = Field(
        1.0,
        ge=0,
        description="Least time between two checks, for the whole deployment, of plans reached, batch leases "
        "run out and watched judges' drift.",
    )
    webhook_timeout_seconds: float = Field(10.0, gt=0)
    webhook_lease_seconds: float = Field(
        60.0, gt=0, description="How long a sender holds a webhook target it takes a turn at without renewing."
    )
    webhook_target_budget_seconds: float = Field(
        10.0,
        gt=0,
        description="How long one turn at a webhook target keeps starting deliveries (at most a third of the "
        "lease): a slow target then waits behind the others.",
    )
    webhook_targets_at_once: int = Field(4, ge=1, description="Webhook targets one sender takes turns at at once.")
    webhook_targets_per_project: int = Field(
        2,
        ge=1,
        description="Turns at webhook targets of one project at once, in all senders (at most targets_at_once).",
    )
    webhook_retry_base_seconds: float = Field(5.0, gt=0)
    webhook_retry_cap_seconds: float = Field(2 * 3600.0, gt=0)
    webhook_retry_window_seconds: float = Field(24 * 3600.0, ge=0)


def api_runs_jobs(settings: Settings) -> bool:
    """Whether api processes run the job queue beside their requests (``api_runs_jobs``; unset: on SQLite)."""
    if settings.api_runs_jobs is not None:
        return settings.api_runs_jobs
    return settings.database_url.startswith("sqlite")


_PROCESS_SECRET = secrets.token_bytes(32)


def signing_secret(settings: Settings) -> bytes:
    """The key this server signs its tokens with (see ``secret_key``); the same in every worker when configured."""
    if settings.secret_key:
        return hashlib.sha256(b"annoplan-secret." + settings.secret_key.encode()).digest()
    if settings.admin_key:
        seed = f"annoplan-derived.{settings.admin_key}.{settings.database_url}".encode()
        return hashlib.sha256(seed).digest()
    return _PROCESS_SECRET


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read once."""
    return Settings()
