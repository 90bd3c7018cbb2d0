"""One enqueue as a script call: the options of :meth:`genq.Queue.enqueue`, checked, turned
into ``enqueue.lua``'s keys and arguments, and its reply turned back into an outcome.

Shared by ``enqueue`` (one call) and ``enqueue_many`` (a pipeline of calls), so a batch runs
exactly the script and checks a single enqueue runs.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._queue_base import QueueBase, ms
from .cluster import Call, run_pipelined
from .errors import EnqueueManyError, JobExistsError
from .events import text
from .keys import check_job_id, check_tenant
from .scripts import Code, raise_for

PRIORITY_RANGE = range(-1000, 1001)
MAX_IDEMPOTENCY_KEY = 512


@dataclass(frozen=True)
class Enqueued:
    id: str
    deduplicated: bool


@dataclass(frozen=True)
class EnqueueItem:
    """One job of :meth:`genq.Queue.enqueue_many`: the same options as ``enqueue``."""

    payload: Any
    idempotency_key: str | None = None
    priority: int = 0
    delay: float = 0.0
    job_id: str | None = None
    max_attempts: int | None = None
    idempotency_ttl: float | None = None
    tenant: str = ""


def enqueue_call(queue: QueueBase, item: EnqueueItem) -> Call:
    """The checked ``enqueue.lua`` call for ``item``; raises ValueError on a bad option."""
    priority, delay, key = item.priority, item.delay, item.idempotency_key
    if not isinstance(priority, int) or priority not in PRIORITY_RANGE:
        raise ValueError("priority must be an integer from -1000 to 1000")
    if not math.isfinite(delay) or delay < 0:
        raise ValueError("delay must be a finite number of seconds >= 0")
    attempts = queue.max_attempts if item.max_attempts is None else item.max_attempts
    if attempts < 1:
        raise ValueError("max_attempts must be >= 1")
    if key is not None and not 0 < len(key) <= MAX_IDEMPOTENCY_KEY:
        raise ValueError(f"idempotency_key must be 1-{MAX_IDEMPOTENCY_KEY} characters")
    tenant = check_tenant(item.tenant)
    idem_ttl = queue.result_ttl if item.idempotency_ttl is None else item.idempotency_ttl
    if not math.isfinite(idem_ttl) or idem_ttl < 0:
        raise ValueError("idempotency_ttl must be a finite number of seconds >= 0 (0: forever)")
    # The nonce lets a resent enqueue recognise the job it already made; a generated id
    # is unique on its own.
    nonce = uuid.uuid4().hex
    job_id = check_job_id(item.job_id) if item.job_id is not None else nonce
    k = queue.keys
    keys = [
        k.job(job_id),
        k.events(job_id),
        k.ready,
        k.scheduled,
        k.rank,
        k.dead,
        k.signal,
        k.seq,
        k.idempotency(key or ""),
        *k.books,
    ]
    args = [
        job_id,
        nonce,
        queue.codec.encode(item.payload),
        priority,
        ms(delay),
        attempts,
        key or "",
        ms(idem_ttl),
        tenant,
    ]
    return keys, args


def enqueued(call: Call, reply: Any) -> Enqueued:
    """``enqueue.lua``'s reply to ``call`` -> the outcome; raises JobExistsError on a live id."""
    code, bound = reply
    raise_for(code, call[1][0])
    return Enqueued(id=text(bound), deduplicated=code == Code.DEDUPLICATED)


async def enqueue_batch(queue: QueueBase, items: Iterable[EnqueueItem]) -> list[Enqueued]:
    """:meth:`genq.Queue.enqueue_many`: one pipeline of ``enqueue.lua`` calls, one per item.

    Items with a bad option are not sent; the others are, and their outcomes come back in
    item order. Any failure raises :class:`EnqueueManyError` once the whole batch ran.
    """
    results: list[Enqueued | Exception] = []
    calls: list[tuple[int, Call]] = []
    for index, item in enumerate(items):
        try:
            calls.append((index, enqueue_call(queue, item)))
            results.append(_SENT)
        except ValueError as exc:
            results.append(exc)
    if calls:
        replies = await run_pipelined(queue.redis, queue.scripts.enqueue, [c for _, c in calls])
        for (index, call), reply in zip(calls, replies, strict=True):
            try:
                results[index] = enqueued(call, reply)
            except JobExistsError as exc:
                results[index] = exc
    done = [result for result in results if isinstance(result, Enqueued)]
    if len(done) < len(results):
        raise EnqueueManyError(results)
    return done


_SENT = Enqueued(id="", deduplicated=False)
"""A placeholder for an item's outcome until the batch's reply fills it in."""
