"""GenAI metrics in OpenTelemetry's conventions, kept twice: as Prometheus histograms (a
worker process's ``/metrics``, always) and as OpenTelemetry instruments (exported by OTLP when
:func:`genq_services.telemetry.setup` turned metrics on; no-ops otherwise).

Labels stay bounded: provider, model (the routing's allowlist), token type, queue, outcome.
Tenants are not a label here (their tokens and cost are the gateway's ``genq_tokens_total``).
"""

from __future__ import annotations

import functools

from opentelemetry import metrics
from prometheus_client import CollectorRegistry, Counter, Histogram

from . import _genai as n
from ._setup import metrics_on

# Bucket boundaries as the conventions advise them (v1.44.0).
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
SECONDS_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96)
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

GENAI_LABELS = ("gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model")


class GenAIMetrics:
    """One process's GenAI metrics; :func:`genai_metrics` gives the process's one."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.token_usage = Histogram(
            "gen_ai_client_token_usage",
            "Number of input and output tokens used per provider call",
            [*GENAI_LABELS, "gen_ai_token_type"],
            buckets=TOKEN_BUCKETS,
            registry=registry,
        )
        self.duration = Histogram(
            "gen_ai_client_operation_duration_seconds",
            "Duration of a provider call, from its request to its stream's end",
            [*GENAI_LABELS, "error_type"],
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.first_chunk = Histogram(
            "gen_ai_client_operation_time_to_first_chunk_seconds",
            "Time from a provider call's request to the first chunk of its stream",
            GENAI_LABELS,
            buckets=SECONDS_BUCKETS,
            registry=registry,
        )
        self.queue_wait = Histogram(
            "genq_queue_wait_seconds",
            "Time an attempt waited in its queue before a worker started it",
            ["queue"],
            buckets=WAIT_BUCKETS,
            registry=registry,
        )
        self.attempts = Counter(
            "genq_attempts",
            "Attempts ended by this process, by outcome",
            ["queue", "outcome"],
            registry=registry,
        )
        self.restarts = Counter(
            "genq_restarts",
            "Attempts started after an attempt lost with its worker",
            ["queue"],
            registry=registry,
        )
        self.otlp = metrics_on()
        """Whether the OpenTelemetry instruments export (else they are skipped: no-ops)."""
        meter = metrics.get_meter(n.TRACER, schema_url=n.SEMCONV_SCHEMA)
        self._otel_tokens = meter.create_histogram(
            n.TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(TOKEN_BUCKETS),
        )
        self._otel_duration = meter.create_histogram(
            n.OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(SECONDS_BUCKETS),
        )
        self._otel_first_chunk = meter.create_histogram(
            n.TIME_TO_FIRST_CHUNK_METRIC,
            unit="s",
            description="Time to receive the first chunk of the response stream.",
            explicit_bucket_boundaries_advisory=list(SECONDS_BUCKETS),
        )
        self._otel_wait = meter.create_histogram(
            n.QUEUE_WAIT_METRIC,
            unit="s",
            description="Time an attempt waited in its queue before a worker started it.",
            explicit_bucket_boundaries_advisory=list(WAIT_BUCKETS),
        )
        self._otel_attempts = meter.create_counter(
            n.ATTEMPTS_METRIC, unit="{attempt}", description="Attempts ended, by outcome."
        )
        self._otel_restarts = meter.create_counter(
            n.RESTARTS_METRIC,
            unit="{attempt}",
            description="Attempts started after an attempt lost with its worker.",
        )

    def provider_call(
        self,
        provider: str,
        model: str,
        duration: float,
        first_chunk: float | None,
        input_tokens: int | None,
        output_tokens: int | None,
        error_type: str | None,
    ) -> None:
        """One provider call ended (``first_chunk``: None when nothing arrived)."""
        labels = (n.CHAT, provider, model)
        attributes: dict[str, str] = {
            n.OPERATION: n.CHAT,
            n.PROVIDER: provider,
            n.REQUEST_MODEL: model,
        }
        self.duration.labels(*labels, error_type or "").observe(duration)
        if first_chunk is not None:
            self.first_chunk.labels(*labels).observe(first_chunk)
        for kind, count in (("input", input_tokens), ("output", output_tokens)):
            if count is not None:
                self.token_usage.labels(*labels, kind).observe(count)
        if not self.otlp:
            return
        failed = {**attributes, n.ERROR_TYPE: error_type} if error_type else attributes
        self._otel_duration.record(duration, failed)
        if first_chunk is not None:
            self._otel_first_chunk.record(first_chunk, attributes)
        for kind, count in (("input", input_tokens), ("output", output_tokens)):
            if count is not None:
                self._otel_tokens.record(count, {**attributes, n.TOKEN_TYPE: kind})

    def waited(self, queue: str, seconds: float) -> None:
        self.queue_wait.labels(queue).observe(seconds)
        if self.otlp:
            self._otel_wait.record(seconds, {n.QUEUE: queue})

    def restarted(self, queue: str) -> None:
        self.restarts.labels(queue).inc()
        if self.otlp:
            self._otel_restarts.add(1, {n.QUEUE: queue})

    def attempt_ended(self, queue: str, outcome: str) -> None:
        self.attempts.labels(queue, outcome).inc()
        if self.otlp:
            self._otel_attempts.add(1, {n.QUEUE: queue, n.OUTCOME: outcome})


@functools.cache
def genai_metrics() -> GenAIMetrics:
    """This process's GenAI metrics (made at the first call: after :func:`setup`, so the
    OpenTelemetry instruments come from the installed meter provider)."""
    return GenAIMetrics()
