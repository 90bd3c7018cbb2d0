"""A reserve, as the built-in worker and a puller both make it: ``pick.lua`` claims runnable
jobs (and reports expired leases), ``activate.lua`` turns each claim into a lease held by a new
token, and ``reclaim.lua`` takes back what expired. One definition for :class:`genq.Worker` and
:mod:`genq._pull`, which differ only in who holds the lease (a presence id, or none)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any

from ._active_job import record_fields
from ._calls import activate_call, reclaim_call
from ._events import as_text
from ._queue_base import QueueBase, ms
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
        claimed, expired, wait_ms, admitting = (await queue.scripts.pick(keys=keys, args=args))[:4]
        if not admitting:  # else it only admitted part of a long intake: pick again at once
            return [as_text(i) for i in claimed], [as_text(i) for i in expired], int(wait_ms)


def make_offer(queue: QueueBase, holder: str, lease: float) -> str:
    """A new offer of one free slot of the worker ``holder`` (``Keys.idle``): a job handed off
    under it is held by the offer's own lease token for ``lease`` seconds."""
    return f"{holder}\0{uuid.uuid4().hex}\0{ms(lease)}\0{queue.tenant_concurrency}"


@dataclass(frozen=True)
class HandOff:
    """A job an enqueue started under an idle worker's offer (``Keys.handoffs``)."""

    holder: str
    """The worker whose offer it was: its lease is filed under that worker."""
    token: str
    fields: dict[str, str]

    @classmethod
    def parse(cls, raw: bytes | str) -> HandOff:
        holder, token, _, record = as_text(raw).split("\0", 3)
        return cls(holder, token, record_fields(json.loads(record)))

    def offered_by(self, offer: str | None) -> bool:
        return offer is not None and offer.startswith(f"{self.holder}\0{self.token}\0")


async def pick_hinted(
    queue: QueueBase,
    count: int,
    holder: str,
    hint: str | None,
    lease: float,
    offer: str = "",
    adopted: str = "",
) -> tuple[list[tuple[str, dict[str, str]]], list[str], list[str], int]:
    """:func:`pick` for a worker. Given the id a doorbell ring named (``hint``), when the pick
    claims that job it activates it too, in the same round trip; given the worker's ``offer``,
    it withdraws it, and takes the job handed off under it when the offer was taken (and no
    other worker took that job first); ``adopted``: ``<offerer>\0<id>`` of a job this worker
    took under another's offer, whose lease is filed under this worker from now on. Returns
    ((token, record) of each job started for this worker: the hinted one, the one handed off;
    the other claimed ids, to :func:`activate`; expired lease ids; ms until the next scheduled
    job or lease expiry)."""
    token = uuid.uuid4().hex
    hinted = None if hint is None else (hint, token, lease)
    keys, sent = queue.pick_call(count, CLAIM_SECONDS, holder, hinted, offer, adopted)
    args = list(sent)
    started = []
    while True:
        claimed, expired, wait_ms, admitting, held, owed = await queue.scripts.pick(
            keys=keys, args=args
        )
        if owed:
            handed = HandOff.parse(owed)
            started.append((handed.token, handed.fields))
        args[6] = args[7] = ""  # done: a pick again at once must not repeat them
        if not admitting:
            break
    ids = [as_text(i) for i in claimed]
    if hint is not None and held and int(held[0]) == Code.OK:
        started.append((token, record_fields(held[1])))
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
