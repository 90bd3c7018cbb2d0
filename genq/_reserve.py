"""A reserve, as the built-in worker and a puller both make it: ``pick.lua`` claims runnable
jobs (and reports expired leases), ``activate.lua`` turns each claim into a lease held by a new
token, and ``reclaim.lua`` takes back what expired. One definition for :class:`genq.Worker` and
:mod:`genq._pull`, which differ only in who holds the lease (a presence id, or none)."""

from __future__ import annotations

import uuid
from functools import partial
from typing import Any

from ._active_job import record_fields
from ._calls import activate_call, reclaim_call
from ._events import as_text
from ._queue_base import QueueBase
from ._retrying import with_retry
from ._scripts import Code
from ._streamed import run_streamed

CLAIM_SECONDS = 10.0
"""How long a picked job may wait for its activation before another worker may take it."""


async def pick(
    queue: QueueBase, count: int, holder: str, claim: float | None = None
) -> tuple[list[str], list[str], int]:
    """Claims up to ``count`` jobs under ``holder`` for ``claim`` seconds (by default
    :data:`CLAIM_SECONDS`, read at the call): (claimed ids, expired lease ids, ms until the next
    scheduled job or lease expiry, -1 for none)."""
    claim = CLAIM_SECONDS if claim is None else claim
    keys, args = queue.pick_call(count, claim, holder)
    while True:
        claimed, expired, wait_ms, admitting = await queue.scripts.pick(keys=keys, args=args)
        if not admitting:  # else it only admitted part of a long intake: pick again at once
            return [as_text(i) for i in claimed], [as_text(i) for i in expired], int(wait_ms)


async def pick_hinted(
    queue: QueueBase, count: int, holder: str, hint: str, lease: float
) -> tuple[list[tuple[str, dict[str, str]]], list[str], list[str], int]:
    """:func:`pick`, given the id a doorbell ring named (``hint``): when the pick claims that
    job it activates it too, in the same round trip. Returns (the hinted job's (token,
    record) if it was activated, else nothing; the other claimed ids, to :func:`activate`;
    expired lease ids; ms until the next scheduled job or lease expiry)."""
    token = uuid.uuid4().hex
    keys, args = queue.pick_call(count, CLAIM_SECONDS, holder, (hint, token, lease))
    while True:
        reply = await queue.scripts.pick(keys=keys, args=args)
        claimed, expired, wait_ms, admitting = reply[:4]
        if admitting:
            continue
        ids = [as_text(i) for i in claimed]
        held = reply[4] if len(reply) > 4 else []
        started = []
        if held and int(held[0]) == Code.OK:
            started = [(token, record_fields(held[1]))]
            ids.remove(hint)
        return started, ids, [as_text(i) for i in expired], int(wait_ms)


async def activate(
    queue: QueueBase, ids: list[str], lease: float
) -> list[tuple[str, dict[str, str]]]:
    """Activates the claimed ``ids`` in one round trip: (token, record) of each one held; a
    claim that went meanwhile (cancelled, reclaimed) is left out."""
    tokens = {job_id: uuid.uuid4().hex for job_id in ids}
    calls = [activate_call(queue, job_id, tokens[job_id], lease) for job_id in ids]
    replies = await with_retry(
        lambda: run_streamed(queue.redis, queue.scripts.activate, calls), within=CLAIM_SECONDS
    )
    return [
        (tokens[job_id], record_fields(reply[1]))
        for job_id, reply in zip(ids, replies, strict=True)
        if int(reply[0]) == Code.OK
    ]


async def reclaim(queue: QueueBase, ids: list[str]) -> list[tuple[str, str]]:
    """Hands expired leases to ``reclaim.lua``: (id, status after) of each one taken back."""
    done = []
    for job_id in ids:
        reply = await queue.run_keyed(job_id, partial(_reclaim_one, queue, job_id))
        if int(reply[0]) == 1:
            done.append((job_id, as_text(reply[1])))
    return done


async def _reclaim_one(queue: QueueBase, job_id: str, idem: str) -> list[Any]:
    reply: list[Any] = await queue.scripts.reclaim(*reclaim_call(queue, job_id, idem))
    return reply
