"""Dead-letter alerts: every job that dead-letters becomes a signed POST to each webhook.

The script that dead-letters a job appends a notice to its queue's outbox stream; every worker
process reads the outboxes of all provider queues in one consumer group (:mod:`workers.outbox`),
so a notice written while no worker runs waits for the first one to start, and one killed
between reading and acknowledging a notice loses nothing (another takes it over). For each
notice :class:`DeadLetterAlerts` enqueues one delivery per webhook that wants that queue
(:mod:`workers.webhooks`) on a queue of its own (``<namespace>-alerts``: its own hash tag),
under the idempotency key ``<queue prefix>:<outbox entry id>:<webhook>``: a notice read twice
never enqueues twice. The deliveries' worker POSTs the alert (at least once: a receiver should
deduplicate on ``X-Genq-Delivery``). A receiver that fails (5xx, 408, 429, timeout) gets the
alerts queue's retries with backoff; after the last attempt the delivery dead-letters in the
alerts queue and is NOT alerted again: the alerts queue's own outbox is never read, so a webhook
that is down cannot loop. Every attempt's outcome goes to the delivery log
(:mod:`genq_services.alert_log`), shown by ``GET /v1/alerts``, ``/admin`` and
``genq alerts list``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from redis.exceptions import RedisError

from genq import ActiveJob, Queue, RetryJobError, TerminalJobError, Worker
from genq_contract.alert_attempt import DELIVERED, GIVEN_UP, RETRYING, AlertAttempt, Outcome
from genq_services.alert_log import record_attempt
from workers.outbox import OutboxReader, Source
from workers.webhooks import (
    DEFAULT_NAME,
    SIGNATURE_HEADER,
    Webhook,
    encode,
    is_final_failure,
    sign,
)

log = logging.getLogger("workers.alerts")

EVENT = "job.dead_letter"
WEBHOOK_HEADER = "X-Genq-Webhook"
IDEMPOTENCY_TTL = 86400.0
"""Seconds a delivery's idempotency key outlives it: far above any takeover of a notice."""

__all__ = ["EVENT", "SIGNATURE_HEADER", "DeadLetterAlerts", "encode", "sign"]


class DeadLetterAlerts:
    """Reads the given queues' outboxes and delivers each notice to every matching webhook."""

    def __init__(
        self,
        redis: Any,
        sources: Mapping[str, str],
        queue: Queue,
        webhooks: Sequence[Webhook],
        *,
        log_key: str | None = None,
        timeout: float = 10.0,
        concurrency: int = 4,
        claim_after: float = 30.0,
        block: float = 1.0,
        consumer: str | None = None,
    ) -> None:
        """``sources``: queue name (provider) -> queue prefix. ``queue`` carries deliveries.
        ``log_key``: the delivery log's stream (None: no log)."""
        if queue.prefix in sources.values():
            raise ValueError("the alerts queue must not be one of the queues it watches")
        if not webhooks:
            raise ValueError("dead-letter alerts need at least one webhook")
        self.redis = redis
        self.sources = [Source(name, prefix) for name, prefix in sources.items()]
        self.queue = queue
        self.webhooks = {hook.name: hook for hook in webhooks}
        self.log_key = log_key
        self.reader = OutboxReader(
            redis,
            self.sources,
            self.fan_out,
            consumer=consumer,
            claim_after=claim_after,
            block=block,
        )
        self.worker: Worker = queue.worker(self.deliver, concurrency=concurrency)
        self._http = httpx.AsyncClient(timeout=timeout)

    async def start(self) -> None:
        """Starts the delivery worker and the outbox readers (returns once they read)."""
        await self.worker.start()
        await self.reader.start()

    async def stop(self, deadline: float | None = None) -> None:
        await self.reader.stop()
        await self.worker.stop(deadline=deadline)
        await self._http.aclose()

    async def fan_out(self, source: Source, entry_id: str, notice: dict[str, Any]) -> None:
        """Enqueues one delivery per webhook that wants ``source``'s dead letters (idempotent:
        the same entry read again enqueues nothing new)."""
        # A notice written by an older genq has no tenant: it reads as null, as the default
        # tenant's does.
        alert = {
            "event": EVENT, "queue": source.name, "queue_prefix": source.prefix, "tenant": None,
            **notice,
        }  # fmt: skip
        for hook in self.webhooks.values():
            if hook.wants(source.name):
                await self.queue.enqueue(
                    {"webhook": hook.name, "alert": alert},
                    idempotency_key=f"{source.prefix}:{entry_id}:{hook.name}",
                    idempotency_ttl=IDEMPOTENCY_TTL,
                )

    async def deliver(self, job: ActiveJob) -> dict[str, Any]:
        """POSTs one alert; 2xx is done, 4xx (but 408/429) is final, anything else retries."""
        payload = job.payload
        if "alert" in payload:
            name, alert = payload.get("webhook", DEFAULT_NAME), payload["alert"]
        else:  # a delivery enqueued before several webhooks existed: the alert itself
            name, alert = DEFAULT_NAME, payload
        hook = self.webhooks.get(name)
        if hook is None:
            message = f"webhook {name!r} is no longer configured"
            await self._log(job, name, alert, GIVEN_UP, None, message)
            raise TerminalJobError(message)
        body = encode(alert)
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(hook.secret.get_secret_value(), body),
            "X-Genq-Delivery": job.id,
            "X-Genq-Attempt": str(job.attempt),
            WEBHOOK_HEADER: hook.name,
        }
        try:
            response = await self._http.post(hook.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            message = f"webhook unreachable: {type(exc).__name__}: {exc}"
            await self._log(job, name, alert, self._after_failure(job), None, message)
            raise RetryJobError(message) from exc
        status = response.status_code
        if response.is_success:
            await self._log(job, name, alert, DELIVERED, status, None)
            return {"status": status, "webhook": hook.name}
        message = f"webhook answered {status}"
        if is_final_failure(status):
            await self._log(job, name, alert, GIVEN_UP, status, message)
            raise TerminalJobError(message)
        await self._log(job, name, alert, self._after_failure(job), status, message)
        retry_after = response.headers.get("Retry-After", "")
        raise RetryJobError(
            message, retry_after=float(retry_after) if retry_after.isdigit() else None
        )

    @staticmethod
    def _after_failure(job: ActiveJob) -> Outcome:
        return GIVEN_UP if job.attempt >= job.max_attempts else RETRYING

    async def _log(
        self,
        job: ActiveJob,
        webhook: str,
        alert: Mapping[str, Any],
        outcome: Outcome,
        status: int | None,
        error: str | None,
    ) -> None:
        """Adds the attempt to the delivery log; a log that cannot be written does not stop
        the delivery (it is a record, not the alert)."""
        if self.log_key is None:
            return
        attempt = AlertAttempt(
            webhook=webhook,
            job_id=str(alert.get("id", "")),
            queue=str(alert.get("queue", "")),
            attempt=job.attempt,
            outcome=outcome,
            status=status,
            error=error,
            delivery=job.id,
        )
        with contextlib.suppress(RedisError, OSError):
            await record_attempt(self.redis, self.log_key, attempt)
            return
        log.warning("delivery log unavailable: attempt %s of %s not logged", job.attempt, job.id)
