"""The direct OpenAI path (providers/direct_openai.py) against LiteLLM's, on the same inputs.

Each test runs a request through LiteLLM (the direct path switched off) and then with the
direct path on, and compares what the provider received, the deltas and the job errors.
Which path served a request is read off the request itself: LiteLLM's call to the ``openai``
SDK sets ``x-stainless-raw-response``, the direct path's does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from litellm.utils import get_optional_params
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import providers.telemetry as provider_telemetry
from genq import JobError
from providers import direct_openai
from providers.errors import RateLimitedError
from providers.litellm_adapter import Delta, stream_chat
from tests.fakes.openai_server import (
    FakeOpenAI,
    Reply,
    function_tools,
    reasoning_deltas,
    tool_call_deltas,
)
from tests.providers.test_warm_calls import script_answer
from workers.settings import WorkerSettings

MODEL = "openai/gpt-4o-mini"
KEY = "sk-direct-0123456789abcdefghij"
RAW = "x-stainless-raw-response"
HELLO = [{"role": "user", "content": "say hello"}]
CANNED_BASE = "http://canned.test/v1"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts without cached decisions: one made under another test's settings (a
    LiteLLM-wide config, a patched mapping) would otherwise answer for this one, in whatever
    order the tests run."""
    monkeypatch.setattr(direct_openai, "_decisions", {})
    monkeypatch.setattr(direct_openai, "_tool_verdicts", {})


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default_tokens=3) as fake:
        yield fake


@dataclass
class Outcome:
    deltas: list[Delta]
    error: JobError | None
    direct: bool | None  # which path sent the request (None: no request arrived)
    request: Any = None


async def run(
    server: FakeOpenAI | None,
    direct: bool,
    model: str = MODEL,
    messages: list[dict[str, Any]] | None = None,
    params: dict[str, Any] | None = None,
    reply: Reply | None = None,
    silence_timeout: float = 5.0,
    api_base: str | None = None,
    api_key: str | None = KEY,
) -> Outcome:
    """One request on one path (``direct``: the direct path on, else off)."""
    if reply is not None and server is not None:
        server.plan(reply)
    before = server.count() if server is not None else 0
    direct_openai.set_enabled(direct)
    deltas: list[Delta] = []
    error: JobError | None = None
    try:
        stream = stream_chat(
            model,
            messages or HELLO,
            params or {},
            silence_timeout=silence_timeout,
            api_base=api_base or (server.base_url if server else None),
            api_key=api_key,
        )
        async with contextlib.aclosing(stream):
            async for delta in stream:
                deltas.append(delta)
    except JobError as exc:
        error = exc
    finally:
        direct_openai.set_enabled(True)
    if server is None or server.count() == before:
        return Outcome(deltas, error, None)
    record = server.requests[-1]
    return Outcome(deltas, error, RAW not in record.headers, record)


async def both(
    server: FakeOpenAI | None, reply: Reply | None = None, **kw: Any
) -> tuple[Outcome, Outcome]:
    through_litellm = await run(server, False, reply=reply, **kw)
    direct = await run(server, True, reply=reply, **kw)
    return through_litellm, direct


def same_request(through_litellm: Outcome, direct: Outcome) -> None:
    assert through_litellm.direct is False
    assert direct.direct is True
    assert direct.request.body == through_litellm.request.body
    for header in ("authorization", "content-type"):
        assert direct.request.headers[header] == through_litellm.request.headers[header]


def same_error(through_litellm: Outcome, direct: Outcome) -> None:
    a, b = through_litellm.error, direct.error
    assert a is not None and b is not None
    assert type(b) is type(a) and str(b) == str(a)
    assert getattr(b, "retry_after", None) == getattr(a, "retry_after", None)
    if isinstance(a, RateLimitedError):
        assert isinstance(b, RateLimitedError) and b.provider_wide == a.provider_wide
    assert KEY not in str(b)


# -- what the provider receives ------------------------------------------------------------

WEATHER = function_tools("get_weather", "get_time", described=True)
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "rain"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this picture?"},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.com/a.png", "detail": "low"},
            },
        ],
    },
]

Case = tuple[str, list[dict[str, Any]], dict[str, Any]]

