"""The worker's side of OpenTelemetry (docs/OBSERVABILITY.md).

- :func:`install`: JSON logs when ``GENQ_LOG_FORMAT=json``, the SDK from OpenTelemetry's
  environment variables (service name ``genq-worker`` unless ``OTEL_SERVICE_NAME`` says
  otherwise), httpx's instrumentation (the alert and webhook POSTs), and the Prometheus
  ``/metrics`` of the GenAI histograms on ``GENQ_METRICS_PORT``.
- :class:`TracedHandler`: each attempt as a ``genq.attempt`` span, a child of the span that
  enqueued the generation (its payload's ``traceparent``), so every attempt of a generation,
  in any process, before and after a restart, is in the request's trace. An attempt after one
  lost with its worker says so (``genq.previous_attempt.*``): the lost one's process had no
  chance to end its own span. The provider call inside is its GenAI span
  (:mod:`providers.telemetry`).

Off, an attempt costs two metric observations and no span.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from genq import ActiveJob, Attempt, JobLeaseLostError, LostAttempt, Queue, TerminalJobError
from genq_contract.spend import Usage
from genq_services import telemetry
from genq_services.telemetry import GenAIMetrics, genai_metrics, names

log = logging.getLogger("workers.telemetry")

SERVICE = "genq-worker"
LOST = "lease_expired"
"""The outcome the queue records for an attempt whose worker went silent."""

Handler = Callable[[ActiveJob], Awaitable[Any]]


def install(log_format: str, metrics_port: int, metrics_host: str) -> None:
    """Turns on what the settings and the environment ask for; call once, at process start
    (after logging is configured)."""
    if log_format == "json":
        telemetry.use_json_logs()
    if telemetry.setup(SERVICE).traces:
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor().instrument()
    if metrics_port:
        from prometheus_client import start_http_server

        try:
            start_http_server(metrics_port, metrics_host, registry=genai_metrics().registry)
        except OSError as exc:  # the generations matter more than their metrics
            log.error("GenAI metrics not served on %s:%d: %s", metrics_host, metrics_port, exc)
        else:
            log.info("GenAI metrics on http://%s:%d/metrics", metrics_host, metrics_port)


METRICS_PORT = "GENQ_METRICS_PORT"


def child_environment(slot: int) -> dict[str, str]:
    """The environment of a supervised worker process (``genq worker --processes N``): its
    own, with the ``slot``-th port after ``GENQ_METRICS_PORT`` for its ``/metrics``."""
    env = dict(os.environ)
    base = env.get(METRICS_PORT, "")
    if base.strip().isdigit() and int(base) > 0:
        env[METRICS_PORT] = str(int(base) + slot)
    return env


def outcome_of(job: ActiveJob, error: BaseException | None) -> str:
    """How the attempt ended, as the span and the metrics say it: ``completed``,
    ``cancelled`` (Stop), ``interrupted`` (handed back: drain, lost lease), ``lease_lost``,
    ``failed`` (terminal or out of attempts) or ``retry``."""
    if error is None:
        return "completed"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled" if job.signal.is_set() else "interrupted"
    if isinstance(error, JobLeaseLostError):
        return "lease_lost"
    if isinstance(error, TerminalJobError) or job.attempt >= job.max_attempts:
        return "failed"
    return "retry"


@dataclass
class TracedHandler:
    """A provider queue's generation handler, each attempt measured and, when tracing is on,
    in its ``genq.attempt`` span."""

    handler: Handler
    queue: str
    """The provider queue's prefix."""
    metrics: GenAIMetrics = field(default_factory=genai_metrics)

    async def __call__(self, job: ActiveJob) -> Any:
        self.metrics.waited(self.queue, job.waited)
        previous = job.history[-1] if job.attempt > 1 and job.history else None
        if previous is not None and previous.outcome == LOST:
            self.metrics.restarted(self.queue)
        if not telemetry.tracing_on():
            error: BaseException | None = None
            try:
                return await self.handler(job)
            except BaseException as exc:
                error = exc
                raise
            finally:
                self.metrics.attempt_ended(self.queue, outcome_of(job, error))
        return await self._traced(job, previous)

    async def _traced(self, job: ActiveJob, previous: Attempt | None) -> Any:
        payload = job.payload if isinstance(job.payload, dict) else {}
        parent = telemetry.context_of(payload.get(telemetry.TRACEPARENT))
        attributes: dict[str, Any] = {
            names.JOB_ID: job.id,
            names.QUEUE: self.queue,
            names.ATTEMPT: job.attempt,
            names.MAX_ATTEMPTS: job.max_attempts,
            names.TENANT: job.tenant,
            names.QUEUE_WAIT: job.waited,
        }
        if previous is not None:
            attributes[names.PREVIOUS_OUTCOME] = previous.outcome
            if previous.outcome == LOST and previous.error:
                # genq's own words; another attempt's error may quote the provider, and so
                # the prompt: never exported.
                attributes[names.PREVIOUS_ERROR] = previous.error
            lost = sum(1 for attempt in job.history if attempt.outcome == LOST)
            if lost:
                attributes[names.LOST_ATTEMPTS] = lost
        error: BaseException | None = None
        with telemetry.tracer().start_as_current_span(
            "genq.attempt",
            context=parent,
            kind=trace.SpanKind.CONSUMER,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await self.handler(job)
            except BaseException as exc:
                error = exc
                raise
            finally:
                outcome = outcome_of(job, error)
                span.set_attribute(names.OUTCOME, outcome)
                if outcome == "cancelled":
                    span.add_event(names.CANCEL_EVENT)
                elif error is not None and not isinstance(error, asyncio.CancelledError):
                    span.set_attribute(names.ERROR_TYPE, type(error).__name__)
                    span.set_status(trace.StatusCode.ERROR)
                self.metrics.attempt_ended(self.queue, outcome)
                log.debug("job %s attempt %d: %s", job.id, job.attempt, outcome)


def current_traceparent() -> str | None:
    """The attempt's own ``traceparent`` (a fallback generation it enqueues is its child);
    None when not traced."""
    return telemetry.current_traceparent() if telemetry.tracing_on() else None


def note_fallback(model: str, child_id: str) -> None:
    """A generation handed to its fallback model, as an event on the attempt's span (the
    reason stays out: it quotes the provider's error, which may quote the prompt)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.add_event(names.FALLBACK_EVENT, {"genq.fallback.model": model, names.JOB_ID: child_id})


async def trace_lost_attempt(queue: Queue, lost: LostAttempt, model: str, usage: Usage) -> None:
    """The ``genq.attempt`` span of an attempt lost with its worker (whose process never
    ended its own), made afterwards by the process that metered it: in the generation's
    trace, over the attempt's times as the record's history has them (server clock), with
    the usage estimated from what it streamed."""
    payload = lost.payload if isinstance(lost.payload, dict) else {}
    parent = telemetry.context_of(payload.get(telemetry.TRACEPARENT))
    if parent is None or not telemetry.tracing_on():
        return
    try:
        job = await queue.get(lost.job_id)
    except Exception as exc:  # the attempt is metered: its span is not worth failing that
        log.warning("job %s: lost attempt %d not traced (%r)", lost.job_id, lost.attempt, exc)
        return
    ran = next((a for a in job.history if a.attempt == lost.attempt), None) if job else None
    ended = ran.ended_at if ran is not None else time.time()
    started = ran.started_at if ran is not None and ran.started_at else ended
    span = telemetry.tracer().start_span(
        "genq.attempt",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        start_time=int(started * 1e9),
        attributes={
            names.JOB_ID: lost.job_id,
            names.QUEUE: queue.prefix,
            names.ATTEMPT: lost.attempt,
            names.TENANT: lost.tenant or "",
            names.OUTCOME: LOST,
            names.ERROR_TYPE: "worker_lost",
            names.REQUEST_MODEL: model,
            "genq.lost.estimated_input_tokens": usage.prompt_tokens,
            "genq.lost.estimated_output_tokens": usage.completion_tokens,
            "genq.lost.reported_by": "lost-attempt meter",
        },
    )
    if ran is not None and ran.error:
        span.set_attribute("genq.lost.reason", ran.error)
    span.set_status(trace.StatusCode.ERROR, "the attempt's worker was lost")
    span.end(end_time=int(ended * 1e9))
