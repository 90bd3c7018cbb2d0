"""Health, readiness, Prometheus metrics, the model list, the web pages and CORS."""

from __future__ import annotations

import asyncio

import httpx
import redis.asyncio as aioredis

from genq_contract.keys import provider_429_counter
from tests.gateway.conftest import (
    KEY_ALPHA,
    LiveGateway,
    client_for,
    create,
    make_settings,
    queue_for,
    read_stream,
    wait_until,
)
from tests.ports import free_port


async def test_health_live_and_ready(anon: httpx.AsyncClient) -> None:
    assert (await anon.get("/healthz")).json() == {"status": "ok"}
    assert (await anon.get("/readyz")).json() == {"status": "ready"}


async def test_health_not_ready_without_redis_and_no_500s(prefix: str) -> None:
    settings = make_settings(f"redis://127.0.0.1:{free_port()}", prefix)
    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            assert (await alpha.get("/healthz")).status_code == 200
            ready = await alpha.get("/readyz")
            assert ready.status_code == 503
            assert ready.json() == {"detail": "redis unreachable"}
            post = await alpha.post("/v1/generations", json={"model": "demo/fast", "prompt": "x"})
            assert post.status_code == 503
            assert post.headers["retry-after"] == "1"
            assert "unavailable" in post.json()["detail"]


async def test_metrics_report_queues_viewers_and_counters(
    alpha: httpx.AsyncClient,
    admin: httpx.AsyncClient,
    live: LiveGateway,
    redis: aioredis.Redis,
    prefix: str,
) -> None:
    waiting = await create(alpha, delay_ms=60_000, key="m-1")
    await create(alpha, delay_ms=60_000, key="m-1")
    watching = asyncio.create_task(read_stream(alpha, waiting["id"]))
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 1)
    queue = queue_for(redis, prefix)
    await redis.incrby(provider_429_counter(queue), 3)

    text = (await admin.get("/metrics")).text
    for line in (
        'genq_enqueued_total{queue="demo"} 1.0',
        'genq_deduplicated_total{queue="demo"} 1.0',
        'genq_queue_jobs{queue="demo",state="scheduled"} 1.0',
        'genq_queue_jobs{queue="demo",state="waiting"} 0.0',
        'genq_queue_jobs{queue="demo",state="dead"} 0.0',
        'genq_sse_viewers{queue="demo"} 1.0',
        'genq_provider_rate_limited_total{queue="demo"} 3.0',
        'genq_queue_oldest_waiting_seconds{queue="demo"} 0.0',
    ):
        assert line in text, line

    await alpha.post(f"/v1/generations/{waiting['id']}/cancel")
    await asyncio.wait_for(watching, 5)
    text = (await admin.get("/metrics")).text
    assert 'genq_cancel_requests_total{queue="demo"} 1.0' in text
    assert 'genq_sse_viewers{queue="demo"} 0.0' in text


async def test_models_lists_the_allow_list(anon: httpx.AsyncClient) -> None:
    assert (await anon.get("/v1/models")).json() == {
        "object": "list",
        "data": [
            {"id": "demo/fast", "object": "model", "created": 0, "owned_by": "demo"},
            {"id": "other/model", "object": "model", "created": 0, "owned_by": "other"},
        ],
    }


async def test_config_shows_dev_keys_only_in_dev_mode(
    anon: httpx.AsyncClient, redis_url: str, prefix: str
) -> None:
    assert (await anon.get("/v1/config")).json() == {
        "dev": False,
        "dev_key": None,
        "dev_admin_key": None,
    }
    with LiveGateway(make_settings(redis_url, prefix, dev=True)) as live:
        async with client_for(live, None) as client:
            config = (await client.get("/v1/config")).json()
            assert config["dev"] is True
            dev = await client.post(
                "/v1/generations",
                json={"model": "demo/fast", "prompt": "x", "delay_ms": 60_000},
                headers={"Authorization": f"Bearer {config['dev_key']}"},
            )
            assert dev.status_code == 202


async def test_web_pages_are_served(anon: httpx.AsyncClient) -> None:
    for page in ("/", "/admin"):
        served = await anon.get(page)
        assert served.status_code == 200, page
        assert served.headers["content-type"].startswith("text/html")
    assert (await anon.get("/web/api.js")).status_code == 200
    assert (await anon.get("/web/nope.js")).status_code == 404


async def test_cors_allows_only_listed_origins(redis_url: str, prefix: str) -> None:
    settings = make_settings(redis_url, prefix, cors_origins=["https://app.example"])
    with LiveGateway(settings) as live:
        async with client_for(live, None) as client:
            preflight = {
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,idempotency-key,content-type",
            }
            allowed = await client.options(
                "/v1/generations", headers={"Origin": "https://app.example", **preflight}
            )
            refused = await client.options(
                "/v1/generations", headers={"Origin": "https://evil.example", **preflight}
            )
            assert allowed.status_code == 200
            assert allowed.headers["access-control-allow-origin"] == "https://app.example"
            assert "access-control-allow-origin" not in refused.headers
