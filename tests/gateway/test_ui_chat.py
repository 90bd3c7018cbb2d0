"""The AI SDK's routes against a live gateway and a scripted worker: the UI message stream of an
answer, re-attaching a message sent again, 409 for another message while one runs, resume
(204 when nothing runs), Stop, tenant scoping, regenerate, a continued message, a failed and a
restarted generation, and every refusal naming the request's field with nothing queued."""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.settings import Settings
from gateway.ui_chat.attach import CHAT_KEY, MESSAGE_KEY
from genq_contract.keys import GatewayKeys
from genq_services.capabilities import Capabilities, publish_capabilities

from .conftest import (
    KEY_ALPHA,
    LiveGateway,
    client_for,
    make_settings,
    queue_for,
    redis_user,
    wait_until,
)
from .test_beyond_text import ANSWERED, CALLED
from .ui_chat import UI, chat_body, resume, send, stop, user

pytestmark = pytest.mark.timeout(60)

IMAGE_CAP = 3000
TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return make_settings(redis_url, prefix, max_image_bytes=IMAGE_CAP)


def gated(gate: str, chunks: int = 3, **meta: Any) -> dict[str, Any]:
    """Metadata of a generation that emits ``t0`` and then waits for ``script.gate(gate)``."""
    return {"chunks": chunks, "gate": gate, "gate_at": 1, **meta}


async def jobs_of(redis: aioredis.Redis, prefix: str) -> int:
    counts = await queue_for(redis, prefix).job_counts()
    return sum(counts.values())


async def test_ui_chat_streams_a_whole_answer_as_ui_message_chunks(alpha, script, redis, prefix):
    answer = await send(alpha, chat_body(metadata={"chunks": 3, "meter": 5}))

    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert answer.headers["cache-control"] == "no-cache"
    assert answer.headers["x-accel-buffering"] == "no"
    assert answer.types() == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert answer.done
    assert answer.text() == "t0 t1 t2 "
    generation = answer.generation_id
    assert answer.chunks[0]["messageId"] == generation
    finish = answer.chunks[-1]
    assert finish["finishReason"] == "stop"
    genq = finish["messageMetadata"]["genq"]
    assert (genq["generationId"], genq["status"]) == (generation, "completed")
    assert genq["usage"]["completion_tokens"] == 3
    assert genq["usage"]["prompt_tokens"] == 2
    assert len(answer.ids) == 4 and answer.ids == sorted(answer.ids), "one id per entry"
    record = (await alpha.get(f"/v1/generations/{generation}")).json()
    assert record["status"] == "completed" and record["text"] == "t0 t1 t2 "
    assert record["metadata"][CHAT_KEY] == "chat-1"
    pointer = GatewayKeys(prefix).ui_chat("alpha", "chat-1")
    assert await redis.get(pointer) == generation.encode(), "the chat points at it"
    assert 0 < await redis.pttl(pointer) <= 3600 * 1000


async def test_ui_chat_same_message_sent_again_reattaches_to_one_generation(
    alpha, script, redis, prefix
):
    body = chat_body(metadata=gated("again"))
    first = await send(alpha, body, limit=4)  # then its connection drops mid-answer
    assert first.types()[-1] == "text-delta"
    second = asyncio.create_task(send(alpha, body))
    await asyncio.sleep(0.2)
    assert not second.done()
    script.gate("again").set()
    again = await second

    generation = first.generation_id
    assert again.generation_id == generation
    assert again.text() == "t0 t1 t2 " and again.done
    assert script.runs[generation] == 1, "the provider is called once"
    later = await send(alpha, body)  # after it completed: the same answer, replayed
    assert (later.generation_id, later.text(), later.done) == (generation, "t0 t1 t2 ", True)
    assert script.runs[generation] == 1
    assert await jobs_of(redis, prefix) == 1


