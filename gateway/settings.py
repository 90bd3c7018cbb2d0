"""The gateway's settings, read from the environment (prefix ``GENQ_``).

In production mode (the default) secrets have no defaults: the app refuses to start without
``GENQ_SECRET``. Dev mode (``GENQ_DEV=1``) generates a secret per process and accepts two
well-known keys, one for a ``dev`` tenant and one with the admin role.
"""

from __future__ import annotations

import secrets
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from genq_contract.api_keys import KEY_HASH_PATTERN, KeyGrant, hash_key
from genq_contract.keys import GatewayKeys
from genq_contract.routing import split_list
from genq_contract.settings import CommonSettings

MIN_SECRET_LENGTH = 16


class TenantLimits(BaseModel):
    """Per-tenant overrides of the default limits."""

    rate: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    max_in_flight: int | None = Field(default=None, ge=1)
    max_streams: int | None = Field(default=None, ge=1)
    max_waits: int | None = Field(default=None, ge=1)
    daily_quota: int | None = Field(default=None, ge=0)
    """Generations accepted per UTC day; 0 = no quota for this tenant."""


_NO_OVERRIDES = TenantLimits()
"""A tenant's overrides when it has none (made once: they are read on every request)."""


class Settings(CommonSettings):
    """Inherits the settings every process shares (``GENQ_REDIS_URL``, ``GENQ_MODELS``,
    ``GENQ_RESULT_TTL``, ...; see :class:`genq_contract.settings.CommonSettings`). In dev mode
    (``GENQ_DEV``) a generated secret and the well-known dev keys are allowed."""

    redis_max_connections: int = Field(default=32, ge=2)
    """Size of the shared connection pool; the shared tails hold one more each."""

    secret: SecretStr | None = None
    """Signs watch tokens. Required outside dev mode."""
    api_keys: dict[str, KeyGrant] = {}
    """``{"sha256:<hex>": "tenant"}`` or ``{"sha256:<hex>": {"tenant": ..., "admin": true}}``."""
    key_cache_seconds: float = Field(default=5.0, ge=0)
    """How long a key looked up in Redis is trusted before it is looked up again."""
    dev_key: str = "genq-dev-key"
    dev_admin_key: str = "genq-dev-admin-key"

    cors_origins: Annotated[list[str], NoDecode] = []

    max_body_bytes: int = Field(default=256 * 1024, ge=1024)
    max_file_bytes: int = Field(default=100 * 1024 * 1024, ge=1024)
    """GENQ_MAX_FILE_BYTES: the largest file ``POST /v1/files`` stores (in Redis, whole): 413
    past it, nothing stored. Its own cap: GENQ_MAX_BODY_BYTES does not apply to uploads."""
    file_ttl: float = Field(default=30 * 86400.0, gt=0)
    """GENQ_FILE_TTL: seconds an uploaded file is kept (its ``expires_at``)."""
    batch_window: float = Field(default=86400.0, gt=0)
    """GENQ_BATCH_WINDOW: seconds a batch may take (``completion_window: "24h"``); past it
    the batch is ``expired``: its lines not finished are cancelled, what finished is in its
    output file."""
    batch_poll: float = Field(default=0.5, gt=0, le=60)
    """GENQ_BATCH_POLL: seconds between a batch runner's looks at its batches' lines."""
    max_image_bytes: int = Field(default=128 * 1024, ge=0)
    """The most bytes of images one request may carry in ``data:`` URLs, counted decoded and
    summed over its messages (``genq_contract.chat.check_image_bytes``); the body cap above
    binds too, and base64 takes a third more room than the bytes it holds."""
    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds a connection has to send a whole request head (the first, and each next one on
    a kept-alive connection); then it gets 408 and is closed (``gateway.connection_guard``)."""
    max_connections: int = Field(default=10_000, ge=1)
    """Open connections one gateway process accepts; past it a new one gets 503 and is closed
    (one log line per burst). Lowered at start to leave headroom under the process's
    file-descriptor limit (``ulimit -n``), see ``gateway.server_options``."""
    max_delay_ms: int = Field(default=30 * 86_400_000, ge=0)
    """How far ahead a request may schedule its start (``delay_ms``, ``run_at``): 30 days."""
    max_attempts_ceiling: int = Field(default=10, ge=1)
    """The most attempts a request's ``max_attempts`` may ask for."""

    tenant_rate: float = Field(default=5.0, gt=0)
    """Enqueues per second per tenant (token bucket refill)."""
    tenant_burst: int = Field(default=20, ge=1)
    tenant_max_in_flight: int = Field(default=10_000, ge=1)
    """A backstop against one tenant filling Redis: the fair share (GENQ_TENANT_WEIGHTS,
    GENQ_TENANT_CONCURRENCY) already keeps a tenant's backlog from delaying the others."""
    tenant_daily_quota: int = Field(default=0, ge=0)
    """Generations one tenant may have accepted per UTC day (replays are free); 0 = no quota."""
    tenant_limits: dict[str, TenantLimits] = {}

    watch_token_ttl: float = Field(default=3600.0, gt=0)
    sse_retry_ms: int = Field(default=2000, ge=100)
    """Base reconnect delay sent as ``retry:``; each stream gets it with +-50% jitter."""
    sse_ping: float = Field(default=15.0, gt=0)
    max_wait: float = Field(default=60.0, gt=0)
    """Upper bound of ``?timeout=`` on the result route."""
    tenant_max_streams: int = Field(default=1000, ge=1)
    """Event streams (SSE) one tenant may hold open at once, per gateway process; 429 beyond."""
    tenant_max_waits: int = Field(default=200, ge=1)
    """Result waits one tenant may hold open at once, per gateway process; 429 beyond."""
    sse_send_timeout: float = Field(default=30.0, gt=0)
    """A stream whose client does not take a write for this long is closed (a slow reader)."""
    sse_max_duration: float = Field(default=900.0, gt=0)
    """A stream ends cleanly after this long; its client resumes with ``Last-Event-ID``."""

    tail_block: float = Field(default=5.0, gt=0)
    """Longest blocking XREAD of a shared tail; new streams unblock it at once."""
    tail_pace: float = Field(default=0.01, ge=0)
    """While entries flow, a shared tail reads at most once per this many seconds."""
    tail_idle_check: float = Field(default=10.0, gt=0)
    """A watched stream quiet this long is checked for a vanished job."""

    gc_tuning: bool = True
    """Freeze the startup heap and collect garbage less often (see ``gateway.app.tune_gc``);
    it is process-wide, so in-process tests turn it off."""
    history_interval: float = Field(default=5.0, gt=0)
    """Seconds between samples of the queue depths kept for the operations chart."""

    budget_sweep_interval: float = Field(default=5.0, gt=0)
    """Seconds between two sweeps of budget reservations nobody charged."""
    budget_sweep_grace: float = Field(default=60.0, gt=0)
    """A finished (or vanished) generation's reservation is swept after this many seconds: it
    must exceed the longest a worker takes from an attempt's end to its charge."""

    web_dir: Path | None = None
    """Serve the pages from this directory instead of the installed ones (a page's developer)."""
    docs: bool = True
    """Serve ``/docs`` (Swagger UI) and ``/redoc``, with their assets from this gateway."""
    metrics_public: bool = False
    """Serve ``/metrics`` without credentials; otherwise it takes an admin key (Bearer)."""

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return split_list(value)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _hashed_keys(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        for digest in value:
            if not KEY_HASH_PATTERN.match(str(digest)):
                raise ValueError(
                    "GENQ_API_KEYS holds key hashes ('sha256:<64 hex>'), never raw keys; "
                    "`genq keys hash` prints one"
                )
        return {k: {"tenant": v} if isinstance(v, str) else v for k, v in value.items()}

    @model_validator(mode="after")
    def _secrets(self) -> Settings:
        if self.secret is None:
            if not self.dev:
                raise ValueError("GENQ_SECRET is required (or set GENQ_DEV=1 for development)")
            self.secret = SecretStr(secrets.token_urlsafe(32))
        if len(self.secret.get_secret_value()) < MIN_SECRET_LENGTH:
            raise ValueError(f"GENQ_SECRET must be at least {MIN_SECRET_LENGTH} characters")
        return self

    def grants(self) -> dict[str, KeyGrant]:
        """Key hash (hex, without the ``sha256:`` tag) -> grant."""
        grants = {digest.removeprefix("sha256:"): grant for digest, grant in self.api_keys.items()}
        if self.dev:
            grants[hash_key(self.dev_key)] = KeyGrant(tenant="dev")
            grants[hash_key(self.dev_admin_key)] = KeyGrant(tenant="dev", admin=True)
        return grants

    @property
    def keys(self) -> GatewayKeys:
        """The gateway's own Redis keys (API keys, rate buckets, audit log)."""
        return GatewayKeys(self.queue_namespace)

    def limits_for(self, tenant: str) -> tuple[float, int, int]:
        """(rate, burst, max_in_flight) for a tenant."""
        custom = self.tenant_limits.get(tenant, _NO_OVERRIDES)
        return (
            custom.rate or self.tenant_rate,
            custom.burst or self.tenant_burst,
            custom.max_in_flight or self.tenant_max_in_flight,
        )

    def daily_quota_for(self, tenant: str) -> int:
        """Generations the tenant may have accepted per UTC day; 0 = no quota."""
        quota = self.tenant_limits.get(tenant, _NO_OVERRIDES).daily_quota
        return self.tenant_daily_quota if quota is None else quota

    def max_streams_for(self, tenant: str) -> int:
        """Event streams the tenant may hold open at once (per gateway process)."""
        return self.tenant_limits.get(tenant, _NO_OVERRIDES).max_streams or self.tenant_max_streams

    def max_waits_for(self, tenant: str) -> int:
        """Result waits the tenant may hold open at once (per gateway process)."""
        return self.tenant_limits.get(tenant, _NO_OVERRIDES).max_waits or self.tenant_max_waits

    def resolved_web_dir(self) -> Path:
        """``GENQ_WEB_DIR``, else the pages installed with genq (the package ``genq_web``,
        which is ``web/`` in a checkout)."""
        return self.web_dir or Path(str(resources.files("genq_web")))
