"""Pull/ack: jobs held by any process that asks for them, instead of a :class:`genq.Worker`.

A pulled job is held exactly as a worker's job is: ``pick.lua`` then ``activate.lua`` give it a
lease token, and ``emit.lua``, ``heartbeat.lua`` and ``settle.lua`` fence every later call by
that token. What differs is liveness: a puller has no presence, so its job's lease is its
*visibility*. Once the visibility passes, the receipt is dead for good (emit and heartbeat
refuse an expired lease, and an ack first hands an expired lease to ``reclaim.lua``), and the
job goes back in line; the next attempt's activation writes ``restarted``, as after a worker
death. Expired leases are reclaimed by the next pull (or a worker's next reserve).

The receipt is ``<lease token>.<visibility in ms>``: the token fences, the visibility is what
events renew the lease to. It is opaque to callers; a malformed one is simply stale.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ._calls import settle_call
from ._errors import JobLeaseLostError
from ._events import as_text, check_event_type
from ._queue_base import QueueBase, ms
from ._reserve import activate, pick, reclaim
from ._retrying import with_retry
from ._scripts import Code
from ._status import CHUNK, PROGRESS
from ._streamed import run_streamed
from ._worker import MAX_ERROR_CHARS

MAX_PULL = 500
"""The most jobs one pull may take."""
COALESCE_MAX_CHARS = 2048
"""Adjacent text chunks of one push are joined up to this many characters, as the worker's
emit batcher joins a job's deltas (``workers.coalesce``)."""


@dataclass(frozen=True)
class PulledJob:
    """A job handed to a puller: settle it with ``receipt`` before its visibility passes."""

    id: str
    receipt: str
    attempt: int
    max_attempts: int
    payload: Any
    tenant: str = ""


@dataclass(frozen=True)
class Pulled:
    """One pull's jobs, and when the queue next changes by itself (a scheduled job comes due
    or a lease expires), in seconds (None: nothing pending). A long poll waits no longer."""

    jobs: list[PulledJob]
    next_change: float | None


def receipt_of(token: str, visibility: float) -> str:
    return f"{token}.{ms(visibility)}"


def parse_receipt(job_id: str, receipt: str) -> tuple[str, int]:
    """(token, visibility ms); a receipt that does not parse is stale like any other."""
    token, _, visibility = receipt.partition(".")
    if not token or not visibility.isdigit():
        raise JobLeaseLostError(job_id)
    return token, int(visibility)


def check_visibility(visibility: float) -> float:
    if not isinstance(visibility, int | float) or not 0 < visibility <= 86_400:
        raise ValueError("visibility must be more than 0 and at most 86400 seconds")
    return float(visibility)


async def pull(queue: QueueBase, count: int, visibility: float) -> Pulled:
    """Takes up to ``count`` runnable jobs for ``visibility`` seconds (fair share applies)."""
    if not isinstance(count, int) or not 1 <= count <= MAX_PULL:
        raise ValueError(f"max must be an integer from 1 to {MAX_PULL}")
    visibility = check_visibility(visibility)
    claimed, wait_ms = await _pick(queue, count)
    if len(claimed) < count and wait_ms == 0:
        more, wait_ms = await _pick(queue, count - len(claimed))  # what the reclaim put back
        claimed += more
    jobs = await _activate(queue, claimed, visibility) if claimed else []
    return Pulled(jobs, None if wait_ms < 0 else wait_ms / 1000)


async def _pick(queue: QueueBase, count: int) -> tuple[list[str], int]:
    claimed, expired, wait_ms = await pick(queue, count, "")  # a puller has no presence
    reclaimed = await reclaim(queue, expired)
    return claimed, 0 if reclaimed else wait_ms


async def _activate(queue: QueueBase, ids: list[str], visibility: float) -> list[PulledJob]:
    return [
        PulledJob(
            id=fields["id"],
            receipt=receipt_of(token, visibility),
            attempt=int(fields["attempt"]),
            max_attempts=int(fields["max_attempts"]),
            payload=queue.codec.decode(fields["payload"]),
            tenant=fields.get("tenant", ""),
        )
        for token, fields in await activate(queue, ids, visibility)
    ]


