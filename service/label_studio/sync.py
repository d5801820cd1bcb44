"""Pull sync: a full snapshot of a Label Studio project fetched through its REST API.

The snapshot is made by Label Studio's export API with full predictions and annotators
(``POST /api/projects/<id>/exports``), polled until it is ready, downloaded as JSON and then
deleted; the project's labeling config comes with ``GET /api/projects/<id>``. The token is
used for these calls only: it is never stored or logged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import httpx
from pydantic import Field, SecretStr, field_validator

from service.core.errors import AppError
from service.core.outbound import OutboundPolicy, OutboundRefused, client
from service.label_studio.reconcile import ImportResult
from service.schemas.base import Strict

SNAPSHOT_OPTIONS = {"predictions": {"only_id": False}, "annotations__completed_by": {"only_id": False}}


class LabelStudioUnavailable(AppError):
    status_code = 502
    code = "label_studio_unavailable"


class TokenRefused(LabelStudioUnavailable):
    """Label Studio answered 401 or 403: the token or its type is wrong."""


class LabelStudioTarget(Strict):
    """Where the Label Studio project is and how to authenticate."""

    url: str = Field(max_length=2000, description="Label Studio's base URL, e.g. `http://127.0.0.1:8080`.")
    project: int = Field(ge=1, description="The Label Studio project's id.")
    token: SecretStr = Field(
        min_length=1, max_length=2000, description="A Label Studio API token; used for this call only, never stored."
    )
    token_type: Literal["Token", "Personal", "Bearer"] = Field(
        "Token",
        description="`Token` for a legacy API token (Label Studio started with "
        "`--enable-legacy-api-token`), `Personal` for a personal access token (exchanged at Label Studio's "
        "`/api/token/refresh/` for a short-lived access token first), `Bearer` for such an access token.",
    )

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return url.rstrip("/")


class SyncRequest(LabelStudioTarget):
    """Where the Label Studio project is, how to authenticate, and how to read it."""

    from_name: str | None = Field(
        None, max_length=200, description="The choices control, when the config is ambiguous."
    )
    primary: str | None = Field(None, max_length=200, description="Label Studio user id or email of the primary.")
    judge_prefix: str = Field("", max_length=100, description="Prefix of the judges' external ids.")
    criterion: str | None = Field(
        None, max_length=100, description="Criterion the choices label (default: the project's first)."
    )


class SyncResult(ImportResult):
    """What a sync changed: the reconciliation of the snapshot with the project."""

    tasks: int = Field(description="Tasks in the snapshot.")


def answer_json(response: httpx.Response, what: str) -> Any:
    """The JSON of a 2xx answer; 502 with the status and a reason of ours otherwise (nothing of the body)."""
    if response.status_code in (401, 403):
        raise TokenRefused(f"Label Studio refused the token ({response.status_code}) for {what}")
    if response.status_code >= 300:
        raise LabelStudioUnavailable(f"Label Studio answered {response.status_code} for {what}")
    try:
        return response.json()
    except ValueError:
        raise LabelStudioUnavailable(f"Label Studio's answer for {what} is not JSON") from None


def answer_object(response: httpx.Response, what: str) -> dict[str, Any]:
    answer = answer_json(response, what)
    if not isinstance(answer, dict):
        raise LabelStudioUnavailable(f"Label Studio's answer for {what} is not a JSON object")
    return answer


def _export_id(export: dict[str, Any]) -> int:
    eid = export.get("id")
    if not isinstance(eid, int) or isinstance(eid, bool) or eid < 0:
        raise LabelStudioUnavailable("Label Studio's snapshot export has no integer id")
    return eid


@contextmanager
def label_studio_calls(target: LabelStudioTarget, policy: OutboundPolicy, *, max_calls: int) -> Iterator[httpx.Client]:
    """An outbound client to ``target`` with its token (a personal access token exchanged for an access
    token first); refusals and transport errors as 502s that say why."""
    token = target.token.get_secret_value()
    personal = target.token_type == "Personal"
    headers = {} if personal else {"Authorization": f"{target.token_type} {token}"}
    try:
        with client(policy, base_url=target.url, headers=headers, max_calls=max_calls + personal) as http:
            if personal:
                access = answer_object(http.post("/api/token/refresh/", json={"refresh": token}), "the token exchange")
                if not isinstance(access.get("access"), str):
                    raise LabelStudioUnavailable("Label Studio's token exchange answered no access token")
                http.headers["Authorization"] = f"Bearer {access['access']}"
            yield http
    except TokenRefused as refused:
        raise TokenRefused(f"{refused.detail}: {_token_hint(target.token_type, token)}") from None
    except OutboundRefused as refused:
        raise LabelStudioUnavailable(f"Label Studio was not called further: {refused.reason}") from None
    except httpx.HTTPError as exc:
        raise LabelStudioUnavailable(f"Label Studio could not be reached: {type(exc).__name__}") from None


def _token_hint(token_type: str, token: str) -> str:
    """What to check when Label Studio refuses ``token`` sent as ``token_type``."""
    jwt = token.count(".") == 2 and token.startswith("eyJ")  # a JSON Web Token: a personal access token
    if jwt and token_type != "Personal":
        return "this token is a JSON Web Token, as personal access tokens are: send it with token_type Personal"
    if token_type == "Token":
        return (
            "a legacy token needs Label Studio started with --enable-legacy-api-token; "
            "a personal access token goes with token_type Personal"
        )
    if token_type == "Personal":
        return "the personal access token was not accepted: check it is current (not revoked or rotated)"
    return "a Bearer token is a short-lived access token; pass a personal access token with token_type Personal"


def fetch_snapshot(
    req: SyncRequest, policy: OutboundPolicy, *, ready_within: float = 120.0, max_calls: int = 60
) -> tuple[str | None, list[Any]]:
    """The project's labeling config and a full snapshot of its tasks; 502 when Label Studio fails.

    Under the outbound ``policy`` (docs/operations.md): pinned checked addresses, no
    redirects, a timeout per call, at most ``max_calls`` calls, and the export polled with a
    growing pause for at most ``ready_within`` seconds.
    """
    base = f"/api/projects/{req.project}"
    with label_studio_calls(req, policy, max_calls=max_calls) as http:
        config = answer_object(http.get(base), "the project").get("label_config")
        if config is not None and not isinstance(config, str):
            raise LabelStudioUnavailable("Label Studio's project has a label_config that is not a string")
        export = answer_object(
            http.post(f"{base}/exports", json={"title": "annoplan sync", "serialization_options": SNAPSHOT_OPTIONS}),
            "a snapshot export",
        )
        eid = _export_id(export)
        deadline = time.monotonic() + ready_within
        pause = 0.25
        while export.get("status") != "completed":
            if export.get("status") == "failed" or time.monotonic() + pause > deadline:
                status = export.get("status")
                shown = status if isinstance(status, str) and len(status) <= 20 else "unknown"
                raise LabelStudioUnavailable(f"the snapshot export is {shown!r}, not completed")
            time.sleep(pause)
            pause = min(2 * pause, 5.0)
            export = answer_object(http.get(f"{base}/exports/{eid}"), "the snapshot's status")
        tasks = answer_json(
            http.get(f"{base}/exports/{eid}/download", params={"exportType": "JSON"}),
            "the snapshot download",
        )
        http.delete(f"{base}/exports/{eid}")
    if not isinstance(tasks, list):
        raise LabelStudioUnavailable("the snapshot download is not a list of tasks")
    return config, tasks