SENT_AS_THEY_ARE: dict[str, Case] = {
    "plain": (MODEL, HELLO, {}),
    "sampling": (
        MODEL,
        HELLO,
        {
            "temperature": 0.3,
            "top_p": 0.9,
            "max_tokens": 64,
            "seed": 7,
            "stop": ["\n\n"],
            "user": "u-1",
        },
    ),
    "penalties": (
        MODEL,
        HELLO,
        {"presence_penalty": 0.5, "frequency_penalty": 0.2, "logit_bias": {"50256": -100}},
    ),
    "tools": (
        MODEL,
        HELLO,
        {"tools": WEATHER, "tool_choice": "auto", "parallel_tool_calls": False},
    ),
    "named tool": (
        MODEL,
        HELLO,
        {"tools": WEATHER, "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
    ),
    "json schema": (
        MODEL,
        HELLO,
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "strict": True,
                    "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                },
            }
        },
    ),
    "history": (MODEL, HISTORY, {"tools": WEATHER}),
    "any compatible server": (
        "openai/my-local-model",
        HELLO,
        {"temperature": 0.1, "max_tokens": 9},
    ),
    "gpt-5 at the one temperature it takes": ("openai/gpt-5", HELLO, {"temperature": 1}),
}


@pytest.mark.parametrize("case", SENT_AS_THEY_ARE)
async def test_the_provider_receives_what_litellm_sends(server: FakeOpenAI, case: str) -> None:
    model, messages, params = SENT_AS_THEY_ARE[case]
    through_litellm, direct = await both(server, model=model, messages=messages, params=params)
    same_request(through_litellm, direct)
    assert direct.deltas == through_litellm.deltas
    assert through_litellm.error is None and direct.error is None


UNSAFE_PATTERN_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"code": {"type": "string", "pattern": "^\\p{L}+$"}},
            },
        },
    }
]