# -- while holding ---------------------------------------------------------------------------------


async def extend(queue: QueueBase, job_id: str, receipt: str, visibility: float) -> bool:
    """Sets the job's visibility to ``visibility`` seconds from now; True if a cancel is
    pending (the puller should stop and ack or nack)."""
    token, _ = parse_receipt(job_id, receipt)
    k = queue.keys
    args: list[Any] = [job_id, token, ms(check_visibility(visibility))]
    reply = await with_retry(
        lambda: queue.scripts.heartbeat(keys=[k.job(job_id), k.leases], args=args), within=2.0
    )
    return _cancel_pending(job_id, int(reply[0]))


def coalesce(
    events: Sequence[tuple[str, Any]], types: Collection[str] = ()
) -> list[tuple[str, Any, int]]:
    """Joins adjacent text chunks (up to ``COALESCE_MAX_CHARS``); other events stay as they are.
    Each merged event carries the position (from 0) of the last event it holds. Raises
    ValueError on a type that is neither ``chunk``, ``progress`` nor one of ``types`` (each a
    type a handler may emit: :class:`genq.EventTypeError` otherwise), or a progress outside
    0..1."""
    allowed = {CHUNK, PROGRESS, *(check_event_type(kind) for kind in types)}
    merged: list[tuple[str, Any, int]] = []
    for position, (kind, data) in enumerate(events):
        if kind not in allowed:
            raise ValueError(
                f"event type must be one of {', '.join(sorted(allowed))}, not {kind!r}"
            )
        if kind == PROGRESS and (
            isinstance(data, bool) or not isinstance(data, int | float) or not 0 <= data <= 1
        ):
            raise ValueError("progress data must be a number from 0 to 1")
        last = merged[-1] if merged else None
        if (
            kind == CHUNK
            and last is not None
            and last[0] == CHUNK
            and isinstance(data, str)
            and isinstance(last[1], str)
            and len(last[1]) + len(data) <= COALESCE_MAX_CHARS
        ):
            merged[-1] = (CHUNK, last[1] + data, position)
        else:
            merged.append((kind, data, position))
    return merged


async def push_events(
    queue: QueueBase,
    job_id: str,
    receipt: str,
    events: Sequence[tuple[str, Any]],
    seq: int | None = None,
    types: Collection[str] = (),
) -> bool:
    """Appends ``(type, data)`` events (``chunk``: any JSON, text for a generation;
    ``progress``: 0..1; the caller's own ``types``, each a type a handler may emit, as with
    :meth:`genq.ActiveJob.emit`) to the job's stream through ``emit.lua``, in order, each
    renewing the visibility to at least the pull's. True if a cancel is pending (nothing more
    is appended then).

    ``seq`` makes a resend safe: the number of the first event among all the events this
    attempt has sent (from 1), so a call sent again after a lost reply appends nothing twice
    (emit.lua skips numbers it has applied). Without it, the events are numbered after the last
    one applied: a resend appends them again, and overlapping calls may interleave."""
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 1):
        raise ValueError("seq must be an integer >= 1")
    token, visibility_ms = parse_receipt(job_id, receipt)
    pending = coalesce(events, types)
    k = queue.keys
    for _ in range(10):
        if not pending:
            return False
        (applied, lease_until), now = await queue.read_with_time(
            lambda pipe: (pipe.hget(k.job(job_id), "eseq"), pipe.zscore(k.leases, job_id))
        )
        # Never shorten a visibility an extend made longer than the pull's.
        renew = max(visibility_ms, int(float(lease_until or 0) - now * 1000))
        # A merged event takes the number of the last event it holds, so numbers stay the
        # client's whatever was joined.
        start = int(applied or 0) + 1 - pending[0][2] if seq is None else seq
        calls = [
            _emit_call(queue, job_id, token, start + last, kind, data, renew)
            for kind, data, last in pending
        ]
        replies = await run_streamed(queue.redis, queue.scripts.emit, calls)
        for i, reply in enumerate(replies):
            code = int(reply[0])
            if _cancel_pending(job_id, code):
                return True
            if as_text(reply[1]) == "" and seq is None:  # another push took this number: again
                pending = pending[i:]
                break
        else:
            return False
    raise RuntimeError(f"job {job_id!r}: events kept colliding with another push")


