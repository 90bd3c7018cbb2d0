"""Enqueues as script calls: the options of :meth:`genq.Queue.enqueue`, checked, turned into
``enqueue.lua``'s keys and arguments, and its replies turned back into outcomes.

One script serves both: ``enqueue`` sends one item, ``enqueue_many`` sends its items in chunks
of up to :data:`CHUNK`, one ``EVALSHA`` each, each chunk written as soon as it is made and the
replies read after the last (:mod:`genq._streamed`). Every item runs the same checks and, in the
script, the same steps as a single enqueue.

With durable acceptance on (``Queue(durable_replicas=N)``), both send ``WAIT N <ms>`` right
after their scripts, on the same connection, and raise :class:`ReplicationTimeoutError` when
fewer than N replicas confirmed in time: the jobs are on the primary, but not yet safe.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ._cluster import Call, run_durably
from ._errors import EnqueueManyError, JobExistsError, ReplicationTimeoutError
from ._events import as_text
from ._keys import Keys, check_job_id, check_tenant
from ._queue_base import QueueBase, ms
from ._scripts import Code, raise_for
from ._streamed import run_streamed

PRIORITY_RANGE = range(-1000, 1001)
MAX_IDEMPOTENCY_KEY = 512
CHUNK = 20
"""Items per ``EVALSHA`` of a batch. Each chunk is written as soon as it is made
(:mod:`genq._streamed`), so the server runs one while the producer makes the next: more jobs/s
than the same batch made whole and sent as one call (``bench/queue.py``; docs/KNOWN_LIMITS.md)."""


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


@lru_cache(maxsize=1024)
def static_keys(keys: Keys) -> tuple[str, ...]:
    """``enqueue.lua``'s first KEYS for items, the same for every call on one queue."""
    k = keys
    return (
        k.intake, k.scheduled, k.rank, k.dead, k.signal, k.seq, k.index, k.tenant_index,
        k.index_expiry,
    )  # fmt: skip


@lru_cache(maxsize=1024)
def new_job_keys(keys: Keys) -> tuple[str, str, str]:
    """``enqueue.lua``'s first KEYS for one new job: its intake, doorbell and sequence."""
    return keys.intake, keys.signal, keys.seq


def item_call(
    queue: QueueBase,
    payload: Any,
    key: str | None = None,
    priority: int = 0,
    delay: float = 0.0,
    job_id: str | None = None,
    max_attempts: int | None = None,
    idempotency_ttl: float | None = None,
    tenant: str = "",
) -> tuple[tuple[str, str, str], tuple[Any, ...]]:
    """One item's keys and arguments for ``enqueue.lua``; raises ValueError on a bad option."""
    if not isinstance(priority, int) or priority not in PRIORITY_RANGE:
        raise ValueError("priority must be an integer from -1000 to 1000")
    delay_ms = 0
    if delay:
        if not math.isfinite(delay) or delay < 0:
            raise ValueError("delay must be a finite number of seconds >= 0")
        delay_ms = ms(delay)
    attempts = queue.max_attempts if max_attempts is None else max_attempts
    if attempts < 1:
        raise ValueError("max_attempts must be >= 1")
    if key is None:
        key = ""
    elif not 0 < len(key) <= MAX_IDEMPOTENCY_KEY:
        raise ValueError(f"idempotency_key must be 1-{MAX_IDEMPOTENCY_KEY} characters")
    if tenant != "":
        check_tenant(tenant)
    if idempotency_ttl is None:
        idem_ttl = ms(queue.result_ttl)
    elif not math.isfinite(idempotency_ttl) or idempotency_ttl < 0:
        raise ValueError("idempotency_ttl must be a finite number of seconds >= 0 (0: forever)")
    else:
        idem_ttl = ms(idempotency_ttl)
    # The nonce lets a resent enqueue recognise the job it already made; a generated id
    # is unique on its own.
    nonce = os.urandom(16).hex()
    job_id = nonce if job_id is None else check_job_id(job_id)
    k = queue.keys
    keys = (k.job(job_id), k.events(job_id), k.idempotency(key))
    payload = queue.codec.encode(payload)
    return keys, (job_id, nonce, payload, priority, delay_ms, attempts, key, idem_ttl, tenant)


def enqueue_call(queue: QueueBase, item: EnqueueItem, admitted_in: str | None = None) -> Call:
    """The checked ``enqueue.lua`` call for ``item`` alone, as :meth:`genq.Queue.enqueue` sends
    it (``admitted_in``: see :func:`one_call`); raises ValueError on a bad option."""
    keys, args = item_call(
        queue, item.payload, item.idempotency_key, item.priority, item.delay, item.job_id,
        item.max_attempts, item.idempotency_ttl, item.tenant,
    )  # fmt: skip
    return one_call(queue, keys, args, admitted_in)