CHANGED_BY_LITELLM: dict[str, Case] = {
    "max_tokens on o3-mini": ("openai/o3-mini", HELLO, {"max_tokens": 64}),
    "max_tokens on gpt-5": ("openai/gpt-5", HELLO, {"max_tokens": 64}),
    "temperature on gpt-5": ("openai/gpt-5", HELLO, {"temperature": 0.3}),
    "reasoning_effort on a non-reasoning model": (MODEL, HELLO, {"reasoning_effort": "low"}),
    "user on a server outside OpenAI's catalogue": (
        "openai/my-local-model",
        HELLO,
        {"user": "u-1"},
    ),
    "tool_choice without tools": (MODEL, HELLO, {"tool_choice": "auto"}),
    "a developer message": (MODEL, [{"role": "developer", "content": "Be terse."}, *HELLO], {}),
    "a cache mark": (
        MODEL,
        [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        {},
    ),
    "a regex Python cannot compile": (MODEL, HELLO, {"tools": UNSAFE_PATTERN_TOOL}),
}


@pytest.mark.parametrize("case", CHANGED_BY_LITELLM)
async def test_a_request_litellm_would_change_goes_through_litellm(
    server: FakeOpenAI, case: str
) -> None:
    model, messages, params = CHANGED_BY_LITELLM[case]
    assert not direct_openai.serves(model, messages, params, server.base_url, KEY)
    outcome = await run(server, True, model=model, messages=messages, params=params)
    assert outcome.direct is False


async def test_without_a_key_the_key_is_the_one_litellm_reads(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert not direct_openai.serves(MODEL, HELLO, {}, server.base_url, None)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment-0123")
    through_litellm, direct = await both(server, api_key=None)
    same_request(through_litellm, direct)
    assert direct.request.headers["authorization"] == "Bearer sk-from-the-environment-0123"


async def test_tools_are_checked_in_every_request(server: FakeOpenAI) -> None:
    """The cached answer covers the names of the params; tools LiteLLM would rewrite (a
    pattern Python cannot compile is dropped) still send that one request through LiteLLM."""
    assert direct_openai.serves(MODEL, HELLO, {"tools": WEATHER}, server.base_url, KEY)
    assert (await run(server, True, params={"tools": UNSAFE_PATTERN_TOOL})).direct is False
    assert (await run(server, True, params={"tools": WEATHER})).direct is True


async def test_the_decision_is_litellms_mapping_asked_once_per_kind_of_request(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    mapping = get_optional_params

    def counting(**kwargs: Any) -> Any:
        asked.append(kwargs["model"])
        return mapping(**kwargs)

    monkeypatch.setattr(direct_openai, "get_optional_params", counting)
    params = {"temperature": 0.25, "tools": WEATHER}
    for text in ("one", "two", "three"):
        messages = [{"role": "user", "content": text}]
        assert direct_openai.serves(MODEL, messages, params, server.base_url, KEY)
    assert asked == ["gpt-4o-mini"]
    assert direct_openai.serves(MODEL, HELLO, {**params, "temperature": 0.5}, server.base_url, KEY)
    assert not direct_openai.serves(
        "openai/gpt-5", HELLO, {"temperature": 0.5}, server.base_url, KEY
    )
    assert asked == ["gpt-4o-mini", "gpt-4o-mini", "gpt-5"]


# -- the deltas ------------------------------------------------------------------------------

STREAMS = {
    "text": Reply.stream(["Hello", ",", " world"]),
    "cut short by length": Reply.stream(["a", "b"], finish_reason="length"),
    "reasoning_content": Reply.deltas_of(
        [*reasoning_deltas("Let me think."), {"content": "Yes."}], reasoning_tokens=4
    ),
    "reasoning": Reply.deltas_of(
        [{"reasoning": "Hmm, "}, {"reasoning": "ok."}, {"content": "Done."}]
    ),
    "tool calls": Reply.deltas_of(
        tool_call_deltas(
            [("c1", "get_weather", '{"city": "Oslo"}'), ("c2", "get_time", '{"city": "Rome"}')]
        ),
        finish_reason="tool_calls",
    ),
    "tool calls ending in stop": Reply.deltas_of(
        tool_call_deltas([("c1", "get_weather", '{"city": "Oslo"}')]), finish_reason="stop"
    ),
    "empty content": Reply.stream([]),
    "an unmapped finish reason": Reply.stream(["x"], finish_reason="eos_token"),
}


@pytest.mark.parametrize("case", STREAMS)
async def test_the_deltas_are_litellms(server: FakeOpenAI, case: str) -> None:
    through_litellm, direct = await both(server, reply=STREAMS[case], params={"tools": WEATHER})
    same_request(through_litellm, direct)
    assert direct.deltas == through_litellm.deltas
    assert direct.deltas[-1].usage is not None  # the usage-only last chunk, as the provider sent it


def sse(*chunks: dict[str, Any]) -> bytes:
    def event(chunk: dict[str, Any]) -> str:
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            **chunk,
        }
        return f"data: {json.dumps(body)}\n\n"

    return ("".join(event(c) for c in chunks) + "data: [DONE]\n\n").encode()


def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


USAGE = {
    "prompt_tokens": 11,
    "completion_tokens": 2,
    "total_tokens": 13,
    "prompt_tokens_details": {"cached_tokens": 3},
}

CANNED = {
    "no usage reported": sse(
        choice({"role": "assistant", "content": "Hi"}),
        choice({"content": " there"}),
        choice({}, "stop"),
    ),
    "text and finish in one chunk": sse(
        choice({"content": "Hi"}), choice({"content": "!"}, "stop"), {"choices": [], "usage": USAGE}
    ),
    "usage with the finish chunk": sse(
        choice({"content": "Hi"}), {**choice({}, "stop"), "usage": USAGE}
    ),
    "no content at all": sse(
        choice({"role": "assistant", "content": ""}),
        choice({}, "stop"),
        {"choices": [], "usage": USAGE},
    ),
    "reasoning under either name, its tokens reported": sse(
        choice({"role": "assistant", "reasoning_content": "Think"}),
        choice({"reasoning": " more"}),
        choice({"content": "Hi"}, "stop"),
        {"choices": [], "usage": {**USAGE, "completion_tokens_details": {"reasoning_tokens": 1}}},
    ),
    "tool calls without an index or an id": sse(
        choice({"tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{"}}]}),
        choice({"tool_calls": [{"index": 0, "id": "", "function": {"arguments": "}"}}]}),
        choice({}, "tool_calls"),
    ),
}


@contextlib.contextmanager
def canned(body: bytes) -> Iterator[None]:
    """Serves ``body`` to both paths (both send through LiteLLM's httpx client)."""
    with respx.mock(using="httpx") as mock:
        mock.post(f"{CANNED_BASE}/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body
            )
        )
        yield


