"""The stream switches change LiteLLM's cost, not its output: every chunk LiteLLM yields, and the
response it assembles, are the same with the switches on and off (providers/_lean_chunks.py,
providers/_lean_streams.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
from litellm.integrations.custom_logger import CustomLogger
from litellm.types.utils import Delta, ModelResponseStream, StreamingChoices

from providers import _lean_streams
from providers._litellm import litellm
from providers._litellm_patches import set_patched
from providers.litellm_adapter import stream_chat

KEY = "sk-test-0123456789abcdefghij"
BASE = "http://provider.test/v1"


@contextlib.contextmanager
def stock_litellm() -> Iterator[None]:
    set_patched(False)
    try:
        yield
    finally:
        assert set_patched(True)


def state(model: Any) -> dict[str, Any]:
    """Everything a pydantic model holds, nested models included, in order."""

    def plain(value: Any) -> Any:
        if isinstance(value, (Delta, StreamingChoices, ModelResponseStream)):
            return state(value)
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return {
        "type": type(model).__name__,
        "fields": {k: plain(v) for k, v in model.__dict__.items()},
        "extra": {k: plain(v) for k, v in (model.__pydantic_extra__ or {}).items()},
        "extra order": list(model.__pydantic_extra__ or {}),
        "fields set": sorted(model.__pydantic_fields_set__),
        "private": model.__pydantic_private__,
        "dump": model.model_dump(),
        "json": model.model_dump_json(),
        "repr": repr(model),
    }


CONSTRUCTIONS: list[Callable[[], Any]] = [
    lambda: Delta(),
    lambda: Delta(content="a word "),
    lambda: Delta(content="a", role="assistant"),
    lambda: Delta(role="assistant"),
    lambda: Delta(content="x", reasoning_content="why"),  # not the plain case: LiteLLM's code
    lambda: StreamingChoices(),
    lambda: StreamingChoices(delta=Delta(content="y")),
    lambda: StreamingChoices(delta=None),
    lambda: StreamingChoices(delta={"content": "z"}),  # not the plain case
    lambda: StreamingChoices(finish_reason="stop", index=1),  # not the plain case
]


@pytest.mark.parametrize("build", CONSTRUCTIONS)
def test_a_chunk_object_is_built_the_same_with_the_switches_on(build: Callable[[], Any]) -> None:
    with stock_litellm():
        expected = state(build())
    assert state(build()) == expected


def test_extras_are_read_and_written_as_pydantic_does() -> None:
    def exercise() -> list[Any]:
        delta = Delta(content="a")
        delta.content = "b"
        delta.role = "assistant"
        delta.custom = 1  # not one of the known extras: pydantic's own path
        choice = StreamingChoices()
        choice.delta = delta
        choice.finish_reason = "stop"
        choice.enhancements = "e"  # not set by the constructor
        chunk = ModelResponseStream(model="m", choices=[choice])
        seen: list[Any] = [state(delta), state(choice), choice.delta.content, chunk.choices]
        for obj, name in [(chunk, "usage"), (delta, "reasoning_content"), (choice, "nope")]:
            try:
                seen.append(getattr(obj, name))
            except AttributeError as exc:
                seen.append(str(exc))
        seen += [hasattr(chunk, "usage"), getattr(chunk, "usage", None), chunk._hidden_params]
        chunk.usage = {"prompt_tokens": 1}
        return [*seen, chunk.usage, state(chunk)["extra"], state(chunk)["fields set"]]

    with stock_litellm():
        expected = exercise()
    assert exercise() == expected


def sse_events(*bodies: dict[str, Any]) -> bytes:
    base = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "system_fingerprint": "fp_1",
    }
    events = [f"data: {json.dumps({**base, **body})}\n\n" for body in bodies]
    return ("".join(events) + "data: [DONE]\n\n").encode()


def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


USAGE = {
    "prompt_tokens": 11,
    "completion_tokens": 4,
    "total_tokens": 15,
    "prompt_tokens_details": {"cached_tokens": 3},
}
TEXT_WITH_USAGE = sse_events(
    choice({"role": "assistant", "content": ""}),
    *(choice({"content": word}) for word in ("Hello", ",", " big", " world")),
    choice({}, "stop"),
    {"choices": [], "usage": USAGE},
)
TOOL_CALL = sse_events(
    choice(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": ""},
                }
            ],
        }
    ),
    choice({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
    choice({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
    choice({}, "tool_calls"),
    {"choices": [], "usage": USAGE},
)


def comparable(chunk: Any) -> dict[str, Any]:
    """A chunk's content: its id and times are new on every call."""
    dump = chunk.model_dump()
    dump.pop("id"), dump.pop("created")
    hidden = {k: v for k, v in chunk._hidden_params.items() if k != "created_at"}
    return {"dump": dump, "hidden": hidden}


