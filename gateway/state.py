"""The gateway's process state, in one place: what one gateway process shares between requests.

:class:`Gateway` is made by the app's lifespan (``app.state.gateway``) and reached by routes
through :data:`gateway.deps.GatewayDep`. It holds every long-lived object of the process: the
shared Redis client and one shared tail per provider queue, the caches and counters of the
rooms (access, admission, pull), and the background tasks (history samples, the budget sweep).

Two kinds of state live elsewhere on purpose, because they belong to an event loop rather than
to the app: the per-loop helpers of :mod:`gateway.streaming` (a stream's send watchdog, the
quiet gate for stream endings; ``streaming._per_loop``), and the tasks of
:func:`gateway.openai.connection_bound.cancel_soon`, kept referenced until they finish.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from genq import Queue, Tail, reader_links
from genq.connection import connect, is_cluster_url
from genq_services.access import Access

from .access.audit import Audit
from .access.auth import ApiKeyStore, Authenticator, WatchTokens
from .admission.admit import Admission
from .admission.budgets import BudgetSweep
from .admission.holds import TenantHolds
from .admission.limits import Limiter
from .history import History
from .metrics import Metrics
from .pull.receipts import Receipts
from .pull.waiter import PullWaiter
from .queues import Queues
from .settings import Settings
from .streaming.frames import frame

POOL_WAIT_SECONDS = 5.0


@dataclass
class Gateway:
    """Everything one gateway process shares between requests."""

    settings: Settings
    redis: Redis | RedisCluster
    queues: Queues
    tails: dict[str, Tail]
    auth: Authenticator
    api_key_store: ApiKeyStore
    tokens: WatchTokens
    limiter: Limiter
    admission: Admission
    """Admits a generation in one round trip on a single server (the limits, the budget)."""
    metrics: Metrics
    history: History
    sweep: BudgetSweep
    """Releases budget reservations nobody charged (a worker killed mid-attempt)."""
    audit: Audit
    open_streams: TenantHolds
    """Event streams open per tenant (this process): every streaming route's, through
    :func:`gateway.streaming.sse.stream_hold`."""
    open_waits: TenantHolds
    """Server-side waits open per tenant (this process): ``GET .../result`` and the OpenAI
    routes' non-streamed calls."""
    receipts: Receipts
    """Signs and verifies the pull receipts handed to workers anywhere."""
    pull_waiters: dict[str, PullWaiter]
    """One long-poll doorbell listener per queue; each runs only while a pull waits."""

    @classmethod
    async def open(cls, settings: Settings) -> Gateway:
        redis = open_shared(settings)
        queues = Queues(
            redis,
            settings.routing(),
            lane_options=settings.lane_options(),
            **settings.queue_options(),
        )
        api_key_store = ApiKeyStore(redis, settings.keys.api_keys)
        access = Access(redis, settings.queue_namespace)  # revoked key ids, disabled tenants
        secret = settings.secret.get_secret_value() if settings.secret else ""
        tails = {name: open_tail(settings, redis, queue) for name, queue in queues}
        for tail in tails.values():
            await tail.start()
        history = History(redis, queues, interval=settings.history_interval)
        history.start()
        sweep = BudgetSweep(redis, settings, dict(queues), settings.budget_sweep_interval)
        sweep.start()
        limiter, metrics = Limiter(redis, settings, queues), Metrics()
        return cls(
            settings=settings,
            redis=redis,
            queues=queues,
            tails=tails,
            auth=Authenticator(
                settings.grants(), api_key_store, settings.key_cache_seconds, access
            ),
            api_key_store=api_key_store,
            tokens=WatchTokens(secret, settings.watch_token_ttl, access),
            limiter=limiter,
            admission=Admission(redis, settings, limiter, metrics),
            metrics=metrics,
            history=history,
            sweep=sweep,
            audit=Audit(redis, settings.keys.audit),
            open_streams=TenantHolds("event streams", settings.max_streams_for),
            open_waits=TenantHolds("result waits", settings.max_waits_for),
            receipts=Receipts(secret),
            pull_waiters={name: PullWaiter(queue) for name, queue in queues},
        )

    async def close(self) -> None:
        await self.history.stop()
        await self.sweep.stop()
        for tail in self.tails.values():
            await tail.stop()
        with contextlib.suppress(Exception):
            await self.redis.aclose()
        pool = getattr(self.redis, "connection_pool", None)  # a Redis does not own a pool
        if pool is not None:  # it was given (a RedisCluster closes its nodes itself)
            with contextlib.suppress(Exception):
                await pool.aclose()


def open_shared(settings: Settings) -> Redis | RedisCluster:
    """The client every request shares. On a single node the pool is bounded and blocking: a
    burst of viewers waits for a connection instead of opening more. Each shared tail's
    dedicated reader comes from the core (:func:`genq.reader_links`), given the same URL."""
    options: dict[str, Any] = {
        "max_connections": settings.redis_max_connections,
        "client_name": f"genq-gateway:{settings.queue_namespace}",
    }
    if not is_cluster_url(settings.redis_url):
        options["pool_timeout"] = POOL_WAIT_SECONDS
    return connect(settings.redis_url, **options)


def open_tail(settings: Settings, redis: Redis | RedisCluster, queue: Queue) -> Tail:
    """The queue's shared tail, framing each entry as SSE once for all its viewers."""
    links = reader_links(
        redis,
        settings.redis_url,
        client_name=f"genq-tail:{settings.queue_namespace}",
        block=settings.tail_block,
    )
    return Tail(
        queue,
        links,
        block=settings.tail_block,
        idle_check=settings.tail_idle_check,
        heartbeat=settings.sse_ping,
        pace=settings.tail_pace,
        frame=frame,
    )
