"""Webhook events (``/v1/webhook_endpoints``): from a generation's end to a signed POST.

Three steps, each durable, on the machinery of the dead-letter alerts (:mod:`workers.alerts`):

1. **Ends become events.** The gateway notes each generation whose tenant has an endpoint in
   the ``pending`` set before enqueueing it (a background response or a native generation:
   ``genq_services.webhook_endpoints.note_pending``). Every worker process sweeps that set
   (:class:`PendingSweeper`): a generation found finished is published
   (:func:`genq_services.webhook_events.publish`), THEN removed from the set. A worker killed
   right after a settle loses nothing: the generation stays pending until some sweeper
   publishes it; a sweeper killed between publish and removal publishes again, and the event
   id (deterministic) makes that one event. Batches publish their own events (H5's code).
2. **Events fan out.** Events are appended to the outbox stream in the deliveries queue's
   slot; every worker process reads it in the consumer group ``webhooks``
   (:class:`workers.outbox.OutboxReader`: one process per entry, taken over if its reader
   dies) and enqueues one delivery per endpoint of the event's tenant that subscribes to its
   type, on the genq queue ``<namespace>-webhooks``, under the idempotency key
   ``<event id>:<endpoint id>`` (an event read or published twice enqueues once).
3. **Deliveries POST.** The deliveries' worker signs the event the Standard Webhooks way
   (``webhook-id`` is the delivery's job id, the same on every retry) with every secret still
   valid, checks the URL's addresses again (SSRF, ``genq_services.webhook_urls``) and POSTs it.
   2xx is delivered; a 4xx but 408/429 is given up; anything else retries after
   ``retry_base * 2**(attempt-1)`` seconds (at most ``MAX_RETRY_DELAY``), for
   ``max_attempts`` attempts (the defaults span about a day). Each attempt goes to the
   endpoint's delivery log. A delivery whose endpoint was deleted is dropped unsent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import Any

import httpx
from redis.exceptions import RedisError

from genq import (
    TERMINAL,
    ActiveJob,
    JobStatus,
    Queue,
    RetryJobError,
    TerminalJobError,
    Worker,
    as_text,
    cancel_and_wait,
    job_states,
)
from genq_contract.result import read_result
from genq_contract.webhooks import (
    RESPONSE_CANCELLED,
    RESPONSE_COMPLETED,
    RESPONSE_FAILED,
    RESPONSE_INCOMPLETE,
    WebhookKeys,
    event_body,
)
from genq_services import webhook_endpoints as endpoints
from genq_services.webhook_endpoints import DeliveryAttempt, PendingGeneration
from genq_services.webhook_events import events_stream, publish
from genq_services.webhook_send import client, send
from genq_services.webhook_urls import UnsafeUrlError
from workers.outbox import OutboxReader, Source, consumer_name
from workers.webhooks import is_final_failure

log = logging.getLogger("workers.webhook_delivery")

GROUP = "webhooks"
MESSAGE_PREFIX = "msg_"
IDEMPOTENCY_TTL = 2 * 86400.0
MAX_RETRY_DELAY = 6 * 3600.0
SWEEP_PAGE = 500
SWEEP_TURN = 1.0
"""Seconds at most one process's turn to sweep keeps the others from sweeping."""
INCOMPLETE_REASONS = frozenset({"length", "content_filter"})
"""Finish reasons that make a completed generation ``response.incomplete`` (as the Responses
route shows it: ``gateway.openai.objects.response_status``)."""
_TYPES = {
    JobStatus.COMPLETED: RESPONSE_COMPLETED,
    JobStatus.FAILED: RESPONSE_FAILED,
    JobStatus.CANCELLED: RESPONSE_CANCELLED,
}


