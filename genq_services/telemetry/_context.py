"""The trace context a generation carries from the gateway to its workers: one W3C
``traceparent`` string (``genq_contract.payload.GenerationPayload.traceparent``)."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_W3C = TraceContextTextMapPropagator()
TRACEPARENT = "traceparent"


def current_traceparent() -> str | None:
    """The ``traceparent`` of the current span, or None when there is none (tracing off, or
    the span is not sampled and so has nothing to join)."""
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get(TRACEPARENT)


def context_of(traceparent: str | None) -> otel_context.Context | None:
    """The context a ``traceparent`` names (its span as the remote parent), or None for none
    or a malformed one (the worker's spans then start a trace of their own)."""
    if not traceparent:
        return None
    context = _W3C.extract({TRACEPARENT: traceparent})
    if not trace.get_current_span(context).get_span_context().is_valid:
        return None
    return context


def span_context_of(traceparent: str | None) -> trace.SpanContext | None:
    """The span a ``traceparent`` names (for a link), or None."""
    context = context_of(traceparent)
    return None if context is None else trace.get_current_span(context).get_span_context()