@pytest.mark.parametrize("case", CANNED)
async def test_the_deltas_of_other_stream_shapes_are_litellms(case: str) -> None:
    with canned(CANNED[case]):
        through_litellm = await run(None, False, api_base=CANNED_BASE)
        direct = await run(None, True, api_base=CANNED_BASE)
    assert through_litellm.error is None and direct.error is None
    assert direct.deltas == through_litellm.deltas


async def test_the_sdk_hands_each_chunk_over_as_the_json_it_parsed() -> None:
    """The direct path reads the SDK's stream typed ``object``: the chunks are the JSON objects
    the server sent, not ``ChatCompletionChunk`` models (whose making cost most of the SDK's
    time per chunk); the deltas above are LiteLLM's all the same."""
    sent = [choice({"role": "assistant", "content": "Hi"}), choice({}, "stop")]
    with canned(sse(*sent)):
        stream = await direct_openai.open_stream(
            "openai/gpt-4o-mini", [{"role": "user", "content": "Hi"}], {}, CANNED_BASE, "sk-t"
        )
        async with stream:
            chunks = [chunk async for chunk in stream]
    assert [type(chunk) for chunk in chunks] == [dict, dict]
    assert [chunk["choices"] for chunk in chunks] == [c["choices"] for c in sent]


CANNED_FAILURES = {
    "an end with no finish reason": sse(choice({"content": "Hi"}), choice({"content": " there"})),
    "an error event": sse(choice({"content": "Hi"})).replace(
        b"data: [DONE]", b'data: {"error": {"message": "overloaded", "code": 503}}'
    ),
}


@pytest.mark.parametrize("case", CANNED_FAILURES)
async def test_other_stream_failures_are_the_same_job_error(case: str) -> None:
    with canned(CANNED_FAILURES[case]):
        through_litellm = await run(None, False, api_base=CANNED_BASE)
        direct = await run(None, True, api_base=CANNED_BASE)
    assert direct.deltas == through_litellm.deltas
    same_error(through_litellm, direct)


# -- errors ----------------------------------------------------------------------------------

ERRORS = {
    "429 with Retry-After": Reply.error(429, "Rate limit reached", retry_after="3"),
    "429 with rate-limit headers": Reply.error(
        429,
        "Rate limit reached",
        headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"},
    ),
    "429 for this key's quota": Reply.error(429, "You exceeded your current quota"),
    "400": Reply.error(400, "Invalid value for 'messages'"),
    "401": Reply.error(401, f"Incorrect API key provided: {KEY}"),
    "404": Reply.error(404, "The model does not exist"),
    "422": Reply.error(422, "Unprocessable"),
    "500": Reply.error(500, "boom"),
    "503": Reply.error(503, "overloaded", retry_after="7"),
    "a stream cut mid-way": Reply.drop(after=2),
}


@pytest.mark.parametrize("case", ERRORS)
async def test_failures_become_the_same_job_error(server: FakeOpenAI, case: str) -> None:
    through_litellm, direct = await both(server, reply=ERRORS[case])
    assert direct.direct is True
    assert direct.deltas == through_litellm.deltas
    same_error(through_litellm, direct)


async def test_a_refused_connection_is_the_same_job_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    through_litellm, direct = await both(None, api_base=closed)
    same_error(through_litellm, direct)


@pytest.mark.parametrize("after", [0, 2])
async def test_silence_is_the_same_job_error(server: FakeOpenAI, after: int) -> None:
    through_litellm, direct = await both(server, reply=Reply.hang(after=after), silence_timeout=0.3)
    assert direct.direct is True
    assert direct.deltas == through_litellm.deltas
    same_error(through_litellm, direct)


# -- cancellation ----------------------------------------------------------------------------


@pytest.mark.parametrize("direct", [False, True], ids=["litellm", "direct"])
@pytest.mark.parametrize("elsewhere", [False, True], ids=["awaiting a chunk", "awaiting elsewhere"])
async def test_cancelling_the_consumer_closes_the_upstream(
    server: FakeOpenAI, direct: bool, elsewhere: bool
) -> None:
    server.plan(Reply.stream([f"t{i} " for i in range(500)], delay=0.02))
    received = asyncio.Event()
    direct_openai.set_enabled(direct)

    async def consume() -> None:
        stream = stream_chat(MODEL, HELLO, api_base=server.base_url, api_key=KEY)
        async with contextlib.aclosing(stream):
            async for _ in stream:
                received.set()
                if elsewhere:
                    await asyncio.sleep(3600)  # like a slow Redis write

    try:
        task = asyncio.create_task(consume())
        await asyncio.wait_for(received.wait(), 5)
    finally:
        direct_openai.set_enabled(True)
    record = server.requests[-1]
    assert (RAW not in record.headers) is direct
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(record.wait_disconnected, 2)
    assert record.disconnected_at is not None
    assert record.disconnected_at - cancelled_at < 0.5
    assert record.tokens_sent < 100