async def test_ui_chat_another_message_while_one_runs_is_409_naming_it_and_stop(
    alpha, script, redis, prefix
):
    first = await send(alpha, chat_body(metadata=gated("busy")), limit=2)
    generation = first.generation_id
    next_message = [user("hello"), user("and more", "m2")]
    refused = await send(alpha, chat_body(messages=next_message, metadata={"chunks": 1}))

    assert refused.status == 409
    detail = refused.body["detail"]
    assert generation in detail and "POST /v1/ui/chat/chat-1/stop" in detail
    assert await jobs_of(redis, prefix) == 1
    edited = await send(alpha, chat_body(messages=[user("hello, edited")], metadata=gated("busy")))
    assert edited.status == 409, "the same message id with other content is another message"
    script.gate("busy").set()
    ended = await alpha.get(f"/v1/generations/{generation}/result", params={"timeout": 10})
    assert ended.json()["status"] == "completed"
    after = await send(alpha, chat_body(messages=next_message, metadata={"chunks": 1}))
    assert after.status == 200 and after.generation_id != generation and after.done


async def test_ui_chat_resume_replays_a_running_answer_and_is_204_otherwise(alpha, script):
    assert (await resume(alpha, "chat-1")).status == 204, "a chat that never ran"
    first = await send(alpha, chat_body(metadata=gated("resume")), limit=4)
    resumed = asyncio.create_task(resume(alpha, "chat-1"))
    await asyncio.sleep(0.2)
    script.gate("resume").set()
    replay = await resumed

    assert replay.status == 200
    assert replay.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert replay.generation_id == first.generation_id
    assert replay.chunks[0]["messageId"] == first.chunks[0]["messageId"]
    assert replay.types()[:4] == first.types(), "from the start: the same chunks again"
    assert replay.text() == "t0 t1 t2 " and replay.done
    assert (await resume(alpha, "chat-1")).status == 204, "it completed"


async def test_ui_chat_a_replay_redis_refuses_ends_with_an_error_part_saying_resume(
    redis, redis_url, prefix, script, caplog
):
    """A UI message stream already answered 200 whose replay Redis fails (here: the gateway's
    Redis user loses XRANGE while a first viewer holds the tail's channel ahead) ends with the
    ``error`` part that says how to resume, then ``[DONE]``, not with a cut connection; once
    Redis answers again the resume replays the whole answer."""
    async with redis_user(redis, redis_url, f"gw-{prefix}") as user:
        with LiveGateway(make_settings(user.url, prefix)) as live:
            async with client_for(live, KEY_ALPHA) as alpha:
                body = chat_body(metadata=gated("redis", chunks=2))
                async with alpha.stream("POST", UI, json=body) as first:
                    lines = first.aiter_lines()  # kept open: leaving it would end the stream
                    while '"text-delta"' not in await anext(lines):
                        pass  # until the tail read t0: its channel is then ahead
                    await user.deny("xrange")
                    with caplog.at_level(logging.WARNING, logger="gateway.events"):
                        cut = await resume(alpha, "chat-1")
                    assert cut.status == 200 and cut.done
                    assert cut.types()[-1] == "error", cut.types()
                    assert (
                        "GET /v1/ui/chat/chat-1/stream resumes it"
                        in cut.of("error")[0]["errorText"]
                    )
                    assert "ended a UI message stream of chat-1 early: NoPermissionError" in (
                        caplog.text
                    )

                    await user.allow("xrange")
                    resumed = asyncio.create_task(resume(alpha, "chat-1"))
                    await wait_until(lambda: live.gateway.tails["demo"].viewers == 2)
                    script.gate("redis").set()
                    replay = await resumed
                    assert replay.text() == "t0 t1 " and replay.done
                    assert replay.types()[-1] == "finish"


