"""The pages come from the installed package ``genq_web`` (``web/`` in a checkout), wherever
the gateway runs from; ``GENQ_WEB_DIR`` serves another directory instead."""

from __future__ import annotations

from pathlib import Path

import genq_web
import httpx

from gateway.settings import Settings
from tests.gateway.conftest import LiveGateway, make_settings

WEB = Path(__file__).resolve().parents[2] / "web"


def test_web_dir_defaults_to_the_installed_pages(settings: Settings) -> None:
    assert settings.web_dir is None
    assert settings.resolved_web_dir() == Path(genq_web.__file__).parent == WEB


async def test_web_pages_and_assets_are_served_from_the_package(
    anon: httpx.AsyncClient,
) -> None:
    for path, source in [("/", "index.html"), ("/admin", "admin.html"), ("/web/app.js", "app.js")]:
        response = await anon.get(path)
        assert response.status_code == 200, path
        assert response.text == (WEB / source).read_text(), path


async def test_web_dir_override_serves_that_directory(
    redis_url: str, prefix: str, tmp_path: Path
) -> None:
    (tmp_path / "index.html").write_text("<p>a page in progress</p>")
    with LiveGateway(make_settings(redis_url, prefix, web_dir=tmp_path)) as live:
        async with httpx.AsyncClient(base_url=live.url) as client:
            assert (await client.get("/")).text == "<p>a page in progress</p>"
            assert (await client.get("/admin")).status_code == 404  # not in that directory
            assert (await client.get("/web/index.html")).status_code == 200
