"""Streams a chat completion through LiteLLM as plain :class:`Delta` s, owning every failure.

A delta holds what a step of the provider's stream carried: text, reasoning text (LiteLLM's
``reasoning_content``, whatever the provider called it), pieces of tool calls by index (id and
name in a call's first piece, then argument text), and on the last steps the finish reason and
the usage. ``params`` (``tools``, ``tool_choice``, ``response_format``, ``reasoning_effort``
...) reach ``litellm.acompletion`` as they are.

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
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from genq_contract.routing import litellm_provider
from providers import demo
from providers._litellm import litellm, provider_reported_usage
from providers.errors import ProviderSilenceError, to_job_error
from providers.telemetry import ProviderCall

DEFAULT_SILENCE_TIMEOUT = 30.0

log = logging.getLogger("providers.litellm_adapter")

demo.register()


@dataclass(frozen=True, slots=True)
class ToolCallPiece:
    """A piece of a streamed tool call: ``id`` and ``name`` come with a call's first piece
    (None after), ``arguments`` is the next bit of its JSON arguments."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class Delta:
    """One step of a stream: some text, reasoning text, tool-call pieces, and on the last
    steps the finish reason and usage (the provider's report only: None when it sent none).

    Read-only by convention, not frozen: a frozen dataclass sets each field through
    ``object.__setattr__``, and one is made per token."""

    text: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    reasoning: str = ""
    tool_calls: tuple[ToolCallPiece, ...] = ()


async def stream_chat(
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
    demo provider). Raises ``RetryJobError`` / ``TerminalJobError`` only.
    """
    request = {
        **(params or {}),
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
    secrets = (api_key,) if api_key else ()

    call = ProviderCall(model, request)
    try:
        with call.current():
            response = await _within(silence_timeout, litellm.acompletion(**request), secrets)
    except BaseException as exc:
        call.end(exc)
        raise
    silence = _SilenceWatch(silence_timeout)
    first = True
    error: BaseException | None = None
    try:
        while True:
            silence.waiting()
            try:
                chunk = await anext(response)
            except StopAsyncIteration:
                return
            except (asyncio.CancelledError, Exception) as exc:
                if silence.expired():
                    raise to_job_error(ProviderSilenceError(silence_timeout)) from exc
                if isinstance(exc, asyncio.CancelledError):
                    raise
                raise to_job_error(exc, secrets) from exc
            finally:
                silence.arrived()
            if first:
                call.first_chunk(chunk)
                first = False
            delta = _delta(chunk)
            if delta is not None and delta.usage is not None and not _reported(response):
                delta = _without_usage(delta)
            if delta is not None:
                if delta.finish_reason or delta.usage is not None:
                    call.last_steps(delta.finish_reason, delta.usage)
                yield delta
    except BaseException as exc:
        error = exc
        raise
    finally:
        silence.stop()
        call.end(error)
        await response.aclose()


async def warm_calls(models: Iterable[str]) -> None:
    """Runs LiteLLM's call path once for each LiteLLM provider of ``models``, on a mock answer
    (``mock_response``: no request leaves the process), so a worker's first generation does
    not pay the modules LiteLLM imports on its first call (docs/WORKERS.md has the figure).
    A provider LiteLLM cannot mock is skipped: warming is an optimisation, never a failure."""
    seen: set[str] = set()
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


async def _within(seconds: float, awaitable: Any, secrets: tuple[str, ...]) -> Any:
    """Awaits ``awaitable``; silence past ``seconds`` and provider errors become job errors."""
    timer = asyncio.timeout(seconds)
    try:
        async with timer:
            return await awaitable
    except StopAsyncIteration:
        raise
    except Exception as exc:
        if timer.expired():
            raise to_job_error(ProviderSilenceError(seconds)) from exc
        raise to_job_error(exc, secrets) from exc


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
    usage = _usage(getattr(chunk, "usage", None))
    if calls:
        pieces = _pieces(calls)
        if pieces or reasoning or text or finish is not None or usage is not None:
            return Delta(text, finish, usage, reasoning, pieces)
        return None
    if not text and finish is None and usage is None and not reasoning:
        return None
    if reasoning:
        return Delta(text, finish, usage, reasoning)
    return Delta(text, finish, usage)


_NONE: dict[str, Any] = {}


def _pieces(calls: Any) -> tuple[ToolCallPiece, ...]:
    """LiteLLM's ``delta.tool_calls`` (objects or dicts) as pieces; one without an index is
    the ``n``-th of its chunk."""
    pieces = []
    for n, call in enumerate(calls):
        index = _field(call, "index")
        function = _field(call, "function")
        name = _field(function, "name") if function is not None else None
        arguments = _field(function, "arguments") if function is not None else None
        pieces.append(
            ToolCallPiece(
                index if isinstance(index, int) else n,
                _field(call, "id") or None,
                name or None,
                arguments if isinstance(arguments, str) else "",
            )
        )
    return tuple(pieces)


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def _usage(usage: Any) -> dict[str, int] | None:
    """The provider's token counts; ``cached_tokens``: prompt tokens read from its cache (LiteLLM
    puts OpenAI's and Anthropic's under ``prompt_tokens_details``), 0 when it says nothing;
    ``reasoning_tokens`` (of the completion tokens) only when it reported some."""
    if usage is None:
        return None
    fields = ("prompt_tokens", "completion_tokens", "total_tokens")
    values = {name: getattr(usage, name, None) for name in fields}
    if all(v is None for v in values.values()):
        return None
    counts = {name: int(v or 0) for name, v in values.items()}
    details = getattr(usage, "prompt_tokens_details", None)
    counts["cached_tokens"] = int(getattr(details, "cached_tokens", None) or 0)
    reasoning = getattr(getattr(usage, "completion_tokens_details", None), "reasoning_tokens", None)
    if reasoning:
        counts["reasoning_tokens"] = int(reasoning)
    return counts


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
