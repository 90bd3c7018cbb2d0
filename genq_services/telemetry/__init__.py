"""OpenTelemetry for the gateway and the workers: one setup, one trace context, one log format.

Configured only by OpenTelemetry's standard variables (``OTEL_EXPORTER_OTLP_ENDPOINT`` and
friends, read by the SDK itself): :func:`setup` turns traces and metrics on when an endpoint
is set. The generation carries its trace from the gateway to the workers as one W3C
``traceparent`` (``genq_contract.payload.GenerationPayload.traceparent``). What is traced and
what it costs: docs/OBSERVABILITY.md. Never FastAPI, never LiteLLM: both processes use it.
"""

from . import _genai as names
from ._context import TRACEPARENT, context_of, current_traceparent, span_context_of
from ._logs import LOG_FORMATS, JsonFormatter, use_json_logs
from ._metrics import GenAIMetrics, genai_metrics
from ._setup import Telemetry, setup, tracer, tracing_on

__all__ = [
    "LOG_FORMATS",
    "TRACEPARENT",
    "GenAIMetrics",
    "JsonFormatter",
    "Telemetry",
    "context_of",
    "current_traceparent",
    "genai_metrics",
    "names",
    "setup",
    "span_context_of",
    "tracer",
    "tracing_on",
    "use_json_logs",
]
