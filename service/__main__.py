"""``python -m service``: start the API with uvicorn on the configured host and port."""

from __future__ import annotations

import uvicorn

from service.core.settings import get_settings


def main() -> None:
    """Serve the app; the docs URL is printed before uvicorn takes over."""
    settings = get_settings()
    print(f"annoplan: API docs at http://{settings.host}:{settings.port}/docs", flush=True)
    # no `server: uvicorn` header: what the server runs on is nobody's business (issue 30)
    uvicorn.run("service.app:create_app", factory=True, host=settings.host, port=settings.port, server_header=False)


if __name__ == "__main__":
    main()
