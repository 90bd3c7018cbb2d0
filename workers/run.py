"""The worker process: one genq Worker per provider queue, until SIGTERM drains it.

``run_worker(settings)`` is what ``genq worker`` and ``python -m workers`` call.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from tenacity import (
    AsyncRetrying,
    before_sleep_log,
    retry_if_exception_type,
    stop_after_delay,
    wait_random_exponential,
)

from genq import HELD_CONNECTIONS, Queue, RedisClient, Worker
from genq.connection import DEFAULTS as CONNECTION_DEFAULTS
from genq.connection import connect as connect_redis
from genq_contract.keys import GatewayKeys
from genq_contract.lanes import batch_lane, batch_slots, is_batch_lane
from genq_contract.routing import ProviderConfig
from genq_contract.webhooks import deliveries_prefix
from genq_services.capabilities import publish_capabilities
from genq_services.prices import publish_prices
from providers import direct_openai
from providers.capabilities import capabilities_of
from providers.costs import served_models, warm_up
from providers.litellm_adapter import warm_calls
from workers.alerts import DeadLetterAlerts
from workers.coalesce import EmitStats
from workers.drain import Drain
from workers.handler import GenerationHandler
from workers.lanes import Lanes
from workers.logs import configure as configure_logging
from workers.logs import log_failure
from workers.lost_attempts import LostAttemptMeter
from workers.metering import Metering
from workers.settings import WorkerSettings
from workers.telemetry import TracedHandler
from workers.telemetry import install as install_telemetry
from workers.webhook_delivery import MAX_RETRY_DELAY, WebhookDeliveries

log = logging.getLogger("workers")


@dataclass
class WorkerProcess:
    """The workers of one process, for code that runs them in-process (tests, benchmarks)."""

    settings: WorkerSettings
    redis: RedisClient
    queues: dict[str, Queue] = field(default_factory=dict)
    workers: dict[str, Worker] = field(default_factory=dict)
    handlers: dict[str, GenerationHandler] = field(default_factory=dict)
    stats: EmitStats = field(default_factory=EmitStats)
    metering: Metering = field(default_factory=Metering)
    lost: LostAttemptMeter | None = None
    """Meters the attempts of these queues that were lost with their worker."""

    @classmethod
    def build(cls, settings: WorkerSettings, redis: RedisClient) -> WorkerProcess:
        routing = settings.routing()
        direct_openai.set_enabled(settings.direct_openai)
        metering = Metering(budgets=settings, overrun=settings.budget_overrun)
        process = cls(settings, redis, metering=metering)
        timings: dict[str, Any] = {
            "lease": settings.lease,
            "backoff": settings.backoff,
            "max_backoff": max(settings.max_backoff, settings.backoff),
        }
        for name in settings.selected_providers():
            provider = routing.providers[name]
            queue = Queue(
                redis, prefix=provider.queue_prefix, **timings, **settings.queue_options()
            )
            lane = Queue(
                redis,
                prefix=batch_lane(provider.queue_prefix),
                **timings,
                **settings.lane_options(),
            )
            lanes = Lanes(
                provider.concurrency, batch_slots(provider.concurrency, settings.batch_share)
            )
            for lane_name, lane_queue, handler in (
                (name, queue, process.handler(queue, provider, batch_lane=lane)),
                (batch_lane(name), lane, process.handler(lane, provider)),
            ):
                process.queues[lane_name] = lane_queue
                process.handlers[lane_name] = handler
                process.workers[lane_name] = lane_queue.worker(
                    TracedHandler(
                        lanes.wrap("batch" if lane_queue is lane else "interactive", handler),
                        lane_queue.prefix,
                    ),
                    concurrency=provider.concurrency,
                    on_error=log_failure,
                    presence=settings.presence,
                    # A generation runs for seconds, and one that ends within milliseconds
                    # failed (a provider refusing, a 429): jobs read ahead would only spend
                    # more attempts on it.
                    read_ahead=0,
                )
            lanes.attach(process.workers[name], process.workers[batch_lane(name)])
        process.lost = LostAttemptMeter(list(process.queues.values()), process.metering)
        return process

    def handler(
        self, queue: Queue, provider: ProviderConfig, batch_lane: Queue | None = None
    ) -> GenerationHandler:
        settings = self.settings
        return GenerationHandler(
            queue,
            settings.routing(),
            provider,
            silence_timeout=settings.silence_timeout,
            coalesce_window=settings.coalesce_window_ms / 1000,
            coalesce_max_chars=settings.coalesce_max_chars,
            stats=self.stats,
            demo_faults=settings.demo_faults_enabled(),
            max_cooldown=settings.max_cooldown,
            fallback_max_wait=settings.fallback_max_wait,
            access_cache_seconds=settings.access_cache_seconds,
            metering=self.metering,
            batch_lane=batch_lane,
        )

    async def start(self) -> None:
        await self.publish_models()
        await self.start_workers()

    async def start_workers(self) -> None:
        for worker in self.workers.values():
            await worker.start()
        if self.lost is not None:
            self.lost.start()

    async def publish_models(self) -> None:
        """Publishes the prices of the models this process serves (the gateway reserves
        budgets with them) and their capabilities (the gateway refuses a request a model
        cannot run), and loads the token counter and LiteLLM's call path, before the first job."""
        routing = self.settings.routing()
        models = served_models(routing, self.queues)
        await publish_prices(self.redis, routing.namespace, self.metering.prices.prices(models))
        await publish_capabilities(self.redis, routing.namespace, capabilities_of(models))
        await asyncio.to_thread(warm_up, models)
        await warm_calls(models)

    async def stop(self, deadline: float | None = None) -> None:
        await asyncio.gather(*(w.stop(deadline=deadline) for w in self.workers.values()))
        await self.close_handlers()

    async def close_handlers(self) -> None:
        if self.lost is not None:
            await self.lost.stop()
        for handler in self.handlers.values():
            await handler.aclose()