def one_call(
    queue: QueueBase, keys: Sequence[str], args: Sequence[Any], admitted_in: str | None = None
) -> Call:
    """``enqueue.lua``'s call for one item (``item_call``'s keys and arguments): a new job ready
    at once (a generated id, its own nonce, and no delay) in the script's shape for one new
    job, which sends 3 to 7 arguments instead of 9; any other in its shape for items, with
    ``admitted_in`` (the set a layer's admission adds the id to, :func:`genq.enqueue_admitted`)
    if given. A job ready at once goes in the items' shape with the hand-off keys
    (``Keys.hand_off``: the script starts it under an idle worker's offer when no other job is
    ahead of it) while the queue's last such call saw an offer listed (:func:`note_offers`);
    otherwise any call sends only the offers list (the hand-off's keys and path cost a call
    that hands nothing off a quarter of an enqueue: docs/KNOWN_LIMITS.md)."""
    job_id, nonce, payload, priority, delay_ms, attempts, key, idem_ttl, tenant = args
    k = queue.keys
    handing = queue.offers_seen and not delay_ms
    if job_id == nonce and not delay_ms and admitted_in is None and not handing:
        # The values that hold their defaults are left off the end (the server pays to read
        # each value): a plain enqueue sends 3 arguments.
        new_keys = [*new_job_keys(k), keys[0], k.idle]
        if key:
            new_keys.append(keys[2])
            return new_keys, [job_id, payload, attempts, priority, tenant, key, idem_ttl]
        rest = (priority, tenant) if tenant else (priority,) if priority else ()
        return new_keys, [job_id, payload, attempts, *rest]
    admitted = () if admitted_in is None else (admitted_in,)
    hand_off = k.hand_off if handing else (k.idle,)
    return [*static_keys(k), *keys, *admitted, *hand_off], list(args)


def note_offers(queue: QueueBase, reply: Sequence[Any]) -> None:
    """Keeps what the reply of :func:`one_call`'s call says of the idle workers' offers."""
    queue.offers_seen = int(reply[2]) == 1


async def run_enqueue(queue: QueueBase, call: Call) -> tuple[Any, int]:
    """``enqueue.lua`` for one item (``one_call``'s call). Returns the reply and how many
    replicas confirmed it (with durable acceptance off: 0, and no ``WAIT`` is sent)."""
    script = queue.scripts.enqueue
    if queue.durable_replicas:
        replies, acknowledged = await run_durably(queue.redis, script, [call], *durability(queue))
        reply = replies[0]
    else:
        reply, acknowledged = await script(*call), 0
    note_offers(queue, reply)
    return reply, acknowledged


def durability(queue: QueueBase) -> tuple[int, int]:
    """``WAIT``'s arguments: the replicas to wait for and the bound in milliseconds."""
    return queue.durable_replicas, ms(queue.durable_timeout)


def confirm(queue: QueueBase, acknowledged: int, job_ids: list[str]) -> None:
    """Raises :class:`ReplicationTimeoutError` when fewer replicas than the queue asks for
    confirmed the write of ``job_ids`` (never with durable acceptance off)."""
    if acknowledged < queue.durable_replicas and job_ids:
        raise ReplicationTimeoutError(queue.durable_replicas, acknowledged, job_ids)


def enqueued(job_id: str, code: int, bound: Any) -> Enqueued:
    """One item's reply -> its outcome; raises JobExistsError on a live id."""
    if code == Code.OK:  # the job is the item's own
        return Enqueued(id=job_id, deduplicated=False)
    raise_for(code, job_id)
    return Enqueued(id=as_text(bound), deduplicated=code == Code.DEDUPLICATED)


async def enqueue_batch(queue: QueueBase, items: Iterable[EnqueueItem]) -> list[Enqueued]:
    """:meth:`genq.Queue.enqueue_many`: ``enqueue.lua`` once per chunk of items.

    Items with a bad option are not sent; the others are, and their outcomes come back in
    item order. Any failure raises :class:`EnqueueManyError` once the whole batch ran; with
    durable acceptance, too few replicas raises :class:`ReplicationTimeoutError` first (its
    ``job_ids``: every job the batch made or found).
    """
    results: list[Enqueued | Exception] = []
    sent: list[tuple[int, str]] = []  # (item index, job id) in the order sent
    # Taken whole first: an iterable that raises half-way sends nothing.
    calls = chunk_calls(queue, list(items), results, sent)
    acknowledged = 0
    if queue.durable_replicas:
        made = list(calls)
        replies: list[Any] = []
        if made:
            replies, acknowledged = await run_durably(
                queue.redis, queue.scripts.enqueue, made, *durability(queue)
            )
    else:
        # Each chunk goes out as soon as it is made: the server runs it while the next is made.
        replies = await run_streamed(queue.redis, queue.scripts.enqueue, calls)
    flat = [value for reply in replies for value in reply]
    for n, (index, job_id) in enumerate(sent):
        try:
            results[index] = enqueued(job_id, flat[2 * n], flat[2 * n + 1])
        except JobExistsError as exc:
            results[index] = exc
    done = [result for result in results if isinstance(result, Enqueued)]
    confirm(queue, acknowledged, [result.id for result in done])
    if len(done) < len(results):
        raise EnqueueManyError(results)
    return done


def chunk_calls(
    queue: QueueBase,
    items: Iterable[EnqueueItem],
    results: list[Enqueued | Exception],
    sent: list[tuple[int, str]],
) -> Iterator[Call]:
    """``enqueue.lua``'s calls for ``items``, :data:`CHUNK` items each, made as they are taken.
    Each item's outcome slot is appended to ``results`` (for a bad option, its ValueError; for
    a payload the codec refuses, its ValueError or TypeError: that item is not sent) and each
    sent item to ``sent``."""
    static = static_keys(queue.keys)
    keys: list[str] = []
    args: list[Any] = []
    for index, item in enumerate(items):
        try:
            item_keys, item_args = item_call(
                queue, item.payload, item.idempotency_key, item.priority, item.delay,
                item.job_id, item.max_attempts, item.idempotency_ttl, item.tenant,
            )  # fmt: skip
        except (ValueError, TypeError) as exc:
            results.append(exc)
            continue
        if not args:
            keys = [*static]
        keys += item_keys
        args += item_args
        sent.append((index, item_args[0]))
        results.append(_SENT)
        if len(sent) % CHUNK == 0:
            yield keys, args
            args = []
    if args:
        yield keys, args


_SENT = Enqueued(id="", deduplicated=False)
"""A placeholder for an item's outcome until the batch's reply fills it in."""
