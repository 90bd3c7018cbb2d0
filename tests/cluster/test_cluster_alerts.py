"""Dead-letter alerts on a real 3-master Redis Cluster: the outbox of queues on different slots
is read through the consumer group (XREADGROUP, XAUTOCLAIM, XINFO on the queue's own slot),
and the delivery log (a namespace key, no hash tag) is written and read."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from redis.asyncio.cluster import RedisCluster

from genq import Queue
from genq_contract.keys import GatewayKeys
from genq_services.alert_log import recent_attempts
from tests.ops.alert_receiver import Hooks
from tests.ops.test_alert_outbox import dead_letter, until
from workers.alerts import DeadLetterAlerts
from workers.webhooks import Webhook

pytestmark = pytest.mark.timeout(60)


async def test_cluster_alerts_outboxes_on_several_slots_are_delivered_once(
    client: RedisCluster,
) -> None:
    ns = f"c-{uuid.uuid4().hex[:8]}"
    names = ("demo", "openai", "other")
    sources = {name: f"{ns}:{name}" for name in names}
    slots = {client.keyslot(Queue(client, prefix).keys.outbox) for prefix in sources.values()}
    dead = {name: await dead_letter(Queue(client, prefix), 2) for name, prefix in sources.items()}
    with Hooks() as hooks:
        alerts = DeadLetterAlerts(
            client,
            sources,
            Queue(client, prefix=f"{ns}-alerts", backoff=0.05, max_backoff=0.1),
            [Webhook(name="ops", url=hooks.url("/ops"), secret="s")],
            log_key=GatewayKeys(ns).alert_log,
            claim_after=0.5,
        )
        await alerts.start()
        try:
            await until(lambda: len(hooks.to("/ops")) == 6)
            await asyncio.sleep(0.7)  # a claim pass on every slot: nothing is pending
        finally:
            await alerts.stop(deadline=1)
    assert len(slots) > 1  # the queues live on different slots
    assert sorted(hooks.job_ids("/ops")) == sorted(i for ids in dead.values() for i in ids)
    log = await recent_attempts(client, GatewayKeys(ns).alert_log, 50)
    assert sorted(a.job_id for a in log if a.outcome == "delivered") == sorted(
        hooks.job_ids("/ops")
    )
