"""Streams a chat completion through LiteLLM as plain :class:`Delta` s, owning every failure.

A delta holds what a step of the provider's stream carried: text, reasoning text (LiteLLM's
``reasoning_content``, whatever the provider called it), pieces of tool calls by index (id and
name in a call's first piece, then argument text), and on the last steps the finish reason and
the usage. ``params`` (``tools``, ``tool_choice``, ``response_format``, ``reasoning_effort``
...) reach ``litellm.acompletion`` as they are.

A request to an ``openai/...`` model that LiteLLM would pass through unchanged skips LiteLLM:
the ``openai`` SDK sends it and its chunks become the same deltas, its failures the same job
errors (:mod:`providers.direct_openai`; ``GENQ_DIRECT_OPENAI=0`` turns that off). Both paths
share the loop below: the silence timeout, the close in ``finally`` and the telemetry.

- Retries are the queue's job: LiteLLM's (``num_retries``) and the SDK's (``max_retries``) are
  off on every call, so a 429 is one request, not three.
- The stream is always closed in a ``finally``: when the task consuming it is cancelled (Stop)
  the upstream connection is torn down at once instead of streaming on until garbage
  collection. Consume it with ``contextlib.aclosing`` so that also holds when the consumer is
  cancelled while awaiting something else.
- A stream that yields nothing for ``silence_timeout`` seconds is aborted as a retryable error,
  so a hung provider cannot hold a job for a whole lease.
- Every exception leaves as a ``genq.RetryJobError`` or ``genq.TerminalJobError``
  (see :mod:`providers.errors`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any, Protocol

from genq_contract.routing import litellm_provider
from providers import demo, direct_openai
from providers._litellm import litellm, provider_reported_usage
from providers.deltas import Delta, ToolCallPiece, tool_call_pieces, usage_counts
from providers.errors import ProviderSilenceError, to_job_error
from providers.telemetry import ProviderCall

DEFAULT_SILENCE_TIMEOUT = 30.0

log = logging.getLogger("providers.litellm_adapter")

demo.register()

__all__ = ["DEFAULT_SILENCE_TIMEOUT", "Delta", "ToolCallPiece", "stream_chat", "warm_calls"]


def stream_chat(
    model: str,
    messages: list[dict[str, Any]],
    params: Mapping[str, Any] | None = None,
    *,
    silence_timeout: float = DEFAULT_SILENCE_TIMEOUT,
    api_base: str | None = None,
    api_key: str | None = None,
) -> AsyncGenerator[Delta, None]:
    """Yields the deltas of ``model``'s answer to ``messages``.

    ``params`` are generation params (``temperature``, ``max_tokens``, ...; ``demo_*`` for the
    demo provider). Raises ``RetryJobError`` / ``TerminalJobError`` only. A request LiteLLM
    would send unchanged to an OpenAI-compatible server is sent by the ``openai`` SDK itself
    (:mod:`providers.direct_openai`): the same request, deltas and errors, sooner.
    """
    params = params or {}
    secrets = (api_key,) if api_key else ()
    request = _litellm_request(model, messages, params, api_base, api_key)  # telemetry reads it
    if direct_openai.serves(model, messages, params, api_base, api_key):
        return _stream(
            model,
            request,
            partial(direct_openai.open_stream, model, messages, params, api_base, api_key),
            lambda _: direct_openai.OpenAIChunks(model),
            partial(direct_openai.as_litellm_error, model=model),
            silence_timeout,
            secrets,
        )
    return _stream(
        model,
        request,
        partial(litellm.acompletion, **request),
        _LiteLLMChunks,
        _as_raised,
        silence_timeout,
        secrets,
    )


def _litellm_request(
    model: str,
    messages: list[dict[str, Any]],
    params: Mapping[str, Any],
    api_base: str | None,
    api_key: str | None,
) -> dict[str, Any]:
    request = {
        **params,
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_retries": 0,
        "num_retries": 0,
        "drop_params": True,  # a param one provider lacks (e.g. seed) is dropped, not fatal
    }
    if api_base:
        request["api_base"] = api_base
    if api_key:
        request["api_key"] = api_key
    return request


class _Chunks(Protocol):
    """How one path's chunks become deltas and its failures LiteLLM's exceptions."""

    def delta(self, chunk: Any) -> Delta | None: ...

    def end(self) -> list[Delta]:
        """The deltas after the last chunk (may raise the stream's failure)."""
        ...

    def error(self, exc: BaseException) -> BaseException | None:
        """The failure to report for ``exc``, or None: the stream ended normally."""
        ...


async def _stream(
    model: str,
    request: Mapping[str, Any],
    open_response: Callable[[], Awaitable[Any]],
    chunks_of: Callable[[Any], _Chunks],
    translate: Callable[[BaseException], BaseException],
    silence_timeout: float,
    secrets: tuple[str, ...],
) -> AsyncGenerator[Delta, None]:
    call = ProviderCall(model, request)
    try:
        with call.current():
            response = await _within(silence_timeout, open_response(), secrets, translate)
    except BaseException as exc:
        call.end(exc)
        raise
    chunks = chunks_of(response)
    silence = _SilenceWatch(silence_timeout)
    first = True
    error: BaseException | None = None
    try:
        while True:
            silence.waiting()
            try:
                chunk = await anext(response)
            except StopAsyncIteration:
                chunk = _END
            except (asyncio.CancelledError, Exception) as exc:
                if silence.expired():
                    raise to_job_error(ProviderSilenceError(silence_timeout)) from exc
                if isinstance(exc, asyncio.CancelledError):
                    raise
                failure = chunks.error(exc)
                if failure is not None:
                    raise to_job_error(failure, secrets) from failure
                chunk = _END
            finally:
                silence.arrived()
            if chunk is _END:
                try:
                    tail = chunks.end()
                except Exception as exc:
                    raise to_job_error(exc, secrets) from exc
                for delta in tail:
                    call.last_steps(delta.finish_reason, delta.usage)
                    yield delta
                return
            if first:
                call.first_chunk(chunk)
                first = False
            step = chunks.delta(chunk)
            if step is not None:
                if step.finish_reason or step.usage is not None:
                    call.last_steps(step.finish_reason, step.usage)
                yield step
    except BaseException as exc:
        error = exc
        raise
    finally:
        silence.stop()
        call.end(error)
        await response.aclose()


_END = object()


class _LiteLLMChunks:
    """LiteLLM's chunks; its failures are already its own exceptions."""

    __slots__ = ("_response",)

    def __init__(self, response: Any) -> None:
        self._response = response

    def delta(self, chunk: Any) -> Delta | None:
        delta = _delta(chunk)
        if delta is not None and delta.usage is not None and not _reported(self._response):
            return _without_usage(delta)
        return delta

    def end(self) -> list[Delta]:
        return []

    def error(self, exc: BaseException) -> BaseException | None:
        return exc


def _as_raised(exc: BaseException) -> BaseException:
    return exc


async def warm_calls(models: Iterable[str]) -> None:
    """Runs LiteLLM's call path once for each LiteLLM provider of ``models``, on a mock answer
    (``mock_response``: no request leaves the process), and the direct path's decision and the
    SDK's request path on a canned answer (:func:`providers.direct_openai.warm_up`), so a
    worker's first generation does not pay the modules imported on a first call
    (docs/WORKERS.md has the figure).
    A provider LiteLLM cannot mock is skipped: warming is an optimisation, never a failure."""
    seen: set[str] = set()
    models = list(models)
    direct = [
        m
        for m in models
        if direct_openai.serves(m, [{"role": "user", "content": "warm up"}], {}, None, "warm-up")
    ]
    if direct:  # the decision above ran LiteLLM's request mapping, cold once; now the SDK's path
        try:
            await direct_openai.warm_up()
        except Exception as exc:
            log.debug("no warm call for the direct path: %r", exc)
    for model in models:
        vendor = litellm_provider(model)
        if vendor in seen:
            continue
        seen.add(vendor)
        try:
            response = await litellm.acompletion(
                model=model,
                messages=[{"role": "user", "content": "warm up"}],
                stream=True,
                mock_response="ok",
                num_retries=0,
            )
            async for _ in response:
                pass
        except Exception as exc:
            log.debug("no warm call for %s: %r", model, exc)


class _SilenceWatch:
    """Cancels the streaming task once the provider has been silent for ``seconds``.

    What ``asyncio.timeout`` around each ``anext`` would do, for a fraction of its cost: one
    timer per stream that re-arms itself, instead of a timer made and cancelled per chunk (and
    the cancelled timers the event loop's heap carries; docs/KNOWN_LIMITS.md has the cost).
    Only the wait for the provider counts: time the consumer spends between chunks (a Redis
    write) never does. The task that
    opened the stream must be the one that consumes it (the handler's job task does both).
    """

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._cancelling = self._task.cancelling() if self._task is not None else 0
        self._since: float | None = None  # when the wait for the next chunk began
        self._fired = False
        self._timer = self._loop.call_at(self._loop.time() + seconds, self._check)

    def waiting(self) -> None:
        self._since = self._loop.time()

    def arrived(self) -> None:
        self._since = None

    def expired(self) -> bool:
        """After the wait for a chunk failed: whether this watch's cancel caused it (then the
        cancel is withdrawn and the failure is the provider's silence)."""
        if not self._fired or self._task is None:
            return False
        self._fired = False
        return self._task.uncancel() <= self._cancelling

    def stop(self) -> None:
        self._timer.cancel()

    def _check(self) -> None:
        now = self._loop.time()
        if self._since is not None and now - self._since >= self._seconds and self._task:
            self._fired = True
            self._task.cancel()
            return
        start = self._since if self._since is not None else now
        self._timer = self._loop.call_at(start + self._seconds, self._check)


async def _within(
    seconds: float,
    awaitable: Any,
    secrets: tuple[str, ...],
    translate: Callable[[BaseException], BaseException] = _as_raised,
) -> Any:
    """Awaits ``awaitable``; silence past ``seconds`` and provider errors (as ``translate``
    makes them LiteLLM's) become job errors."""
    timer = asyncio.timeout(seconds)
    try:
        async with timer:
            return await awaitable
    except StopAsyncIteration:
        raise
    except Exception as exc:
        if timer.expired():
            raise to_job_error(ProviderSilenceError(seconds)) from exc
        failure = translate(exc)
        raise to_job_error(failure, secrets) from failure


def _delta(chunk: Any) -> Delta | None:
    choices = getattr(chunk, "choices", None) or []
    text, finish, reasoning, calls = "", None, "", None
    if choices:
        choice = choices[0]
        delta = getattr(choice, "delta", None)
        if delta is not None:
            text = getattr(delta, "content", None) or ""
            calls = getattr(delta, "tool_calls", None)
            # A declared field LiteLLM deletes when unset: in the instance dict only when sent
            # (reading the attribute would raise and catch an AttributeError per token).
            reasoning = getattr(delta, "__dict__", _NONE).get("reasoning_content") or ""
        finish = getattr(choice, "finish_reason", None) or None
    usage = usage_counts(getattr(chunk, "usage", None))
    if calls:
        pieces = tool_call_pieces(calls)
        if pieces or reasoning or text or finish is not None or usage is not None:
            return Delta(text, finish, usage, reasoning, pieces)
        return None
    if not text and finish is None and usage is None and not reasoning:
        return None
    if reasoning:
        return Delta(text, finish, usage, reasoning)
    return Delta(text, finish, usage)


_NONE: dict[str, Any] = {}


def _reported(response: Any) -> bool:
    """Whether the provider reported usage itself. Asked for usage (``include_usage``), LiteLLM
    ends every stream with a usage chunk, counting tokens on its own when the provider sent
    none; only the provider's chunks, which its stream wrapper keeps, tell the two apart."""
    chunks = getattr(response, "chunks", None)
    if chunks is None:
        return True
    return provider_reported_usage(chunks)


def _without_usage(delta: Delta) -> Delta | None:
    if not (delta.text or delta.finish_reason or delta.reasoning or delta.tool_calls):
        return None
    return Delta(delta.text, delta.finish_reason, None, delta.reasoning, delta.tool_calls)
