"""The ``openai`` LiteLLM provider (``openai/...`` models, any OpenAI-compatible server) served
with the ``openai`` SDK alone, for the requests LiteLLM would pass through unchanged.

For such a request LiteLLM adds milliseconds before the request leaves (its call wrapper,
logging setup, a thread-pool hop, provider and parameter mapping) and a stream wrapper per
chunk, and sends what the SDK would send itself: the direct path skips all of it
(docs/WORKERS.md has the figures). It is taken only when LiteLLM would send exactly what it
sends, as LiteLLM's own request mapping says (:func:`serves`):

- per (model, api_base, params: the names, and the values of scalar ones such as
  ``temperature``), LiteLLM's ``get_optional_params`` and its OpenAI config's
  ``transform_request`` are asked once and must hand the params back unchanged (a rename
  such as ``max_tokens`` -> ``max_completion_tokens`` for a reasoning model, a dropped
  param, ``tool_choice`` without tools, ...: LiteLLM's path), and the model must be neither
  bridged to the Responses API nor fake-streamed. The answer is cached: later requests pay a
  dict lookup.
- per request, what LiteLLM rewrites by value: messages must be of the plain shapes LiteLLM
  passes through (:func:`plain_messages`: no developer role, file parts, cache marks ...;
  a key without a value is left out, as LiteLLM does), and tools must come out of LiteLLM's
  tool sanitising unchanged (asked once per list of tools, cached too).
- per process: no LiteLLM success callback or cache listens (they would miss the call), no
  LiteLLM-wide key, base URL, headers or OpenAI config params are set.

A cached decision costs a few microseconds; the first of a kind, LiteLLM's mapping (a fraction
of a millisecond; the worker warms it with :func:`providers.litellm_adapter.warm_calls`).

The stream is read as LiteLLM reads it (:class:`OpenAIChunks`): the same deltas, the finish
reason mapped and held to the end of the content, the provider's usage last. The SDK hands each
chunk over as the JSON object it parsed (its stream typed ``object``), not as a
``ChatCompletionChunk``: building that model was most of the SDK's time per chunk
(docs/WORKERS.md has the figures), and nothing here needs more than its fields. Any failure
is turned into the exception LiteLLM raises for it (:func:`as_litellm_error`), so
:func:`providers.errors.to_job_error` gives the same job error either way.

Like genq's other LiteLLM patches it is on only with the LiteLLM release it was tested against
(:data:`GUARD`, the pinned one); ``GENQ_DIRECT_OPENAI=0`` turns it off (:func:`set_enabled`).
``tests/providers/test_direct_openai.py`` runs both paths on the same requests and compares
what the provider receives and what the stream yields.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from litellm import LlmProviders
from litellm.exceptions import MidStreamFallbackError
from litellm.litellm_core_utils.completion_timeout import CompletionTimeout, StreamKind
from litellm.litellm_core_utils.core_helpers import map_finish_reason
from litellm.litellm_core_utils.exception_mapping_utils import exception_type
from litellm.litellm_core_utils.request_timeout_resolver import get_configured_request_timeout
from litellm.litellm_core_utils.streaming_handler import (
    _is_transport_timeout,
    _skips_stream_fallback,
)
from litellm.llms.openai.common_utils import BaseOpenAILLM, OpenAIError, upstream_error_response
from litellm.llms.openai.workload_identity import openai_static_api_key
from litellm.main import _drop_anthropic_only_tool_keys
from litellm.responses.bridge_check import _resolve_openai_api_base, responses_api_bridge_check
from litellm.utils import ProviderConfigManager, get_optional_params, supports_httpx_timeout
from openai import AsyncOpenAI, AsyncStream
from openai.resources.chat.completions import AsyncCompletions
from openai.types.chat import ChatCompletion

from genq import PatchGuard, pinned
from providers import openai_requests
from providers._lean_streams import anyone_reads_the_response
from providers._litellm import litellm
from providers.deltas import Delta, ToolCallPiece, tool_call_pieces, usage_counts
from providers.openai_stream import ChunkStream

log = logging.getLogger("providers.direct_openai")

PROVIDER = "openai"
STREAM_OPTIONS = {"include_usage": True}

GUARD = PatchGuard(
    tested=pinned("litellm"),
    off_warning="genq's direct OpenAI path is off; every openai/... request goes through "
    "LiteLLM (a slower first token)",
    logger="providers",
)
"""On with the LiteLLM release whose request mapping the direct path was compared against."""

MAX_DECISIONS = 4096
"""Cached answers kept; past it the cache starts over (scalar values such as ``user`` ids can
make many keys; each miss costs one run of LiteLLM's mapping)."""

_enabled = True
_decisions: dict[tuple[Any, ...], bool] = {}
_tool_verdicts: dict[tuple[str, str | None, str], bool] = {}
_Clients = dict[tuple[str | None, str | None], AsyncOpenAI]
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Clients] = (
    weakref.WeakKeyDictionary()
)
_CREATE_PARAMS = frozenset(inspect.signature(AsyncCompletions.create).parameters)
_ROLES = frozenset({"system", "user", "assistant", "tool"})
_MESSAGE_KEYS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id"})
_SCALARS = (str, int, float, bool, type(None))
_EMPTY: dict[str, Any] = {}


