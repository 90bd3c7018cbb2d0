"""A layer's own script run with what genq keeps, in the round trips genq makes anyway.

A layer that admits jobs (the gateway's tenant limits) must see, in the same atomic step as its
own checks, whether an idempotency key is bound already, and must release what it holds for the
key once the enqueue bound it. Both without naming genq's keys (only genq does):

- :func:`run_with_bindings` runs the layer's script with the key's binding in each queue added
  to its KEYS (one round trip);
- :func:`enqueue_then` sends the layer's script right behind an enqueue, on the same
  connection, so both cost one round trip.

Both are for one server: on a Cluster the layer's keys and the queues' are in other slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

from ._enqueue import Enqueued, EnqueueItem, confirm, enqueue_call, enqueued, run_enqueue
from ._queue_base import QueueBase
from ._redis_patches import _on_pooled_connection, _packed, pooled
from ._streamed import run_streamed


async def run_with_bindings(
    queues: Sequence[QueueBase],
    idempotency_key: str,
    script: AsyncScript,
    keys: Sequence[str],
    args: Sequence[Any],
) -> Any:
    """Runs the caller's registered ``script`` once, on the queues' client, with KEYS ``keys``
    followed by the key that binds ``idempotency_key`` in each of ``queues``, in that order: a
    string holding the bound job's id, absent while the key is unbound (the script reads them,
    never writes them). Returns the script's reply."""
    bindings = [queue.keys.idempotency(idempotency_key) for queue in queues]
    (reply,) = await run_streamed(queues[0].redis, script, [([*keys, *bindings], list(args))])
    return reply


async def enqueue_then(
    queue: QueueBase,
    item: EnqueueItem,
    script: AsyncScript,
    keys: Sequence[str],
    args: Sequence[Any],
) -> tuple[Enqueued, Any]:
    """:meth:`genq.Queue.enqueue` of ``item``, then the caller's registered ``script`` (which
    must be safe to run twice, as the enqueue is) on the same connection, written together:
    one round trip. Returns the enqueue's outcome and the script's reply; raises what
    ``enqueue`` raises (the script then ran all the same). With durable acceptance on, or on
    a client without genq's write path (a Cluster), they are two round trips."""
    call = enqueue_call(queue, item)
    job_id = str(call[1][0])
    if queue.durable_replicas or not pooled(queue.redis):
        try:
            (code, bound), acknowledged = await run_enqueue(queue, call)
        finally:
            reply = await script(keys=keys, args=args)
        result = enqueued(job_id, int(code), bound)
        confirm(queue, acknowledged, [result.id])
        return result, reply
    calls: list[tuple[AsyncScript, Sequence[Any], Sequence[Any]]] = [
        (queue.scripts.enqueue, *call),
        (script, keys, args),
    ]
    replies = await _together(queue.redis, calls)
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    code, bound = replies[0]
    return enqueued(job_id, int(code), bound), replies[1]


async def _together(
    redis: Any, calls: list[tuple[AsyncScript, Sequence[Any], Sequence[Any]]]
) -> list[Any]:
    """Each call written in one write on one pooled connection; the replies (an error reply
    as its exception). A NOSCRIPT loads that script and sends every call again."""

    async def attempt(conn: AbstractConnection) -> list[Any]:
        await conn.send_packed_command([b for s, k, a in calls for b in _packed(conn, s, k, a)])
        replies: list[Any] = []
        for _ in calls:
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:  # read whole: the connection is in step
                replies.append(exc)
        return replies

    replies = await _on_pooled_connection(redis, attempt)
    missing = [
        s for (s, _, _), r in zip(calls, replies, strict=True) if isinstance(r, NoScriptError)
    ]
    if not missing:
        return replies
    for script in missing:
        script.sha = await redis.script_load(script.script)
    return await _on_pooled_connection(redis, attempt)
