"""The keys and arguments of each state-changing script, in the order its header lists them.

One builder per script, shared by the queue, the worker and the tests that drive the scripts
one step at a time, so a script's signature is written down once in Python. Every one of them
that moves a job ends its keys with ``Keys.books`` (fair share and job index), which the
script reads with ``books_at`` (``genq/lua/_lib.lua``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ._cluster import Call
from ._queue_base import QueueBase, ms
from ._usage import USAGE_DAYS_KEPT

USAGE_KEPT_MS = ms(USAGE_DAYS_KEPT * 86400)
"""How long a day's usage counters are kept after their last write (ms)."""


def usage_keys(queue: QueueBase) -> tuple[list[str], list[Any]]:
    """Where a metered attempt is counted, today (UTC): the keys and arguments ``meter``
    (genq/lua/_lib.lua) reads."""
    k = queue.keys
    day = datetime.now(UTC).date().isoformat()
    keys = [k.usage_day(day), k.usage_total, k.usage_journal(day), k.usage_journals]
    return keys, [USAGE_KEPT_MS, day]


def fold_usage_call(queue: QueueBase, days: list[str]) -> Call:
    """Adds the journals of ``days`` to the usage counters (fold_usage.lua)."""
    k = queue.keys
    keys = [k.usage_journals, k.usage_total]
    for day in days:
        keys += [k.usage_journal(day), k.usage_day(day)]
    return keys, [USAGE_KEPT_MS, *days]


def activate_call(queue: QueueBase, job_id: str, token: str, lease: float) -> Call:
    k = queue.keys
    keys = [k.job(job_id), k.events(job_id), k.leases, *k.books]
    return keys, [job_id, token, ms(lease), queue.events_max_len]


def settle_call(
    queue: QueueBase,
    job_id: str,
    token: str,
    idempotency_key: str,
    outcome: str,
    data: Any = "",
    delay: float = 0.0,
    reason: str = "error",
    metered: str = "",
) -> Call:
    """``outcome``: complete | retry | fail | cancel | release (see settle.lua); ``metered``:
    the attempt's usage (:meth:`genq.ActiveJob.meter`), counted under today's UTC date."""
    k = queue.keys
    keys = [
        k.job(job_id), k.events(job_id), k.leases, k.scheduled, k.ready, k.dead, k.rank,
        k.idempotency(idempotency_key), k.signal, *k.books,
    ]  # fmt: skip
    args = [
        job_id, token, outcome, data, ms(delay), reason, ms(queue.result_ttl),
        ms(queue.dead_ttl), queue.events_max_len, k.dead_letters, metered,
    ]  # fmt: skip
    if metered:  # a settle with nothing to count passes no usage key
        usage, usage_args = usage_keys(queue)
        keys += usage
        args += usage_args
    return keys, args


def reclaim_call(queue: QueueBase, job_id: str, idempotency_key: str) -> Call:
    k = queue.keys
    keys = [
        k.job(job_id), k.events(job_id), k.leases, k.ready, k.dead,
        k.idempotency(idempotency_key), k.signal, k.lost, *k.books,
    ]  # fmt: skip
    args = [
        job_id, ms(queue.result_ttl), ms(queue.dead_ttl), queue.events_max_len, idempotency_key,
        k.dead_letters,
    ]  # fmt: skip
    return keys, args


def meter_lost_call(queue: QueueBase, job_id: str, attempt: int, metered: str) -> Call:
    """``metered``: the lost attempt's estimated usage (:func:`genq._usage.encode_meter`),
    counted under today's UTC date."""
    k = queue.keys
    usage, usage_args = usage_keys(queue)
    return [k.job(job_id), k.lost, *usage], [job_id, attempt, metered, *usage_args]


def cancel_call(queue: QueueBase, job_id: str, idempotency_key: str) -> Call:
    k = queue.keys
    keys = [
        k.job(job_id), k.events(job_id), k.ready, k.scheduled, k.leases, k.rank,
        k.idempotency(idempotency_key), k.intake, *k.books,
    ]  # fmt: skip
    args = [job_id, ms(queue.result_ttl), queue.events_max_len, k.cancels, idempotency_key]
    return keys, args


def retry_call(queue: QueueBase, job_id: str, idempotency_key: str, cancelled_too: bool) -> Call:
    k = queue.keys
    keys = [
        k.job(job_id), k.events(job_id), k.dead, k.ready, k.idempotency(idempotency_key),
        k.signal, *k.books,
    ]  # fmt: skip
    return keys, [job_id, queue.events_max_len, idempotency_key, int(cancelled_too)]


def delete_call(queue: QueueBase, job_id: str, idempotency_key: str) -> Call:
    k = queue.keys
    keys = [k.job(job_id), k.events(job_id), k.dead, k.idempotency(idempotency_key), *k.books]
    return keys, [job_id, idempotency_key]


def purge_dead_call(queue: QueueBase, job_id: str) -> Call:
    k = queue.keys
    return [k.job(job_id), k.events(job_id), k.dead, *k.books], [job_id]


def presence_call(queue: QueueBase, holder: str, ttl: float) -> Call:
    """Renews ``holder``'s presence for ``ttl`` seconds (0 withdraws it) and expires the leases
    of holders whose presence lapsed (see presence.lua)."""
    k = queue.keys
    return [k.presence, k.leases, k.holders, k.holds, k.idle, k.handoffs], [holder, ms(ttl)]