def build_alerts(settings: WorkerSettings, redis: RedisClient) -> DeadLetterAlerts | None:
    """The dead-letter alerts of this process, when a webhook is configured
    (``GENQ_ALERT_WEBHOOK_URL``, ``GENQ_ALERT_WEBHOOKS``).

    They read every configured provider queue's outbox (not only the ones this process
    serves), so a process serving one provider still alerts for all; each notice goes to one
    process, and deliveries are deduplicated."""
    webhooks = settings.webhooks()
    if not webhooks:
        return None
    sources = {name: p.queue_prefix for name, p in settings.routing().providers.items()}
    queue = Queue(
        redis,
        prefix=settings.alert_queue_prefix(),
        backoff=settings.backoff,
        max_backoff=max(settings.max_backoff, settings.backoff),
        lease=max(30.0, settings.alert_timeout * 3),
        **{**settings.queue_options(), "max_attempts": settings.alert_max_attempts},
    )
    return DeadLetterAlerts(
        redis,
        sources,
        queue,
        webhooks,
        log_key=GatewayKeys(settings.queue_namespace).alert_log,
        timeout=settings.alert_timeout,
        claim_after=settings.alert_claim_after,
        block=min(1.0, settings.redis_socket_timeout / 2),
    )


def build_webhooks(settings: WorkerSettings, redis: RedisClient) -> WebhookDeliveries:
    """The webhook events of this process (``/v1/webhook_endpoints``, ``workers.webhook_delivery``):
    always on, a few idle reads when no tenant has an endpoint."""
    options: dict[str, Any] = {
        **settings.queue_options(),
        "max_attempts": settings.webhook_max_attempts,
        "tenant_concurrency": 0,  # a tenant's deliveries are not its generations
    }
    queue = Queue(
        redis,
        prefix=deliveries_prefix(settings.queue_namespace),
        backoff=settings.webhook_retry_base,
        max_backoff=max(settings.webhook_retry_base, MAX_RETRY_DELAY),
        lease=max(30.0, settings.webhook_timeout * 3),
        **options,
    )
    return WebhookDeliveries(
        redis,
        settings.queue_namespace,
        queue,
        allow_private=settings.webhook_allow_private,
        timeout=settings.webhook_timeout,
        retry_base=settings.webhook_retry_base,
        claim_after=settings.alert_claim_after,
        block=min(1.0, settings.redis_socket_timeout / 2),
        sweep_every=settings.webhook_sweep_every,
    )


POOL_SPARE = 16
"""Connections a worker process keeps beyond one per job: activations, settles and the
dead-letter alerts' own worker take a few at a time."""