class PendingSweeper:
    """Publishes the end of every pending generation (step 1 of the module)."""

    def __init__(self, redis: Any, namespace: str, every: float, grace: float) -> None:
        """``grace``: seconds a pending generation with no record is kept (its enqueue may
        still be on its way) before it is dropped (never enqueued, or expired unseen)."""
        self.redis = redis
        self.namespace = namespace
        self.every = every
        self.grace = grace
        self.keys = WebhookKeys(namespace)
        self._queues: dict[str, Queue] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="genq-webhook-sweeper")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        me = consumer_name()
        while True:
            pause = self.every
            try:
                # one sweep per interval whatever the number of processes: the turn lapses by
                # itself (an interval, at most SWEEP_TURN), so a killed holder blocks no one
                turn = min(self.every, SWEEP_TURN)
                taken = await self.redis.set(
                    self.keys.sweeping, me, nx=True, px=max(1, int(turn * 1000))
                )
                if taken:
                    started = time.monotonic()
                    await self.sweep()
                    # a long sweep (many generations pending) waits as long as it took: this
                    # process never spends more than half its time sweeping
                    pause = max(self.every, time.monotonic() - started)
            except (RedisError, OSError) as exc:
                log.warning("webhook sweep failed (%s); retrying", exc)
            except Exception:  # a bug must not end the events for good
                log.exception("webhook sweep failed")
            await asyncio.sleep(pause)

    def _queue(self, prefix: str) -> Queue:
        queue = self._queues.get(prefix)
        if queue is None:
            queue = self._queues[prefix] = Queue(self.redis, prefix)
        return queue

    async def sweep(self) -> int:
        """One pass over the whole set; returns how many events it published."""
        published = 0
        start = 0
        while True:
            members = await self.redis.zrange(
                self.keys.pending, start, start + SWEEP_PAGE - 1, withscores=True
            )
            if not members:
                return published
            published += await self._page(members)
            if len(members) < SWEEP_PAGE:
                return published
            start += SWEEP_PAGE  # removals shift the ranks: a skipped one waits a pass

    async def _page(self, members: list[tuple[Any, float]]) -> int:
        now_ms = time.time() * 1000
        found: list[tuple[Any, PendingGeneration]] = []
        drop: list[Any] = []
        for member, _ in members:
            pending = PendingGeneration.from_member(member)
            if pending is None:
                drop.append(member)
            else:
                found.append((member, pending))
        scores = {as_text(m): s for m, s in members}
        states = await job_states([(self._queue(p.queue_prefix), p.job_id) for _, p in found])
        published = 0
        for (member, pending), state in zip(found, states, strict=True):
            if state is None:
                if now_ms - scores[as_text(member)] > self.grace * 1000:
                    drop.append(member)
                continue
            if state.status not in TERMINAL:
                continue
            await publish(
                self.redis,
                tenant=pending.tenant,
                type=await self._type(pending, state.status),
                object_id=pending.object_id,
                namespace=self.namespace,
            )
            drop.append(member)
            published += 1
        if drop:
            await self.redis.zrem(self.keys.pending, *drop)
        return published

    async def _type(self, pending: PendingGeneration, status: JobStatus) -> str:
        if status is JobStatus.COMPLETED:
            job = await self._queue(pending.queue_prefix).get(pending.job_id)
            if job is not None and read_result(job.result).finish_reason in INCOMPLETE_REASONS:
                return RESPONSE_INCOMPLETE
        return _TYPES[status]


