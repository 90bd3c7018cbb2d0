"""The gateway's side of OpenTelemetry (docs/OBSERVABILITY.md).

- :func:`install`: the SDK from OpenTelemetry's environment variables (service name
  ``genq-gateway`` unless ``OTEL_SERVICE_NAME`` says otherwise), FastAPI's instrumentation
  (one server span per request, continuing the client's ``traceparent``), and JSON logs when
  ``GENQ_LOG_FORMAT=json``.
- :func:`enqueue_span`: the enqueue as a child span, which writes its own ``traceparent``
  into the payloads it enqueues: the workers' spans are its children.
- :func:`viewed`: one span per SSE viewer connection, linked to the generation's trace.

Off (no endpoint), each is a no-op that costs a flag check.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Iterator, MutableMapping
from typing import Any

from fastapi import FastAPI
from opentelemetry import trace

from genq import Job
from genq_contract.payload import payload_fields
from genq_services import telemetry
from genq_services.telemetry import names

SERVICE = "genq-gateway"
UNTRACED_URLS = "healthz,readyz,metrics"
"""Probes and scrapes: a span each would drown the generations' traces."""


def install(app: FastAPI, log_format: str) -> None:
    """Turns on what the environment asks for; call once, in ``create_app``."""
    if log_format == "json":
        telemetry.use_json_logs("uvicorn", "uvicorn.access", "uvicorn.error")
    if not telemetry.setup(SERVICE).traces:
        return
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    # No span per ASGI send/receive: an event stream sends one message per event.
    FastAPIInstrumentor.instrument_app(
        app, excluded_urls=UNTRACED_URLS, exclude_spans=["receive", "send"]
    )


_UNTRACED = contextlib.nullcontext()


def enqueue_span(
    queue: str,
    payloads: Iterable[tuple[str, MutableMapping[str, Any]]],
    tenant: str,
    linked: str | None = None,
) -> contextlib.AbstractContextManager[None]:
    """A ``genq.enqueue`` span (a producer, child of the request's span) around the enqueue
    of ``payloads`` (job id, payload dict) on ``queue``; writes the span's ``traceparent``
    into each payload before the enqueue sends it. ``linked``: the ``traceparent`` of a span
    the enqueue belongs to without being its child (a batch's create, for its lines)."""
    if not telemetry.tracing_on():
        return _UNTRACED
    return _enqueue_span(queue, list(payloads), tenant, linked)


@contextlib.contextmanager
def _enqueue_span(
    queue: str,
    jobs: list[tuple[str, MutableMapping[str, Any]]],
    tenant: str,
    linked: str | None,
) -> Iterator[None]:
    attributes: dict[str, Any] = {names.QUEUE: queue, names.TENANT: tenant}
    if len(jobs) == 1:
        attributes[names.JOB_ID] = jobs[0][0]
    else:
        attributes["genq.jobs"] = len(jobs)
    span_name = f"genq.enqueue {queue}"
    link = telemetry.span_context_of(linked)
    with telemetry.tracer().start_as_current_span(
        span_name,
        kind=trace.SpanKind.PRODUCER,
        attributes=attributes,
        links=[trace.Link(link)] if link is not None else None,
    ):
        parent = telemetry.current_traceparent()
        if parent is not None:
            for _, payload in jobs:
                payload[telemetry.TRACEPARENT] = parent
        yield


def viewed(job: Job, queue: str, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``stream`` (one viewer's SSE bytes for ``job``), in a ``genq.view`` span linked to
    the generation's trace when tracing is on; ``stream`` itself otherwise."""
    if not telemetry.tracing_on():
        return stream
    return _viewed(job, queue, stream)


async def _viewed(job: Job, queue: str, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    origin = telemetry.span_context_of(payload_fields(job.payload).get(telemetry.TRACEPARENT))
    links = [trace.Link(origin)] if origin is not None else []
    span = telemetry.tracer().start_span(
        f"genq.view {queue}",
        attributes={names.JOB_ID: job.id, names.QUEUE: queue, names.TENANT: job.tenant},
        links=links,
    )
    writes = 0
    try:
        async with contextlib.aclosing(stream) as pieces:  # type: ignore[type-var]
            async for piece in pieces:
                writes += 1
                yield piece
    except (GeneratorExit, asyncio.CancelledError):
        span.set_attribute("genq.view.left", True)  # the viewer went away: not an error
        raise
    except BaseException as exc:
        span.set_attribute(names.ERROR_TYPE, type(exc).__name__)
        raise
    finally:
        span.set_attribute("genq.view.writes", writes)
        span.end()
