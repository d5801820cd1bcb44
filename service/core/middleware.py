"""ASGI middleware and browser protections: the request-body size limit (413), security headers on
every response, the allocator's free pages returned after long requests, and the login form's CSRF token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time

import orjson
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.core.allocator import TRIM_AFTER_SECONDS, returned_free_pages
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
LOGIN_COOKIE = "annoplan_login"
"""The dashboard's login cookie: a login token (``service.data.logins``), never an API key."""
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


CSRF_MAX_AGE_SECONDS = 3600


def cookie_name(name: str, *, https: bool) -> str:
    """``__Host-<name>`` over https (the browser then takes it only Secure, for this host, path /), else ``name``."""
    return f"__Host-{name}" if https else name


def _csrf_mac(secret: bytes, nonce: str, issued: int) -> str:
    mac = hmac.new(secret, f"login-csrf.{nonce}.{issued}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def new_csrf_token(secret: bytes, *, now: float | None = None) -> str:
    """A login-form token ``<nonce>.<issued>.<HMAC of both under the server's secret>`` (double submit, signed)."""
    nonce, issued = secrets.token_urlsafe(18), int(time.time() if now is None else now)
    return f"{nonce}.{issued}.{_csrf_mac(secret, nonce, issued)}"


def csrf_matches(cookie: str | None, submitted: str | None, secret: bytes, *, now: float | None = None) -> bool:
    """Whether the form's token is the cookie's (constant-time), signed by this server and under an hour old."""
    if not (cookie and submitted) or not secrets.compare_digest(cookie.encode(), submitted.encode()):
        return False
    parts = submitted.split(".")
    if len(parts) != 3 or not parts[1].isdigit():
        return False
    nonce, issued, mac = parts[0], int(parts[1]), parts[2]
    age = (time.time() if now is None else now) - issued
    return 0 <= age <= CSRF_MAX_AGE_SECONDS and secrets.compare_digest(mac, _csrf_mac(secret, nonce, issued))


def logout_token(secret: bytes, login_token: str) -> str:
    """The logout form's CSRF token: an HMAC of the login's token under the server's secret, so only a
    page served to that login can post it."""
    mac = hmac.new(secret, f"logout.{login_token}".encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).decode().rstrip("=")


def same_origin_post(origin: str | None, fetch_site: str | None, own_origin: str) -> bool:
    """Whether a browser's form post comes from this origin: ``Origin`` and ``Sec-Fetch-Site`` agree when sent.

    A page on another port of the host or on a sibling subdomain is same-site but not
    same-origin: refused. Clients that send neither (not browsers) are judged by the token alone.
    """
    if fetch_site is not None and fetch_site not in ("same-origin", "none"):
        return False
    return origin is None or origin.rstrip("/") == own_origin.rstrip("/")


RETRY_AFTER_SECONDS = 5
"""``Retry-After`` of a 429 or 503 whose handler set none."""


class ReturnedFreePages:
    """After a request that ran :data:`~service.core.allocator.TRIM_AFTER_SECONDS` or longer, the allocator's
    free pages go back to the system (:func:`~service.core.allocator.returned_free_pages`); its response is
    sent by then."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.monotonic()
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http" and time.monotonic() - started >= TRIM_AFTER_SECONDS:
                returned_free_pages()


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


DEPRECATED_SINCE = "@1796083200"
"""``Deprecation`` header value (RFC 9745: since 2026-12-01) of a request that used a deprecated name."""


def mark_deprecated(headers: MutableHeaders, names: list[str]) -> None:
    """Tell the client that its request used the deprecated ``names``, accepted for one release."""
    if names:
        headers["Deprecation"] = DEPRECATED_SINCE
        headers["X-Deprecated-Names"] = ", ".join(names)
