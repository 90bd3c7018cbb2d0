"""The pull clients (``genq_client.AsyncPuller``, ``genq_client.Puller`` and
``examples/genq_puller.mjs`` under Node) against a live gateway and real Redis, with no
built-in worker: each scenario runs once per client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.settings import Settings
from genq_client import APIError
from genq_contract.transcript import Transcript
from tests.ports import free_port

from .conftest import KEY_ALPHA, PARTS, PARTS_RESULT, LiveGateway, client_for, create, read_stream
from .pullers import KINDS, Runner
from .test_pull import KEY_WORKER, worker_key_settings

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]

PROMPT = "the quick brown fox jumps over the lazy dog"


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    return worker_key_settings(redis_url, prefix)


@pytest.fixture(params=KINDS)
async def runner(request: pytest.FixtureRequest) -> AsyncIterator[Runner]:
    puller = Runner(request.param)
    try:
        yield puller
    finally:
        await puller.close()


async def record(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    return dict((await client.get(f"/v1/generations/{job_id}")).json())


async def finished(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    reply = await client.get(f"/v1/generations/{job_id}/result", params={"timeout": 20})
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def chunks(stream: Any) -> str:
    return "".join(e.data for e in stream.events if e.event == "chunk")


async def test_puller_completes_generations_streamed_to_viewers(live, alpha, runner):
    echoed = await create(alpha, prompt=PROMPT)
    returned = await create(alpha, prompt=PROMPT, metadata={"mode": "return"})
    viewers = [
        asyncio.create_task(read_stream(alpha, job["id"], timeout=30)) for job in (echoed, returned)
    ]
    await runner.start(live.url, KEY_WORKER)
    echo_stream, return_stream = await asyncio.gather(*viewers)

    assert chunks(echo_stream) == PROMPT
    assert [e.event for e in echo_stream.events][-2:] == ["progress", "completed"]
    result = {"text": PROMPT, "model": "demo/fast", "finish_reason": "stop", "usage": None}
    assert echo_stream.events[-1].data == result
    # A str returned without emitting: acked as the text, and emitted so the chunks add up.
    assert chunks(return_stream) == PROMPT
    assert return_stream.events[-1].data == result
    for job in (echoed, returned):
        generation = await record(alpha, job["id"])
        assert (generation["status"], generation["text"]) == ("completed", PROMPT)
        assert (generation["attempt"], generation["finish_reason"]) == (1, "stop")
    await runner.stop()


async def test_puller_acks_a_returned_result_and_fails_a_malformed_one(live, alpha, runner):
    usage = {"prompt_tokens": 2, "completion_tokens": 1, "cached_tokens": 0, "total_tokens": 3,
             "cost_usd": 0.0, "estimated": False}  # fmt: skip
    result = {"text": "short", "finish_reason": "length", "usage": usage}
    shaped = await create(alpha, metadata={"mode": "result", "result": json.dumps(result)})
    malformed = await create(alpha, metadata={"mode": "result", "result": '{"txt": "x"}'})
    refused = await create(  # shaped right, but the gateway's check refuses it (422)
        alpha, metadata={"mode": "result", "result": '{"usage": {"prompt_tokens": -1}}'}
    )
    await runner.start(live.url, KEY_WORKER)
    done = await finished(alpha, shaped["id"])
    assert (done["status"], done["text"], done["finish_reason"]) == ("completed", "short", "length")
    failed = await finished(alpha, malformed["id"])
    assert failed["status"] == "failed" and failed["attempt"] == 1  # terminal: no retry
    assert "txt" in failed["error"]
    failed = await finished(alpha, refused["id"])
    assert failed["status"] == "failed" and failed["attempt"] == 1
    assert "result was refused" in failed["error"] and "prompt_tokens" in failed["error"]
    await runner.stop()


def joined(stream: Any) -> list[tuple[str, Any]]:
    """The stream's events with adjacent text of one kind (and call) joined: how a puller
    batched its emits is its own business, what they add up to is not."""
    events: list[tuple[str, Any]] = []
    for e in stream.events:
        kind, data = e.event, e.data
        last = events[-1] if events else None
        if last and last[0] == kind and kind in ("chunk", "reasoning"):
            events[-1] = (kind, last[1] + data)
        elif last and last[0] == kind == "tool_args" and last[1]["index"] == data["index"]:
            events[-1] = (kind, {**data, "delta": last[1]["delta"] + data["delta"]})
        else:
            events.append((kind, data))
    return events


TIME_CALL = {"id": "call_2", "name": "get_time", "arguments": '{"zone": "Europe/Oslo"}'}


async def test_puller_streams_reasoning_and_tool_calls_and_acks_them(live, alpha, runner):
    """A handler emits reasoning, text and a tool call in pieces (no ``tool_done``): returning
    nothing acks all of it, the ack closing the call. Another returns one more call than it
    streamed: the stream gains that call's ``tool_done``, and the result holds both."""
    (call,) = PARTS_RESULT["tool_calls"]
    streamed = [*PARTS[:2], ("chunk", "Let me look. "), *PARTS[2:5]]
    emitting = await create(alpha, metadata={"mode": "parts", "parts": json.dumps(streamed)})
    returned = {"tool_calls": [call, TIME_CALL], "model": "mine/1"}
    returning = await create(
        alpha,
        metadata={"mode": "parts", "parts": json.dumps(PARTS), "result": json.dumps(returned)},
    )
    viewers = [
        asyncio.create_task(read_stream(alpha, job["id"], timeout=30))
        for job in (emitting, returning)
    ]
    await runner.start(live.url, KEY_WORKER)
    first, second = await asyncio.gather(*viewers)

    result = {
        "text": "Let me look. ",
        "model": "demo/fast",
        "finish_reason": "tool_calls",
        "usage": None,
        "reasoning": "Thinking.",
        "tool_calls": [call],
    }
    assert joined(first) == [
        ("reasoning", "Thinking."),
        ("chunk", "Let me look. "),
        PARTS[2],
        ("tool_args", {"index": 0, "delta": call["arguments"]}),
        ("tool_done", {"index": 0, **call}),  # sent by the ack: the call had none
        ("completed", result),
    ]
    both = {**result, "text": "", "model": "mine/1", "tool_calls": [call, TIME_CALL]}
    assert joined(second) == [
        ("reasoning", "Thinking."),
        *PARTS[2:3],
        ("tool_args", {"index": 0, "delta": call["arguments"]}),
        PARTS[5],  # closed by the handler already: not sent again
        ("tool_done", {"index": 1, **TIME_CALL}),  # the call only the result had
        ("completed", both),
    ]
    for stream, job, expected in ((first, emitting, result), (second, returning, both)):
        folded = Transcript()
        for e in stream.events:
            folded.add(e.event, e.data)
        shown = {k: expected[k] for k in ("text", "reasoning", "tool_calls", "finish_reason")}
        assert {k: v for k, v in folded.as_json().items() if k != "usage"} == shown
        assert {k: (await record(alpha, job["id"]))[k] for k in shown} == shown
        assert {k: (await finished(alpha, job["id"]))[k] for k in shown} == shown
    await runner.stop()