async def test_ui_chat_stop_ends_every_stream_with_abort_finish_done(alpha, script, redis, prefix):
    assert (await stop(alpha, "chat-1")).status_code == 204, "nothing to stop"
    sending = asyncio.create_task(send(alpha, chat_body(metadata=gated("stop"))))
    started = time.monotonic()
    while not script.at_gate:
        assert time.monotonic() - started < 10
        await asyncio.sleep(0.01)
    (generation,) = script.at_gate
    resumed = asyncio.create_task(resume(alpha, "chat-1"))
    await asyncio.sleep(0.2)

    stopped = await stop(alpha, "chat-1")
    answered = time.monotonic()
    assert stopped.status_code == 200
    assert stopped.json() == {"generationId": generation, "cancelled": True, "status": "cancelled"}
    for task in (sending, resumed):
        ended = await asyncio.wait_for(task, 1.0)
        assert ended.types()[-2:] == ["abort", "finish"] and ended.done
        assert ended.text() == "t0 "
        assert ended.chunks[-1]["messageMetadata"]["genq"]["status"] == "cancelled"
    assert time.monotonic() - answered < 1.0
    assert script.cancelled_event(generation).is_set(), "the handler (the provider call) stopped"
    assert (await resume(alpha, "chat-1")).status == 204
    assert (await stop(alpha, "chat-1")).status_code == 204
    record = (await alpha.get(f"/v1/generations/{generation}")).json()
    assert record["status"] == "cancelled"
    events = await queue_for(redis, prefix).events_range(generation)
    assert [e.data for e in events if e.type == "chunk"] == ['"t0 "'], "the partial text stays"


async def test_ui_chat_id_is_scoped_to_its_tenant(alpha, beta, script):
    mine = await send(alpha, chat_body(metadata=gated("tenant")), limit=2)
    assert (await resume(beta, "chat-1")).status == 204
    assert (await stop(beta, "chat-1")).status_code == 204
    theirs = await send(beta, chat_body(messages=[user("other")], metadata={"chunks": 1}))
    assert theirs.status == 200 and theirs.done, "beta's chat-1 is another chat"
    assert theirs.generation_id != mine.generation_id
    record = (await alpha.get(f"/v1/generations/{mine.generation_id}")).json()
    assert record["status"] == "active"
    assert (await beta.get(f"/v1/generations/{mine.generation_id}")).status_code == 404
    resumed = asyncio.create_task(resume(alpha, "chat-1"))
    await asyncio.sleep(0.2)
    script.gate("tenant").set()
    assert (await resumed).text() == "t0 t1 t2 "


async def test_ui_chat_regenerate_makes_a_new_answer_each_time(alpha, script):
    first = await send(alpha, chat_body(metadata={"chunks": 1}))
    again = chat_body(trigger="regenerate-message", metadata={"chunks": 1})
    second = await send(alpha, again)
    third = await send(alpha, again)
    named = await send(alpha, {**again, "messageId": third.generation_id})

    ids = [s.generation_id for s in (first, second, third, named)]
    assert len(set(ids)) == 4, ids
    assert all(s.done and s.text() == "t0 " for s in (first, second, third, named))
    assert all(s.chunks[0]["messageId"] == s.generation_id for s in (second, third, named))


async def test_ui_chat_continuing_a_message_keeps_its_id_and_sends_the_tool_output(
    alpha, script, redis, prefix
):
    asked = await send(alpha, chat_body(tools=[TOOL], metadata={"chunks": 1}))
    called = {
        "id": asked.chunks[0]["messageId"],
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "hmm"},
            {
                "type": "tool-get_weather",
                "toolCallId": "call_1",
                "state": "output-available",
                "input": {"city": "Paris"},
                "output": {"sky": "clear"},
            },
        ],
    }
    body = chat_body(messages=[user("hello"), called], tools=[TOOL], metadata={"chunks": 1})
    continued = await send(alpha, body)

    assert continued.status == 200 and continued.done
    assert continued.chunks[0]["messageId"] == called["id"], "the parts extend that message"
    job = await queue_for(redis, prefix).get(continued.generation_id)
    assert job is not None
    assert job.payload["messages"][1:] == [CALLED, ANSWERED]
    assert job.payload["params"]["tools"] == [TOOL]
    assert job.payload["metadata"][MESSAGE_KEY] == called["id"]