# -- telemetry -------------------------------------------------------------------------------


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(provider_telemetry, "tracing_on", lambda: True)
    monkeypatch.setattr(provider_telemetry, "tracer", lambda: provider.get_tracer("test"))
    return exporter


def described(span: ReadableSpan) -> tuple[str, dict[str, Any], str]:
    attributes = dict(span.attributes or {})
    first_chunk = attributes.pop("gen_ai.response.time_to_first_chunk", 0.0)
    assert isinstance(first_chunk, float) and first_chunk >= 0
    return span.name, attributes, span.status.status_code.name


@pytest.mark.parametrize(
    "reply", [Reply.stream(["a", "b"]), Reply.error(429, retry_after="2"), Reply.drop(after=1)]
)
async def test_the_provider_call_span_is_the_same(
    server: FakeOpenAI, spans: InMemorySpanExporter, reply: Reply
) -> None:
    params = {"temperature": 0.5, "max_tokens": 20}
    await run(server, False, reply=reply, params=params)
    await run(server, True, reply=reply, params=params)
    through_litellm, direct = spans.get_finished_spans()
    assert described(direct) == described(through_litellm)


# -- warming --------------------------------------------------------------------------------

# A fresh interpreter: the modules a first call imports are only seen in one that made none.
FIRST_CALL = """
import asyncio, json, sys
from tests.fakes.openai_server import FakeOpenAI
from providers.litellm_adapter import stream_chat, warm_calls

async def main(server):
    if sys.argv[1] == "warm":
        await warm_calls(["openai/gpt-4o-mini"])
    before, warm_requests = set(sys.modules), server.count()
    async for _ in stream_chat("openai/gpt-4o-mini", [{"role": "user", "content": "hi"}],
                               api_base=server.base_url, api_key="sk-test"):
        pass
    print(json.dumps({"loaded": sorted(set(sys.modules) - before), "warm_requests": warm_requests,
                      "direct": "x-stainless-raw-response" not in server.requests[-1].headers}))

with FakeOpenAI(default_tokens=3) as server:
    asyncio.run(main(server))
"""


def first_call(mode: str) -> dict[str, Any]:
    return script_answer(FIRST_CALL, mode)


def test_a_warmed_worker_sends_its_first_direct_request_without_imports() -> None:
    cold, warm = first_call("cold"), first_call("warm")
    assert cold["direct"] and warm["direct"]
    assert cold["loaded"], "a cold first call imported nothing: nothing to warm"
    assert warm["loaded"] == []
    assert warm["warm_requests"] == 0


# -- the guard and the switch ----------------------------------------------------------------


async def test_another_litellm_release_sends_everything_through_litellm(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(direct_openai.GUARD.tested, "litellm", "0.0.1")
    try:
        with caplog.at_level(logging.WARNING, logger="providers"):
            assert direct_openai.GUARD.check() is False
        assert [r.getMessage() for r in caplog.records] == [
            f"litellm {version('litellm')} is not the tested 0.0.1: genq's direct OpenAI path is "
            "off; every openai/... request goes through LiteLLM (a slower first token)"
        ]
        assert not direct_openai.serves(MODEL, HELLO, {}, server.base_url, KEY)
        outcome = await run(server, True)
        assert outcome.direct is False and outcome.error is None
    finally:
        monkeypatch.undo()
        assert direct_openai.GUARD.check()
    assert (await run(server, True)).direct is True


def test_genq_direct_openai_0_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    base: dict[str, Any] = {"queue_namespace": "ns", "_env_file": None}
    assert WorkerSettings(**base).direct_openai is True
    monkeypatch.setenv("GENQ_DIRECT_OPENAI", "0")
    assert WorkerSettings(**base).direct_openai is False
