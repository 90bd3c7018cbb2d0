"""The native route beyond text: Chat-format messages and params checked before anything is
queued (422/400 naming the field), the image cap, the capability refusal, the record's
reasoning and tool calls, each part's SSE event name and an exact resume inside a call's
arguments, and an HTTP puller pushing typed parts."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.settings import Settings
from genq_services.capabilities import Capabilities, publish_capabilities, read_capabilities
from providers.capabilities import capabilities_of, model_capabilities

from .conftest import PARTS, PARTS_RESULT, create, key_client, queue_for, read_stream
from .test_pull import KEY_WORKER, post, pull, worker_key_settings

pytestmark = pytest.mark.timeout(60)

IMAGE_CAP = 3000
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
USER = {"role": "user", "content": "Weather in Paris?"}
CALLED = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}
ANSWERED = {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "clear"}'}


def data_url(size: int) -> str:
    return "data:image/png;base64," + base64.b64encode(b"\x89" * size).decode()


def image_message(*urls: str) -> dict[str, Any]:
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return {"role": "user", "content": [{"type": "text", "text": "What is it?"}, *parts]}


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return worker_key_settings(redis_url, prefix).model_copy(update={"max_image_bytes": IMAGE_CAP})


worker = key_client("worker", KEY_WORKER)


async def assert_nothing_queued(redis: aioredis.Redis, prefix: str) -> None:
    for provider in ("demo", "other"):
        counts = await queue_for(redis, prefix, provider).job_counts()
        assert not any(counts.values()), (provider, counts)


REFUSED_422: list[tuple[dict[str, Any], str]] = [
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.tool_call_id"),
    ({"messages": [USER, {"role": "user", "content": None}]}, "messages.1.content"),
    ({"messages": [{"role": "user", "content": [{"text": "x"}]}]}, "messages.0.content.0"),
    (
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
        "messages.0.content.0.text",
    ),
    ({"messages": [image_message("http://example.com/a.png")]}, "image_url.url"),
    ({"messages": [image_message("ftp://example.com/a.png")]}, "messages.0.content.1.image_url"),
    (
        {"messages": [{"role": "user", "content": [{"type": "file", "file": "x"}]}]},
        "messages.0.content.0.file",
    ),
    (
        {"messages": [{**CALLED, "tool_calls": [{"id": "c", "function": {"name": "bad name"}}]}]},
        "messages.0.tool_calls.0.function.name",
    ),
    (
        {"messages": [{"role": "user", "content": "x", "tool_calls": CALLED["tool_calls"]}]},
        "messages.0.tool_calls",
    ),
    (
        {"messages": [image_message(data_url(2000), data_url(1001))]},
        "messages.0.content.2.image_url.url",
    ),
    ({"messages": [image_message("data:image/png;base64,@@@")]}, "not base64"),
    ({"prompt": "x", "params": {"tools": [WEATHER_TOOL] * 129}}, "params.tools"),
    (
        {"prompt": "x", "params": {"tools": [{"type": "web_search"}]}},
        "params.tools.0.type",
    ),
    (
        {"prompt": "x", "params": {"tools": [{"type": "function", "function": {"name": "a b"}}]}},
        "params.tools.0.function.name",
    ),
    (
        {
            "prompt": "x",
            "params": {"tools": [{"type": "function", "function": {"name": "f", "parameters": 1}}]},
        },
        "params.tools.0.function.parameters",
    ),
    ({"prompt": "x", "params": {"tool_choice": "always"}}, "params.tool_choice"),
    ({"prompt": "x", "params": {"parallel_tool_calls": "yes"}}, "params.parallel_tool_calls"),
    ({"prompt": "x", "params": {"response_format": {"type": "xml"}}}, "params.response_format"),
    ({"prompt": "x", "params": {"reasoning_effort": 3}}, "params.reasoning_effort"),
]


@pytest.mark.parametrize(("fields", "named"), REFUSED_422)
async def test_generation_beyond_text_refusal_is_422_naming_the_field(
    alpha, redis, prefix, fields, named
):
    response = await alpha.post("/v1/generations", json={"model": "other/model", **fields})
    assert response.status_code == 422, response.text
    assert named in str(response.json()["detail"])
    await assert_nothing_queued(redis, prefix)


async def test_generation_batch_item_beyond_text_refusal_is_its_own_422(alpha, redis, prefix):
    items = [
        {"model": "other/model", "messages": [{"role": "tool", "content": "x"}]},
        {"model": "other/model", "prompt": "x", "params": {"tools": [{"type": "mcp"}]}},
        {"model": "other/model", "messages": [image_message(data_url(IMAGE_CAP + 1))]},
    ]
    response = await alpha.post("/v1/generations:batch", json={"items": items})
    assert response.status_code == 207, response.text
    answers = response.json()["items"]
    named = ["messages.0.tool_call_id", "params.tools.0.type", "messages.0.content.1.image_url"]
    for answer, field in zip(answers, named, strict=True):
        assert answer["error"]["status"] == 422
        assert field in str(answer["error"]["detail"])
    await assert_nothing_queued(redis, prefix)


async def test_generation_takes_chat_format_messages_to_the_payload(alpha, redis, prefix):
    messages = [USER, CALLED, ANSWERED, image_message(data_url(IMAGE_CAP), "https://x.test/a.png")]
    params = {"tools": [WEATHER_TOOL], "tool_choice": "auto", "parallel_tool_calls": False}
    created = await create(
        alpha, model="other/model", messages=messages, params=params, prompt=None
    )
    job = await queue_for(redis, prefix, "other").get(created["id"])
    assert job is not None
    assert job.payload["messages"] == messages
    assert job.payload["params"] == params


async def test_generation_refused_400_for_what_the_model_cannot_take(alpha, redis, prefix):
    """The capabilities a worker publishes refuse before queueing; unknown refuses nothing."""
    await publish_capabilities(redis, prefix, capabilities_of(["demo/fast"]))
    await publish_capabilities(
        redis, prefix, {"other/model": Capabilities(function_calling=True, vision=None)}
    )
    refused = [
        ({"prompt": "x", "params": {"tools": [WEATHER_TOOL]}}, "params.tools"),
        ({"messages": [image_message("https://x.test/a.png")]}, "messages.0.content.1"),
        (
            {
                "prompt": "x",
                "params": {
                    "response_format": {"type": "json_schema", "json_schema": {"name": "s"}}
                },
            },
            "params.response_format",
        ),
    ]
    for fields, named in refused:
        response = await alpha.post("/v1/generations", json={"model": "demo/fast", **fields})
        assert response.status_code == 400, response.text
        detail = response.json()["detail"]
        assert detail.startswith(named) and "'demo/fast' does not support" in detail
        # A fallback that cannot take it refuses the request too.
        response = await alpha.post(
            "/v1/generations", json={"model": "other/model", "fallbacks": ["demo/fast"], **fields}
        )
        assert response.status_code == 400, response.text
    await assert_nothing_queued(redis, prefix)
    # Known to take tools, images unknown: both accepted.
    for fields, _ in refused[:2]:
        await create(alpha, model="other/model", **{"prompt": None, **fields})
    # Text and a JSON object format need no capability.
    await create(alpha, params={"response_format": {"type": "json_object"}})


def test_capabilities_are_litellms_and_the_demos_declared() -> None:
    assert model_capabilities("openai/gpt-4o-mini") == Capabilities(
        function_calling=True, vision=True, response_schema=True, reasoning=None
    )
    assert model_capabilities("openai/o3-mini") == Capabilities(
        function_calling=True, vision=False, response_schema=True, reasoning=True
    )
    assert model_capabilities("openai/not-a-model-genq-knows") is None
    assert model_capabilities("demo/fast") == Capabilities(False, False, False, False)


async def test_capabilities_published_read_back(redis, prefix) -> None:
    published = capabilities_of(["demo/fast", "openai/gpt-4o-mini", "openai/no-such-model"])
    await publish_capabilities(redis, prefix, published)
    read = await read_capabilities(redis, prefix, ["openai/gpt-4o-mini", "demo/fast", "x/y"])
    assert read == {m: published[m] for m in ("openai/gpt-4o-mini", "demo/fast")}


async def test_record_and_result_show_reasoning_and_tool_calls(alpha, admin, script):
    created = await create(alpha, metadata={"chunks": 2, "parts": True})
    result = await alpha.get(f"/v1/generations/{created['id']}/result", params={"timeout": 10})
    assert result.status_code == 200, result.text
    record = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    admin_view = (await admin.get(f"/v1/queues/demo/jobs/{created['id']}")).json()
    for shown in (result.json(), record, admin_view):
        assert shown["text"] == "t0 t1 "
        assert shown["reasoning"] == PARTS_RESULT["reasoning"]
        assert shown["tool_calls"] == PARTS_RESULT["tool_calls"]
        assert shown["finish_reason"] == "tool_calls"
    plain = await create(alpha, metadata={"chunks": 1})
    shown = (await alpha.get(f"/v1/generations/{plain['id']}/result")).json()
    assert (shown["reasoning"], shown["tool_calls"]) == (None, [])


async def test_sse_sends_each_part_by_name_and_resumes_inside_the_arguments(alpha, script):
    created = await create(alpha, metadata={"chunks": 2, "parts": True})
    stream = await read_stream(alpha, created["id"])
    names = [e.event for e in stream.events]
    assert names == ["chunk", "chunk", *(kind for kind, _ in PARTS), "completed"]
    assert [(e.event, e.data) for e in stream.events[2:-1]] == PARTS
    # From the first argument piece: exactly the rest.
    inside = next(i for i, e in enumerate(stream.events) if e.event == "tool_args")
    resumed = await read_stream(
        alpha, created["id"], headers={"Last-Event-ID": str(stream.events[inside].id)}
    )
    assert [(e.id, e.event, e.data) for e in resumed.events] == [
        (e.id, e.event, e.data) for e in stream.events[inside + 1 :]
    ]
    assert resumed.events[0].data == {"index": 0, "delta": '"Paris"}'}


async def test_puller_pushes_typed_parts_and_acks_them(alpha, worker):
    created = await create(alpha, prompt="weather?")
    (job,) = await pull(worker, visibility=30)
    events = [
        {"type": "chunk", "data": "Let me look. "},
        *({"type": k, "data": d} for k, d in PARTS),
    ]
    reply = await post(worker, job, "events", events=events, seq=1)
    assert reply.status_code == 200, reply.text
    result = {"text": "Let me look. ", **PARTS_RESULT}
    reply = await post(worker, job, "ack", result=result)
    assert reply.status_code == 200, reply.text
    stream = await read_stream(alpha, created["id"])
    assert [(e.event, e.data) for e in stream.events[:-1]] == [
        (e["type"], e["data"]) for e in events
    ]
    shown = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert (shown["reasoning"], shown["tool_calls"]) == (
        PARTS_RESULT["reasoning"],
        PARTS_RESULT["tool_calls"],
    )


BAD_PARTS: list[tuple[dict[str, Any], str]] = [
    ({"type": "reasoning", "data": 5}, "reasoning"),
    ({"type": "tool_call", "data": {"index": 0, "name": "f"}}, "id"),
    ({"type": "tool_call", "data": {"index": -1, "id": "c", "name": "f"}}, "index"),
    ({"type": "tool_args", "data": {"index": 0, "delta": 7}}, "delta"),
    ({"type": "tool_args", "data": {"index": "0", "delta": "{"}}, "index"),
    ({"type": "tool_done", "data": {"index": 0, "id": "c", "name": "f"}}, "arguments"),
    ({"type": "finish", "data": "stop"}, "type"),
]


@pytest.mark.parametrize(("event", "named"), BAD_PARTS)
async def test_puller_bad_part_is_422_naming_it_and_appends_nothing(alpha, worker, event, named):
    created = await create(alpha)
    (job,) = await pull(worker, visibility=30)
    good = {"type": "chunk", "data": "kept? "}
    reply = await post(worker, job, "events", events=[good, event])
    assert reply.status_code == 422, reply.text
    assert named in str(reply.json()["detail"])
    reply = await post(worker, job, "ack", result={"text": ""})
    assert reply.status_code == 200
    stream = await read_stream(alpha, created["id"])
    assert [e.event for e in stream.events] == ["completed"]


async def test_puller_ack_with_a_bad_tool_call_is_422(worker, alpha):
    await create(alpha)
    (job,) = await pull(worker, visibility=30)
    bad = {"text": "", "tool_calls": [{"id": "c", "name": "f"}]}
    reply = await post(worker, job, "ack", result=bad)
    assert reply.status_code == 422
    assert "arguments" in str(reply.json()["detail"])