async def test_puller_bad_part_or_tool_call_fails_the_job_naming_it(live, alpha, runner):
    """Refused by the client before anything is sent (the gateway would 422 it): the job fails
    at once, without a retry, and the error names the field."""
    cases = [
        (
            {"mode": "parts", "parts": json.dumps([["tool_args", {"index": 0, "delta": 7}]])},
            "delta",
        ),
        ({"mode": "parts", "parts": json.dumps([["tool_call", {"index": 1024}]])}, "index"),
        ({"mode": "parts", "parts": json.dumps([["finish", "stop"]])}, "finish"),
        ({"mode": "result", "result": '{"tool_calls": [{"id": "c", "name": "f"}]}'}, "arguments"),
        ({"mode": "result", "result": '{"reasoning": 5}'}, "reasoning"),
    ]
    jobs = [(await create(alpha, metadata=meta, max_attempts=3), named) for meta, named in cases]
    await runner.start(live.url, KEY_WORKER, concurrency=len(cases))
    for job, named in jobs:
        failed = await finished(alpha, job["id"])
        assert (failed["status"], failed["attempt"]) == ("failed", 1), failed
        assert named in failed["error"], failed["error"]
        stream = await read_stream(alpha, job["id"])
        assert [e.event for e in stream.events] == ["failed"]  # nothing of it was sent
    await runner.stop()


async def test_puller_retry_job_is_retried_no_sooner_than_retry_after(live, alpha, runner):
    created = await create(alpha, metadata={"mode": "retry", "retry_after": 2})
    await runner.start(live.url, KEY_WORKER)
    second = await runner.marker("start", id=created["id"], attempt=2)
    first_end = await runner.marker("end", id=created["id"], attempt=1)
    # The queue's own backoff for a first retry is under 1 s: only retry_after waits 2.
    assert second["t"] - first_end["t"] >= 2000
    done = await finished(alpha, created["id"])
    assert (done["status"], done["attempt"], done["text"]) == ("completed", 2, "hello")
    await runner.stop()


async def test_puller_exception_nacks_with_its_message(live, alpha, runner):
    failing = await create(
        alpha, metadata={"mode": "fail", "message": "model exploded"}, max_attempts=1
    )
    terminal = await create(
        alpha, metadata={"mode": "terminal", "message": "bad input"}, max_attempts=3
    )
    await runner.start(live.url, KEY_WORKER, concurrency=2)
    failed = await finished(alpha, failing["id"])
    assert (failed["status"], failed["error"]) == ("failed", "model exploded")
    ended = await finished(alpha, terminal["id"])  # no retry, although attempts remain
    assert (ended["status"], ended["attempt"], ended["error"]) == ("failed", 1, "bad input")
    await runner.stop()


