"""What a queue's workers and job handles share with it: client, key names, scripts, options.

:class:`genq.Queue` builds on this class, and :class:`genq.Worker` and :class:`genq.ActiveJob`
depend only on it, so ``queue`` -> ``worker`` -> ``active_job`` -> this module is a one-way
chain (``Queue.worker()`` makes workers; workers never need the producer side).
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Self

from ._cluster import Call, is_cluster, server_time, socket_timeout
from ._codecs import Codec, json_codec
from ._events import as_text
from ._job import Job
from ._keys import Keys, check_prefix, check_tenant
from ._scripts import Code, Scripts
from .connection import RedisClient, RedisPipeline


def ms(seconds: float) -> int:
    """Seconds -> whole milliseconds (rounded up, never negative), as the scripts take them."""
    return max(0, math.ceil(seconds * 1000))


MAX_WEIGHT = 1000


def check_weights(weights: Mapping[str, int]) -> dict[str, int]:
    """Tenant weights: each a whole number from 1 to 1000 (a tenant not named weighs 1)."""
    checked = {}
    for tenant, weight in weights.items():
        check_tenant(tenant)
        if not isinstance(weight, int) or not 1 <= weight <= MAX_WEIGHT:
            raise ValueError(f"weight of tenant {tenant!r} must be an integer from 1 to 1000")
        checked[tenant] = weight
    return checked


def safe_block(redis: RedisClient, wanted: float) -> float:
    """A blocking command's wait, kept under the client's socket timeout.

    redis-py 8.1 applies its socket timeout (5 s by default) to XREAD BLOCK and BLPOP too, so a
    block as long as the timeout ends in a TimeoutError instead of an empty reply.
    """
    timeout = socket_timeout(redis)
    return wanted if not timeout else min(wanted, timeout / 2)


MAX_DURABLE_REPLICAS = 10


def check_durability(redis: RedisClient, replicas: int, timeout: float) -> tuple[int, float]:
    """Durable acceptance's options: 0-10 replicas (0: off), a wait in seconds > 0.

    The wait must end before the client's socket timeout, or redis-py would give up on the
    ``WAIT`` reply first and report a dropped connection instead of the replicas' count.
    """
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise ValueError("durable_replicas must be an integer from 0 to 10 (0: off)")
    if not 0 <= replicas <= MAX_DURABLE_REPLICAS:
        raise ValueError("durable_replicas must be an integer from 0 to 10 (0: off)")
    if not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError("durable_timeout must be a finite number of seconds > 0")
    limit = socket_timeout(redis)
    if replicas and limit and timeout >= limit:
        raise ValueError(
            f"durable_timeout ({timeout:g} s) must be under the Redis client's socket timeout "
            f"({limit:g} s), or the client gives up on WAIT before it answers"
        )
    return replicas, float(timeout)


class QueueBase:
    """A queue's client, key names, scripts, codecs and timings (see :class:`genq.Queue`)."""

    def __init__(
        self,
        redis: RedisClient,
        prefix: str = "queue",
        *,
        codec: Codec[Any] = json_codec,
        result_codec: Codec[Any] = json_codec,
        lease: float = 60.0,
        max_attempts: int = 3,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        result_ttl: float = 3600.0,
        dead_ttl: float = 14 * 86400.0,
        events_max_len: int = 10_000,
        watch_block: float = 2.0,
        tenant_weights: Mapping[str, int] | None = None,
        tenant_concurrency: int = 0,
        durable_replicas: int = 0,
        durable_timeout: float = 1.0,
    ) -> None:
        if lease <= 0 or max_attempts < 1 or backoff < 0 or max_backoff < backoff:
            raise ValueError("lease > 0, max_attempts >= 1, 0 <= backoff <= max_backoff")
        if result_ttl < 0 or dead_ttl < 0 or events_max_len < 1:
            raise ValueError("result_ttl, dead_ttl >= 0 (0: forever) and events_max_len >= 1")
        self.redis = redis
        self.prefix = check_prefix(prefix)
        self.keys = Keys(prefix)
        self.codec = codec
        self.result_codec = result_codec
        self.lease = lease
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.result_ttl = result_ttl
        self.dead_ttl = dead_ttl
        self.events_max_len = events_max_len
        self.watch_block = safe_block(redis, watch_block)
        self.scripts = Scripts(redis)
        self.tenant_weights = check_weights(tenant_weights or {})
        if not isinstance(tenant_concurrency, int) or tenant_concurrency < 0:
            raise ValueError("tenant_concurrency must be an integer >= 0 (0: no cap)")
        self.tenant_concurrency = tenant_concurrency
        self.weights_arg = json.dumps(self.tenant_weights, separators=(",", ":"))
        self.durable_replicas, self.durable_timeout = check_durability(
            redis, durable_replicas, durable_timeout
        )
        self.offers_seen = True
        """Whether this queue's last enqueue of one job saw an idle worker's offer listed: the
        next one sends the hand-off keys only then (``genq._enqueue.one_call``)."""
        self.options: dict[str, Any] = {
            "codec": codec, "result_codec": result_codec, "lease": lease,
            "max_attempts": max_attempts, "backoff": backoff, "max_backoff": max_backoff,
            "result_ttl": result_ttl, "dead_ttl": dead_ttl, "events_max_len": events_max_len,
            "watch_block": watch_block, "tenant_weights": self.tenant_weights,
            "tenant_concurrency": tenant_concurrency, "durable_replicas": durable_replicas,
            "durable_timeout": durable_timeout,
        }  # fmt: skip
        """The keyword options this queue was made with (:meth:`sibling` reuses them)."""

    def sibling(self, prefix: str) -> Self:
        """A queue on the same Redis under ``prefix``, with this queue's options."""
        return type(self)(self.redis, prefix, **self.options)

    async def server_time(self) -> float:
        """The clock of the server holding this queue (the one its scripts use), in seconds."""
        seconds, micros = await server_time(self.redis, self.keys.ready)
        return seconds + micros / 1e6

    async def get(self, job_id: str) -> Job | None:
        """The job's record, or None when the id is unknown or its record expired."""
        (raw,), now = await self.read_with_time(lambda pipe: pipe.hgetall(self.keys.job(job_id)))
        if not raw:
            return None
        return Job.from_hash(raw, self.codec, self.result_codec, now)

    async def read_with_time(
        self, fill: Callable[[RedisPipeline], object]
    ) -> tuple[list[Any], float]:
        """The replies of the reads ``fill`` queues on a pipeline, and the server's time.

        For reads of this queue's keys (or ``keys.extra`` ones) that need "now" on the
        server's clock. A cluster pipeline refuses TIME (it has no key to route by), so there
        the time is read from the queue's node right after the pipeline.
        """
        cluster = is_cluster(self.redis)
        async with self.redis.pipeline(transaction=False) as pipe:
            fill(pipe)
            if not cluster:
                pipe.time()
            replies: list[Any] = await pipe.execute()
        if cluster:
            return replies, await self.server_time()
        seconds, micros = replies.pop()
        return replies, int(seconds) + int(micros) / 1e6

    async def admit(self) -> int:
        """Admits the jobs enqueued since the last pick into the ready set, their tenants' lines
        and the job index, as the next pick would (``admit.lua``, called until the intake is
        empty: each call takes at most 1,000), and returns how many. Job listings and counts
        call it first, so they show every waiting job while no worker picks."""
        k = self.keys
        keys = [k.intake, k.ready, *k.books]
        total = 0
        while True:
            admitted, left = await self.scripts.admit(keys=keys)
            total += int(admitted)
            if not left:
                return total

    def pick_call(
        self,
        count: int,
        claim: float,
        holder: str = "",
        hint: tuple[str, str, float] | None = None,
        offer: str = "",
        adopted: str = "",
    ) -> Call:
        """``pick.lua``'s keys and arguments: claim up to ``count`` jobs for ``claim`` seconds,
        filed under ``holder`` (a worker's presence id; '' for none). ``hint``: (the id a
        doorbell ring named, a lease token, the lease in seconds): activate that job under the
        token if this pick claims it. ``offer``: the worker's offer to withdraw (``Keys.idle``);
        ``adopted``: ``<offerer>\0<id>`` of a job it took under another worker's offer."""
        k = self.keys
        keys = [
            k.ready, k.scheduled, k.leases, k.rank, k.cooldown, k.dead, k.intake, *k.books,
            k.idle, k.handoffs,
        ]  # fmt: skip
        args = [
            count, ms(claim), ms(self.dead_ttl), self.tenant_concurrency, self.weights_arg,
            holder, offer, adopted,
        ]  # fmt: skip
        if hint is not None:
            job_id, token, lease = hint
            keys += [k.job(job_id), k.events(job_id)]
            args += [job_id, token, ms(lease), self.events_max_len]
        return keys, args

    async def cancel_requested(self, job_id: str) -> bool:
        """Whether a cancel of the job was requested while it ran (a Stop): its record's flag,
        read now."""
        flag = await self.redis.hget(self.keys.job(job_id), "cancel_requested")
        return flag is not None and as_text(flag) == "1"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prefix={self.prefix!r})"

    async def run_keyed(
        self, job_id: str, call: Callable[[str], Awaitable[list[Any]]]
    ) -> list[Any]:
        """Runs a script that releases or binds the job's idempotency key.

        A script cannot build that key's name itself (every key must be passed in), so the
        caller reads the job's key first; the script checks it is still the job's and answers
        ``STALE_READ`` if it changed in between (a custom id re-enqueued), and then it is read
        again.
        """
        for _ in range(10):
            raw = await self.redis.hget(self.keys.job(job_id), "idempotency_key")
            reply = await call(as_text(raw) if raw else "")
            if reply[0] != Code.STALE_READ:
                return reply
        raise RuntimeError(f"job {job_id!r} kept changing under a state change")
