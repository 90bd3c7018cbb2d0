"""The worker process's settings, from ``GENQ_`` environment variables.

What every process shares (Redis URL, routing, attempts, retention) comes from
:class:`genq_contract.settings.CommonSettings`, so the gateway and the workers agree on them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from genq import PRESENCE_SECONDS
from genq_contract.routing import split_list
from genq_contract.settings import CommonSettings
from providers.limits import DEFAULT_MAX_COOLDOWN
from workers.metering import DEFAULT_OVERRUN
from workers.webhooks import DEFAULT_NAME, Webhook, check_webhooks, parse_webhooks


class WorkerSettings(CommonSettings):
    # A bad setting's error names it and says why, without echoing the input: it may hold a
    # webhook's secret (GENQ_ALERT_WEBHOOKS, GENQ_ALERT_WEBHOOK_SECRET).
    model_config = SettingsConfigDict(hide_input_in_errors=True)

    worker_providers: Annotated[list[str], NoDecode] = []
    """GENQ_WORKER_PROVIDERS: the providers this process serves (default: all configured)."""
    lease: float = Field(60.0, gt=0)
    """GENQ_LEASE: seconds a job stays ours without a heartbeat."""
    backoff: float = Field(1.0, ge=0)
    """GENQ_BACKOFF: base of the exponential retry backoff (full jitter), seconds."""
    max_backoff: float = Field(60.0, ge=0)
    """GENQ_MAX_BACKOFF: the backoff's ceiling, seconds (a Retry-After may exceed it)."""
    presence: float = Field(PRESENCE_SECONDS, ge=0.2, le=60)
    """GENQ_PRESENCE: seconds a worker may give no sign of life (killed, cut off, frozen)
    before the other workers take its generations back, whatever GENQ_LEASE says. Its own loop
    renews it six times as often; an event loop blocked longer than this loses its jobs."""
    silence_timeout: float = Field(30.0, gt=0)
    """GENQ_SILENCE_TIMEOUT: a stream silent this long is aborted and retried."""
    direct_openai: bool = True
    """GENQ_DIRECT_OPENAI: a request to an ``openai/...`` model that LiteLLM would send
    unchanged is sent by the ``openai`` SDK itself, for a sooner first token
    (``providers.direct_openai``); 0 sends every request through LiteLLM."""
    drain_deadline: float = Field(600.0, ge=0)
    """GENQ_DRAIN_DEADLINE: on SIGTERM, seconds in-flight jobs get to finish before being
    handed back: long enough that a deploy does not cut (and re-bill) long generations. Keep
    the orchestrator's kill grace period above it (compose ``stop_grace_period: 630s``,
    Kubernetes ``terminationGracePeriodSeconds: 630``)."""
    coalesce_window_ms: float = Field(10.0, ge=0)
    """GENQ_COALESCE_WINDOW_MS: deltas (of all jobs of a provider) arriving within this window
    share one round trip; 0 = one emit per delta. An attempt's first delta waits for none."""
    coalesce_max_chars: int = Field(2048, ge=1)
    """GENQ_COALESCE_MAX_CHARS: a job with this much text buffered is sent without waiting."""
    redis_socket_timeout: float = Field(5.0, gt=0)
    """GENQ_REDIS_SOCKET_TIMEOUT: a dead connection fails after this instead of hanging."""
    log_level: str = "INFO"
    """GENQ_LOG_LEVEL."""
    metrics_port: int = Field(0, ge=0, le=65535)
    """GENQ_METRICS_PORT: serve the worker's Prometheus ``/metrics`` (the GenAI histograms:
    tokens, duration and time to first chunk per provider call, queue wait, attempts) on this
    port; 0 (default): not served. ``genq worker --processes N`` gives its N processes this
    port and the next N-1."""
    metrics_host: str = "127.0.0.1"
    """GENQ_METRICS_HOST: the address ``/metrics`` listens on (``0.0.0.0`` in a container)."""
    demo_faults: bool | None = None
    """GENQ_DEMO_FAULTS: the demo provider fails on request (``[demo:429]``, ``demo_fault``);
    default: on in dev mode (GENQ_DEV), off otherwise (see ``providers.demo``)."""
    max_cooldown: float = Field(DEFAULT_MAX_COOLDOWN, ge=0)
    """GENQ_MAX_COOLDOWN: the longest queue-wide pause one provider 429 can cause, seconds (the
    job that got it still waits its whole Retry-After); 0 = a 429 never pauses the queue."""
    access_cache_seconds: float = Field(5.0, ge=0, le=60)
    """GENQ_ACCESS_CACHE_SECONDS: how long a worker trusts its copy of the revoked API keys and
    disabled tenants; a generation of one stops at its next check once the copy is renewed
    (``genq_services.access``). 0 reads Redis at every check."""
    budget_overrun: float = Field(DEFAULT_OVERRUN, ge=0, le=10)
    """GENQ_BUDGET_OVERRUN: how far past its budget hold (as a fraction: 0.10 is 10%) a running
    generation of a budgeted tenant may spend before the worker stops it, failed with the
    reason (a provider that ignores ``max_tokens``; ``workers.metering``)."""
    fallback_max_wait: float = Field(30.0, ge=0)
    """GENQ_FALLBACK_MAX_WAIT: a 429 asking to wait longer than this (seconds) sends the
    generation to its next fallback model at once (see ``workers.fallback``)."""
    startup_timeout: float = Field(60.0, gt=0)
    """GENQ_STARTUP_TIMEOUT: how long to wait for Redis at start before giving up."""

    alert_webhook_url: str | None = None
    """GENQ_ALERT_WEBHOOK_URL: POST every dead-lettered job here (see ``workers.alerts``): the
    webhook named ``default``."""
    alert_webhook_secret: SecretStr | None = None
    """GENQ_ALERT_WEBHOOK_SECRET: HMAC-SHA256 key of ``X-Genq-Signature``; required with a URL."""
    alert_webhooks: Annotated[list[Webhook], NoDecode] = []
    """GENQ_ALERT_WEBHOOKS: more webhooks, a JSON list of ``{"name", "url", "secret",
    "queues"?}``: ``queues`` (provider names) keeps only their dead letters (absent: all).
    Names are unique (``default`` is GENQ_ALERT_WEBHOOK_URL's)."""
    alert_claim_after: float = Field(30.0, gt=0)
    """GENQ_ALERT_CLAIM_AFTER: seconds a dead-letter notice read but not acknowledged (its
    worker died) waits before another worker takes it over."""
    alert_queue: str | None = None
    """GENQ_ALERT_QUEUE: the deliveries' queue prefix (default ``<namespace>-alerts``)."""
    alert_max_attempts: int = Field(5, ge=1)
    """GENQ_ALERT_MAX_ATTEMPTS: tries of one webhook delivery before it dead-letters."""
    alert_timeout: float = Field(10.0, gt=0)
    """GENQ_ALERT_TIMEOUT: seconds one webhook POST may take."""

    webhook_max_attempts: int = Field(16, ge=1, le=50)
    """GENQ_WEBHOOK_MAX_ATTEMPTS: tries of one webhook event delivery to one endpoint; with
    GENQ_WEBHOOK_RETRY_BASE's default they span about a day (``workers.webhook_delivery``)."""
    webhook_retry_base: float = Field(5.0, gt=0)
    """GENQ_WEBHOOK_RETRY_BASE: seconds before a failed webhook delivery's first retry; each
    next waits twice as long, at most 6 h."""
    webhook_sweep_every: float = Field(0.5, gt=0, le=60)
    """GENQ_WEBHOOK_SWEEP_EVERY: seconds between two looks for generations that ended and owe
    their tenant's endpoints an event."""

    @field_validator("alert_webhooks", mode="before")
    @classmethod
    def _parse_webhooks(cls, value: Any) -> Any:
        return parse_webhooks(value)

    @model_validator(mode="after")
    def _alert_secret(self) -> WorkerSettings:
        if self.alert_webhook_url and not self.alert_webhook_secret:
            raise ValueError("GENQ_ALERT_WEBHOOK_SECRET is required with GENQ_ALERT_WEBHOOK_URL")
        hooks = self.webhooks()
        if any(hook.queues for hook in hooks):  # the routing is read only when a filter needs it
            check_webhooks(hooks, set(self.routing().providers))
        else:
            check_webhooks(hooks, set())
        return self

    def webhooks(self) -> list[Webhook]:
        """Every alert webhook: GENQ_ALERT_WEBHOOK_URL's (``default``), then GENQ_ALERT_WEBHOOKS."""
        hooks = list(self.alert_webhooks)
        if self.alert_webhook_url and self.alert_webhook_secret:
            try:
                default = Webhook(
                    name=DEFAULT_NAME, url=self.alert_webhook_url, secret=self.alert_webhook_secret
                )
            except ValueError as exc:
                raise ValueError(f"GENQ_ALERT_WEBHOOK_URL: {exc}") from None
            hooks.insert(0, default)
        return hooks

    def demo_faults_enabled(self) -> bool:
        return self.dev if self.demo_faults is None else self.demo_faults

    def alert_queue_prefix(self) -> str:
        return self.alert_queue or f"{self.queue_namespace}-alerts"

    @field_validator("worker_providers", mode="before")
    @classmethod
    def _parse_providers(cls, value: Any) -> Any:
        return split_list(value)

    def selected_providers(self) -> list[str]:
        """The providers to serve; unknown names are a configuration error."""
        configured = self.routing().providers
        names = self.worker_providers or list(configured)
        unknown = sorted(set(names) - set(configured))
        if unknown:
            raise ValueError(f"GENQ_WORKER_PROVIDERS names unknown providers {unknown}")
        return names
