"""What routes depend on: the gateway's shared state, the caller's identity, owned jobs.

Identity comes from ``Authorization: Bearer <api key>``; on the events and cancel routes a
watch token (``?token=``) works too, since EventSource cannot send headers. A job that belongs
to another tenant is reported exactly like one that does not exist.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.security import APIKeyQuery, HTTPAuthorizationCredentials, HTTPBearer
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from genq import Job, Queue, Tail, reader_links
from genq_contract.access import Access
from genq_contract.payload import payload_fields

from .audit import Audit
from .auth import Authenticator, KeyStore, Principal, WatchTokens
from .budgets import BudgetSweep
from .errors import Forbidden, NotFound, Unauthorized
from .frames import frame
from .history import History
from .limits import Limiter
from .metrics import Metrics
from .queues import Queues
from .readers import open_shared
from .settings import Settings
from .slots import TenantSlots


@dataclass
class Gateway:
    """Everything one gateway process shares between requests."""

    settings: Settings
    redis: Redis | RedisCluster
    queues: Queues
    tails: dict[str, Tail]
    auth: Authenticator
    keystore: KeyStore
    tokens: WatchTokens
    limiter: Limiter
    metrics: Metrics
    history: History
    sweep: BudgetSweep
    """Releases budget reservations nobody charged (a worker killed mid-attempt)."""
    audit: Audit
    streams: TenantSlots
    """Event streams open per tenant (this process): every streaming route's, through
    :func:`gateway.sse.stream_slot`."""
    waits: TenantSlots
    """Server-side waits open per tenant (this process): ``GET .../result`` and the OpenAI
    routes' non-streamed calls."""

    @classmethod
    async def open(cls, settings: Settings) -> Gateway:
        redis = open_shared(settings)
        queues = Queues(redis, settings.routing(), **settings.queue_options())
        keystore = KeyStore(redis, settings.keys.api_keys)
        access = Access(redis, settings.queue_namespace)  # revoked key ids, disabled tenants
        secret = settings.secret.get_secret_value() if settings.secret else ""
        tails = {name: open_tail(settings, redis, queue) for name, queue in queues}
        for tail in tails.values():
            await tail.start()
        history = History(redis, queues, interval=settings.history_interval)
        history.start()
        sweep = BudgetSweep(redis, settings, dict(queues), settings.budget_sweep_interval)
        sweep.start()
        return cls(
            settings=settings,
            redis=redis,
            queues=queues,
            tails=tails,
            auth=Authenticator(settings.grants(), keystore, settings.key_cache_seconds, access),
            keystore=keystore,
            tokens=WatchTokens(secret, settings.watch_token_ttl, access),
            limiter=Limiter(redis, settings, queues),
            metrics=Metrics(),
            history=history,
            sweep=sweep,
            audit=Audit(redis, settings.keys.audit),
            streams=TenantSlots("event streams", settings.max_streams_for),
            waits=TenantSlots("result waits", settings.max_waits_for),
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


def get_gateway(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


GatewayDep = Annotated[Gateway, Depends(get_gateway)]

_bearer = HTTPBearer(auto_error=False, description="An API key")
_watch_token = APIKeyQuery(
    name="token",
    auto_error=False,
    description="A watch_token from POST /v1/generations (for EventSource, which cannot send "
    "headers); bound to one generation and short-lived",
)
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
JobId = Annotated[str, Path(min_length=1, max_length=200, description="A generation id")]


async def any_principal(gateway: GatewayDep, credentials: BearerDep) -> Principal:
    """The caller, worker keys included: only the pull routes (``queue_puller``) take it."""
    if credentials is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    return await gateway.auth.principal(credentials.credentials)


def refuse_worker(principal: Principal) -> Principal:
    """Worker keys pull and settle jobs of their queues (``/v1/queues/{name}/pull`` and the
    job routes under it) and nothing else: no generations, no OpenAI routes, no operations."""
    if principal.worker:
        raise Forbidden("a worker key may only pull and settle jobs of its queues")
    return principal


async def current_principal(gateway: GatewayDep, credentials: BearerDep) -> Principal:
    return refuse_worker(await any_principal(gateway, credentials))


async def queue_puller(
    name: Annotated[str, Path(min_length=1, max_length=100, description="A queue name")],
    principal: Annotated[Principal, Depends(any_principal)],
) -> Principal:
    """A caller that may pull from queue ``name``: an admin key, or a worker key naming it."""
    if principal.admin or (principal.queues is not None and name in principal.queues):
        return principal
    if principal.worker:
        raise Forbidden(f"this worker key may not pull from queue {name!r}")
    raise Forbidden("pulling jobs takes a worker key for this queue (or an admin key)")


async def admin_principal(
    principal: Annotated[Principal, Depends(current_principal)],
) -> Principal:
    if not principal.admin:
        raise Forbidden("this API key lacks the admin role")
    return principal


async def job_tenant(
    gateway: GatewayDep,
    credentials: BearerDep,
    job_id: JobId,
    token: Annotated[str | None, Depends(_watch_token)] = None,
) -> str:
    """The caller's tenant on a route that also takes a watch token for the job in the path."""
    if credentials is not None:
        return refuse_worker(await gateway.auth.principal(credentials.credentials)).tenant
    if token:
        return await gateway.tokens.verify_allowed(token, job_id)
    raise Unauthorized("missing credentials: send 'Authorization: Bearer <key>' or ?token=")


PrincipalDep = Annotated[Principal, Depends(current_principal)]
AdminDep = Annotated[Principal, Depends(admin_principal)]
PullerDep = Annotated[Principal, Depends(queue_puller)]
JobTenantDep = Annotated[str, Depends(job_tenant)]


@dataclass(frozen=True)
class OwnedJob:
    provider: str
    queue: Queue
    job: Job


async def load_owned_job(gateway: Gateway, job_id: str, tenant: str) -> OwnedJob:
    """The job if it exists and belongs to ``tenant``; NotFound otherwise (either way)."""
    provider, queue = gateway.queues.locate(job_id)
    job = await queue.get(job_id)
    if job is None or tenant_of(job) != tenant:
        raise NotFound("generation not found")
    return OwnedJob(provider, queue, job)


def tenant_of(job: Job) -> Any:
    return payload_fields(job.payload).get("tenant")
