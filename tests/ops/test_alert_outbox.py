"""Alerts that are never lost: dead letters go to each queue's outbox stream, read through a
consumer group, delivered at least once to every webhook that wants them, each attempt logged.

Real Redis, real HTTP receivers (``alert_receiver.Hooks``), real processes where one must die.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from genq import ActiveJob, Queue, TerminalJobError
from genq_contract.keys import GatewayKeys
from genq_services.alert_log import recent_attempts
from workers.alerts import DeadLetterAlerts
from workers.outbox import GROUP
from workers.settings import WorkerSettings
from workers.webhooks import Webhook

from .alert_receiver import Hooks

pytestmark = pytest.mark.timeout(60)

OPS_SECRET = "ops-secret-1"
BILLING_SECRET = "billing-secret-2"


async def explode(job: ActiveJob) -> None:
    raise TerminalJobError(f"no luck for {job.payload['n']}")


async def dead_letter(queue: Queue, count: int) -> list[str]:
    """``count`` jobs that dead-letter at once (terminal error), with NO alerts running."""
    ids = [(await queue.enqueue({"n": i})).id for i in range(count)]
    async with queue.worker(explode):
        async with asyncio.timeout(10):
            while (await queue.stats()).dead < count:
                await asyncio.sleep(0.02)
    return ids


def make_alerts(
    redis: aioredis.Redis, prefix: str, hooks: list[Webhook], **options: Any
) -> DeadLetterAlerts:
    queue = Queue(redis, prefix=f"{prefix}-alerts", max_attempts=3, backoff=0.05, max_backoff=0.1)
    sources = {"demo": f"{prefix}:demo", "openai": f"{prefix}:openai"}
    log_key = GatewayKeys(prefix).alert_log
    return DeadLetterAlerts(redis, sources, queue, hooks, log_key=log_key, timeout=2, **options)


@contextlib.asynccontextmanager
async def running(alerts: DeadLetterAlerts) -> AsyncIterator[DeadLetterAlerts]:
    await alerts.start()
    try:
        yield alerts
    finally:
        await alerts.stop(deadline=1)


async def until(predicate: Any, timeout: float = 15) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def pending(redis: aioredis.Redis, prefix: str) -> int:
    info = await redis.xpending(f"{{{prefix}}}:outbox", GROUP)
    return int(info["pending"])


async def test_alert_outbox_dead_letters_from_before_any_worker_are_delivered_once(
    redis: aioredis.Redis, prefix: str
) -> None:
    demo, openai = Queue(redis, f"{prefix}:demo"), Queue(redis, f"{prefix}:openai")
    demo_dead = await dead_letter(demo, 3)
    openai_dead = await dead_letter(openai, 2)  # all written while no alerts ran
    with Hooks(fail={"/ops": 1}) as hooks:
        ops = Webhook(name="ops", url=hooks.url("/ops"), secret=OPS_SECRET)
        billing = Webhook(
            name="billing",
            url=hooks.url("/billing"),
            secret=BILLING_SECRET,
            queues=frozenset({"openai"}),
        )
        alerts = make_alerts(redis, prefix, [ops, billing])
        async with running(alerts):
            await until(lambda: len(hooks.to("/ops")) == 5 and len(hooks.to("/billing")) == 2)
            await asyncio.sleep(0.5)  # time for a (wrong) second delivery to arrive
        # exactly the dead letters there were, each once (a retry aside)
        assert sorted(hooks.job_ids("/ops")) == sorted(demo_dead + openai_dead)
        assert sorted(hooks.job_ids("/billing")) == sorted(openai_dead)  # its queue filter
        assert len(hooks.to("/ops", status=500)) == 1  # the one failure, then its retry
        assert len(hooks.posts) == 5 + 2 + 1
        for post in hooks.to("/ops", None):
            assert post.signed_with(OPS_SECRET) and not post.signed_with(BILLING_SECRET)
            assert post.headers["X-Genq-Webhook"] == "ops"
        assert all(p.signed_with(BILLING_SECRET) for p in hooks.to("/billing"))
        failed = hooks.to("/ops", status=500)[0]
        retried = [p for p in hooks.to("/ops") if p.alert["id"] == failed.alert["id"]]
        assert retried[0].headers["X-Genq-Delivery"] == failed.headers["X-Genq-Delivery"]
        assert (failed.headers["X-Genq-Attempt"], retried[0].headers["X-Genq-Attempt"]) == (
            "1",
            "2",
        )
    alert = retried[0].alert
    assert alert["event"] == "job.dead_letter" and alert["reason"] == "terminal"
    assert set(alert) == {
        "event", "queue", "queue_prefix", "id", "reason", "error", "died_at", "attempts",
        "tenant",
    }  # fmt: skip
    assert alert["tenant"] is None  # enqueued for no tenant

    # the delivery log: one entry per POST; no (webhook, job) delivered twice
    log = await recent_attempts(redis, GatewayKeys(prefix).alert_log, 100)
    delivered = Counter((a.webhook, a.job_id) for a in log if a.outcome == "delivered")
    assert set(delivered.values()) == {1} and len(delivered) == 7
    (retrying,) = [a for a in log if a.outcome != "delivered"]
    assert (retrying.outcome, retrying.webhook, retrying.status, retrying.attempt) == (
        "retrying",
        "ops",
        500,
        1,
    )
    assert retrying.error == "webhook answered 500" and retrying.job_id == failed.alert["id"]
    assert all(a.queue in ("demo", "openai") and a.delivery for a in log)
    assert await pending(redis, f"{prefix}:demo") == 0
    assert await pending(redis, f"{prefix}:openai") == 0


async def test_alert_outbox_a_restart_reads_nothing_twice(
    redis: aioredis.Redis, prefix: str
) -> None:
    demo = Queue(redis, f"{prefix}:demo")
    with Hooks() as hooks:
        hooks_list = [Webhook(name="ops", url=hooks.url("/ops"), secret=OPS_SECRET)]
        async with running(make_alerts(redis, prefix, hooks_list)):
            first = await dead_letter(demo, 2)  # while it runs
            await until(lambda: len(hooks.to("/ops")) == 2)
        later = await dead_letter(demo, 1)  # between two workers
        async with running(make_alerts(redis, prefix, hooks_list)):
            await until(lambda: len(hooks.to("/ops")) == 3)
            await asyncio.sleep(0.5)
    assert sorted(hooks.job_ids("/ops")) == sorted(first + later)
    assert len(hooks.posts) == 3


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["before-enqueue", "before-ack"])
async def test_alert_outbox_a_reader_killed_before_its_ack_loses_and_doubles_nothing(
    redis: aioredis.Redis, redis_url: str, prefix: str, stage: str
) -> None:
    demo = Queue(redis, f"{prefix}:demo")
    with Hooks() as hooks:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.ops.alerts_process",
            redis_url,
            prefix,
            hooks.url("/ops"),
            stage,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert process.stdout is not None
        try:
            async with asyncio.timeout(20):
                assert (await process.stdout.readline()).decode().strip() == "READY"
                (job_id,) = await dead_letter(demo, 1)
                line = (await process.stdout.readline()).decode().split()
            assert line[0] == "STALLED"
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
            await process.wait()
        entry_id = line[1]
        # what the killed process left: the notice read (pending on its consumer), not acked
        detail = await redis.xpending_range(
            f"{{{prefix}:demo}}:outbox", GROUP, min="-", max="+", count=10
        )
        assert [(d["message_id"].decode(), d["consumer"].decode()) for d in detail] == [
            (entry_id, "doomed")
        ]
        alerts_queue = Queue(redis, prefix=f"{prefix}-alerts")
        enqueued = (await alerts_queue.stats()).waiting
        assert enqueued == (1 if stage == "before-ack" else 0)

        hooks_list = [Webhook(name="default", url=hooks.url("/ops"), secret="stall-secret")]
        async with running(make_alerts(redis, prefix, hooks_list, claim_after=0.5)):
            await until(lambda: hooks.to("/ops"))
            await asyncio.sleep(1.5)  # claim passes, and time for a wrong second POST
        assert hooks.job_ids("/ops") == [job_id]  # delivered, once
        assert hooks.posts[0].signed_with("stall-secret")
    assert await pending(redis, f"{prefix}:demo") == 0
    stats = await alerts_queue.stats()
    assert (stats.waiting, stats.scheduled, stats.active, stats.dead) == (0, 0, 0, 0)


async def test_alert_outbox_holds_the_notice_dead_watch_hears_live(
    redis: aioredis.Redis, prefix: str
) -> None:
    demo = Queue(redis, f"{prefix}:demo")
    pubsub = redis.pubsub()
    await pubsub.subscribe(demo.keys.dead_letters)  # `genq dead watch` still hears them live
    (job_id,) = await dead_letter(demo, 1)
    async with asyncio.timeout(5):
        while (message := await pubsub.get_message(True, timeout=1)) is None:
            pass
    await pubsub.aclose()
    ((_, fields),) = await redis.xrange(demo.keys.outbox)
    assert fields[b"notice"] == message["data"]
    notice = json.loads(fields[b"notice"])
    assert (notice["id"], notice["reason"], notice["attempts"]) == (job_id, "terminal", 1)


def test_alert_outbox_webhook_settings_are_checked_at_startup() -> None:
    base: dict[str, Any] = {
        "redis_url": "redis://127.0.0.1:1",
        "models": ["demo/fast", "openai/gpt-4o-mini"],
        "_env_file": None,
    }
    hooks = json.dumps(
        [
            {"name": "ops", "url": "https://ops.example/hook", "secret": "s1"},
            {"name": "bill", "url": "http://b/x", "secret": "s2", "queues": ["openai"]},
        ]
    )
    settings = WorkerSettings(
        **base, alert_webhooks=hooks, alert_webhook_url="http://d/x", alert_webhook_secret="s0"
    )
    assert [(h.name, h.queues) for h in settings.webhooks()] == [
        ("default", None),
        ("ops", None),
        ("bill", frozenset({"openai"})),
    ]
    bad = {
        "[{": "GENQ_ALERT_WEBHOOKS is not JSON",
        '{"name": "x"}': "must be a JSON list",
        '[{"name": "x", "url": "ftp://h/x", "secret": "s"}]': "GENQ_ALERT_WEBHOOKS[0]: url: must",
        '[{"name": "x", "url": "http://h/x"}]': "GENQ_ALERT_WEBHOOKS[0]: secret: Field required",
        '[{"name": "x", "url": "http://h", "secret": "s", "queues": ["nope"]}]': "unknown queues",
        '[{"name": "x", "url": "http://h", "secret": "s"}, {"name": "x", "url": "http://i",'
        ' "secret": "t"}]': "'x' is used twice",
    }
    for raw, message in bad.items():
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            WorkerSettings(**base, alert_webhooks=raw)
    with pytest.raises(ValueError) as caught:
        WorkerSettings(**base, alert_webhooks='[{"name": "x", "url": "ftp://h", "secret": "hush"}]')
    assert "hush" not in str(caught.value)  # a secret is never echoed
