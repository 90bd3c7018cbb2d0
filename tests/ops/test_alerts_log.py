"""The alert delivery log shown: ``GET /v1/alerts`` (admin) and ``genq alerts list`` run as a
process, on attempts real deliveries wrote (one failed once, then went through)."""

from __future__ import annotations

import asyncio
import json

import pytest
import redis.asyncio as aioredis

from genq import Queue
from genq_contract.keys import GatewayKeys
from genq_services.alert_log import recent_attempts
from tests.gateway.conftest import KEY_ADMIN, KEY_ALPHA, LiveGateway
from workers.webhooks import Webhook

from .alert_receiver import Hooks
from .conftest import cli_env, genq
from .test_alert_outbox import dead_letter, make_alerts, running, until

pytestmark = pytest.mark.timeout(60)


async def test_alerts_log_listed_by_the_api_and_the_cli(
    redis: aioredis.Redis, prefix: str, live: LiveGateway
) -> None:
    (job_id,) = await dead_letter(Queue(redis, f"{prefix}:demo"), 1)
    with Hooks(fail={"/ops": 1}) as hooks:
        ops = Webhook(name="ops", url=hooks.url("/ops"), secret="s")
        async with running(make_alerts(redis, prefix, [ops])):
            await until(lambda: hooks.to("/ops"))
    key = GatewayKeys(prefix).alert_log
    await until_logged(redis, key, 2)

    env = cli_env(live.url, KEY_ADMIN)
    shown = await genq("alerts", "list", "--limit", "10", env=env)
    assert shown.code == 0, shown.err
    lines = [line for line in shown.out.splitlines() if job_id in line]
    assert len(lines) == 2  # newest first: delivered on attempt 2, then the failed attempt 1
    assert "ops" in lines[0] and "delivered" in lines[0] and " 200 " in lines[0]
    assert "retrying" in lines[1] and " 500 " in lines[1]
    assert "demo" in lines[0]

    as_json = await genq("alerts", "list", "--limit", "1", "--json", env=env)
    assert as_json.code == 0, as_json.err
    (newest,) = json.loads(as_json.out)
    assert newest["outcome"] == "delivered" and newest["attempt"] == 2
    assert (newest["job_id"], newest["webhook"], newest["status"]) == (job_id, "ops", 200)
    assert newest["delivery"] and newest["at"] > 0

    refused = await genq("alerts", "list", env=cli_env(live.url, KEY_ALPHA))
    assert refused.code == 4 and "403" in refused.err and "admin" in refused.err
    too_many = await genq("alerts", "list", "--limit", "5000", env=env)
    assert too_many.code == 2 and "--limit" in too_many.err  # typer refuses it


async def test_alerts_log_route_pages_newest_first_and_checks_its_limit(
    redis: aioredis.Redis, prefix: str, live: LiveGateway
) -> None:
    import httpx

    (job_id,) = await dead_letter(Queue(redis, f"{prefix}:demo"), 1)
    with Hooks() as hooks:
        hooks_list = [
            Webhook(name="a", url=hooks.url("/a"), secret="s"),
            Webhook(name="b", url=hooks.url("/b"), secret="t"),
        ]
        async with running(make_alerts(redis, prefix, hooks_list)):
            await until(lambda: hooks.to("/a") and hooks.to("/b"))
    await until_logged(redis, GatewayKeys(prefix).alert_log, 2)
    admin = {"Authorization": f"Bearer {KEY_ADMIN}"}
    async with httpx.AsyncClient(base_url=live.url, headers=admin) as client:
        answer = (await client.get("/v1/alerts", params={"limit": 1})).json()
        assert len(answer["entries"]) == 1 and answer["max_entries"] == 1000
        both = (await client.get("/v1/alerts")).json()["entries"]
        assert sorted(e["webhook"] for e in both) == ["a", "b"]
        assert {e["job_id"] for e in both} == {job_id}
        assert both[0]["at"] >= both[1]["at"]
        assert both[0] == answer["entries"][0]
        bad = await client.get("/v1/alerts", params={"limit": 0})
        assert bad.status_code == 422 and "detail" in bad.json()
        anonymous = await client.get("/v1/alerts", headers={"Authorization": ""})
        assert anonymous.status_code == 401


async def until_logged(redis: aioredis.Redis, key: str, count: int) -> None:
    async with asyncio.timeout(10):
        while len(await recent_attempts(redis, key, 100)) < count:
            await asyncio.sleep(0.02)