async def litellm_stream(model: str, body: bytes | None = None) -> AsyncIterator[Any]:
    request: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "compare"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "demo_tokens": 25,
        "demo_delay_ms": 0,
    }
    if body is not None:
        request |= {"api_base": BASE, "api_key": KEY}
    with respx.mock(using="httpx", assert_all_called=False) as mock:
        mock.post(f"{BASE}/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=body or b""
            )
        )
        response = await litellm.acompletion(**request)
        async for chunk in response:
            yield chunk


async def chunks_and_response(model: str, body: bytes | None = None) -> tuple[list[Any], Any]:
    """LiteLLM's chunks for one call, and the response a success callback receives."""
    recorder = Recorder()
    litellm.callbacks = [recorder]
    try:
        chunks = [comparable(c) async for c in litellm_stream(model, body)]
        await recorder.wait()
    finally:  # LiteLLM copied the callback into its other lists: empty them all
        litellm.logging_callback_manager._reset_all_callbacks()
    return chunks, comparable_response(recorder.responses[0])


def comparable_response(response: Any) -> dict[str, Any]:
    dump = response.model_dump()
    dump.pop("id"), dump.pop("created")
    return dump


class Recorder(CustomLogger):
    def __init__(self) -> None:
        super().__init__()
        self.responses: list[Any] = []

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.responses.append(response_obj)

    async def wait(self) -> None:
        async with asyncio.timeout(5):
            while not self.responses:
                await asyncio.sleep(0.01)


@pytest.mark.parametrize(
    ("model", "body"),
    [
        ("demo/instant", None),
        ("openai/gpt-4o-mini", TEXT_WITH_USAGE),
        ("openai/gpt-4o-mini", TOOL_CALL),
    ],
    ids=["demo", "openai text and usage", "openai tool call"],
)
async def test_litellm_yields_and_logs_the_same_stream_with_the_switches_on(
    model: str, body: bytes | None
) -> None:
    with stock_litellm():
        expected = await chunks_and_response(model, body)
    chunks, response = await chunks_and_response(model, body)
    assert chunks == expected[0]
    assert response == expected[1]
    if body is TOOL_CALL:
        assert response["choices"][0]["message"]["tool_calls"][0]["function"] == {
            "name": "weather",
            "arguments": '{"city": "Oslo"}',
        }


@pytest.mark.usefixtures("through_litellm")
async def test_without_listeners_the_stream_still_carries_the_providers_usage() -> None:
    """The assembled response is skipped only when nobody reads it: the usage a provider
    reported still ends the stream, with its cached tokens, inline or (long streams) in
    LiteLLM's thread."""
    for inline in (_lean_streams.INLINE_CHUNKS, 2):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_lean_streams, "INLINE_CHUNKS", inline)
            with respx.mock(using="httpx") as mock:
                mock.post(f"{BASE}/chat/completions").mock(
                    return_value=httpx.Response(
                        200,
                        headers={"content-type": "text/event-stream"},
                        content=TEXT_WITH_USAGE,
                    )
                )
                stream = stream_chat(
                    "openai/gpt-4o-mini",
                    [{"role": "user", "content": "usage"}],
                    api_base=BASE,
                    api_key=KEY,
                )
                async with contextlib.aclosing(stream):
                    deltas = [d async for d in stream]
        assert "".join(d.text for d in deltas) == "Hello, big world"
        assert [d.usage for d in deltas if d.usage] == [
            {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15, "cached_tokens": 3}
        ]
