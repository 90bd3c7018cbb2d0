"""The gateway's settings, read from the environment (prefix ``GENQ_``).

In production mode (the default) secrets have no defaults: the app refuses to start without
``GENQ_SECRET``. Dev mode (``GENQ_DEV=1``) generates a secret per process and accepts two
well-known keys, one for a ``dev`` tenant and one with the admin role.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from providers.routing import RoutingSettings, split_list

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
KEY_HASH_PATTERN = re.compile(r"^sha256:[0-9a-f]{64}$")
MIN_SECRET_LENGTH = 16


class KeyGrant(BaseModel):
    """What an API key grants: the tenant it acts as, and whether it may operate the queues."""

    tenant: str = Field(pattern=TENANT_PATTERN)
    admin: bool = False


class TenantLimits(BaseModel):
    """Per-tenant overrides of the default limits."""

    rate: float | None = Field(default=None, gt=0)
    burst: int | None = Field(default=None, ge=1)
    max_in_flight: int | None = Field(default=None, ge=1)


def gateway_key(namespace: str, name: str) -> str:
    """A gateway-owned Redis key (API keys, rate buckets) under the queue namespace.

    Queue keys start with ``{``, so these never collide with a provider's queue."""
    return f"{namespace}:gateway:{name}"


class Settings(RoutingSettings):
    """Inherits the routing settings (``GENQ_MODELS``, ``GENQ_QUEUE_NAMESPACE``, ...) so the
    gateway and the workers always agree on which queue a model's jobs go to."""

    model_config = SettingsConfigDict(env_prefix="GENQ_", extra="ignore")

    dev: bool = False
    """Dev mode: a generated secret and the well-known dev keys are allowed."""

    redis_url: str = "redis://127.0.0.1:6379/0"
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
    max_priority: int = Field(default=9, ge=0, le=1000)
    max_delay_ms: int = Field(default=86_400_000, ge=0)
    max_attempts: int = Field(default=3, ge=1)
    result_ttl: float = Field(default=3600.0, gt=0)
    """Seconds a finished generation stays readable; must match the workers'."""

    tenant_rate: float = Field(default=5.0, gt=0)
    """Enqueues per second per tenant (token bucket refill)."""
    tenant_burst: int = Field(default=20, ge=1)
    tenant_max_in_flight: int = Field(default=100, ge=1)
    tenant_limits: dict[str, TenantLimits] = {}

    watch_token_ttl: float = Field(default=3600.0, gt=0)
    sse_retry_ms: int = Field(default=2000, ge=100)
    """Base reconnect delay sent as ``retry:``; each stream gets it with +-50% jitter."""
    sse_ping: float = Field(default=15.0, gt=0)
    max_wait: float = Field(default=60.0, gt=0)
    """Upper bound of ``?timeout=`` on the result route."""

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

    web_dir: Path | None = None

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
            from .auth import hash_key

            grants[hash_key(self.dev_key)] = KeyGrant(tenant="dev")
            grants[hash_key(self.dev_admin_key)] = KeyGrant(tenant="dev", admin=True)
        return grants

    def key(self, name: str) -> str:
        return gateway_key(self.queue_namespace, name)

    def limits_for(self, tenant: str) -> tuple[float, int, int]:
        """(rate, burst, max_in_flight) for a tenant."""
        custom = self.tenant_limits.get(tenant, TenantLimits())
        return (
            custom.rate or self.tenant_rate,
            custom.burst or self.tenant_burst,
            custom.max_in_flight or self.tenant_max_in_flight,
        )

    def resolved_web_dir(self) -> Path:
        return self.web_dir or Path(__file__).resolve().parent.parent / "web"
