"""One error hierarchy and the handlers that render it as ``{"error", "detail"}``."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException


class ErrorBody(BaseModel):
    """The error document, as documented in OpenAPI."""

    error: str = Field(description="A stable code for programs, such as not_found or validation_error.")
    detail: str = Field(description="What went wrong, in one sentence for people.")
    fields: list[dict[str, Any]] | None = Field(
        None, description="Per invalid field (validation errors only): where it is and why."
    )


log = logging.getLogger("annoplan")


class AppError(Exception):
    """An error a client caused or must know about; rendered with its status and code."""

    status_code = 400
    code = "bad_request"

    def __init__(self, detail: str, *, code: str | None = None, fields: list[Any] | None = None):
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code
        self.fields = fields


class Unauthorized(AppError):
    status_code = 401
    code = "unauthorized"


class Forbidden(AppError):
    status_code = 403
    code = "forbidden"


class NotFound(AppError):
    status_code = 404
    code = "not_found"


class Conflict(AppError):
    status_code = 409
    code = "conflict"


class TooLarge(AppError):
    status_code = 413
    code = "payload_too_large"


class UnsupportedMediaType(AppError):
    status_code = 415
    code = "unsupported_media_type"


class Invalid(AppError):
    status_code = 422
    code = "invalid"


ECHO_CHARS = 100
"""Longest slice of a client's value that an error message repeats back."""

DETAIL_CHARS = 1000
"""Longest error ``detail``; a backstop for messages that echo several values."""


def echo(value: object) -> str:
    """``repr(value)`` as quoted in error messages: at most ``ECHO_CHARS`` characters of it."""
    text = repr(value)
    if len(text) <= ECHO_CHARS:
        return text
    return f"{text[:ECHO_CHARS]}... ({len(text):,} characters)"


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... (truncated)"


def error_body(code: str, detail: str, fields: list[Any] | None = None) -> dict[str, Any]:
    """The stable error document every 4xx and 5xx answers with."""
    body: dict[str, Any] = {"error": code, "detail": _bounded(detail, DETAIL_CHARS)}
    if fields:
        body["fields"] = [_bounded_field(f) for f in fields]
    return body


def _bounded_field(field: Any) -> Any:
    """A ``fields`` entry with long location parts and values cut to ``ECHO_CHARS``."""
    if not isinstance(field, dict):
        return field
    bounded = dict(field)
    if "loc" in bounded:
        bounded["loc"] = [_bounded(p, ECHO_CHARS) if isinstance(p, str) else p for p in bounded["loc"]]
    if isinstance(bounded.get("value"), str):
        bounded["value"] = _bounded(bounded["value"], ECHO_CHARS)
    if isinstance(bounded.get("msg"), str):
        bounded["msg"] = _bounded(bounded["msg"], DETAIL_CHARS)
    return bounded


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries documenting the error body for each status."""
    return {s: {"model": ErrorBody, "description": HTTPStatus(s).phrase} for s in statuses}


def install_error_handlers(app: FastAPI) -> None:
    """Route every failure through the one error body."""

    @app.exception_handler(AppError)
    async def _app_error(_: Request, exc: AppError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return JSONResponse(error_body(exc.code, exc.detail, exc.fields), exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media and media != "application/json" and any(e.get("loc", ("",))[0] == "body" for e in exc.errors()):
            return JSONResponse(
                error_body(
                    "unsupported_media_type", f"content type {echo(media)} is not accepted; send application/json"
                ),
                415,
            )
        malformed = next((e for e in exc.errors() if e.get("type") == "json_invalid"), None)
        if malformed is not None:  # as the bulk routes answer one (service.core.uploads)
            at = malformed.get("loc", ("body", None))[-1]
            where = f" at character {at}" if isinstance(at, int) else ""
            reason = malformed.get("ctx", {}).get("error", "")
            return JSONResponse(
                error_body("malformed_body", f"body is not valid JSON{where}: {reason}".rstrip(": ")), 422
            )
        fields = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()
        ]
        first = fields[0] if fields else {"loc": [], "msg": "invalid request"}
        where = _bounded(".".join(str(p) for p in first["loc"]), ECHO_CHARS)
        return JSONResponse(error_body("validation_error", f"{where}: {first['msg']}", fields), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_").replace("-", "_")
        return JSONResponse(error_body(code, str(exc.detail)), exc.status_code, headers=exc.headers)

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        log.info("database refused a value: %s", exc.orig)
        return JSONResponse(
            error_body("invalid_value", "a value cannot be stored (out of range, or a character such as NUL)"), 422
        )

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body("internal_error", "an unexpected error occurred; it has been logged"), 500)
