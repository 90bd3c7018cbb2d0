"""The official ``openai`` Python SDK against a live gateway + demo worker: the Responses API.

Every check compares what the SDK got with the native view of the same generation
(``/v1/generations/{id}``), so a translation bug cannot hide behind a second translation.
"""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest

from gateway.openai.objects import job_id_of
from tests.e2e.browser import Stack
from tests.openai.conftest import sdk_client

pytestmark = pytest.mark.slow

PREAMBLE = [
    "response.created",
    "response.queued",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
]
CLOSING = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def poll(client: openai.OpenAI, response_id: str, until: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        response = client.responses.retrieve(response_id)
        if until(response):
            return response
        assert time.monotonic() < deadline, f"{response_id} stayed {response.status}"
        time.sleep(0.05)


def numbers(events: list[Any]) -> list[int]:
    return [e.sequence_number for e in events]


def test_responses_background_create_answers_queued_and_retrieve_polls_to_completed(
    client: openai.OpenAI, stack: Stack
) -> None:
    created = client.responses.create(
        model="demo/fast", input="background please", background=True, metadata={"k": "v"}
    )
    assert created.id.startswith("resp_")
    assert (created.status, created.background, created.output) == ("queued", True, [])
    done = poll(client, created.id, lambda r: r.status not in ("queued", "in_progress"))
    native = stack.result(job_id_of(created.id))
    assert done.status == "completed"
    assert done.output_text == native["text"]
    assert done.output_text.startswith("Echo: background please")
    assert done.metadata == {"k": "v"}
    assert done.usage is not None
    # 48 words; the demo reports no usage, so the worker's token count (one or more a word).
    assert done.usage.output_tokens == native["usage"]["completion_tokens"] >= 48
    assert done.usage.total_tokens == done.usage.input_tokens + done.usage.output_tokens


def test_responses_stream_sends_every_event_in_order_with_increasing_sequence_numbers(
    client: openai.OpenAI, stack: Stack
) -> None:
    events = list(client.responses.create(model="demo/fast", input="stream me", stream=True))
    kinds = [e.type for e in events]
    assert kinds[:5] == PREAMBLE and kinds[-4:] == CLOSING
    assert set(kinds[5:-4]) == {"response.output_text.delta"}
    assert numbers(events) == sorted(set(numbers(events)))
    assert numbers(events)[0] == 0
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    completed = events[-1].response
    assert text == events[-4].text == completed.output_text
    assert text == stack.result(job_id_of(completed.id))["text"]
    assert completed.status == "completed" and completed.background is False


def test_responses_retrieve_stream_starting_after_gives_exactly_the_rest(
    client: openai.OpenAI,
) -> None:
    created = client.responses.create(
        model="demo/fast", input="resume me", background=True, extra_body={"demo_tokens": 30}
    )
    first: list[Any] = []
    with client.responses.retrieve(created.id, stream=True) as stream:
        for event in stream:
            first.append(event)
            if sum(e.type == "response.output_text.delta" for e in first) == 3:
                break
    cut = first[-1].sequence_number
    rest = list(client.responses.retrieve(created.id, stream=True, starting_after=cut))
    replay = list(client.responses.retrieve(created.id, stream=True))
    assert rest[-1].type == "response.completed"
    assert numbers(first) + numbers(rest) == numbers(replay)
    assert [e.to_dict() for e in first + rest] == [e.to_dict() for e in replay]
    text = "".join(e.delta for e in first + rest if e.type == "response.output_text.delta")
    assert text == rest[-1].response.output_text
    assert (
        list(client.responses.retrieve(created.id, stream=True, starting_after=numbers(replay)[-1]))
        == []
    )


def test_responses_stream_helper_accumulates_the_final_response(client: openai.OpenAI) -> None:
    with client.responses.stream(model="demo/fast", input="helper") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.output_text == "".join(deltas)
    assert final.output_text.startswith("Echo: helper")


def test_responses_cancel_ends_cancelled_with_usage_and_is_idempotent(
    client: openai.OpenAI, stack: Stack
) -> None:
    created = client.responses.create(
        model="demo/slow", input="cancel me", background=True, extra_body={"demo_tokens": 200}
    )
    poll(client, created.id, lambda r: r.status == "in_progress" and len(r.output_text) > 10)
    cancelled = client.responses.cancel(created.id)
    assert cancelled.status == "cancelled"
    assert cancelled.usage is not None and cancelled.usage.output_tokens > 0
    assert cancelled.output_text.startswith("Echo: cancel")
    again = client.responses.cancel(created.id)
    assert again.status == "cancelled"
    assert again.output_text == cancelled.output_text
    assert client.responses.retrieve(created.id).status == "cancelled"
    assert stack.record(job_id_of(created.id))["status"] == "cancelled"
    events = list(client.responses.retrieve(created.id, stream=True))
    assert events[-1].type == "response.cancelled"
    assert events[-1].to_dict()["response"]["status"] == "cancelled"  # passed through as is


def test_responses_unknown_model_raises_the_sdks_not_found_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(model="nobody/nothing", input="x")
    assert caught.value.code == "model_not_found"
    assert caught.value.body["param"] == "model"


def test_responses_invalid_input_is_a_400_in_openais_error_shape(
    client: openai.OpenAI, stack: Stack
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="demo/fast", input="x", temperature=7)
    assert caught.value.body["type"] == "invalid_request_error"
    assert caught.value.body["param"] == "temperature"
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_demo.00000000000000000000000000000000")
    with stack.client() as native:  # native routes keep {"detail": ...}
        answer = native.post("/v1/generations", json={"model": "demo/fast"})
    assert answer.status_code == 422 and "detail" in answer.json()


def test_responses_wrong_key_raises_the_sdks_authentication_error(stack: Stack) -> None:
    with (
        sdk_client(stack, key="wrong") as sdk,
        pytest.raises(openai.AuthenticationError) as caught,
    ):
        sdk.responses.retrieve("resp_demo.00000000000000000000000000000000")
    assert caught.value.code == "invalid_api_key"


def test_responses_provider_429_waits_retry_after_then_completes(
    client: openai.OpenAI, stack: Stack
) -> None:
    started = time.monotonic()
    response = client.responses.create(model="demo/fast", input="slow down [demo:429:1]")
    assert response.status == "completed"
    assert time.monotonic() - started >= 1.0
    assert stack.record(job_id_of(response.id))["attempt"] == 2


def test_responses_provider_429_on_every_attempt_fails_with_rate_limit_exceeded(
    client: openai.OpenAI,
) -> None:
    created = client.responses.create(
        model="demo/fast",
        input="always limited",
        background=True,
        extra_body={"demo_fault": "429", "demo_fault_attempts": 9, "demo_retry_after": 0.1},
    )
    failed = poll(client, created.id, lambda r: r.status not in ("queued", "in_progress"))
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code == "rate_limit_exceeded"
