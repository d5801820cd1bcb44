"""Pull sync: a full snapshot of a Label Studio project fetched through its REST API.

The snapshot is made by Label Studio's export API with full predictions and annotators
(``POST /api/projects/<id>/exports``), polled until it is ready, downloaded as JSON and then
deleted; the project's labeling config comes with ``GET /api/projects/<id>``. The token is
used for these calls only: it is never stored or logged.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator

from service.core.errors import AppError, Invalid, echo
from service.label_studio.reconcile import ImportResult
from service.schemas import Strict

SNAPSHOT_OPTIONS = {"predictions": {"only_id": False}, "annotations__completed_by": {"only_id": False}}


class LabelStudioUnavailable(AppError):
    status_code = 502
    code = "label_studio_unavailable"


class SyncRequest(Strict):
    """Where the Label Studio project is, how to authenticate, and how to read it."""

    url: str = Field(max_length=2000, description="Label Studio's base URL, e.g. `http://127.0.0.1:8080`.")
    project: int = Field(ge=1, description="The Label Studio project's id.")
    token: SecretStr = Field(
        min_length=1, max_length=2000, description="A Label Studio API token; used for this call only, never stored."
    )
    token_type: Literal["Token", "Bearer"] = Field(
        "Token",
        description="`Token` for a legacy API token (Label Studio started with "
        "`--enable-legacy-api-token`), `Bearer` for an access token.",
    )
    from_name: str | None = Field(
        None, max_length=200, description="The choices control, when the config is ambiguous."
    )
    primary: str | None = Field(None, max_length=200, description="Label Studio user id or email of the primary.")
    judge_prefix: str = Field("", max_length=100, description="Prefix of the judges' external ids.")
    criterion: str | None = Field(None, max_length=100)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return url.rstrip("/")


class SyncResult(ImportResult):
    """What a sync changed: the reconciliation of the snapshot with the project."""

    tasks: int = Field(description="Tasks in the snapshot.")


def check_allowed(url: str, allowed: list[str]) -> None:
    """422 unless ``url`` is under one of the ``allowed`` base URLs (same scheme, host and port,
    path below it); an empty list allows any.

    >>> check_allowed("http://ls:8080/", ["http://ls:8080"])
    >>> check_allowed("http://ls:80801", ["http://ls:8080"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    service.core.errors.Invalid: url 'http://ls:80801' is not a Label Studio this server may call ...
    """
    target = httpx.URL(url)
    for base in map(httpx.URL, allowed):
        if (target.scheme, target.host, target.port) == (base.scheme, base.host, base.port) and target.path.startswith(
            base.path.rstrip("/")
        ):
            return
    if allowed:
        raise Invalid(
            f"url {echo(url)} is not a Label Studio this server may call (ANNOPLAN_LABEL_STUDIO_URLS)",
            code="label_studio_not_allowed",
        )


def _json(response: httpx.Response, what: str) -> Any:
    if response.status_code in (401, 403):
        raise LabelStudioUnavailable(
            f"Label Studio refused the token ({response.status_code}) for {what}: check the token and token_type "
            "(legacy tokens need Label Studio started with --enable-legacy-api-token)"
        )
    if response.status_code >= 400:
        raise LabelStudioUnavailable(f"Label Studio answered {response.status_code} for {what}: {response.text[:100]}")
    try:
        return response.json()
    except ValueError:
        raise LabelStudioUnavailable(f"Label Studio's answer for {what} is not JSON") from None


def fetch_snapshot(
    req: SyncRequest, *, timeout: float = 30.0, ready_within: float = 300.0
) -> tuple[str | None, list[Any]]:
    """The project's labeling config and a full snapshot of its tasks; 502 when Label Studio fails."""
    headers = {"Authorization": f"{req.token_type} {req.token.get_secret_value()}"}
    base = f"/api/projects/{req.project}"
    try:
        with httpx.Client(base_url=req.url, headers=headers, timeout=timeout) as client:
            config = _json(client.get(base), "the project").get("label_config")
            export = _json(
                client.post(
                    f"{base}/exports", json={"title": "annoplan sync", "serialization_options": SNAPSHOT_OPTIONS}
                ),
                "a snapshot export",
            )
            deadline = time.monotonic() + ready_within
            while export.get("status") != "completed":
                if export.get("status") == "failed" or time.monotonic() > deadline:
                    raise LabelStudioUnavailable(f"the snapshot export is {export.get('status')!r}, not completed")
                time.sleep(0.5)
                export = _json(client.get(f"{base}/exports/{export['id']}"), "the snapshot's status")
            tasks = _json(
                client.get(f"{base}/exports/{export['id']}/download", params={"exportType": "JSON"}),
                "the snapshot download",
            )
            client.delete(f"{base}/exports/{export['id']}")
    except httpx.HTTPError as exc:
        raise LabelStudioUnavailable(
            f"Label Studio at {req.url[:100]} could not be reached: {type(exc).__name__}"
        ) from None
    if not isinstance(tasks, list):
        raise LabelStudioUnavailable("the snapshot download is not a list of tasks")
    return config, tasks
