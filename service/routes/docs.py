"""API documentation pages (Swagger UI, ReDoc) served with assets from an installed package.

The pages work without internet access: the JavaScript and CSS come from the
``fastapi-offline`` package's static files, mounted at ``DOCS_ASSETS``.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from service.core.middleware import csp_with_inline_scripts

DOCS_ASSETS = "/static/docs"

router = APIRouter(include_in_schema=False)


def docs_assets() -> StaticFiles:
    """The Swagger UI and ReDoc bundles shipped in the ``fastapi-offline`` package."""
    return StaticFiles(directory=str(files("fastapi_offline") / "static"))


def _page(html: str, *, extra_csp: str = "") -> HTMLResponse:
    """A docs page whose fixed inline script (no request input) is allowed by its hash."""
    return HTMLResponse(html, headers={"Content-Security-Policy": csp_with_inline_scripts(html) + extra_csp})


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    """Interactive API documentation (Swagger UI); no key needed to read it."""
    page = get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="annoplan - Swagger UI",
        swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
    )
    return _page(bytes(page.body).decode())


@router.get("/redoc")
def redoc() -> HTMLResponse:
    """API reference (ReDoc); no key needed to read it. ReDoc runs a worker from a blob URL."""
    page = get_redoc_html(
        openapi_url="/openapi.json",
        title="annoplan - ReDoc",
        redoc_js_url=f"{DOCS_ASSETS}/redoc.standalone.js",
        redoc_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        with_google_fonts=False,
    )
    return _page(bytes(page.body).decode(), extra_csp="; worker-src 'self' blob:")
