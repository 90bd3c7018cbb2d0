"""The oldest wait as operators read it: ``/metrics``, ``GET /v1/queues``, the chart's history
and ``genq stats`` (a process), with a starving low-priority job behind newer high ones."""

from __future__ import annotations

import asyncio
import re

import redis.asyncio as aioredis

from tests.gateway.conftest import KEY_ADMIN, KEY_ALPHA, LiveGateway, client_for, queue_for
from tests.ops.conftest import cli_env, genq


async def test_oldest_wait_reports_the_starving_job_everywhere(
    live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    queue = queue_for(redis, prefix)  # no worker serves it: every job waits
    async with client_for(live, KEY_ALPHA) as alpha, client_for(live, KEY_ADMIN) as admin:
        low = await alpha.post("/v1/generations", json={"model": "demo/fast", "prompt": "old"})
        assert low.status_code == 202
        created = (await queue.get(low.json()["id"])).created_at
        async with asyncio.timeout(15):  # 1.5 s on the server's clock, the one stats read
            while await queue.server_time() < created + 1.5:
                await asyncio.sleep(0.02)
        for _ in range(3):
            high = {"model": "demo/fast", "prompt": "urgent", "priority": 9}
            assert (await alpha.post("/v1/generations", json=high)).status_code == 202
        listed = await admin.get("/v1/queues/demo/jobs")  # a listing admits: all in line now
        assert listed.status_code == 200
        assert await redis.llen(queue.keys.intake) == 0

        metrics = (await admin.get("/metrics")).text
        found = re.search(r'genq_queue_oldest_waiting_seconds\{queue="demo"\} (\S+)', metrics)
        assert found is not None, metrics
        assert 1.5 <= float(found.group(1)) < 60

        row = (await admin.get("/v1/queues/demo")).json()
        assert row["waiting"] == 4 and 1.5 <= row["oldest_wait"] < 60

        async with asyncio.timeout(15):  # the sampler (every 0.1 s here) charts it too
            while True:
                history = (await admin.get("/v1/queues/demo/history")).json()
                longest = [b["longest_wait"] or 0 for b in history["buckets"]]
                if max(longest) >= 1.5:
                    break
                await asyncio.sleep(0.05)

    result = await genq("stats", env=cli_env(live.url, KEY_ADMIN))
    assert result.code == 0, result.err
    rows = {line.split("│")[1].strip(): line for line in result.out.splitlines() if "│" in line}
    cells = [cell.strip() for cell in rows["demo"].split("│")[1:-1]]
    assert cells[1] == "4"  # waiting
    oldest = cells[5]  # name, waiting, scheduled, active, dead, oldest wait
    assert oldest.endswith("s") and 1.5 <= float(oldest[:-1]) < 60, result.out
