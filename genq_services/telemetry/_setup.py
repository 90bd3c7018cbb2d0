"""Turning the OpenTelemetry SDK on, from OpenTelemetry's own environment variables only.

On when an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT``, or the traces one for
traces and the metrics one for metrics) and ``OTEL_SDK_DISABLED`` is not ``true``. Everything
else (sampler, batch delays, headers, timeouts, resource attributes, the service name) is read
by the SDK itself, so it means what OpenTelemetry's documentation says. Off, no provider is
installed: the API's tracer and meter are no-ops, and the genq code paths that would build
spans check :func:`tracing_on` first.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from opentelemetry import metrics, trace
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from ._genai import SEMCONV_SCHEMA, TRACER

log = logging.getLogger("genq.telemetry")

TRACES_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
METRICS_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")


@dataclass(frozen=True)
class Telemetry:
    """What :func:`setup` turned on in this process."""

    traces: bool = False
    metrics: bool = False


_state = Telemetry()


def tracing_on() -> bool:
    """Whether this process exports spans (false until :func:`setup` turned them on)."""
    return _state.traces


def metrics_on() -> bool:
    """Whether this process exports metrics by OTLP."""
    return _state.metrics


def setup(default_service: str) -> Telemetry:
    """Installs the SDK's tracer and meter providers when an endpoint is set; call once, at
    process start. ``default_service``: the service name unless ``OTEL_SERVICE_NAME`` (or
    ``OTEL_RESOURCE_ATTRIBUTES``) names one. A second call changes nothing."""
    global _state
    if _state.traces or _state.metrics:
        return _state
    if os.environ.get(OTEL_SDK_DISABLED, "").strip().lower() == "true":
        return _state
    want_traces = any(os.environ.get(name) for name in TRACES_ENDPOINTS)
    want_metrics = any(os.environ.get(name) for name in METRICS_ENDPOINTS)
    if not (want_traces or want_metrics):
        return _state
    resource = _resource(default_service)
    if want_traces:
        _install_tracing(resource)
    if want_metrics:
        _install_metrics(resource)
    _state = Telemetry(traces=want_traces, metrics=want_metrics)
    log.info(
        "OpenTelemetry on for %s: traces %s, metrics %s",
        resource.attributes.get(SERVICE_NAME),
        "on" if want_traces else "off",
        "on" if want_metrics else "off",
    )
    return _state


def _resource(default_service: str) -> Resource:
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: default_service}))
    return resource


def _install_tracing(resource: Resource) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_BSP_*
    trace.set_tracer_provider(provider)


def _install_metrics(resource: Resource) -> None:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    reader = PeriodicExportingMetricReader(OTLPMetricExporter())  # OTEL_METRIC_EXPORT_INTERVAL
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))


def tracer() -> trace.Tracer:
    """genq's tracer (the API's no-op one while tracing is off)."""
    return trace.get_tracer(TRACER, schema_url=SEMCONV_SCHEMA)
