"""What an adversarial probe of the gateway found (issue 17): watch tokens that are not ASCII,
the catch-all error answer, ``/metrics`` exposure, the docs' assets and the pages' headers."""

from __future__ import annotations

import httpx
import pytest

from gateway.middleware import PAGE_CSP
from tests.gateway.conftest import (
    KEY_ADMIN,
    KEY_ALPHA,
    LiveGateway,
    client_for,
    create,
    make_settings,
)
from tests.gateway.test_logs import logged

SECRET = "hunter2-prompt-91c4"


@pytest.mark.parametrize("token", ["a.%C3%A9", "%C3%A9.%C3%A9", "a.%F0%9F%94%91", "%00.%FF"])
async def test_watch_token_non_ascii_is_401(
    live: LiveGateway, alpha: httpx.AsyncClient, anon: httpx.AsyncClient, token: str
) -> None:
    job = (await create(alpha, delay_ms=60_000))["id"]
    with logged() as collected:
        for method, path in (("GET", "events"), ("POST", "cancel")):
            url = f"{live.url}/v1/generations/{job}/{path}?token={token}"
            answer = await anon.request(method, httpx.URL(url))
            assert answer.status_code == 401, (path, answer.text)
            assert answer.json() == {"detail": "invalid or expired watch token"}
    assert "Traceback" not in "\n".join(collected.lines)


async def test_catch_all_answers_500_without_logging_the_message(live: LiveGateway) -> None:
    async def boom() -> None:
        raise RuntimeError(f"could not handle {SECRET}")

    live.app.add_api_route("/boom", boom)
    async with client_for(live, None) as client:
        with logged() as collected:
            failed = await client.get("/boom")
            after = await client.get("/healthz")  # the same connection still serves
    assert (failed.status_code, failed.json()) == (500, {"detail": "internal error"})
    assert after.status_code == 200
    text = "\n".join(collected.lines)
    assert "unhandled RuntimeError" in text, "the error was not logged at all"
    assert SECRET not in text


async def test_text_that_cannot_be_stored_is_422_not_500(alpha: httpx.AsyncClient) -> None:
    # JSON may escape a lone surrogate; no UTF-8 store can hold it.
    for body in (
        b'{"model": "demo/fast", "messages": [{"role": "user", "content": "x \\udfff"}]}',
        b'{"model": "demo/fast", "prompt": "x", "params": {"stop": "\\ud800"}}',
        b'{"model": "demo/fast", "prompt": "x", "metadata": {"\\ud800": 1}}',
    ):
        answer = await alpha.post(
            "/v1/generations", content=body, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == 422, answer.text
        assert "surrogate" in str(answer.json()["detail"])


async def test_metrics_needs_admin_unless_public(redis_url: str, prefix: str) -> None:
    with LiveGateway(make_settings(redis_url, prefix)) as live:
        for key, status in ((None, 401), (KEY_ALPHA, 403), (KEY_ADMIN, 200)):
            async with client_for(live, key) as client:
                assert (await client.get("/metrics")).status_code == status, key
    with LiveGateway(make_settings(redis_url, prefix, metrics_public=True)) as live:
        async with client_for(live, None) as anon:
            scraped = await anon.get("/metrics")
            assert scraped.status_code == 200
            assert "genq_queue_jobs" in scraped.text


async def test_docs_load_their_assets_from_the_gateway(anon: httpx.AsyncClient) -> None:
    for page, assets in (
        ("/docs", ("/docs-assets/swagger-ui-bundle.js", "/docs-assets/swagger-ui.css")),
        ("/redoc", ("/docs-assets/redoc.standalone.js",)),
    ):
        html = (await anon.get(page)).text
        assert "https://" not in html and "//cdn" not in html, page
        for asset in assets:
            assert asset in html
            served = await anon.get(asset)
            assert served.status_code == 200 and len(served.content) > 10_000, asset
    assert (await anon.get("/openapi.json")).status_code == 200


async def test_docs_off_keeps_the_openapi_schema(redis_url: str, prefix: str) -> None:
    with LiveGateway(make_settings(redis_url, prefix, docs=False)) as live:
        async with client_for(live, None) as anon:
            assert (await anon.get("/docs")).status_code == 404
            assert (await anon.get("/redoc")).status_code == 404
            assert (await anon.get("/openapi.json")).status_code == 200


async def test_pages_send_a_content_security_policy(anon: httpx.AsyncClient) -> None:
    for page in ("/", "/admin"):
        headers = (await anon.get(page)).headers
        assert headers["content-security-policy"] == PAGE_CSP, page
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"
    api = (await anon.get("/healthz")).headers
    assert api["x-content-type-options"] == "nosniff"
    assert "content-security-policy" not in api
