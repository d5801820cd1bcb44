"""ASGI middleware and browser protections: the request-body size limit (413), security headers on
every response, and the login form's CSRF token."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.core.errors import error_body


class BodySizeLimit:
    """Reject bodies over ``max_bytes`` by their Content-Length, or while they stream in."""

    def __init__(self, app: ASGIApp, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self.max_bytes:
                await self._reject(send)
                return
            await self.app(scope, receive, send)
            return
        # No Content-Length (chunked): read the body here, up to the limit, then replay it.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message]), send)
                return
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                await self._reject(send)
                return
            if not message.get("more_body", False):
                break
        await self.app(
            scope, _replay([{"type": "http.request", "body": b"".join(chunks), "more_body": False}], receive), send
        )

    async def _reject(self, send: Send) -> None:
        body = orjson.dumps(
            error_body("payload_too_large", f"request body exceeds the limit of {self.max_bytes} bytes")
        )
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    """A ``receive`` that hands out ``messages`` first, then defers to ``then``."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive


CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
CSRF_COOKIE = "annoplan_login_csrf"
CSRF_FIELD = "csrf"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def csp_with_inline_scripts(html: str) -> str:
    """The policy for a page whose inline scripts are our own fixed code: each allowed by its hash.

    Only for pages that echo no client input, or an injected script would be allowed too.
    """
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in _INLINE_SCRIPT.findall(html)
    )
    return CSP.replace("script-src 'self'", f"script-src 'self' {hashes}")


def new_csrf_token() -> str:
    """A fresh random token for the login form and its cookie (double submit)."""
    return secrets.token_urlsafe(32)


def csrf_matches(cookie: str | None, submitted: str | None) -> bool:
    """Whether the form's token is the one in the browser's cookie (constant-time)."""
    return bool(cookie and submitted) and secrets.compare_digest(cookie.encode(), submitted.encode())


RETRY_AFTER_SECONDS = 5
"""``Retry-After`` of a 429 or 503 whose handler set none."""


class SecurityHeaders:
    """Add ``X-Content-Type-Options: nosniff`` to every response, to HTML the CSP and
    ``X-Frame-Options: DENY`` (a policy the page set itself is kept), and ``Retry-After`` to
    every 429 and 503 that has none."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                names = {k.lower() for k, _ in headers}
                headers.append((b"x-content-type-options", b"nosniff"))
                if message["status"] in (429, 503) and b"retry-after" not in names:
                    headers.append((b"retry-after", str(RETRY_AFTER_SECONDS).encode()))
                content_type = dict(headers).get(b"content-type", b"")
                if content_type.startswith(b"text/html"):
                    headers.append((b"x-frame-options", b"DENY"))
                    if b"content-security-policy" not in names:
                        headers.append((b"content-security-policy", CSP.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
