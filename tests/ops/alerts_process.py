"""A worker process's dead-letter alerts that stop dead between reading a notice and
acknowledging it, for the test that SIGKILLs them there (tests/ops/test_alert_outbox.py).

``python -m tests.ops.alerts_process <redis url> <prefix> <webhook url> <stage>``: reads the
outbox of ``<prefix>:demo``; at ``stage`` (``before-enqueue``: the notice read, no delivery
enqueued; ``before-ack``: the delivery enqueued, the notice not acknowledged) it prints
``STALLED <entry id>`` and hangs until killed. Its delivery worker does not run: the delivery
is left for the process that takes over.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import redis.asyncio as aioredis

from genq import Queue
from workers.alerts import DeadLetterAlerts
from workers.outbox import Source
from workers.webhooks import Webhook

SECRET = "stall-secret"


class Stalling(DeadLetterAlerts):
    stage = "before-enqueue"

    async def start(self) -> None:
        self.reader.ack = self._stall_ack  # type: ignore[method-assign]
        await self.reader.start()

    async def fan_out(self, source: Source, entry_id: str, notice: dict[str, Any]) -> None:
        if self.stage == "before-enqueue":
            await self._stall(entry_id)
        await super().fan_out(source, entry_id, notice)

    async def _stall_ack(self, source: Source, entry_ids: list[str]) -> None:
        await self._stall(entry_ids[0])

    async def _stall(self, entry_id: str) -> None:
        print(f"STALLED {entry_id}", flush=True)
        await asyncio.Event().wait()


async def main(redis_url: str, prefix: str, url: str, stage: str) -> None:
    redis = aioredis.Redis.from_url(redis_url)
    queue = Queue(redis, prefix=f"{prefix}-alerts")
    hooks = [Webhook(name="default", url=url, secret=SECRET)]
    alerts = Stalling(redis, {"demo": f"{prefix}:demo"}, queue, hooks, consumer="doomed")
    alerts.stage = stage
    await alerts.start()
    print("READY", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
