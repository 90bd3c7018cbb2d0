"""Generations end to end inside one process: genq Worker + handler + LiteLLM + a provider."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from genq import JobCancelledError, JobFailedError, visible_text
from genq_contract.keys import provider_429_counter
from providers.costs import estimate_usage
from providers.demo import DemoScript
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.workers.conftest import events_of
from workers.run import freeze_heap

OPENAI = "openai/gpt-4o-mini"


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_demo_generation_streams_chunks_and_completes(start_workers) -> None:
    workers = await start_workers()
    queue = workers.queues["demo"]
    params = {"demo_tokens": 40, "demo_delay_ms": 2}
    job = await queue.enqueue({"model": "demo/fast", "prompt": "hi there", "params": params})
    events = await events_of(queue, job.id)
    expected = DemoScript.from_request("demo/fast", user("hi there"), params).text
    chunks = [e for e in events if e.type == "chunk"]
    assert "".join(e.data for e in chunks) == expected
    assert events[-1].type == "completed"
    result = events[-1].data
    assert result["text"] == expected
    assert result["model"] == "demo/fast"
    assert result["finish_reason"] == "stop"
    # The demo reports no usage: the worker counts it (tests/workers/test_usage.py).
    estimate = estimate_usage("demo/fast", user("hi there"), expected)
    assert result["usage"]["completion_tokens"] == estimate.completion_tokens > 0
    assert result["usage"]["estimated"] is True
    assert 1 < len(chunks) < 40  # deltas were coalesced, yet streamed in several pieces


async def test_concurrent_generations_share_round_trips(start_workers) -> None:
    # A window of 20 token gaps: what merges does not hang on the event loop keeping time (on
    # a loaded machine, with a window of 5 gaps, a turn of the loop could outlast it, and half
    # the deltas went alone).
    workers = await start_workers(coalesce_window_ms=40)
    queue = workers.queues["demo"]
    params = {"demo_tokens": 100, "demo_delay_ms": 2}
    jobs = {
        (await queue.enqueue({"model": "demo/fast", "prompt": f"job {i}", "params": params})).id: i
        for i in range(8)
    }
    for job_id, i in jobs.items():
        events = await events_of(queue, job_id)
        expected = DemoScript.from_request("demo/fast", user(f"job {i}"), params).text
        assert visible_text(events) == expected == events[-1].data["text"]
    stats = workers.stats
    assert stats.writes == 8 * 100
    assert stats.chunks < stats.writes / 2  # a job's deltas were merged ...
    assert stats.round_trips < stats.chunks / 2  # ... and several jobs shared a round trip


async def test_openai_generation_through_litellm(start_workers, fake_openai: FakeOpenAI) -> None:
    fake_openai.plan(Reply.stream(["The", " answer", " is", " 42."], delay=0.005))
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "messages": user("question"), "params": {}})
    result = await queue.wait(job.id, timeout=20)
    assert result["text"] == "The answer is 42."
    assert result["finish_reason"] == "stop"
    assert visible_text(await events_of(queue, job.id)) == "The answer is 42."
    request = fake_openai.requests[0]
    assert request.headers["authorization"] == "Bearer sk-test-worker-0123456789"
    assert request.body["messages"] == user("question")


async def test_stop_closes_the_provider_connection(start_workers, fake_openai) -> None:
    fake_openai.plan(Reply.stream([f"w{i} " for i in range(1000)], delay=0.03))
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "long story"})
    async for event in queue.watch(job.id):
        if event.type == "chunk":
            break
    cancelled_at = time.monotonic()
    assert await queue.cancel(job.id)
    record = fake_openai.requests[0]
    assert await asyncio.to_thread(record.wait_disconnected, 3)
    assert record.disconnected_at - cancelled_at < 0.5
    assert record.tokens_sent_after(cancelled_at) <= 2
    with pytest.raises(JobCancelledError):
        await queue.wait(job.id, timeout=10)
    assert (await queue.get(job.id)).status.value == "cancelled"


async def test_rate_limit_waits_retry_after_while_other_providers_flow(
    start_workers, fake_openai: FakeOpenAI, redis
) -> None:
    fake_openai.plan(Reply.error(429, "Rate limit reached", retry_after="3"))
    workers = await start_workers()
    openai, demo = workers.queues["openai"], workers.queues["demo"]
    first = await openai.enqueue({"model": OPENAI, "prompt": "one"})
    assert await asyncio.to_thread(fake_openai.wait_requests, 1, 10)
    limited_at = fake_openai.requests[0].received_at
    await asyncio.sleep(0.2)
    assert await openai.cooldown_remaining() > 2.0  # shared with every worker through Redis
    second = await openai.enqueue({"model": OPENAI, "prompt": "two"})

    other = await demo.enqueue({"model": "demo/fast", "prompt": "meanwhile"})
    await demo.wait(other.id, timeout=10)
    assert time.monotonic() - limited_at < 3.0  # finished during the cooldown
    assert fake_openai.count() == 1  # no SDK- or LiteLLM-internal retry

    await openai.wait(first.id, timeout=15)
    await openai.wait(second.id, timeout=15)
    later = [r.received_at - limited_at for r in fake_openai.requests[1:]]
    assert len(later) == 2
    assert min(later) >= 3.0  # neither job was reserved before the cooldown ended
    assert (await openai.get(first.id)).attempt == 2
    assert int(await redis.get(provider_429_counter(openai))) == 1


async def test_bad_request_fails_after_one_attempt(start_workers, fake_openai) -> None:
    fake_openai.plan(Reply.error(400, "Invalid value for 'temperature'"))
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "x"})
    with pytest.raises(JobFailedError) as info:
        await queue.wait(job.id, timeout=10)
    assert "Invalid value for 'temperature'" in info.value.error
    record = await queue.get(job.id)
    assert (record.status.value, record.attempt) == ("failed", 1)
    assert fake_openai.count() == 1
    assert job.id in await queue.dead()


async def test_malformed_payload_fails_at_once_without_calling_the_provider(
    start_workers, fake_openai
) -> None:
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "messages": [{"content": "no role"}]})
    with pytest.raises(JobFailedError) as info:
        await queue.wait(job.id, timeout=10)
    assert "invalid generation payload: " in info.value.error
    assert "each message must be an object with a role" in info.value.error
    record = await queue.get(job.id)
    assert (record.status.value, record.attempt) == ("failed", 1)
    assert fake_openai.count() == 0


async def test_server_error_is_retried_then_completes(start_workers, fake_openai) -> None:
    fake_openai.plan(Reply.error(500, "upstream exploded"))
    fake_openai.plan(Reply.stream(["fine", " now"]))
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "x"})
    assert (await queue.wait(job.id, timeout=10))["text"] == "fine now"
    record = await queue.get(job.id)
    assert record.attempt == 2
    assert "upstream exploded" in (record.error or "")
    assert fake_openai.count() == 2


async def test_mid_stream_drop_restarts_and_shows_the_text_once(start_workers, fake_openai) -> None:
    fake_openai.plan(Reply.drop(after=3, tokens=["lost ", "partial ", "text "], delay=0.01))
    fake_openai.plan(Reply.stream(["Hello", " world"]))
    workers = await start_workers()
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "x"})
    events = await events_of(queue, job.id)
    types = [e.type for e in events]
    assert types.count("restarted") == 1
    assert types[-1] == "completed"
    assert visible_text(events) == "Hello world" == events[-1].data["text"]
    after_restart = events[types.index("restarted") :]
    assert "".join(e.data for e in after_restart if e.type == "chunk") == "Hello world"


async def test_hung_provider_hits_silence_timeout_and_is_retried(
    start_workers, fake_openai
) -> None:
    fake_openai.plan(Reply.hang(after=1))
    fake_openai.plan(Reply.stream(["recovered"]))
    workers = await start_workers(silence_timeout=0.5)
    queue = workers.queues["openai"]
    started = time.monotonic()
    job = await queue.enqueue({"model": OPENAI, "prompt": "x"})
    assert (await queue.wait(job.id, timeout=10))["text"] == "recovered"
    assert 0.5 <= time.monotonic() - started < 5  # not the 10 s lease
    assert "silence timeout" in ((await queue.get(job.id)).error or "")
    assert await asyncio.to_thread(fake_openai.requests[0].wait_disconnected, 2)


async def test_demo_faults_on_first_attempt_then_succeed(start_workers) -> None:
    workers = await start_workers(demo_faults=True)
    queue = workers.queues["demo"]
    jobs = {
        fault: await queue.enqueue(
            {"model": "demo/instant", "prompt": f"[demo:{fault}]", "params": {"demo_tokens": 8}}
        )
        for fault in ("500", "drop")
    }
    for job in jobs.values():
        result = await queue.wait(job.id, timeout=10)
        assert result["text"].startswith("Echo:")
        assert (await queue.get(job.id)).attempt == 2


async def test_demo_fault_injection_off_in_production(start_workers) -> None:
    workers = await start_workers()  # neither GENQ_DEV nor GENQ_DEMO_FAULTS
    assert not workers.settings.demo_faults_enabled()
    queue = workers.queues["demo"]
    params = {"demo_fault": "429", "demo_retry_after": 99999999, "demo_tokens": 6}
    job = await queue.enqueue(
        {"model": "demo/instant", "prompt": "[demo:429:99999999]", "params": params}
    )
    result = await queue.wait(job.id, timeout=10)
    assert result["text"].startswith("Echo: [demo:429:99999999]")
    assert (await queue.get(job.id)).attempt == 1
    assert await queue.cooldown_remaining() == 0


async def test_demo_fault_cooldown_is_capped_where_faults_are_on(start_workers) -> None:
    workers = await start_workers(dev=True, max_cooldown=1.0)  # dev mode turns faults on
    queue = workers.queues["demo"]
    job = await queue.enqueue(
        {"model": "demo/instant", "prompt": "[demo:429:99999999]", "params": {"demo_tokens": 4}}
    )
    async with asyncio.timeout(10):
        while (await queue.get(job.id)).attempt < 1 or not (await queue.get(job.id)).error:
            await asyncio.sleep(0.02)
    assert 0 < await queue.cooldown_remaining() <= 1.0  # not the 24 h the provider asked for


async def test_invalid_payload_fails_at_once(start_workers) -> None:
    workers = await start_workers()
    queue = workers.queues["demo"]
    bad = await queue.enqueue({"model": "demo/fast"})
    wrong_queue = await queue.enqueue({"model": OPENAI, "prompt": "x"})
    for job in (bad, wrong_queue):
        with pytest.raises(JobFailedError):
            await queue.wait(job.id, timeout=10)
        assert (await queue.get(job.id)).attempt == 1


async def test_stop_a_demo_generation_settles_cancelled_promptly(start_workers) -> None:
    workers = await start_workers()
    queue = workers.queues["demo"]
    params = {"demo_tokens": 200, "demo_delay_ms": 20}
    job = await queue.enqueue({"model": "demo/fast", "prompt": "stop me", "params": params})
    seen: list[str] = []
    async with asyncio.timeout(10):
        async for event in queue.watch(job.id):
            seen.append(event.type)
            if event.type == "chunk" and seen.count("chunk") == 3:
                started = time.monotonic()
                assert await queue.cancel(job.id)
    assert seen[-1] == "cancelled"
    assert time.monotonic() - started < 1.0
    assert (await queue.get(job.id)).result is None


@contextlib.contextmanager
def fake_openai_process(tokens: int) -> Iterator[str]:
    """The fake OpenAI server in a process of its own, streaming ``tokens`` tokens as fast as it
    can to every request (faster than a worker reads them); yields its base URL."""
    code = (
        "import sys\n"
        "from tests.fakes.openai_server import FakeOpenAI\n"
        f"with FakeOpenAI(default_tokens={tokens}) as server:\n"
        "    print(server.base_url, flush=True)\n"
        "    sys.stdin.read()\n"
    )
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen(
        [sys.executable, "-c", code], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        try:
            yield server.stdout.readline().decode().strip()
        finally:
            server.stdin.close()  # its cue to stop
            server.wait(timeout=10)


async def test_a_stream_that_arrives_at_once_leaves_the_event_loop_to_others(
    start_workers,
) -> None:
    # Chunks already buffered never make the stream wait: without its own pauses the
    # generation would hold the event loop to its end, and the worker's presence, heartbeats
    # and other jobs with it.
    words = 6000
    with fake_openai_process(words) as base_url:
        workers = await start_workers(provider_api_bases={"openai": base_url})
        queue = workers.queues["openai"]
        late: list[float] = []
        done = asyncio.Event()

        async def tick() -> None:
            loop = asyncio.get_running_loop()
            while not done.is_set():
                due = loop.time() + 0.01
                await asyncio.sleep(0.01)
                late.append(loop.time() - due)

        freeze_heap()  # as a worker process does: a full collection would stall it ~0.3 s here
        ticker = asyncio.create_task(tick())
        try:
            job = await queue.enqueue({"model": OPENAI, "messages": user("long"), "params": {}})
            result = await queue.wait(job.id, timeout=60)
        finally:
            done.set()
            await ticker
            gc.unfreeze()
    assert len(result["text"].split()) == words
    assert max(late) < 0.3, f"the event loop stalled {max(late):.2f} s"
