"""The one place LiteLLM is imported, configured for a worker process.

Importing it costs seconds and ~200 MB, so only worker-side modules import this one. It turns
off LiteLLM's download of the model cost map (offline, no surprise outbound connection) and its
debug banner on every exception, and three pieces of per-stream bookkeeping that only
LiteLLM's Router, cost tracking and logging callbacks read (:func:`_turn_off_unread_stream_work`):
a worker streams every chunk through LiteLLM, so LiteLLM's own CPU is what bounds a worker
process (``bench/workers.py``).
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import version
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# The variable above must be set before this import.
import litellm
import litellm.exceptions
from litellm.litellm_core_utils.litellm_logging import Logging as _LiteLLMLogging
from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

from providers.redact import withhold_text

PINNED_VERSION = "1.110.2"
"""The LiteLLM release the stream switches below were written against (pyproject.toml pins
it); on any other release they stay off, since they replace private methods."""

log = logging.getLogger("providers")

litellm.suppress_debug_info = True
litellm.telemetry = False
# LiteLLM logs request params, and at DEBUG whole request bodies: keep its records, not its text.
withhold_text("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def _accumulate_text_only(self: Any, delta: object) -> None:
    """Replaces ``CustomStreamWrapper._accumulate_streamed_delta`` (run on every chunk).

    Kept: the text so far (``response_uptil_now``), which ``litellm.post_call_rules`` and the
    message of a mid-stream error read. Turned off: the scan of 8 delta fields (tool calls,
    reasoning, audio, ...) through pydantic's slow missing-attribute path, ~11% of a stream's
    CPU, whose only reader is the Router's "continue a broken stream from its prefix" feature.
    A worker uses no Router and retries a broken stream from the start, so the stream is marked
    as never continuable, the conservative answer."""
    get = getattr(delta, "get", None)
    content = get("content") if callable(get) else None
    if isinstance(content, str):
        self.response_uptil_now += content
    self._emitted_disqualifying_content = True


_dispatch_success_handlers = _LiteLLMLogging.dispatch_success_handlers


async def _dispatch_success_if_anyone_listens(self: Any, *args: Any, **kwargs: Any) -> None:
    """Wraps ``Logging.dispatch_success_handlers`` (run once per call, after the last chunk).

    It prices the response (cost map lookups), builds LiteLLM's standard logging payload and
    hands both to the registered success callbacks. With no callback registered, globally
    (``litellm.callbacks``, ``litellm.success_callback``, ...) or for the request, and no
    ``litellm.cache``, nobody reads any of it: the worker reports usage from the stream, not
    LiteLLM's cost. Registering a callback turns it back on."""
    listeners = (
        litellm.callbacks,
        litellm.success_callback,
        litellm._async_success_callback,
        getattr(self, "dynamic_success_callbacks", None),
        getattr(self, "dynamic_async_success_callbacks", None),
    )
    if any(listeners) or litellm.cache is not None:
        await _dispatch_success_handlers(self, *args, **kwargs)


_response_cost_calculator = _LiteLLMLogging.response_cost_calculator


def _no_price_for_an_unread_stream(self: Any, result: object, *args: Any, **kwargs: Any) -> Any:
    """Wraps ``Logging.response_cost_calculator`` (run once per call, when the stream opens).

    ``acompletion`` prices what it returns before returning it; for a stream that is the
    stream wrapper, before any chunk: a cost map and model info walk (~3 ms a call here) whose
    answer is "no cost yet". LiteLLM already answers ``None`` at once for the OpenAI SDK's own
    stream objects; this gives its ``CustomStreamWrapper`` the same answer. The priced
    response, if a callback wants one, is the assembled one after the last chunk."""
    if isinstance(result, CustomStreamWrapper):
        return None
    return _response_cost_calculator(self, result, *args, **kwargs)


def _turn_off_unread_stream_work() -> bool:
    """Applies the three replacements above; whether they are on (only on the pinned release)."""
    if version("litellm") != PINNED_VERSION:
        log.warning(
            "LiteLLM %s is not %s: its per-chunk bookkeeping stays on (slower streams)",
            version("litellm"),
            PINNED_VERSION,
        )
        return False
    CustomStreamWrapper._accumulate_streamed_delta = _accumulate_text_only  # type: ignore[method-assign]
    _LiteLLMLogging.dispatch_success_handlers = _dispatch_success_if_anyone_listens  # type: ignore[method-assign]
    _LiteLLMLogging.response_cost_calculator = _no_price_for_an_unread_stream  # type: ignore[method-assign]
    return True


LEAN_STREAMS = _turn_off_unread_stream_work()
"""True when the stream switches are on (tests assert it on the pinned release)."""

__all__ = ["LEAN_STREAMS", "litellm"]
