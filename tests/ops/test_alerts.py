"""Dead-letter alerts: a dead job becomes ONE signed webhook POST; a failing webhook never loops."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from genq import ActiveJob, Queue, TerminalJobError
from workers.alerts import DeadLetterAlerts
from workers.outbox import Source
from workers.run import build_alerts
from workers.settings import WorkerSettings
from workers.webhooks import Webhook

from .alert_receiver import Hooks

SECRET = "alert-secret-0123456789"


async def explode(job: ActiveJob) -> None:
    raise TerminalJobError(f"no luck for {job.payload['n']}")


def alerts_for(redis: aioredis.Redis, prefix: str, url: str) -> DeadLetterAlerts:
    queue = Queue(redis, prefix=f"{prefix}-alerts", max_attempts=3, backoff=0.05, max_backoff=0.1)
    hooks = [Webhook(name="default", url=url, secret=SECRET)]
    return DeadLetterAlerts(redis, {"demo": f"{prefix}:demo"}, queue, hooks, timeout=2)


@contextlib.asynccontextmanager
async def running(*alerts: DeadLetterAlerts) -> AsyncIterator[None]:
    for a in alerts:
        await a.start()
    try:
        yield
    finally:
        for a in alerts:
            await a.stop(deadline=1)


async def until(predicate: Any, timeout: float = 10) -> None:
    """Polls ``predicate`` (sync, or async for state in Redis) until it holds."""
    async with asyncio.timeout(timeout):
        while True:
            held = predicate()
            if asyncio.iscoroutine(held):
                held = await held
            if held:
                return
            await asyncio.sleep(0.02)


async def test_alerts_a_dead_job_is_posted_once_signed(redis: aioredis.Redis, prefix: str) -> None:
    source = Queue(redis, prefix=f"{prefix}:demo")
    with Hooks() as hook:
        # two worker processes hear the same notice: still one delivery
        url = hook.url("/hook")
        first, second = alerts_for(redis, prefix, url), alerts_for(redis, prefix, url)
        async with running(first, second), source.worker(explode):
            job = await source.enqueue({"n": 7})
            await until(lambda: hook.posts)
            await asyncio.sleep(0.5)
        assert len(hook.posts) == 1
        post = hook.posts[0]
    assert post.signed_with(SECRET)
    assert post.headers["Content-Type"] == "application/json"
    body = json.loads(post.body)
    assert body["event"] == "job.dead_letter" and body["queue"] == "demo"
    assert (body["id"], body["error"], body["attempts"]) == (job.id, "no luck for 7", 1)
    assert body["reason"] and body["died_at"] > 0
    delivered = await first.queue.stats()
    assert (delivered.waiting, delivered.dead) == (0, 0)


async def test_alerts_a_dead_letter_names_its_tenant_in_the_outbox_channel_and_webhook(
    redis: aioredis.Redis, prefix: str
) -> None:
    source = Queue(redis, prefix=f"{prefix}:demo", max_attempts=1, lease=0.5)
    channel = redis.pubsub()
    await channel.subscribe(source.keys.dead_letters)
    with Hooks() as hook:
        async with source.worker(explode):
            tenant = await source.enqueue({"n": 1}, tenant="acme")
            default = await source.enqueue({"n": 2})  # the default tenant: no name
            await until(lambda: dead_count(source, 2))
        # A worker lost mid-job: reclaim.lua dead-letters it, with its tenant too.
        lost = await source.enqueue({"n": 3}, tenant="acme")
        held = await source.pull(1, visibility=0.05)  # then never acked: as good as lost
        assert [job.id for job in held] == [lost.id]
        async with source.worker(explode):
            await until(lambda: dead_count(source, 3))
        published = [json.loads((await next_message(channel))["data"]) for _ in range(3)]
        await channel.aclose()
        alerts = alerts_for(redis, prefix, hook.url("/hook"))
        async with running(alerts):
            await until(lambda: len(hook.posts) == 3)
    expected = {tenant.id: "acme", default.id: None, lost.id: "acme"}
    outbox = await redis.xrange(source.keys.outbox)
    noticed = [json.loads(fields[b"notice"]) for _, fields in outbox]
    for notices in (noticed, published, [post.alert for post in hook.posts]):
        assert {n["id"]: n["tenant"] for n in notices} == expected
    reasons = {n["id"]: n["reason"] for n in noticed}
    assert reasons[lost.id] == "lease_expired"


async def test_alerts_a_failing_webhook_is_retried_then_dead_without_a_new_alert(
    redis: aioredis.Redis, prefix: str
) -> None:
    source = Queue(redis, prefix=f"{prefix}:demo")
    alerts_channel = redis.pubsub()
    with Hooks(fail={"/hook": 1000}) as hook:  # answers 500, always
        alerts = alerts_for(redis, prefix, hook.url("/hook"))
        await alerts_channel.subscribe(alerts.queue.keys.dead_letters)
        async with running(alerts), source.worker(explode):
            await source.enqueue({"n": 1})
            await until(lambda: len(hook.posts) >= 3)
            await until(lambda: dead_count(alerts.queue, 1))
            notice = await next_message(alerts_channel)
            await asyncio.sleep(0.5)  # time for a (wrong) alert about the alert to arrive
        await alerts_channel.aclose()
        assert len(hook.posts) == 3  # max_attempts of the alerts queue, then nothing more
    assert notice is not None  # the delivery did dead-letter and publish its notice...
    assert len({p.headers["X-Genq-Delivery"] for p in hook.posts}) == 1  # ...one delivery
    assert [p.headers["X-Genq-Attempt"] for p in hook.posts] == ["1", "2", "3"]
    entry = (await alerts.queue.dead_entries())[0]
    assert entry.error == "webhook answered 500" and entry.attempts == 3
    assert (await source.stats()).dead == 1


async def next_message(pubsub: Any, timeout: float = 5) -> Any:
    """The next published message (get_message answers None for the subscribe reply)."""
    async with asyncio.timeout(timeout):
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
            if message is not None:
                return message


async def dead_count(queue: Queue, wanted: int) -> bool:
    return (await queue.stats()).dead == wanted


async def test_alerts_worker_settings_start_them_only_with_a_url_and_a_secret(
    redis_url: str, redis: aioredis.Redis
) -> None:
    base: dict[str, Any] = {"redis_url": redis_url, "queue_namespace": "ns", "_env_file": None}
    assert build_alerts(WorkerSettings(**base), None) is None
    with pytest.raises(ValueError, match="GENQ_ALERT_WEBHOOK_SECRET is required"):
        WorkerSettings(**base, alert_webhook_url="http://127.0.0.1:1/x")
    settings = WorkerSettings(
        **base,
        models=["demo/fast", "openai/gpt-4o-mini"],
        alert_webhook_url="http://127.0.0.1:1/x",
        alert_webhook_secret=SECRET,
    )
    alerts = build_alerts(settings, redis)
    assert alerts is not None
    assert alerts.queue.prefix == "ns-alerts"
    assert sorted(alerts.sources) == [Source("demo", "ns:demo"), Source("openai", "ns:openai")]
    assert alerts.queue.prefix not in {source.prefix for source in alerts.sources}
    await alerts.stop()
