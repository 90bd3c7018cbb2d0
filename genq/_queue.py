"""The queue: producers, watchers and operators talk to this.

:class:`Queue` is assembled from one class per area, each in a module of its own
(``_queue_<area>.py``), over :class:`genq._queue_base.QueueBase` (what workers and job handles
share with it); making workers is the one thing it adds itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ._active_job import ActiveJob
from ._queue_actions import JobActions
from ._queue_dead_letters import DeadLetters
from ._queue_events import JobEvents
from ._queue_extras import Extras
from ._queue_lost import LostAttempts
from ._queue_pacing import Pacing
from ._queue_producing import Producing
from ._queue_pulling import Pulling
from ._queue_records import Records
from ._queue_stats import Stats
from ._queue_usage import UsageReads
from ._queue_watching import Watching
from ._worker import PRESENCE_SECONDS, Worker

__all__ = ["Queue"]


class Queue(
    Producing,
    Watching,
    Records,
    JobEvents,
    Stats,
    UsageReads,
    Extras,
    Pacing,
    JobActions,
    DeadLetters,
    Pulling,
    LostAttempts,
):
    """A durable job queue with a per-job output stream, on one Redis (Cluster slot).

    ``Queue(redis, prefix="queue", *, codec, result_codec, lease, max_attempts, backoff,
    max_backoff, result_ttl, dead_ttl, events_max_len, watch_block, tenant_weights,
    tenant_concurrency, durable_replicas, durable_timeout)``. All durations are seconds.
    ``redis`` is a ``redis.asyncio.Redis`` or ``RedisCluster``.

    Fair share: waiting jobs are served round-robin across tenants, ``tenant_weights`` (tenant
    -> 1..1000, default 1) turns each served job of a tenant into 1/weight of a turn, and
    ``tenant_concurrency`` (0: none) caps the jobs one tenant holds at once; jobs beyond it wait
    for its running ones. Both are read by this queue's workers when they reserve, so every
    worker of a queue should be given the same ones.

    Durable acceptance: with ``durable_replicas=N`` (0-10; 0, the default, is off and sends
    nothing more), ``enqueue``, ``enqueue_many`` and workers' settles wait, on the connection
    that wrote, until N replicas hold the write (Redis ``WAIT``), for up to
    ``durable_timeout`` seconds (1.0; under the client's socket timeout). An enqueue that is
    not confirmed in time raises :class:`ReplicationTimeoutError`; a settle logs a warning.
    It costs a replication round trip per call and makes nothing lost on a failover that
    promotes a replica which confirmed.
    """

    def worker(
        self,
        handler: Callable[[ActiveJob], Awaitable[Any]],
        concurrency: int = 8,
        lease: float | None = None,
        heartbeat: float | None = None,
        poll: float | None = None,
        is_retryable: Callable[[BaseException], bool] | None = None,
        on_error: Callable[[ActiveJob, BaseException], Any] | None = None,
        presence: float = PRESENCE_SECONDS,
        read_ahead: int | None = None,
    ) -> Worker:
        """A worker running ``handler``; use ``async with`` (leaving = graceful stop).

        ``presence`` (seconds): how long the worker may give no sign of life (killed, cut off,
        paused) before the other workers of the queue take its jobs back, whatever the lease.
        ``read_ahead``: how many jobs beyond its running ones the worker may hold started
        while a backlog of short jobs waits (default: twice its concurrency; 0: never;
        docs/WORKERS.md, "Reading ahead")."""
        return Worker(
            self,
            handler,
            concurrency=concurrency,
            lease=lease,
            heartbeat=heartbeat,
            poll=poll,
            is_retryable=is_retryable,
            on_error=on_error,
            presence=presence,
            read_ahead=read_ahead,
        )
