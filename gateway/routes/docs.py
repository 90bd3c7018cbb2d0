"""``/docs`` (Swagger UI) and ``/redoc``, with their scripts served from this gateway.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, without integrity checks, on the
origin where the web pages keep API keys: whoever controls that CDN could read them. The same
assets ship in the ``fastapi-offline`` wheel; they are served from there under
:data:`ASSETS`. ``GENQ_DOCS=0`` turns both pages off (``/openapi.json`` stays).

Both pages share the origin of the web pages, so they get a Content-Security-Policy as strict as
those two renderers allow (:func:`docs_csp`): scripts from the gateway only (plus Swagger UI's
one inline script, by its hash), no framing.
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS = "/docs-assets"


_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.DOTALL)


def assets_dir() -> Path:
    return Path(str(resources.files("fastapi_offline") / "static"))


def docs_csp(page: HTMLResponse) -> str:
    """The policy of a docs page: its inline scripts allowed by hash, scripts and data from the
    gateway only. Both renderers set inline styles, and ReDoc runs its search in a worker made
    from a ``blob:`` URL."""
    hashes = "".join(
        f" 'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'"
        for script in _INLINE_SCRIPT.findall(bytes(page.body))
    )
    return (
        f"default-src 'self'; script-src 'self'{hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )


def with_csp(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = docs_csp(page)
    return page


def mount_docs(app: FastAPI) -> None:
    """Adds the two pages; the app must be built with ``docs_url=None, redoc_url=None``."""
    router = APIRouter(include_in_schema=False)
    openapi_url = app.openapi_url or "/openapi.json"

    @router.get("/docs")
    async def swagger_ui() -> HTMLResponse:
        return with_csp(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=f"{app.title} - Swagger UI",
                swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS}/favicon.png",
            )
        )

    @router.get("/redoc")
    async def redoc() -> HTMLResponse:
        return with_csp(
            get_redoc_html(
                openapi_url=openapi_url,
                title=f"{app.title} - ReDoc",
                redoc_js_url=f"{ASSETS}/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS}/favicon.png",
                with_google_fonts=False,
            )
        )

    app.include_router(router)
    app.mount(ASSETS, StaticFiles(directory=assets_dir()), name="docs-assets")
