"""The SSRF guard of outbound webhooks: a target must be http(s) and resolve to public addresses only."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from service.core.errors import Invalid, echo


def checked_webhook_url(url: str, *, allow_private: bool) -> str:
    """``url`` when it may receive webhooks; otherwise 422 saying why.

    The host is resolved and every address must be public (not loopback, private,
    link-local, multicast, reserved or unspecified), unless ``allow_private``. Checked when
    the webhook is created and again before each delivery (the DNS answer may change).
    """
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as error:
        raise Invalid(f"malformed url {echo(url)}: {error}", code="invalid_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid(f"malformed url {echo(url)}: it needs http:// or https:// and a host", code="invalid_url")
    if parts.username is not None or parts.password is not None:
        raise Invalid("the url must not carry credentials; the signature authenticates deliveries", code="invalid_url")
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise Invalid(f"the host {echo(parts.hostname)} does not resolve", code="unresolvable_host") from None
    if allow_private:
        return url
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        mapped = getattr(address, "ipv4_mapped", None)
        if not (mapped or address).is_global or (mapped or address).is_multicast:
            raise Invalid(
                f"the host {echo(parts.hostname)} resolves to {address}, a loopback, private or reserved address; "
                "set ANNOPLAN_WEBHOOK_ALLOW_PRIVATE=1 to allow such targets",
                code="private_target",
            )
    return url
