"""The settings every genq process shares, read from ``GENQ_`` environment variables.

The gateway's ``Settings``, the worker's ``WorkerSettings`` and the CLI's Redis commands all
inherit :class:`CommonSettings`, so one variable means one thing everywhere: the gateway
enqueues with the attempts and retention the workers settle with, and ``genq keys`` writes to
the Redis the gateway reads.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from .routing import RoutingSettings

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


class TenantBudget(BaseModel):
    """A tenant's budget in USD per UTC day and per UTC month; an absent one is no limit."""

    model_config = ConfigDict(extra="forbid")

    daily_usd: float | None = Field(default=None, ge=0, le=1e9)
    monthly_usd: float | None = Field(default=None, ge=0, le=1e9)


class CommonSettings(RoutingSettings):
    """The routing (:class:`RoutingSettings`), plus where Redis is and how long jobs live."""

    redis_url: str = DEFAULT_REDIS_URL
    """GENQ_REDIS_URL: ``redis://``, ``rediss://``, ``unix://`` or ``redis+cluster://h1:p1,h2:p2``
    (see ``genq.connect``)."""
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

    tenant_budgets: dict[str, TenantBudget] = {}
    """GENQ_TENANT_BUDGETS: ``{"tenant": {"daily_usd": 5, "monthly_usd": 100}}`` (JSON), either
    may be absent. The gateway reserves each generation's maximum cost against it at enqueue
    (402 past it) and workers charge what attempts cost (``genq_contract.budget``). Limits an
    operator sets with ``PUT /v1/budgets/{tenant}`` win over these."""

    def fair_share(self) -> dict[str, Any]:
        """The :class:`genq.Queue` options of the fair share, as these settings give them."""
        return {
            "tenant_weights": self.tenant_weights,
            "tenant_concurrency": self.tenant_concurrency,
        }