class WebhookDeliveries:
    """The three steps of the module for one worker process."""

    def __init__(
        self,
        redis: Any,
        namespace: str,
        queue: Queue,
        *,
        allow_private: bool = False,
        timeout: float = 10.0,
        retry_base: float = 5.0,
        concurrency: int = 4,
        claim_after: float = 30.0,
        block: float = 1.0,
        sweep_every: float = 0.5,
        grace: float = 60.0,
        consumer: str | None = None,
    ) -> None:
        self.redis = redis
        self.namespace = namespace
        self.queue = queue
        self.allow_private = allow_private
        self.retry_base = retry_base
        source = Source("webhook-events", queue.prefix, stream=events_stream(redis, namespace))
        self.reader = OutboxReader(
            redis,
            [source],
            self.fan_out,
            consumer=consumer,
            claim_after=claim_after,
            block=block,
            group=GROUP,
        )
        self.sweeper = PendingSweeper(redis, namespace, sweep_every, grace)
        self.worker: Worker = queue.worker(self.deliver, concurrency=concurrency)
        self._http = client(timeout)

    async def start(self) -> None:
        await self.worker.start()
        await self.reader.start()
        self.sweeper.start()

    async def stop(self, deadline: float | None = None) -> None:
        await self.sweeper.stop()
        await self.reader.stop()
        await self.worker.stop(deadline=deadline)
        await self._http.aclose()

    async def fan_out(self, source: Source, entry_id: str, notice: dict[str, Any]) -> None:
        """One delivery per endpoint of the event's tenant subscribed to its type."""
        tenant = str(notice["tenant"])
        event = event_body(
            str(notice["event"]),
            str(notice["type"]),
            int(notice["created_at"]),
            str(notice["object_id"]),
        )
        for endpoint in await endpoints.of_tenant(self.redis, self.namespace, tenant):
            if endpoint.wants(event["type"]):
                await self.queue.enqueue(
                    {"endpoint": endpoint.id, "event": event},
                    idempotency_key=f"{event['id']}:{endpoint.id}",
                    job_id=MESSAGE_PREFIX + uuid.uuid4().hex,  # webhook-id: msg_..., as a test's
                    idempotency_ttl=IDEMPOTENCY_TTL,
                    tenant=tenant,
                )

    async def deliver(self, job: ActiveJob) -> dict[str, Any]:
        """POSTs one event to one endpoint (step 3 of the module)."""
        event: dict[str, Any] = job.payload["event"]
        endpoint = await endpoints.get(self.redis, self.namespace, job.payload["endpoint"], None)
        if endpoint is None:
            return {"dropped": "endpoint deleted"}
        try:
            response = await send(self._http, endpoint, job.id, event, self.allow_private)
        except UnsafeUrlError as exc:
            await self._log(job, endpoint.id, event, "given_up", None, str(exc))
            raise TerminalJobError(str(exc)) from exc
        except httpx.HTTPError as exc:
            message = f"endpoint unreachable: {type(exc).__name__}: {exc}"
            await self._log(job, endpoint.id, event, self._after_failure(job), None, message)
            raise RetryJobError(message, retry_after=self._delay(job)) from exc
        status = response.status_code
        if response.is_success:
            await self._log(job, endpoint.id, event, "delivered", status, None)
            return {"status": status, "endpoint": endpoint.id}
        message = f"endpoint answered {status}"
        if is_final_failure(status):
            await self._log(job, endpoint.id, event, "given_up", status, message)
            raise TerminalJobError(message)
        await self._log(job, endpoint.id, event, self._after_failure(job), status, message)
        raise RetryJobError(message, retry_after=self._delay(job))

    def _delay(self, job: ActiveJob) -> float:
        return self._delay_after(self.retry_base, job.attempt)

    @staticmethod
    def _delay_after(base: float, attempt: int) -> float:
        """Seconds before the retry of failed attempt ``attempt``: exponential, the floor under
        genq's jittered backoff."""
        return float(min(MAX_RETRY_DELAY, base * 2 ** (attempt - 1)))

    @staticmethod
    def _after_failure(job: ActiveJob) -> str:
        return "given_up" if job.attempt >= job.max_attempts else "retrying"

    async def _log(
        self,
        job: ActiveJob,
        endpoint_id: str,
        event: dict[str, Any],
        outcome: str,
        status: int | None,
        error: str | None,
    ) -> None:
        """Adds the attempt to the endpoint's log; a log that cannot be written does not stop
        the delivery (it is a record, not the event)."""
        attempt = DeliveryAttempt(
            event_id=str(event.get("id", "")),
            event_type=str(event.get("type", "")),
            webhook_id=job.id,
            attempt=job.attempt,
            outcome=outcome,
            status=status,
            error=error,
        )
        with contextlib.suppress(RedisError, OSError):
            await endpoints.record_attempt(self.redis, self.namespace, endpoint_id, attempt)
            return
        log.warning("webhook delivery log unavailable: attempt %s of %s", job.attempt, job.id)
