"""The official ``openai`` Python SDK against a live gateway + demo worker: Chat Completions."""

from __future__ import annotations

import time

import openai
import pytest

from gateway.openai.objects import job_id_of
from tests.e2e.browser import Stack

pytestmark = pytest.mark.slow

USER = [{"role": "user", "content": "chat with me"}]


def wait_status(stack: Stack, job_id: str, status: str, timeout: float = 10) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while (record := stack.record(job_id))["status"] != status:
        assert time.monotonic() < deadline, f"{job_id} is {record['status']}, not {status}"
        time.sleep(0.05)
    return record


def test_chat_completion_waits_for_the_generations_result(
    client: openai.OpenAI, stack: Stack
) -> None:
    completion = client.chat.completions.create(model="demo/fast", messages=USER)
    native = stack.result(job_id_of(completion.id))
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.content == native["text"]
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == native["usage"]["completion_tokens"]


def test_chat_completion_stream_sends_chunks_usage_and_done(
    client: openai.OpenAI, stack: Stack
) -> None:
    chunks = list(
        client.chat.completions.create(
            model="demo/fast",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == stack.result(job_id_of(chunks[0].id))["text"]
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    native = stack.result(job_id_of(chunks[0].id))
    assert chunks[-1].usage.completion_tokens == native["usage"]["completion_tokens"] >= 48
    assert all(c.usage is None for c in chunks[:-1])
    assert {c.id for c in chunks} == {chunks[0].id}


def test_chat_stream_helper_gets_the_final_completion(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(model="demo/fast", messages=USER) as stream:
        final = stream.get_final_completion()
    assert (final.choices[0].message.content or "").startswith("Echo: chat with me")


def test_chat_stream_left_without_idempotency_key_cancels_the_generation(
    client: openai.OpenAI, stack: Stack
) -> None:
    stream = client.chat.completions.create(
        model="demo/slow", messages=USER, stream=True, extra_body={"demo_tokens": 200}
    )
    first = [next(stream), next(stream)]
    stream.close()
    wait_status(stack, job_id_of(first[0].id), "cancelled")


def test_chat_with_idempotency_key_reattaches_and_runs_the_provider_once(
    client: openai.OpenAI, stack: Stack
) -> None:
    headers = {"Idempotency-Key": f"chat-{time.monotonic_ns()}"}
    body = {"model": "demo/fast", "messages": USER, "extra_body": {"demo_tokens": 20}}
    stream = client.chat.completions.create(**body, stream=True, extra_headers=headers)
    first = [next(stream), next(stream)]
    stream.close()  # with a key, leaving does not cancel
    replay = list(client.chat.completions.create(**body, stream=True, extra_headers=headers))
    waited = client.chat.completions.create(**body, extra_headers=headers)
    job_id = job_id_of(first[0].id)
    assert {c.id for c in replay} == {first[0].id} and waited.id == first[0].id
    text = "".join(c.choices[0].delta.content or "" for c in replay if c.choices)
    record = stack.result(job_id)
    assert text == waited.choices[0].message.content == record["text"]
    assert (record["status"], record["attempt"]) == ("completed", 1)


def test_chat_unknown_model_and_bad_params_raise_the_sdks_typed_errors(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="nobody/nothing", messages=USER)
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="demo/fast", messages=[])
    assert bad.value.body["param"] == "messages"
    with pytest.raises(openai.BadRequestError) as unsupported:
        client.chat.completions.create(
            model="demo/fast", messages=USER, extra_body={"colour": "blue"}
        )
    assert "colour" in unsupported.value.message


def test_chat_provider_429_on_every_attempt_raises_the_sdks_rate_limit_error(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(
            model="demo/fast",
            messages=USER,
            extra_body={"demo_fault": "429", "demo_fault_attempts": 9, "demo_retry_after": 0.1},
        )
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"]
