"""Replacements for the per-stream bookkeeping of LiteLLM's stream wrapper that a worker never
reads (turned on by :mod:`providers._litellm`, which imports this module after configuring
LiteLLM; nothing else should import it).

Each replaces one private method of the pinned LiteLLM release and says why in its docstring.
What a caller of ``litellm.acompletion`` sees (text, finish reason, tool calls, the provider's
usage) is unchanged; a registered success callback or cache turns the skipped work back on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import litellm
from litellm.litellm_core_utils.litellm_logging import Logging as LiteLLMLogging
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper
from litellm.types.utils import ModelResponseStream

INLINE_CHUNKS = 1000
"""Streams up to this many chunks assemble their complete response on the event loop, where it
costs less than the thread hand-off; longer ones in LiteLLM's worker thread, as LiteLLM does
(see :func:`build_complete_if_read`)."""


def provider_reported_usage(chunks: Sequence[object]) -> bool:
    """Whether any of the provider's chunks (as the stream wrapper keeps them) carried usage.

    Newest first (a usage report comes last) and, for LiteLLM's chunk class, a dict lookup
    instead of pydantic's missing-attribute path (two exceptions per chunk)."""
    for chunk in reversed(chunks):
        if type(chunk) is ModelResponseStream:
            usage = (chunk.__pydantic_extra__ or {}).get("usage")
        else:
            usage = getattr(chunk, "usage", None)
        if usage is not None:
            return True
    return False


def anyone_reads_the_response(logging_obj: Any) -> bool:
    """Whether a success callback (global or for the request), a cache or LiteLLM's proxy
    will receive the stream's assembled response."""
    listeners = (
        litellm.callbacks,
        litellm.success_callback,
        litellm._async_success_callback,
        getattr(logging_obj, "dynamic_success_callbacks", None),
        getattr(logging_obj, "dynamic_async_success_callbacks", None),
    )
    # Every call has an ``llm_caching_handler``; it stores only while ``litellm.cache`` is set.
    return (
        any(listeners)
        or litellm.cache is not None
        or getattr(logging_obj, "_on_deferred_stream_complete", None) is not None
    )


def accumulate_text_only(self: Any, delta: object) -> None:
    """Replaces ``CustomStreamWrapper._accumulate_streamed_delta`` (run on every chunk).

    Kept: the text so far (``response_uptil_now``), which ``litellm.post_call_rules`` and the
    message of a mid-stream error read. Turned off: the scan of 8 delta fields (tool calls,
    reasoning, audio, ...) through pydantic's slow missing-attribute path, whose only reader is
    the Router's "continue a broken stream from its prefix" feature. A worker uses no Router
    and retries a broken stream from the start, so the stream is marked as never continuable,
    the conservative answer."""
    get = getattr(delta, "get", None)
    content = get("content") if callable(get) else None
    if isinstance(content, str):
        self.response_uptil_now += content
    self._emitted_disqualifying_content = True


_dispatch_success_handlers = LiteLLMLogging.dispatch_success_handlers


async def dispatch_success_if_anyone_listens(self: Any, *args: Any, **kwargs: Any) -> None:
    """Wraps ``Logging.dispatch_success_handlers`` (run once per call, after the last chunk).

    It prices the response (cost map lookups), builds LiteLLM's standard logging payload and
    hands both to the registered success callbacks. With no callback registered, globally
    (``litellm.callbacks``, ``litellm.success_callback``, ...) or for the request, and no
    cache, nobody reads any of it: the worker reports usage from the stream, not LiteLLM's
    cost. Registering a callback turns it back on."""
    if anyone_reads_the_response(self):
        await _dispatch_success_handlers(self, *args, **kwargs)


_response_cost_calculator = LiteLLMLogging.response_cost_calculator


def no_price_for_an_unread_stream(self: Any, result: object, *args: Any, **kwargs: Any) -> Any:
    """Wraps ``Logging.response_cost_calculator`` (run once per call, when the stream opens).

    ``acompletion`` prices what it returns before returning it; for a stream that is the
    stream wrapper, before any chunk: a cost map and model info walk (docs/KNOWN_LIMITS.md has
    its cost) whose answer is "no cost yet". LiteLLM already answers ``None`` at once for the
    OpenAI SDK's own stream objects; this gives its ``CustomStreamWrapper`` the same answer.
    The priced response, if a callback wants one, is the assembled one after the last
    chunk."""
    if isinstance(result, CustomStreamWrapper):
        return None
    return _response_cost_calculator(self, result, *args, **kwargs)


_build_in_a_thread = CustomStreamWrapper._async_build_complete_streaming_response


async def build_complete_if_read(self: Any) -> Any:
    """Replaces ``CustomStreamWrapper._async_build_complete_streaming_response`` (run twice per
    stream after the last chunk: for the usage chunk, then for logging and caching).

    It runs ``litellm.stream_chunk_builder`` over every chunk of the stream (all of the text,
    tool calls, usage and costs again, through pydantic's slow attribute paths) in a worker
    thread, whose CPU per chunk, more still when many streams' threads fight the event loop
    for the GIL, exceeds LiteLLM's whole per-chunk path (docs/KNOWN_LIMITS.md). Its readers:

    - the usage chunk takes the assembled usage. The worker reads it only when the provider
      reported usage (``litellm_adapter._reported``); otherwise it discards LiteLLM's own
      count and makes its own estimate. So it is built only when a provider chunk had usage.
    - success callbacks, the cache and LiteLLM's proxy (:func:`anyone_reads_the_response`):
      when any is set, it is built as LiteLLM builds it, both times.

    When it is built for a stream of at most :data:`INLINE_CHUNKS` chunks, it is built on the
    event loop (LiteLLM's own synchronous twin of this method): the same response, without the
    thread hand-off that cost more than the work. Not built, the answer is ``None``, which
    LiteLLM's caller already handles (a usage chunk without usage, no cache write)."""
    for_the_usage_chunk = self.send_stream_usage and not self.sent_stream_usage
    if not anyone_reads_the_response(self.logging_obj) and not (
        for_the_usage_chunk and provider_reported_usage(self.chunks)
    ):
        return None
    if len(self.chunks) > INLINE_CHUNKS:
        return await _build_in_a_thread(self)
    return self._build_complete_streaming_response()


def replacements() -> list[tuple[type, str, Any]]:
    """(class, method name, replacement) for each method this module replaces."""
    return [
        (CustomStreamWrapper, "_accumulate_streamed_delta", accumulate_text_only),
        (LiteLLMLogging, "dispatch_success_handlers", dispatch_success_if_anyone_listens),
        (LiteLLMLogging, "response_cost_calculator", no_price_for_an_unread_stream),
        (CustomStreamWrapper, "_async_build_complete_streaming_response", build_complete_if_read),
    ]