def set_enabled(on: bool) -> None:
    """The operator's switch (``GENQ_DIRECT_OPENAI``); the version guard still has its say."""
    global _enabled
    _enabled = on


def enabled() -> bool:
    """Whether the direct path may serve requests in this process."""
    return _enabled and GUARD.patched()


def serves(
    model: str,
    messages: list[dict[str, Any]],
    params: Mapping[str, Any],
    api_base: str | None,
    api_key: str | None,
) -> bool:
    """Whether LiteLLM would send this request unchanged, so the SDK may send it itself."""
    if not model.startswith("openai/") or not enabled():
        return False
    if not api_key and openai_static_api_key(None) is None:
        return False  # no key at all: LiteLLM's path says so in its own words
    if _litellm_adds_something() or not plain_messages(messages):
        return False
    key = (
        model,
        api_base,
        *sorted((k, v if type(v) in _SCALARS else None) for k, v in params.items()),
    )
    name = model.split("/", 1)[1]
    answer = _cached(_decisions, key, lambda: _litellm_keeps(name, params, api_base))
    if answer and "tools" in params:
        tools_key = (model, api_base, repr(params["tools"]))
        return _cached(_tool_verdicts, tools_key, lambda: _tools_kept(name, params, api_base))
    return answer


def _cached(cache: dict[Any, bool], key: Any, ask: Callable[[], bool]) -> bool:
    """``cache[key]``, asked of LiteLLM the first time; the cache starts over when full."""
    answer = cache.get(key)
    if answer is None:
        answer = ask()
        if len(cache) >= MAX_DECISIONS:
            cache.clear()
        cache[key] = answer
    return answer


def plain_messages(messages: list[dict[str, Any]]) -> bool:
    """Messages LiteLLM sends as they are: the four roles, text (or text and image parts in a
    user or system message), assistant tool calls and tool answers, nothing else."""
    for message in messages:
        if type(message) is not dict or message.get("role") not in _ROLES:
            return False
        if not message.keys() <= _MESSAGE_KEYS:
            return False
        content = message.get("content")
        if content is not None and type(content) is not str:
            if type(content) is not list or message["role"] not in ("user", "system"):
                return False
            if not all(_plain_part(part) for part in content):
                return False
        calls = message.get("tool_calls")
        if calls is not None and not (type(calls) is list and all(map(_plain_call, calls))):
            return False
    return True


def _plain_part(part: Any) -> bool:
    if type(part) is not dict:
        return False
    if part.get("type") == "text":
        return part.keys() == {"type", "text"}
    if part.get("type") == "image_url":
        image = part.get("image_url")
        return (
            part.keys() == {"type", "image_url"}
            and type(image) is dict
            and image.keys() <= {"url", "detail"}
        )
    return False


def _plain_call(call: Any) -> bool:
    function = call.get("function") if type(call) is dict else None
    return (
        type(function) is dict
        and call.keys() <= {"id", "type", "function"}
        and call.get("type", "function") == "function"
        and function.keys() <= {"name", "arguments"}
    )


def _litellm_adds_something() -> bool:
    """LiteLLM-wide settings the direct path does not reproduce: listeners, credentials,
    headers, a base URL, system messages moved first (class-level OpenAI params, which cost
    more to read, are asked with LiteLLM's mapping: :func:`_litellm_keeps`)."""
    return (
        anyone_reads_the_response(None)
        or litellm.api_key is not None
        or litellm.openai_key is not None
        or litellm.api_base is not None
        or bool(litellm.headers)
        or litellm.openai_system_messages_first
        or litellm.route_all_chat_openai_to_responses
    )