async def test_puller_runs_up_to_concurrency_handlers_at_once(live, alpha, runner):
    barrier = [await create(alpha, metadata={"mode": "barrier", "n": 3}) for _ in range(3)]
    late = await create(alpha, prompt="after")
    await runner.start(live.url, KEY_WORKER, concurrency=3)
    for job in [*barrier, late]:
        assert (await finished(alpha, job["id"]))["status"] == "completed"
    assert runner.most_at_once() == 3  # the barrier needed 3; the 4th waited for a free slot
    late_start = await runner.marker("start", id=late["id"])
    assert late_start["t"] >= min(m["t"] for m in runner.found("end"))
    await runner.stop()


async def test_puller_cancel_sets_job_cancelled(live, alpha, runner):
    created = await create(alpha, metadata={"mode": "until_cancel"})
    await runner.start(live.url, KEY_WORKER, visibility=3)  # an extend every second
    await runner.marker("start", id=created["id"])
    assert (await alpha.post(f"/v1/generations/{created['id']}/cancel")).status_code in (200, 202)
    end = await runner.marker("end", id=created["id"])
    assert end["cancelled"] is True and end["abandoned"] is False
    assert (await finished(alpha, created["id"]))["status"] == "cancelled"
    await runner.stop()


async def test_puller_extend_keeps_a_long_handler_from_redelivery(live, alpha, runner):
    created = await create(alpha, prompt="slow", metadata={"mode": "hold", "seconds": 5})
    viewer = asyncio.create_task(read_stream(alpha, created["id"], timeout=40))
    await runner.start(live.url, KEY_WORKER, visibility=2, wait=1)
    done = await finished(alpha, created["id"])
    assert (done["status"], done["attempt"], done["text"]) == ("completed", 1, "slow")
    assert len(runner.found("start", id=created["id"])) == 1
    assert "restarted" not in [e.event for e in (await viewer).events]
    await runner.stop()


async def test_puller_stale_receipt_abandons_the_job_and_goes_on(live, alpha, runner):
    created = await create(alpha, metadata={"mode": "until_abandoned"})
    await runner.start(live.url, KEY_WORKER, visibility=3)
    start = await runner.marker("start", id=created["id"], attempt=1)
    # Somebody else settles this attempt: the puller's receipt is stale from now on.
    async with client_for(live, KEY_WORKER) as worker:
        reply = await worker.post(
            f"/v1/queues/demo/jobs/{created['id']}/nack",
            json={"receipt": start["receipt"], "error": "taken over", "retry_after": 0},
        )
    assert reply.json() == {"status": "scheduled"}
    end = await runner.marker("end", id=created["id"], attempt=1)
    assert end["abandoned"] is True
    await runner.marker("start", id=created["id"], attempt=2)
    done = await finished(alpha, created["id"])
    assert (done["status"], done["attempt"]) == ("completed", 2)
    assert runner.logged("info", "abandoned") and not runner.logged("error", created["id"])
    await runner.stop()


async def test_puller_stop_lets_running_handlers_finish(live, alpha, runner):
    created = await create(alpha, prompt="finishing", metadata={"mode": "hold", "seconds": 1})
    await runner.start(live.url, KEY_WORKER, wait=1)
    await runner.marker("start", id=created["id"])
    await runner.stop()  # returns once the loop ended
    assert runner.found("end", id=created["id"])
    generation = await record(alpha, created["id"])
    assert (generation["status"], generation["text"]) == ("completed", "finishing")


async def test_puller_reconnects_after_the_gateway_went_away(settings: Settings, runner):
    port = free_port()
    gateway = LiveGateway(settings, port=port).start()
    try:
        async with client_for(gateway, KEY_ALPHA) as alpha:
            await runner.start(gateway.url, KEY_WORKER, wait=1)
            first = await create(alpha, prompt="before")
            assert (await finished(alpha, first["id"]))["text"] == "before"
        await asyncio.to_thread(gateway.stop)
        await runner.marker("log", level="warning")  # a pull failed: it backs off and retries
        gateway = await asyncio.to_thread(LiveGateway(settings, port=port).start)
        async with client_for(gateway, KEY_ALPHA) as alpha:
            second = await create(alpha, prompt="after")
            assert (await finished(alpha, second["id"]))["text"] == "after"
        assert runner.logged("warning", "pull from")
        await runner.stop()
    finally:
        await asyncio.to_thread(gateway.stop)


async def test_puller_refused_pull_ends_the_loop(live, runner):
    await runner.start(live.url, KEY_ALPHA)  # a user key may not pull: 403
    if runner.kind == "node":
        assert await runner.finished() == 1
        assert "HTTP 403" in (await runner.marker("error"))["message"]
        return
    with pytest.raises(APIError) as refused:
        await runner.finished()
    assert refused.value.status == 403
