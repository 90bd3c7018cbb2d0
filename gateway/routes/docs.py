"""``/docs`` (Swagger UI) and ``/redoc``, with their scripts served from this gateway.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, without integrity checks, on the
origin where the web pages keep API keys: whoever controls that CDN could read them. The same
assets ship in the ``fastapi-offline`` wheel; they are served from there under
:data:`ASSETS`. ``GENQ_DOCS=0`` turns both pages off (``/openapi.json`` stays).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS = "/docs-assets"


def assets_dir() -> Path:
    return Path(str(resources.files("fastapi_offline") / "static"))


def mount_docs(app: FastAPI) -> None:
    """Adds the two pages; the app must be built with ``docs_url=None, redoc_url=None``."""
    router = APIRouter(include_in_schema=False)
    openapi_url = app.openapi_url or "/openapi.json"

    @router.get("/docs")
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
        )

    @router.get("/redoc")
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )

    app.include_router(router)
    app.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")
