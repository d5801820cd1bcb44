"""The one policy of every request this server sends (webhook deliveries, Label Studio sync):
which targets it may reach, and how (docs/operations.md, "Outbound requests").

A target must be ``http(s)://host[:port]/...`` without credentials, with a host name or a
canonical IP literal (decimal, octal and hex forms of IPv4 are refused). The host is resolved
once per connection by the connection layer itself, every address is checked, and the
socket is opened to the checked address: a DNS answer that changes between the check and
the connection (rebinding) cannot move it. Unless the policy allows private targets, every
address must be public: not loopback, private, link-local, shared, documentation,
multicast, reserved or unspecified, and no IPv6 form that embeds such an IPv4 address
(IPv4-mapped, IPv4-compatible, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo).
Redirects are not followed, proxies from the environment are not used, every client has a
timeout, and a client may carry a cap on its calls. Nothing a target answers is echoed:
callers report the status code and a reason of ours.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import httpcore
import httpx

from service.core.errors import Invalid, echo
from service.core.settings import Settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv4 ranges that are not public (IANA special-purpose registry), checked explicitly: Python's
# ``is_global`` differs between versions.
_V4_BLOCKED = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)
_V6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_V6_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_V6_BLOCKED = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "2001::/23",  # IETF protocol assignments, Teredo (2001::/32) among them
        "2001:db8::/32",  # documentation
        "2002::/16",  # 6to4: allowed only when the embedded IPv4 is public, below
        "3fff::/20",  # documentation
    )
)
_NUMERIC_HOST = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]*))*\.?$", re.IGNORECASE)


class OutboundRefused(Exception):
    """A target this server may not call, with a reason of ours (never the target's words)."""

    def __init__(self, reason: str, code: str = "outbound_refused"):
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass(frozen=True)
class OutboundPolicy:
    """Where requests may go.

    ``allowed``: base URLs (scheme, host, port, path prefix); when not empty, only targets
    under one of them, at any address (an operator listing a base vouches for it). When empty,
    any target at public addresses, and at private ones too only with ``allow_private``.
    """

    allowed: tuple[str, ...] = ()
    allow_private: bool = False
    timeout: float = 10.0

    def private_ok(self, url: httpx.URL) -> bool:
        """Whether ``url`` may be at a non-public address: private targets allowed, or listed explicitly."""
        return self.allow_private or (bool(self.allowed) and under_allowed(url, self.allowed))


def non_public(address: IPAddress) -> str | None:
    """Why ``address`` is not public (a short phrase), or None when it is.

    >>> non_public(ipaddress.ip_address("64:ff9b::7f00:1"))
    'NAT64 form of 127.0.0.1, which is loopback, private or reserved'
    >>> non_public(ipaddress.ip_address("8.8.8.8")) is None
    True
    """
    if isinstance(address, ipaddress.IPv4Address):
        if any(address in net for net in _V4_BLOCKED) or address == ipaddress.IPv4Address("255.255.255.255"):
            return "loopback, private or reserved"
        return None
    embedded: tuple[str, ipaddress.IPv4Address] | None = None
    if address.ipv4_mapped is not None:
        embedded = ("IPv4-mapped", address.ipv4_mapped)
    elif address in _V6_NAT64:
        embedded = ("NAT64", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    elif address.sixtofour is not None:
        embedded = ("6to4", address.sixtofour)
    elif address.teredo is not None:
        return "a Teredo address"
    if embedded is not None:
        form, v4 = embedded
        inner = non_public(v4)
        return None if inner is None else f"{form} form of {v4}, which is {inner}"
    if address not in _V6_GLOBAL_UNICAST or any(address in net for net in _V6_BLOCKED):
        return "loopback, private or reserved"
    return None


def under_allowed(url: httpx.URL, allowed: Iterable[str]) -> bool:
    """Whether ``url`` is under one of the ``allowed`` base URLs (same scheme, host and port, path below)."""
    for base in map(httpx.URL, allowed):
        if (url.scheme, url.host, url.port) == (base.scheme, base.host, base.port) and url.path.startswith(
            base.path.rstrip("/")
        ):
            return True
    return False


def parsed(url: str) -> httpx.URL:
    """``url`` parsed when its form may be called at all; otherwise 422 ``invalid_url`` saying why."""
    try:
        target = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as error:
        raise Invalid(f"malformed url {echo(url)}: {error}", code="invalid_url") from None
    if target.scheme not in ("http", "https") or not target.host:
        raise Invalid(f"malformed url {echo(url)}: it needs http:// or https:// and a host", code="invalid_url")
    if target.port is not None and not 0 < target.port < 65536:
        raise Invalid(f"malformed url {echo(url)}: the port is not in 1-65535", code="invalid_url")
    if target.userinfo:
        raise Invalid("the url must not carry credentials", code="invalid_url")
    host = target.host
    if _NUMERIC_HOST.match(host):
        try:
            canonical = str(ipaddress.IPv4Address(host))
        except ValueError:
            canonical = ""
        if canonical != host:
            raise Invalid(
                f"the host {echo(host)} is a numeric form of an address; write it as a dotted quad",
                code="invalid_url",
            )
    return target


def resolve(host: str, port: int, *, private_ok: bool) -> str:
    """The address to connect to for ``host``: resolved once, every answer checked; OutboundRefused otherwise."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError):
        raise OutboundRefused(f"the host {echo(host)} does not resolve", "unresolvable_host") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not addresses:
        raise OutboundRefused(f"the host {echo(host)} does not resolve", "unresolvable_host")
    if not private_ok:
        for address in addresses:
            why = non_public(address)
            if why is not None:
                raise OutboundRefused(
                    f"the host {echo(host)} resolves to {address}, {why}; "
                    "set ANNOPLAN_OUTBOUND_ALLOW_PRIVATE=1 to allow such targets",
                    "private_target",
                )
    return str(addresses[0])


def checked(url: str, policy: OutboundPolicy, *, code_not_allowed: str = "outbound_not_allowed") -> httpx.URL:
    """``url`` parsed when ``policy`` lets it be called now; otherwise 422 saying why (the host is resolved).

    The check a request makes before it stores or calls a target, for a clear error; the
    connection checks again (:func:`client`), on the address it connects to.
    """
    target = parsed(url)
    if policy.allowed and not under_allowed(target, policy.allowed):
        raise Invalid(f"url {echo(url)} is not a target this server may call (allow list)", code=code_not_allowed)
    try:
        resolve(
            target.host, target.port or (443 if target.scheme == "https" else 80), private_ok=policy.private_ok(target)
        )
    except OutboundRefused as refused:
        raise Invalid(refused.reason, code=refused.code) from None
    return target


class _PinnedBackend(httpcore.NetworkBackend):
    """Opens each connection to an address checked against the policy (TLS still names the host)."""

    def __init__(self, policy: OutboundPolicy):
        self.policy = policy
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        # httpcore passes the URL's host; the allow list was checked on the request (event hook)
        private_ok = self.policy.allow_private or bool(self.policy.allowed)
        address = resolve(host.strip("[]"), port, private_ok=private_ok)
        return self.inner.connect_tcp(address, port, timeout, local_address, socket_options)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.NetworkStream:
        raise OutboundRefused("unix sockets are not outbound targets")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    def __init__(self, policy: OutboundPolicy):
        super().__init__(trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=100,
            max_keepalive_connections=20,
            keepalive_expiry=5.0,
            network_backend=_PinnedBackend(policy),
        )


class _Gate:
    """The request hook: every request's URL is checked against the allow list, and counted."""

    def __init__(self, policy: OutboundPolicy, max_calls: int | None):
        self.policy = policy
        self.max_calls = max_calls
        self.calls = 0

    def __call__(self, request: httpx.Request) -> None:
        if self.policy.allowed and not under_allowed(request.url, self.policy.allowed):
            raise OutboundRefused("the request left the allow list")
        self.calls += 1
        if self.max_calls is not None and self.calls > self.max_calls:
            raise OutboundRefused(f"more than {self.max_calls} calls to the target", "too_many_calls")


def client(
    policy: OutboundPolicy,
    *,
    base_url: str = "",
    headers: Mapping[str, str] | None = None,
    max_calls: int | None = None,
) -> httpx.Client:
    """An HTTP client under ``policy``: pinned checked addresses, no redirects, no proxies, a timeout, a call cap.

    A refused target raises :class:`OutboundRefused` (not an ``httpx.HTTPError``) from the call.
    """
    return httpx.Client(
        base_url=base_url,
        headers=dict(headers or {}),
        timeout=policy.timeout,
        follow_redirects=False,
        trust_env=False,
        transport=_PinnedTransport(policy),
        event_hooks={"request": [_Gate(policy, max_calls)]},
    )


def webhook_policy(settings: Settings) -> OutboundPolicy:
    """Webhook targets: public addresses only, unless private targets are allowed."""
    return OutboundPolicy(
        allow_private=settings.outbound_allow_private or settings.webhook_allow_private,
        timeout=min(settings.webhook_timeout_seconds, settings.webhook_lease_seconds / 3),
    )


def label_studio_policy(settings: Settings) -> OutboundPolicy:
    """Label Studio: the listed bases (at any address) when listed, else public addresses only."""
    return OutboundPolicy(
        allowed=tuple(settings.label_studio_urls),
        allow_private=settings.outbound_allow_private,
        timeout=settings.label_studio_timeout_seconds,
    )
