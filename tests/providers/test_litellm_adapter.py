"""The LiteLLM adapter against a real local OpenAI-compatible server (and respx)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time

import httpx
import pytest
import respx

from genq import RetryJobError, TerminalJobError
from providers.errors import RateLimitedError
from providers.litellm_adapter import Delta, stream_chat
from tests.fakes.openai_server import FakeOpenAI, Reply

MODEL = "openai/gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "say hello"}]
KEY = "sk-test-0123456789abcdefghij"


async def collect(server: FakeOpenAI, silence_timeout: float = 5.0) -> list[Delta]:
    stream = stream_chat(
        MODEL,
        MESSAGES,
        {"temperature": 0},
        silence_timeout=silence_timeout,
        api_base=server.base_url,
        api_key=KEY,
    )
    async with contextlib.aclosing(stream):
        return [d async for d in stream]


async def test_stream_yields_text_then_finish_reason_and_usage(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.stream(["Hello", ",", " world"]))
    deltas = await collect(fake_openai)
    assert "".join(d.text for d in deltas) == "Hello, world"
    assert [d.finish_reason for d in deltas if d.finish_reason] == ["stop"]
    usage = [d.usage for d in deltas if d.usage]
    assert usage[-1]["completion_tokens"] == 3
    request = fake_openai.requests[0]
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.headers["authorization"] == f"Bearer {KEY}"


async def test_rate_limit_is_one_request_with_retry_after(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.error(429, "Rate limit reached", retry_after="3"))
    with pytest.raises(RateLimitedError) as info:
        await collect(fake_openai)
    assert info.value.retry_after == 3.0
    await asyncio.sleep(0.2)  # an SDK-internal retry would have arrived by now
    assert fake_openai.count() == 1


async def test_server_error_is_retryable_and_not_retried_inside(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.error(500, "boom"))
    with pytest.raises(RetryJobError) as info:
        await collect(fake_openai)
    assert not isinstance(info.value, RateLimitedError)
    await asyncio.sleep(0.2)
    assert fake_openai.count() == 1


async def test_bad_request_is_terminal(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.error(400, "messages must not be empty"))
    with pytest.raises(TerminalJobError, match="messages must not be empty"):
        await collect(fake_openai)
    assert fake_openai.count() == 1


async def test_rejected_key_is_redacted_from_the_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.error(401, f"Incorrect API key provided: {KEY}"))
    with pytest.raises(TerminalJobError) as info:
        await collect(fake_openai)
    assert KEY not in str(info.value)
    assert "Incorrect API key" in str(info.value)


async def test_drop_mid_stream_is_retryable(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.drop(after=2))
    with pytest.raises(RetryJobError):
        await collect(fake_openai)


async def test_silent_provider_is_aborted_after_silence_timeout(fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.hang(after=1))
    started = time.monotonic()
    with pytest.raises(RetryJobError, match="silence timeout"):
        await collect(fake_openai, silence_timeout=0.4)
    assert 0.35 <= time.monotonic() - started < 3
    record = fake_openai.requests[0]
    assert await asyncio.to_thread(record.wait_disconnected, 2)


async def cancel_mid_stream(server: FakeOpenAI, body_awaits_elsewhere: bool) -> None:
    server.plan(Reply.stream([f"t{i} " for i in range(500)], delay=0.02))
    received = asyncio.Event()

    async def consume() -> None:
        stream = stream_chat(MODEL, MESSAGES, api_base=server.base_url, api_key=KEY)
        async with contextlib.aclosing(stream):
            async for _ in stream:
                received.set()
                if body_awaits_elsewhere:
                    await asyncio.sleep(3600)  # like a slow Redis write

    task = asyncio.create_task(consume())
    await asyncio.wait_for(received.wait(), 5)
    await asyncio.sleep(0.05)
    cancelled_at = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    record = server.requests[0]
    assert await asyncio.to_thread(record.wait_disconnected, 2)
    assert record.disconnected_at is not None
    assert record.disconnected_at - cancelled_at < 0.5
    assert record.tokens_sent_after(cancelled_at) <= 2
    assert record.tokens_sent < 100


async def test_cancel_while_awaiting_a_chunk_closes_the_upstream(fake_openai: FakeOpenAI) -> None:
    await cancel_mid_stream(fake_openai, body_awaits_elsewhere=False)


async def test_cancel_while_the_consumer_awaits_elsewhere_closes_the_upstream(
    fake_openai: FakeOpenAI,
) -> None:
    await cancel_mid_stream(fake_openai, body_awaits_elsewhere=True)


def sse(*tokens: str) -> bytes:
    def chunk(delta: dict[str, str], finish: str | None = None) -> str:
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n"

    events = [chunk({"content": t}) for t in tokens] + [chunk({}, "length"), "data: [DONE]\n\n"]
    return "".join(events).encode()


async def test_stream_through_respx_mocked_http() -> None:
    with respx.mock(using="httpx") as mock:
        route = mock.post("http://provider.test/v1/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=sse("a", "b", "c")
            )
        )
        stream = stream_chat(MODEL, MESSAGES, api_base="http://provider.test/v1", api_key=KEY)
        async with contextlib.aclosing(stream):
            deltas = [d async for d in stream]
    assert "".join(d.text for d in deltas) == "abc"
    assert "length" in [d.finish_reason for d in deltas]
    assert route.call_count == 1
    assert json.loads(route.calls[0].request.content)["model"] == "gpt-4o-mini"