def _litellm_keeps(model: str, params: Mapping[str, Any], api_base: str | None) -> bool:
    """LiteLLM's own request mapping, asked once per key: are the params sent unchanged?"""
    if not set(params) <= _CREATE_PARAMS:
        return False
    if litellm.OpenAIConfig.get_config():  # type: ignore[no-untyped-call]
        return False  # params set on LiteLLM's OpenAI config join every request
    try:
        mapped = get_optional_params(
            model=model,
            custom_llm_provider=PROVIDER,
            drop_params=True,
            stream=True,
            stream_options=STREAM_OPTIONS,
            max_retries=0,
            **params,
        )
        sent = {k: v for k, v in mapped.items() if k not in ("stream", "stream_options")}
        if not sent.get("extra_body"):  # an empty extra_body adds nothing to the body
            sent.pop("extra_body", None)
        config = ProviderConfigManager.get_provider_chat_config(
            model=model, provider=LlmProviders.OPENAI
        )
        if config is None or config.should_fake_stream(
            model=model, stream=True, custom_llm_provider=PROVIDER
        ):
            return False
        body = config.transform_request(model, [], dict(sent), _litellm_params(api_base), {})
        bridge, _ = responses_api_bridge_check(
            model=model,
            custom_llm_provider=PROVIDER,
            tools=params.get("tools"),
            reasoning_effort=params.get("reasoning_effort"),
            api_base=api_base,
        )
    except Exception as exc:  # LiteLLM refuses it: let LiteLLM say so, on its path
        log.debug("LiteLLM's path for %s: %r", model, exc)
        return False
    sent.pop("max_retries", None)
    return (
        bridge.get("mode") != "responses"
        and sent == params
        and body == {"model": model, "messages": [], **params}
    )


def _tools_kept(model: str, params: Mapping[str, Any], api_base: str | None) -> bool:
    """Whether LiteLLM's tool handling (keys only Anthropic reads, JSON-schema sanitising,
    cache marks) leaves these tools as they are."""
    tools = params["tools"]
    try:
        if _drop_anthropic_only_tool_keys(list(tools)) != tools:
            return False
        config = ProviderConfigManager.get_provider_chat_config(
            model=model, provider=LlmProviders.OPENAI
        )
        assert config is not None
        body = config.transform_request(
            model, [], {"tools": list(tools)}, _litellm_params(api_base), {}
        )
    except Exception:
        return False
    return bool(body.get("tools") == tools)


def _litellm_params(api_base: str | None) -> dict[str, Any]:
    return {"custom_llm_provider": PROVIDER, "api_base": api_base, "drop_params": True}


def clients() -> _Clients:
    """The running event loop's clients: a client's connections belong to the loop that
    opened them (a process may run one loop after another: a benchmark, the tests)."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None:
        found = _clients[loop] = {}
    return found


def client(api_base: str | None, api_key: str | None) -> AsyncOpenAI:
    """One SDK client per (api_base, api_key), made as LiteLLM makes its own: the same base
    URL and key resolution, no SDK retries (the queue retries), LiteLLM's stream timeout."""
    mine = clients()
    found = mine.get((api_base, api_key))
    if found is None:
        timeout = CompletionTimeout.resolve(
            None,
            {},
            PROVIDER,
            global_timeout=get_configured_request_timeout(),
            supports_httpx_timeout=supports_httpx_timeout,
            stream_kind=StreamKind.LIVE,
        )
        # LiteLLM's own HTTP client (its transport, TLS and proxy settings), as LiteLLM hands
        # it to the SDK: an httpx client, which the SDK (on httpx2) accepts.
        found = AsyncOpenAI(
            api_key=openai_static_api_key(api_key),
            base_url=_resolve_openai_api_base(api_base),
            max_retries=0,
            timeout=timeout,  # type: ignore[arg-type]
            http_client=BaseOpenAILLM.get_async_http_client(),  # type: ignore[arg-type]
        )
        mine[(api_base, api_key)] = found
    return found


