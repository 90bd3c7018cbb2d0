"""A provider call as OpenTelemetry sees it: a GenAI client span ``chat {model}`` (a child of
the attempt's span) and the GenAI metrics (docs/OBSERVABILITY.md).

What it records is read off the stream once: the first chunk (time to first chunk, response
id and model) and the delta carrying the finish reason and usage; never a prompt or an
answer. Each token costs :func:`providers.litellm_adapter.stream_chat` one flag check.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

from opentelemetry import trace

from genq import RetryJobError, TerminalJobError
from genq_services.telemetry import genai_metrics, names, tracer, tracing_on

from .deltas import field_of
from .errors import RateLimitedError

GENERIC = (RetryJobError, TerminalJobError)
"""Job errors that only say how to go on: ``error.type`` names their cause instead."""
REQUEST_PARAMS = {"max_tokens": names.REQUEST_MAX_TOKENS, "temperature": names.REQUEST_TEMPERATURE}


class ProviderCall:
    """One streamed chat call: start it before the request, feed it what the stream says,
    :meth:`end` it once."""

    __slots__ = (
        "_finish_reasons",
        "_first_chunk",
        "_input_tokens",
        "_output_tokens",
        "_started",
        "model",
        "provider",
        "span",
    )

    def __init__(self, model: str, params: Mapping[str, Any]) -> None:
        self.model = model
        self.provider = model.split("/", 1)[0]
        self.span: trace.Span | None = None
        self._started = time.perf_counter()
        self._first_chunk: float | None = None
        self._finish_reasons: list[str] = []
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        if tracing_on():
            attributes: dict[str, Any] = {
                names.OPERATION: names.CHAT,
                names.PROVIDER: self.provider,
                names.REQUEST_MODEL: model,
                names.REQUEST_STREAM: True,
            }
            for param, name in REQUEST_PARAMS.items():
                value = params.get(param)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    attributes[name] = value
            self.span = tracer().start_span(
                f"{names.CHAT} {model}", kind=trace.SpanKind.CLIENT, attributes=attributes
            )

    @contextlib.contextmanager
    def current(self) -> Iterator[None]:
        """The call's span as the current one (for the HTTP client's own spans), around an
        await that yields nothing to the stream's consumer."""
        if self.span is None:
            yield
            return
        # Not the exception's message: a provider's error can quote the prompt.
        with trace.use_span(
            self.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            yield

    def first_chunk(self, chunk: Any) -> None:
        self._first_chunk = time.perf_counter() - self._started
        if self.span is not None:
            self.span.set_attribute(names.TIME_TO_FIRST_CHUNK, self._first_chunk)
            response_id = field_of(chunk, "id")
            if isinstance(response_id, str) and response_id:
                self.span.set_attribute(names.RESPONSE_ID, response_id)
            model = field_of(chunk, "model")
            if isinstance(model, str) and model:
                self.span.set_attribute(names.RESPONSE_MODEL, model)

    def last_steps(self, finish_reason: str | None, usage: Mapping[str, int] | None) -> None:
        """A delta with a finish reason or the provider's usage report."""
        if finish_reason and finish_reason not in self._finish_reasons:
            self._finish_reasons.append(finish_reason)
        if usage is not None:
            self._input_tokens = usage.get("prompt_tokens")
            self._output_tokens = usage.get("completion_tokens")

    def end(self, error: BaseException | None) -> None:
        error_type = _error_type(error)
        genai_metrics().provider_call(
            self.provider,
            self.model,
            time.perf_counter() - self._started,
            self._first_chunk,
            self._input_tokens,
            self._output_tokens,
            error_type,
        )
        span = self.span
        if span is None:
            return
        if self._finish_reasons:
            span.set_attribute(names.FINISH_REASONS, self._finish_reasons)
        if self._input_tokens is not None:
            span.set_attribute(names.INPUT_TOKENS, self._input_tokens)
        if self._output_tokens is not None:
            span.set_attribute(names.OUTPUT_TOKENS, self._output_tokens)
        if error_type is not None:
            span.set_attribute(names.ERROR_TYPE, error_type)
            if error_type != "cancelled":
                span.set_status(trace.StatusCode.ERROR)
        span.end()


def _error_type(error: BaseException | None) -> str | None:
    """``error.type``: the provider error's class (``RateLimitedError``, ...; its cause's when
    it is a generic job error), or ``cancelled`` for a stream its consumer stopped."""
    if error is None:
        return None
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return "cancelled"
    if type(error) in GENERIC and error.__cause__ is not None:
        return type(error.__cause__).__name__
    return type(error).__name__


def note_cooldown(error: RateLimitedError) -> None:
    """A 429 as an event on the current span (the attempt's)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    attributes: dict[str, Any] = {"genq.provider_wide": bool(error.provider_wide)}
    if error.retry_after is not None:
        attributes["genq.retry_after"] = float(error.retry_after)
    span.add_event(names.COOLDOWN_EVENT, attributes)