def pool_size(settings: WorkerSettings) -> int:
    """The worker process's connection pool: one connection per job it can run at once (with
    emits not batched, ``GENQ_COALESCE_WINDOW_MS=0``, each running job holds one while it
    emits), the three each queue's worker holds (its doorbell, its presence and its cancel
    channel: two queues per provider, its own and its batch lane), and :data:`POOL_SPARE`;
    never fewer than genq's default. Connections open only when used."""
    routing = settings.routing()
    names = settings.selected_providers()
    jobs = sum(routing.providers[name].concurrency for name in names)
    least: int = CONNECTION_DEFAULTS["max_connections"]
    return max(least, jobs + HELD_CONNECTIONS * 2 * len(names) + POOL_SPARE)


def connect(settings: WorkerSettings) -> RedisClient:
    """The worker's Redis client.

    A dead connection fails after ``redis_socket_timeout`` instead of hanging forever, and a
    failed command is re-sent on a fresh connection for a few seconds (jittered backoff, about
    3 s on average, 6.4 s at most), so a failover or a restart does not fail the generations
    in flight. Re-sending is safe: every genq script carries its lease token and sequence
    number. The worst case on a hung server stays under a minute (9 tries of the timeout).
    Its pool holds up to :func:`pool_size` connections.
    """
    retry = Retry(ExponentialWithJitterBackoff(base=0.1, cap=1.0), retries=8)
    return connect_redis(
        settings.redis_url,
        socket_timeout=settings.redis_socket_timeout,
        socket_connect_timeout=settings.redis_socket_timeout,
        health_check_interval=30,
        retry=retry,
        client_name="genq-worker",
        max_connections=pool_size(settings),
    )


async def wait_for_redis(redis: RedisClient, within: float) -> None:
    """Pings until Redis answers (it may start after us), with jittered backoff."""
    retrying = AsyncRetrying(
        retry=retry_if_exception_type((RedisConnectionError, RedisTimeoutError, OSError)),
        stop=stop_after_delay(within),
        wait=wait_random_exponential(multiplier=0.1, max=2.0),
        before_sleep=before_sleep_log(log, logging.WARNING),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            await redis.ping()


def freeze_heap() -> None:
    """Moves everything allocated so far (LiteLLM's large module graph) out of the collector's
    sight: a full collection then skips it, so the worker's GC pauses stay short with many
    streams running (bench/workers.py; docs/KNOWN_LIMITS.md). Call once, after the imports and
    the warm-up, before the first job."""
    gc.collect()
    gc.freeze()


async def serve(settings: WorkerSettings) -> None:
    """Runs the workers until SIGTERM/SIGINT, then drains them (see :mod:`workers.drain`)."""
    redis = connect(settings)
    drain = Drain(settings.drain_deadline)
    drain.install()
    try:
        await wait_for_redis(redis, settings.startup_timeout)
        process = WorkerProcess.build(settings, redis)
        await process.publish_models()  # what it loads (tokenizers, LiteLLM's call path) ...
        freeze_heap()  # ... is frozen with the imports
        await process.start_workers()
        alerts = build_alerts(settings, redis)
        if alerts is not None:
            await alerts.start()
            hosts = ", ".join(  # the full URL may hold a token
                f"{hook.name}={httpx.URL(hook.url).host}" for hook in alerts.webhooks.values()
            )
            log.info("dead-letter alerts to %s via queue %s", hosts, alerts.queue.prefix)
        webhooks = build_webhooks(settings, redis)
        await webhooks.start()
        for name, worker in process.workers.items():
            if is_batch_lane(name):
                log.info(
                    "running batch lines on queue %s (up to %d slots)",
                    process.queues[name].prefix,
                    worker.concurrency,
                )
                continue
            log.info(
                "serving provider %s on queue %s (concurrency %d)",
                name,
                process.queues[name].prefix,
                worker.concurrency,
            )
        await drain.requested.wait()
        await drain.stop(list(process.workers.values()))
        if alerts is not None:
            await alerts.stop(deadline=settings.drain_deadline)
        await webhooks.stop(deadline=settings.drain_deadline)
        await process.close_handlers()
        log.info("drained; exiting")
    finally:
        drain.uninstall()
        await redis.aclose()


def run_worker(settings: WorkerSettings | None = None) -> None:
    """The worker process's entry point; returns (exit 0) once drained after SIGTERM."""
    settings = settings or WorkerSettings()
    configure_logging(settings.log_level)
    install_telemetry(settings.log_format, settings.metrics_port, settings.metrics_host)
    asyncio.run(serve(settings))