async def test_ui_chat_reasoning_and_a_tool_call_become_their_parts(alpha, script):
    answer = await send(alpha, chat_body(metadata={"chunks": 1, "parts": True}))

    assert answer.types() == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-available",
        "finish-step",
        "finish",
    ]
    start, *deltas, available = [c for c in answer.chunks if c["type"].startswith("tool-")]
    assert (start["toolCallId"], start["toolName"]) == ("call_1", "get_weather")
    assert "".join(d["inputTextDelta"] for d in deltas) == '{"city": "Paris"}'
    assert available["input"] == {"city": "Paris"}
    assert "".join(c["delta"] for c in answer.of("reasoning-delta")) == "Thinking."
    assert answer.chunks[-1]["finishReason"] == "tool-calls"


async def test_ui_chat_failed_generation_ends_with_error_and_finish(alpha, script):
    answer = await send(alpha, chat_body(metadata={"chunks": 1, "fail": "the model broke"}))

    assert answer.types()[-3:] == ["text-end", "error", "finish"] and answer.done
    assert "the model broke" in answer.of("error")[0]["errorText"]
    assert answer.chunks[-1]["finishReason"] == "error"
    assert answer.chunks[-1]["messageMetadata"]["genq"]["status"] == "failed"
    assert (await resume(alpha, "chat-1")).status == 204


async def test_ui_chat_restart_resets_the_step_and_says_so(alpha, script):
    answer = await send(alpha, chat_body(metadata={"chunks": 2, "retry_once": True}))

    types = answer.types()
    assert "reset-step" in types and answer.done
    restarted = answer.of("data-genq-restarted")
    assert len(restarted) == 1 and restarted[0]["data"]["generationId"] == answer.generation_id
    after = answer.chunks[types.index("reset-step") :]
    assert "".join(c["delta"] for c in after if c["type"] == "text-delta") == "t0 t1 "
    assert after[1]["type"] == "data-genq-restarted"


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"id": "has space"}, "'id'"),
    ({"id": "a:b"}, "'id'"),
    ({"id": "x" * 129}, "'id'"),
    ({"surprise": 1}, "surprise"),
    ({"messages": []}, "'messages'"),
    ({"trigger": "resume-stream"}, "trigger"),
    ({"messageId": "has space"}, "messageId"),
    ({"messages": [{"id": "m1", "role": "tool", "parts": []}]}, "role"),
    ({"messages": [user("x")] * 1001}, "'messages'"),
    ({"messages": [{**user("x"), "parts": [{"type": "text", "text": "x"}] * 101}]}, "parts"),
    (
        {"messages": [{"id": "m1", "role": "user", "parts": [{"text": "x"}]}]},
        "messages.0.parts.0.type",
    ),
    (
        {"messages": [{"id": "m1", "role": "user", "parts": [{"type": "text"}]}]},
        "messages.0.parts.0.text",
    ),
    (
        {"messages": [{"id": "m1", "role": "user", "parts": [{"type": "step-start"}]}]},
        "messages.0.parts: a user message needs a text or file part",
    ),
    (
        {
            "messages": [
                {
                    "id": "m1",
                    "role": "user",
                    "parts": [
                        {"type": "text", "text": "what is it?"},
                        {"type": "file", "mediaType": "image/png", "url": "ftp://x/a.png"},
                    ],
                }
            ]
        },
        "messages.0.parts.1.url",
    ),
    (
        {
            "messages": [
                {
                    "id": "m1",
                    "role": "user",
                    "parts": [{"type": "file", "mediaType": "application/pdf", "url": "https://x"}],
                }
            ]
        },
        "messages.0.parts.0.url",
    ),
    (
        {
            "messages": [
                user("x"),
                {
                    "id": "a1",
                    "role": "assistant",
                    "parts": [
                        {
                            "type": "tool-bad name",
                            "toolCallId": "c1",
                            "state": "output-available",
                            "input": {},
                            "output": 1,
                        }
                    ],
                },
            ]
        },
        "messages.1.parts.0.type",
    ),
    (
        {
            "messages": [
                user("x"),
                {
                    "id": "a1",
                    "role": "assistant",
                    "parts": [{"type": "dynamic-tool", "toolName": "f", "state": "output-error"}],
                },
            ]
        },
        "messages.1.parts.0.toolCallId",
    ),
    ({"params": {"tools": [TOOL]}}, "params: give tools"),
    ({"tools": [{"type": "web_search"}]}, "tools.0.type"),
    ({"tool_choice": "always"}, "tool_choice"),
    ({"params": {"deep": [[[[[[[[[[1]]]]]]]]]]}}, "params"),
    ({"model": "nope/model"}, "nope/model"),
    ({"metadata": {f"k{i}": i for i in range(17)}}, "metadata"),
]


