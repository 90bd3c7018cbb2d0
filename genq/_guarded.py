"""A layer's admission and the enqueue it admits, in the one round trip genq makes anyway.

A layer that admits jobs (the gateway's tenant limits) must see, in the same atomic step as its
own checks, whether an idempotency key is bound already; the job must be enqueued only when
those checks let it in; and what the layer holds for the key must be released once the enqueue
bound it. All of it without naming genq's keys (only genq does): :func:`enqueue_admitted`
writes the layer's admission script (with the key's binding in each queue added to its KEYS),
the enqueue, which goes ahead only when that script admitted the job, and the layer's release
script, together on one connection: one round trip, whatever the admission answered.

For one server: on a Cluster the layer's keys and the queues' are in other slots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError, ResponseError

from ._active_job import record_fields
from ._enqueue import (
    Enqueued,
    EnqueueItem,
    confirm,
    enqueue_call,
    enqueued,
    note_offers,
    run_enqueue,
)
from ._job import Job
from ._queue_base import QueueBase
from ._redis_patches import _on_pooled_connection, _packed, pooled
from ._scripts import Code
from ._streamed import run_streamed

ScriptCall = tuple[AsyncScript, Sequence[str], Sequence[Any]]
"""A layer's registered script and its KEYS and ARGV."""


@dataclass(frozen=True)
class AdmittedEnqueue:
    """What :func:`enqueue_admitted` sent got back."""

    admission: Any
    """The admission script's reply."""
    enqueued: Enqueued | None
    """The enqueue's outcome; None when the admission did not admit the job (nothing written)."""
    release: Any = None
    """The release script's reply (None without one)."""
    job: Job | None = None
    """With ``read_back``, the job as its record stood right after the enqueue (None when the
    admission did not admit it, or the enqueue found the key bound to another job)."""


async def enqueue_admitted(
    queue: QueueBase,
    item: EnqueueItem,
    admission: ScriptCall,
    admitted_in: str,
    release: ScriptCall | None = None,
    bound_in: Sequence[QueueBase] = (),
    read_back: bool = False,
) -> AdmittedEnqueue:
    """Runs the layer's ``admission`` script, then :meth:`genq.Queue.enqueue` of ``item`` only
    if that script admitted it, by adding the job's id (``item.job_id``, required) to the sorted
    set ``admitted_in``, then the ``release`` script whatever happened (it must be safe to run
    twice and when nothing was admitted, as every script here is sent again after a lost
    connection or a NOSCRIPT).

    With ``read_back``, the job's record (and the server's time, for :class:`Job`) is read right
    after the enqueue, in the same write: a caller that answers with the job needs no read of
    its own.

    With ``bound_in``, the admission's KEYS are followed by the binding of
    ``item.idempotency_key`` in each of those queues, in that order: a string holding the bound
    job's id, absent while the key is unbound (read them, never write them). A key bound to
    ``item.job_id`` itself is this write's own work: sent again (after a NOSCRIPT or a lost
    connection), the enqueue behind its first send bound it; the admission must admit it again.

    One round trip on a single node's pooled client; with durable acceptance on, or on a client
    without genq's write path, one per script. Raises the admission's or the release's error
    reply, and what ``enqueue`` raises (the release then ran all the same)."""
    if item.job_id is None:
        raise ValueError("enqueue_admitted needs the item's job_id: the admission names it")
    script, keys, args = admission
    if bound_in:
        keys = [*keys, *(q.keys.idempotency(item.idempotency_key or "") for q in bound_in)]
    guarded = enqueue_call(queue, item, admitted_in)  # a named job: the items' shape
    if queue.durable_replicas or not pooled(queue.redis):
        sent = await _one_by_one(queue, (script, keys, args), guarded, release)
        if read_back and _fresh(sent.enqueued):
            return replace(sent, job=await queue.get(str(item.job_id)))
        return sent
    calls: list[ScriptCall] = [(script, keys, args), (queue.scripts.enqueue, *guarded)]
    if release is not None:
        calls.append(release)
    reads = [("HGETALL", queue.keys.job(str(item.job_id))), ("TIME",)] if read_back else []
    replies = await _together(queue.redis, calls, reads)
    for reply in replies:
        if isinstance(reply, ResponseError):
            raise reply
    note_offers(queue, replies[1])
    outcome = _outcome(str(item.job_id), replies[1])
    job = None
    if reads and _fresh(outcome) and replies[-2]:
        record, (seconds, micros) = replies[-2], replies[-1]
        fields = record if isinstance(record, dict) else record_fields(record)  # RESP3, RESP2
        now = int(seconds) + int(micros) / 1e6
        job = Job.from_hash(fields, queue.codec, queue.result_codec, now)
    return AdmittedEnqueue(replies[0], outcome, replies[2] if release else None, job)


def _fresh(outcome: Enqueued | None) -> bool:
    """Whether the enqueue wrote the job it was given (not refused, not a key's replay)."""
    return outcome is not None and not outcome.deduplicated


async def _one_by_one(
    queue: QueueBase,
    admission: ScriptCall,
    guarded: tuple[Sequence[Any], Sequence[Any]],
    release: ScriptCall | None,
) -> AdmittedEnqueue:
    script, keys, args = admission
    (admitted,) = await run_streamed(queue.redis, script, [(keys, args)])
    released = None
    try:
        reply, acknowledged = await run_enqueue(queue, guarded)
    finally:
        if release is not None:
            released = await release[0](keys=release[1], args=release[2])
    outcome = _outcome(str(guarded[1][0]), reply)
    if outcome is not None:
        confirm(queue, acknowledged, [outcome.id])
    return AdmittedEnqueue(admitted, outcome, released)


def _outcome(job_id: str, reply: Any) -> Enqueued | None:
    code, bound, _ = reply
    if int(code) == Code.NOT_ADMITTED:
        return None
    return enqueued(job_id, int(code), bound)


async def _together(
    redis: Any, calls: list[ScriptCall], reads: Sequence[tuple[Any, ...]] = ()
) -> list[Any]:
    """Each call, then each of ``reads`` (commands), written in one write on one pooled
    connection; the replies (an error reply as its exception). A NOSCRIPT loads that script and
    sends everything again."""

    async def attempt(conn: AbstractConnection) -> list[Any]:
        packed = [b for s, k, a in calls for b in _packed(conn, s, k, a)]
        packed += [b for read in reads for b in conn.pack_command(*read)]
        await conn.send_packed_command(packed)
        replies: list[Any] = []
        for _ in range(len(calls) + len(reads)):
            try:
                replies.append(await conn.read_response())
            except ResponseError as exc:  # read whole: the connection is in step
                replies.append(exc)
        return replies

    replies = await _on_pooled_connection(redis, attempt)
    scripted = replies[: len(calls)]  # the reads' replies follow
    missing = [
        s for (s, _, _), r in zip(calls, scripted, strict=True) if isinstance(r, NoScriptError)
    ]
    if not missing:
        return replies
    for script in missing:
        script.sha = await redis.script_load(script.script)
    return await _on_pooled_connection(redis, attempt)