async def open_stream(
    model: str,
    messages: list[dict[str, Any]],
    params: Mapping[str, Any],
    api_base: str | None,
    api_key: str | None,
) -> AsyncStream[Any] | ChunkStream:
    """Sends the request; the SDK's stream of chunks, each the JSON object it parsed."""
    sdk = client(api_base, api_key)
    if any(None in message.values() for message in messages):
        # LiteLLM leaves a message's keys without a value (``"content": None``) out
        messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
    body = {
        "messages": messages,
        "model": model.split("/", 1)[1],
        "stream": True,
        "stream_options": STREAM_OPTIONS,
        **params,
    }
    return await _post_stream(sdk, body)


async def _post_stream(sdk: AsyncOpenAI, body: dict[str, Any]) -> AsyncStream[Any] | ChunkStream:
    """The SDK's own request path below ``chat.completions.create``: that method first walks
    the body against its parameter types (a fraction of a millisecond per request), which for
    the plain JSON :func:`serves` admits changes nothing (the tests compare the bodies the
    server receives either way). The request is the SDK's first one for the client, with
    this body (:mod:`providers.openai_requests`), or where that is off, built by ``post``.
    The stream's chunk type is ``object``, for which the SDK yields the JSON it parsed as it
    is (an error event still raises its ``APIError``); the sender reads it so too, in one loop
    (:mod:`providers.openai_stream`)."""
    fast = await openai_requests.sender(sdk, "/chat/completions")
    if fast is not None:
        return await fast.send(body)
    return await sdk.post(
        "/chat/completions",
        body=body,
        cast_to=ChatCompletion,
        stream=True,
        stream_cls=AsyncStream[object],
    )


