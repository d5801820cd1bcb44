"""``python -m service``: start the API with uvicorn on the configured host and port;
``python -m service worker``: run a job worker instead (service.worker); ``python -m service worker --check``:
exit 0 when a job worker of this host is live (the worker container's healthcheck)."""

from __future__ import annotations

import sys

import uvicorn

from service.core.settings import get_settings


def main() -> None:
    """Serve the app with ``ANNOPLAN_WORKERS`` processes; its addresses are printed before uvicorn takes over.

    Forwarded headers (``X-Forwarded-For``, ``X-Forwarded-Proto``) are believed from
    ``ANNOPLAN_FORWARDED_ALLOW_IPS`` only (default: a proxy on this host).
    """
    settings = get_settings()
    base = f"http://{settings.host}:{settings.port}"
    print(f"annoplan: serving {base} (sign in at {base}/login, API docs at {base}/docs)", flush=True)
    uvicorn.run(
        "service.app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        proxy_headers=True,
        forwarded_allow_ips=settings.forwarded_allow_ips,
        server_header=False,  # what the server runs on is nobody's business (issue 30)
    )


def worker() -> None:
    """Run a job worker (no requests served) until SIGTERM or SIGINT."""
    from service.worker import run_worker

    run_worker()


if __name__ == "__main__":
    command = sys.argv[1:]
    if command == ["worker"]:
        worker()
    elif command == ["worker", "--check"]:
        from service.worker import check_worker

        sys.exit(check_worker())
    elif not command:
        main()
    else:
        sys.exit(f"usage: python -m service [worker [--check]] (got {' '.join(command)})")