@pytest.mark.parametrize(("fields", "named"), REFUSED)
async def test_ui_chat_refusal_names_the_field_and_queues_nothing(
    alpha, redis, prefix, fields, named
):
    response = await alpha.post(UI, json={**chat_body(), **fields})
    assert response.status_code in (400, 422), response.text
    assert named in str(response.json()["detail"]), response.text
    assert await jobs_of(redis, prefix) == 0


async def test_ui_chat_images_over_the_cap_name_the_part(alpha, redis, prefix):
    image = "data:image/png;base64," + base64.b64encode(bytes(IMAGE_CAP + 1)).decode()
    parts = [
        {"type": "text", "text": "what is it?"},
        {"type": "file", "mediaType": "image/png", "url": image},
    ]
    body = chat_body(messages=[user("earlier", "m0"), {"id": "m1", "role": "user", "parts": parts}])
    response = await alpha.post(UI, json=body)

    assert response.status_code == 422
    assert response.json()["detail"].startswith("messages.1.parts.1: images in data: URLs")
    assert await jobs_of(redis, prefix) == 0


async def test_ui_chat_refuses_what_the_model_cannot_take_naming_the_request_field(
    alpha, redis, prefix
):
    await publish_capabilities(redis, prefix, {"demo/fast": Capabilities(False, False, False)})
    image = {"type": "file", "mediaType": "image/png", "url": "https://x.test/a.png"}
    seen = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "what?"}, image]}
    refused = [
        (chat_body(messages=[seen]), "messages.0.parts.1: model 'demo/fast' does not support"),
        (chat_body(tools=[TOOL]), "tools: model 'demo/fast' does not support function calling"),
    ]
    for body, detail in refused:
        response = await alpha.post(UI, json={**body, "system": "Be brief."})
        assert response.status_code == 400, response.text
        assert response.json()["detail"].startswith(detail)
    assert await jobs_of(redis, prefix) == 0


async def test_ui_chat_streams_count_against_the_tenant_cap_before_anything_is_queued(
    redis_url, prefix, script, redis
):
    with LiveGateway(make_settings(redis_url, prefix, tenant_max_streams=1)) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            held = asyncio.create_task(send(alpha, chat_body(metadata=gated("cap"))))
            await wait_until(lambda: live.gateway.open_streams.held("alpha") == 1)
            other = chat_body("chat-2", metadata={"chunks": 1})
            refused = await alpha.post(UI, json=other)
            assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
            assert (await resume(alpha, "chat-1")).status == 429
            assert await jobs_of(redis, prefix) == 1, "the refused POST queued nothing"
            script.gate("cap").set()
            assert (await held).done
            assert (await send(alpha, other)).done, "the hold was given back"


async def test_ui_chat_routes_need_an_api_key(anon):
    assert (await anon.post(UI, json=chat_body())).status_code == 401
    assert (await anon.get(f"{UI}/chat-1/stream")).status_code == 401
    assert (await anon.post(f"{UI}/chat-1/stop")).status_code == 401
    assert (await anon.get(f"{UI}/bad%20id/stream")).status_code in (401, 422)