_WARM_STREAM = (
    b'data: {"id": "w", "object": "chat.completion.chunk", "created": 0, "model": "warm-up", '
    b'"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def warm_up() -> None:
    """Runs the SDK's request path once on a canned answer (no request leaves the process):
    a process's first request would otherwise pay the SDK's lazy imports and first-use setup
    (docs/WORKERS.md has the figure)."""

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=_WARM_STREAM
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        sdk = AsyncOpenAI(
            api_key="warm-up",
            base_url="http://warm-up.invalid/v1",
            max_retries=0,
            http_client=http,  # type: ignore[arg-type]  # an httpx client, as in client()
        )
        body = {
            "messages": [{"role": "user", "content": "warm up"}],
            "model": "warm-up",
            "stream": True,
            "stream_options": STREAM_OPTIONS,
        }
        stream = await _post_stream(sdk, body)
        chunks = OpenAIChunks("openai/warm-up")
        async with stream:
            async for chunk in stream:
                chunks.delta(chunk)
        chunks.end()


class OpenAIChunks:
    """The SDK's chunks as the deltas LiteLLM's stream wrapper makes of them: the finish
    reason mapped (``tool_calls`` once a tool call came) and yielded after the content, the
    provider's usage last, a stream that ends without a finish reason a failure."""

    __slots__ = ("_finish", "_finished", "_model", "_reasoning", "_tool_call", "_usage")

    def __init__(self, model: str) -> None:
        self._model = model
        self._finish: str | None = None  # received, not yet yielded
        self._finished = False
        self._tool_call = False
        self._usage: dict[str, int] | None = None
        self._reasoning: list[str] = []

    def delta(self, chunk: dict[str, Any]) -> Delta | None:
        """The delta of one chunk, the JSON object of a ``chat.completion.chunk``."""
        usage = usage_counts(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        choices = chunk.get("choices")
        if not choices:
            return self._pending_finish()
        choice = choices[0]
        delta = choice.get("delta") or _EMPTY
        text = delta.get("content") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        calls = delta.get("tool_calls")
        finish_reason = choice.get("finish_reason")
        if finish_reason:
            self._finished = True
            self._finish = finish_reason
        pieces: tuple[ToolCallPiece, ...] = ()
        if calls:
            self._tool_call = True
            pieces = tool_call_pieces(calls)
        if reasoning:
            self._reasoning.append(reasoning)
        if text or reasoning or pieces:
            return Delta(text, None, None, reasoning, pieces)
        return self._pending_finish()

    def _pending_finish(self) -> Delta | None:
        if self._finish is None:
            return None
        finish = map_finish_reason(self._finish)
        if finish == "stop" and self._tool_call:
            finish = "tool_calls"
        self._finish = None
        return Delta(finish_reason=finish)

    def end(self) -> list[Delta]:
        """The deltas after the provider's last chunk; raises as LiteLLM does when the stream
        ended before a finish reason."""
        if not self._finished:
            eof = httpx.RemoteProtocolError(
                "Stream ended before a finish_reason was received",
                request=httpx.Request(method="POST", url="https://docs.litellm.ai/docs"),
            )
            raise self._mid_stream(eof)
        tail = [d for d in (self._pending_finish(),) if d is not None]
        if self._usage is not None:
            if self._reasoning and "reasoning_tokens" not in self._usage:
                self._count_reasoning(self._usage)
            tail.append(Delta(usage=self._usage))
        return tail

    def _count_reasoning(self, usage: dict[str, int]) -> None:
        """LiteLLM's count of the reasoning tokens a provider streamed without reporting them
        (``stream_chunk_builder``: its tokenizer, capped at the completion tokens)."""
        counted = litellm.token_counter(text="".join(self._reasoning), count_response_tokens=True)
        reasoning = min(max(0, counted), usage["completion_tokens"])
        if reasoning:
            usage["reasoning_tokens"] = reasoning

    def error(self, exc: BaseException) -> BaseException | None:
        """What LiteLLM raises for ``exc`` mid-stream, or None where LiteLLM ends the stream
        normally (the connection dropped after the finish reason)."""
        if self._finished and isinstance(exc, _DROPPED):
            return None
        return self._mid_stream(exc)

    def _mid_stream(self, exc: BaseException) -> BaseException:
        """LiteLLM's stream wrapper: the failure mapped, and wrapped in a
        ``MidStreamFallbackError`` unless it is a client error other than 429."""
        mapped = as_litellm_error(exc, self._model, mid_stream=True)
        if not isinstance(mapped, Exception) or (
            not _is_transport_timeout(exc)
            and (_skips_stream_fallback(_status(mapped)) or _skips_stream_fallback(_status(exc)))
        ):
            return mapped
        return MidStreamFallbackError(
            message=str(mapped),
            model=self._model.split("/", 1)[1],
            llm_provider=PROVIDER,
            original_exception=mapped,
            is_pre_first_chunk=False,
        )


def _status(exc: BaseException) -> int | None:
    """LiteLLM's reading of an exception's HTTP status."""
    for value in (
        getattr(exc, "status_code", None),
        getattr(getattr(exc, "response", None), "status_code", None),
    ):
        try:
            if value is not None:
                return int(value)
        except (TypeError, ValueError):
            pass
    return None


_DROPPED = (httpx.ReadError, httpx.RemoteProtocolError)
"""A connection lost after the finish reason: LiteLLM ends such a stream normally."""


def as_litellm_error(exc: BaseException, model: str, mid_stream: bool = False) -> BaseException:
    """The exception ``litellm.acompletion`` (or, ``mid_stream``, its stream wrapper) raises
    where the SDK raised ``exc``: LiteLLM's OpenAI handler wraps it in its ``OpenAIError``,
    then LiteLLM maps it to its exception classes (``exception_type``)."""
    if not isinstance(exc, Exception):
        return exc
    try:
        if mid_stream:
            mapped = exception_type(  # type: ignore[no-untyped-call]
                model=model.split("/", 1)[1], original_exception=exc, custom_llm_provider=PROVIDER
            )
        else:
            mapped = exception_type(  # type: ignore[no-untyped-call]
                model=model, original_exception=_wrapped(exc), custom_llm_provider=PROVIDER
            )
    except Exception as raised:  # exception_type raises what it maps to
        return raised
    return mapped if isinstance(mapped, BaseException) else exc


def _wrapped(exc: Exception) -> Exception:
    """LiteLLM's ``OpenAIChatCompletion.async_streaming`` wrapping of an SDK failure."""
    if isinstance(exc, OpenAIError):
        return exc
    headers = getattr(exc, "headers", None)
    response = getattr(exc, "response", None)
    body = getattr(exc, "body", None)
    if headers is None and response:
        headers = getattr(response, "headers", None)
    if type(exc).__name__ == "ReadTimeout":
        return OpenAIError(status_code=408, message=type(exc).__name__, headers=headers, body=body)
    if hasattr(exc, "status_code"):
        return OpenAIError(
            status_code=exc.status_code,
            message=str(exc),
            response=upstream_error_response(exc),
            headers=headers,
            body=body,
        )
    return OpenAIError(status_code=500, message=f"{exc}", headers=headers, body=body)


GUARD.check()
