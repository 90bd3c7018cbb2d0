"""The web pages: ``/`` (generate) and ``/admin`` (operations); assets under ``/web``."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles

from ..errors import NotFound


def mount_web(app: FastAPI, web_dir: Path) -> None:
    router = APIRouter(include_in_schema=False)

    def page(name: str) -> FileResponse:
        path = web_dir / name
        if not path.is_file():
            raise NotFound(f"page {name} is not installed")
        return FileResponse(path, headers={"Cache-Control": "no-cache"})

    @router.get("/")
    async def index() -> FileResponse:
        return page("index.html")

    @router.get("/admin")
    async def admin() -> FileResponse:
        return page("admin.html")

    app.include_router(router)
    if web_dir.is_dir():
        app.mount("/web", StaticFiles(directory=web_dir), name="web")