def _emit_call(
    queue: QueueBase, job_id: str, token: str, seq: int, kind: str, data: Any, lease_ms: int
) -> tuple[list[str], list[Any]]:
    """``emit.lua``'s keys and arguments (the same ones :class:`genq.ActiveJob` sends)."""
    k = queue.keys
    progress = repr(float(data)) if kind == PROGRESS else ""
    payload = json.dumps(data, ensure_ascii=False)
    args = [job_id, token, seq, kind, payload, lease_ms, queue.events_max_len, progress]
    return [k.job(job_id), k.events(job_id), k.leases], args


def _cancel_pending(job_id: str, code: int) -> bool:
    if code == Code.LEASE_LOST:
        raise JobLeaseLostError(job_id)
    return code == Code.CANCEL_REQUESTED


# -- settling --------------------------------------------------------------------------------------


async def ack(queue: QueueBase, job_id: str, receipt: str, result: Any) -> str:
    """Completes the job with ``result``; returns its status after (``completed``, or
    ``cancelled`` when a cancel was pending). Sending it again answers the same."""
    data = queue.result_codec.encode(result)
    return await _settle(queue, job_id, receipt, "complete", data)


async def nack(
    queue: QueueBase,
    job_id: str,
    receipt: str,
    error: str,
    retry_after: float | None = None,
    terminal: bool = False,
) -> str:
    """Fails this attempt with ``error``: ``terminal`` dead-letters the job now; otherwise it
    is retried after ``retry_after`` seconds (default: the queue's backoff), or dead-lettered
    when it has no attempts left. Returns the job's status after."""
    if retry_after is not None and not 0 <= retry_after <= 86_400:
        raise ValueError("retry_after must be from 0 to 86400 seconds")
    message = error[:MAX_ERROR_CHARS]
    if terminal:
        return await _settle(queue, job_id, receipt, "fail", message, reason="terminal")
    return await _settle(queue, job_id, receipt, "retry", message, retry_after=retry_after)


async def _settle(
    queue: QueueBase,
    job_id: str,
    receipt: str,
    outcome: str,
    data: str,
    retry_after: float | None = None,
    reason: str = "error",
) -> str:
    token, _ = parse_receipt(job_id, receipt)
    # settle.lua refuses a lease past its visibility; handing it to reclaim.lua now puts the
    # job back in line at once instead of at the next pull or reserve.
    await reclaim_if_expired(queue, job_id)
    idem, attempt = await queue.redis.hmget(queue.keys.job(job_id), ["idempotency_key", "attempt"])
    delay = retry_after
    if delay is None:
        tries = max(1, int(attempt or 1))
        delay = random.uniform(0, min(queue.max_backoff, queue.backoff * 2 ** (tries - 1)))
    call = settle_call(
        queue, job_id, token, as_text(idem) if idem else "", outcome, data, delay, reason
    )
    reply = await with_retry(lambda: queue.scripts.settle(*call), within=queue.lease)
    if int(reply[0]) == Code.LEASE_LOST:
        raise JobLeaseLostError(job_id)
    return as_text(reply[1])


async def reclaim_if_expired(queue: QueueBase, job_id: str) -> None:
    (lease_until,), now = await queue.read_with_time(
        lambda pipe: pipe.zscore(queue.keys.leases, job_id)
    )
    if lease_until is not None and float(lease_until) <= now * 1000:
        await reclaim(queue, [job_id])
