"""Adding jobs to a queue: one, or many in one round trip (:mod:`genq._enqueue` makes the
script calls)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._enqueue import (
    Enqueued,
    EnqueueItem,
    confirm,
    enqueue_batch,
    enqueued,
    item_call,
    one_call,
    run_enqueue,
)
from ._queue_base import QueueBase


class Producing(QueueBase):
    """What a producer calls on :class:`genq.Queue`."""

    async def enqueue(
        self,
        payload: Any,
        idempotency_key: str | None = None,
        priority: int = 0,
        delay: float = 0.0,
        job_id: str | None = None,
        max_attempts: int | None = None,
        idempotency_ttl: float | None = None,
        tenant: str = "",
    ) -> Enqueued:
        """Adds a job in one atomic round trip. Higher ``priority`` runs first; FIFO within one.

        With ``idempotency_key``, a key still bound to a job returns that job's id with
        ``deduplicated=True``. Reusing a finished ``job_id`` starts clean; a live one raises
        :class:`JobExistsError`.

        Waiting jobs are served round-robin across ``tenant`` values (weighted by the queue's
        ``tenant_weights``), by priority and then FIFO within a tenant.

        With ``durable_replicas`` set, it returns only once that many replicas hold the job,
        or raises :class:`ReplicationTimeoutError` (the job is on the primary; resend with the
        same idempotency key or job id to confirm it).
        """
        keys, args = item_call(
            self, payload, idempotency_key, priority, delay, job_id, max_attempts,
            idempotency_ttl, tenant,
        )  # fmt: skip
        (code, bound, _), acknowledged = await run_enqueue(self, one_call(self, keys, args))
        result = enqueued(args[0], code, bound)
        confirm(self, acknowledged, [result.id])
        return result

    async def enqueue_many(self, items: Iterable[EnqueueItem]) -> list[Enqueued]:
        """Adds many jobs in one round trip: each item is one ``enqueue`` (same checks, same
        idempotency), taken in order by one script call per 20 items, each call written while
        the next is made. Outcomes come in item order. Each call is atomic; the batch as a
        whole is not a transaction.

        An item that fails (a bad option, a payload the codec cannot encode, or
        :class:`JobExistsError` for a live custom id) does not stop the others: every other
        item is enqueued, and then
        :class:`EnqueueManyError` is raised with ``results``, one per item: its
        :class:`Enqueued` or its exception. Two items with one idempotency key make one job
        (the later one is ``deduplicated``). Safe to resend, as ``enqueue`` is.
        """
        return await enqueue_batch(self, items)
