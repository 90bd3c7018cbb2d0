"""The settings every genq process shares, read from ``GENQ_`` environment variables.

The gateway's ``Settings``, the worker's ``WorkerSettings`` and the CLI's Redis commands all
inherit :class:`CommonSettings`, so one variable means one thing everywhere: the gateway
enqueues with the attempts and retention the workers settle with, and ``genq keys`` writes to
the Redis the gateway reads.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .money import UsdLimit
from .routing import RoutingSettings

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class TenantBudget(BaseModel):
    """A tenant's budget in USD per UTC day and per UTC month (JSON numbers: a string or a
    boolean is refused); an absent one is no limit."""

    model_config = ConfigDict(extra="forbid")

    daily_usd: UsdLimit | None = None
    monthly_usd: UsdLimit | None = None


class CommonSettings(RoutingSettings):
    """The routing (:class:`RoutingSettings`), plus where Redis is and how long jobs live."""

    redis_url: str = DEFAULT_REDIS_URL
    """GENQ_REDIS_URL: ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://h1:p1,h2:p2``
    or ``redis+sentinel://s1:p1,s2:p2/<service>`` (see ``genq.connect``)."""
    result_ttl: float = Field(default=3600.0, ge=0)
    """GENQ_RESULT_TTL: seconds a finished generation (record, output, idempotency key) stays
    readable; 0 keeps it forever."""
    dead_ttl: float = Field(default=14 * 86400.0, ge=0)
    """GENQ_DEAD_TTL: seconds a dead-lettered job (record, output, dead-set entry) is kept,
    apart from GENQ_RESULT_TTL; 0 keeps it forever. Running and scheduled jobs never expire,
    whatever both say."""
    max_attempts: int = Field(default=3, ge=1)
    """GENQ_MAX_ATTEMPTS: attempts of a job enqueued without its own count."""
    tenant_weights: dict[str, Annotated[int, Field(ge=1, le=1000)]] = {}
    """GENQ_TENANT_WEIGHTS: ``{"tenant": weight}`` (JSON), 1-1000, default 1. Waiting jobs of a
    provider queue are served round-robin across tenants; a tenant of weight 3 gets three turns
    to another's one. Read by workers when they reserve: give all of them the same."""
    tenant_concurrency: int = Field(default=0, ge=0)
    """GENQ_TENANT_CONCURRENCY: the most generations one tenant runs at once on each provider
    queue, counted across every worker (0: no cap). Jobs beyond it wait for the tenant's
    running ones, in line, instead of being refused."""

    durable_replicas: int = Field(default=0, ge=0, le=10)
    """GENQ_DURABLE_REPLICAS: durable acceptance. 0 (default): off. N: every enqueue and every
    settle waits (Redis ``WAIT``) until N replicas hold it; the gateway answers 202 only then,
    and 503 when they do not confirm within GENQ_DURABLE_TIMEOUT (the generation is on the
    primary: a retry with the same Idempotency-Key returns it). Costs a replication round trip
    per enqueue; see docs/ARCHITECTURE.md."""
    durable_timeout: float = Field(default=1.0, gt=0, lt=5)
    """GENQ_DURABLE_TIMEOUT: seconds an enqueue or settle waits for GENQ_DURABLE_REPLICAS
    replicas (under the Redis client's 5 s socket timeout)."""

    tenant_budgets: dict[str, TenantBudget] = {}
    """GENQ_TENANT_BUDGETS: ``{"tenant": {"daily_usd": 5, "monthly_usd": 100}}`` (JSON), either
    may be absent. The gateway reserves each generation's maximum cost against it at enqueue
    (402 past it) and workers charge what attempts cost (``genq_services.budget``). Limits an
    operator sets with ``PUT /v1/budgets/{tenant}`` win over these."""

    batch_share: float = Field(default=0.5, gt=0, le=1)
    """GENQ_BATCH_SHARE: the most of each provider's concurrency batch lines may hold (0-1,
    at least one slot). Interactive jobs are served first and may use all of it."""
    batch_result_ttl: float = Field(default=86400.0, ge=0)
    """GENQ_BATCH_RESULT_TTL: seconds a finished batch line (its record, and so its line of the
    batch's output or error file) stays readable; 0 keeps it forever. Give gateways and
    workers the same."""

    webhook_allow_private: bool = False
    """GENQ_WEBHOOK_ALLOW_PRIVATE: 1 lets webhook endpoints (``/v1/webhook_endpoints``) use
    ``http://`` and private, loopback and link-local addresses (tests, local setups). Off,
    only ``https://`` URLs whose host resolves to public addresses are taken, checked at
    create, update and every delivery (docs/SECURITY.md)."""
    webhook_timeout: float = Field(default=10.0, gt=0, le=60)
    """GENQ_WEBHOOK_TIMEOUT: seconds one webhook POST (a delivery, or ``.../test``) may take."""

    log_format: Literal["text", "json"] = "text"
    """GENQ_LOG_FORMAT: ``text`` (default) or ``json``: one JSON object per line, with the
    ``trace_id`` and ``span_id`` of the current span on every line written inside one (gateway
    and workers; docs/OBSERVABILITY.md)."""

    def queue_options(self) -> dict[str, Any]:
        """The :class:`genq.Queue` options every process builds its queues with (retention,
        attempts, the fair share, durable acceptance), so the gateway, the workers and the CLI
        agree on them."""
        return {
            "result_ttl": self.result_ttl,
            "dead_ttl": self.dead_ttl,
            "max_attempts": self.max_attempts,
            "tenant_weights": self.tenant_weights,
            "tenant_concurrency": self.tenant_concurrency,
            "durable_replicas": self.durable_replicas,
            "durable_timeout": self.durable_timeout,
        }

    def lane_options(self) -> dict[str, Any]:
        """:meth:`queue_options` for a provider's batch lane (``genq_contract.lanes``): its
        lines stay readable ``GENQ_BATCH_RESULT_TTL``, for the batch's output file."""
        return {**self.queue_options(), "result_ttl": self.batch_result_ttl}
