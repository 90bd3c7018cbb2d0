"""Clearing a queue's cooldown: ``DELETE /v1/queues/{name}/cooldown`` and ``genq cooldown
clear`` (issue 17, finding 2)."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.gateway.conftest import (
    KEY_ADMIN,
    KEY_ALPHA,
    LiveGateway,
    Script,
    client_for,
    create,
    queue_for,
    script,
)
from tests.ops.conftest import cli_env, genq

__all__ = ["script"]  # the scripted worker fixture, re-used from the gateway tests


async def test_cooldown_clear_resumes_the_queue_and_is_audited(
    live: LiveGateway, script: Script, redis: aioredis.Redis, prefix: str
) -> None:
    queue = queue_for(redis, prefix)
    await queue.cooldown(3600)  # as after a provider 429 with a long Retry-After
    async with client_for(live, KEY_ALPHA) as alpha, client_for(live, KEY_ADMIN) as admin:
        job = await create(alpha)
        stuck = await alpha.get(f"/v1/generations/{job['id']}/result", params={"timeout": 0.5})
        assert stuck.status_code == 202  # paused: nothing runs

        refused = await alpha.delete("/v1/queues/demo/cooldown")
        assert refused.status_code == 403
        assert (await admin.delete("/v1/queues/nope/cooldown")).status_code == 404

        cleared = await genq("cooldown", "clear", "demo", env=cli_env(live.url, KEY_ADMIN))
        assert cleared.code == 0, cleared.err
        assert cleared.out.startswith("demo: cooldown cleared (")
        done = await alpha.get(f"/v1/generations/{job['id']}/result", params={"timeout": 5})
        assert done.json()["status"] == "completed"

        again = await admin.delete("/v1/queues/demo/cooldown")
        assert again.status_code == 200 and again.json()["cooldown_remaining"] == 0
        audit = (await admin.get("/v1/audit")).json()["entries"]
        assert [(e["action"], e["queue"], e["count"]) for e in audit] == [
            ("clear_cooldown", "demo", 0),
            ("clear_cooldown", "demo", 1),
        ]
        assert audit[1]["actor"].startswith("ops (key ")
