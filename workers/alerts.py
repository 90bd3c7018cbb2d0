"""Dead-letter alerts: every job that dead-letters becomes a signed webhook POST.

genq publishes a JSON notice on each provider queue's ``dead_letters`` channel when a job
dead-letters. :class:`DeadLetterAlerts` subscribes to those channels and, for each notice,
enqueues a delivery on a queue of its own (``<namespace>-alerts``: its own hash tag), whose
worker POSTs the notice to ``GENQ_ALERT_WEBHOOK_URL`` with
``X-Genq-Signature: sha256=<hex HMAC-SHA256 of the body, key GENQ_ALERT_WEBHOOK_SECRET>``.
A receiver that fails (5xx, 408, 429, timeout) gets the alerts queue's retries with backoff;
after the last attempt the delivery dead-letters in the alerts queue and is NOT alerted again:
the alerts queue's own channel is never subscribed, so a webhook that is down cannot loop.

Every worker process runs one; the delivery's idempotency key (queue, job id, time of death)
makes the N processes that hear the same notice enqueue ONE delivery.

Pub/sub is fire-and-forget: a job that dead-letters while no subscriber runs (no worker up,
a reconnect in progress) is not alerted. Alerts are best-effort; the dead set (``genq dead
list``, ``GET /v1/queues/{name}/dead``) remains the source of truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from genq import ActiveJob, Queue, RetryJobError, TerminalJobError, Worker
from genq.cancellation import cancel_and_wait
from genq.events import text
from genq.keys import Keys

log = logging.getLogger("workers.alerts")

SIGNATURE_HEADER = "X-Genq-Signature"
EVENT = "job.dead_letter"


def sign(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=<hex>`` of HMAC-SHA256(secret, body)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encode(payload: Mapping[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


class DeadLetterAlerts:
    """Subscribes to the given queues' dead letters and delivers each one as a webhook."""

    def __init__(
        self,
        redis: Any,
        sources: Mapping[str, str],
        queue: Queue,
        url: str,
        secret: str,
        *,
        timeout: float = 10.0,
        concurrency: int = 4,
    ) -> None:
        """``sources``: queue name (provider) -> queue prefix. ``queue`` carries deliveries."""
        if queue.prefix in sources.values():
            raise ValueError("the alerts queue must not be one of the queues it watches")
        self.redis = redis
        self.channels = {
            Keys(prefix).dead_letters: (name, prefix) for name, prefix in sources.items()
        }
        self.queue = queue
        self.url = url
        self.secret = secret
        self.timeout = timeout
        self.worker: Worker = queue.worker(self.deliver, concurrency=concurrency)
        self._http = httpx.AsyncClient(timeout=timeout)
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def start(self) -> None:
        """Starts the delivery worker and the subscriber; returns once subscribed."""
        await self.worker.start()
        self._listener = asyncio.create_task(self._listen(), name="genq-alerts")
        await asyncio.wait_for(self._subscribed.wait(), 10)

    async def stop(self, deadline: float | None = None) -> None:
        if self._listener is not None:
            await cancel_and_wait(self._listener)  # survives a cancel redis-py swallowed
        await self.worker.stop(deadline=deadline)
        await self._http.aclose()

    async def _listen(self) -> None:
        failures = 0
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.subscribe(*self.channels)
                self._subscribed.set()
                failures = 0
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None:
                        await self.on_notice(message["channel"], message["data"])
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                failures += 1
                log.warning("dead-letter subscription lost (%s); resubscribing", exc)
                await asyncio.sleep(min(5.0, 0.1 * 2**failures))
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()

    async def on_notice(self, channel: bytes | str, data: bytes | str) -> None:
        """Turns one notice into one delivery (idempotent across subscribers)."""
        channel = text(channel)
        name, prefix = self.channels[channel]
        try:
            notice = json.loads(data)
        except ValueError:
            log.error("unreadable dead-letter notice on %s: %r", channel, data)
            return
        payload = {"event": EVENT, "queue": name, "queue_prefix": prefix, **notice}
        key = f"{prefix}:{notice.get('id')}:{notice.get('died_at')}"
        try:
            await self.queue.enqueue(payload, idempotency_key=key)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            log.error("dead-letter alert for %s lost: %s", notice.get("id"), exc)

    async def deliver(self, job: ActiveJob) -> dict[str, Any]:
        """POSTs one alert; 2xx is done, 4xx (but 408/429) is final, anything else retries."""
        body = encode(job.payload)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(self.secret, body),
            "X-Genq-Delivery": job.id,
            "X-Genq-Attempt": str(job.attempt),
        }
        try:
            response = await self._http.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise RetryJobError(f"webhook unreachable: {type(exc).__name__}: {exc}") from exc
        status = response.status_code
        if response.is_success:
            return {"status": status}
        message = f"webhook answered {status}"
        if 400 <= status < 500 and status not in (408, 429):
            raise TerminalJobError(message)
        retry_after = response.headers.get("Retry-After", "")
        raise RetryJobError(
            message, retry_after=float(retry_after) if retry_after.isdigit() else None
        )
