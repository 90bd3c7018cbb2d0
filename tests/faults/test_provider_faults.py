"""Provider faults the worker tests do not cover, and every fault in a row on one job.

tests/workers/test_generation.py covers a hang (silence timeout), a 429 with Retry-After, a
500, a mid-stream drop and a 400, one at a time. Here: malformed streams (a chunk that is not
JSON, an HTML page instead of an event stream, an error object in the middle of the stream), and
one generation that meets 429, 500, a drop, garbage and a hang in turn before it succeeds, with
the invariants checked on what its viewer saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from genq import JobFailedError, Queue
from providers.litellm_adapter import stream_chat
from tests.fakes.openai_server import FakeOpenAI, Reply, _chunk, _send_event
from tests.faults.invariants import check_invariants
from tests.faults.support import Viewer
from workers.run import WorkerProcess
from workers.settings import WorkerSettings

pytestmark = pytest.mark.timeout(45)

OPENAI = "openai/gpt-4o-mini"
ANSWER = ["All ", "good ", "now."]


class MalformedOpenAI(FakeOpenAI):
    """The fake provider, plus replies no provider should send (``Reply(kind=...)``):

    - ``garbage``: the reply's tokens, then a ``data:`` line that is not JSON;
    - ``html``: status 200 with an HTML page, as a misconfigured proxy answers;
    - ``error_event``: the tokens, then an OpenAI-style ``{"error": ...}`` object mid-stream.
    """

    async def _stream(self, record: Any, receive: Any, send: Any) -> None:
        kind = record.reply.kind
        if kind not in ("garbage", "html", "error_event"):
            return await super()._stream(record, receive, send)
        if kind == "html":
            headers = [(b"content-type", b"text/html; charset=utf-8")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            body = b"<html><body>502 Bad Gateway</body></html>"
            await send({"type": "http.response.body", "body": body})
            return None
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await _send_event(send, _chunk(record.model, {"role": "assistant", "content": ""}))
        for token in record.reply.tokens:
            await _send_event(send, _chunk(record.model, {"content": token}))
            record.sent_at.append(time.monotonic())
        if kind == "garbage":
            tail = b'data: {"id": "chatcmpl-fake", "choices": [{"delta": {"content": "tr\n\n'
        else:
            tail = (
                b'data: {"error": {"message": "upstream overloaded", "type": "server_error"}}\n\n'
            )
        await send({"type": "http.response.body", "body": tail, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
        return None


def malformed(kind: str, tokens: list[str] | None = None) -> Reply:
    return Reply(kind, tuple(tokens or ()))


@pytest.fixture
def provider() -> Iterator[MalformedOpenAI]:
    with MalformedOpenAI(default_tokens=3) as server:
        yield server


@pytest.fixture
async def workers(
    redis, redis_url: str, prefix: str, provider: MalformedOpenAI, monkeypatch
) -> AsyncIterator[WorkerProcess]:
    monkeypatch.setenv("GENQ_FAULTS_OPENAI_KEY", "sk-faults-0123456789")
    settings = WorkerSettings(
        redis_url=redis_url,
        queue_namespace=f"{prefix}-gen",
        models=[OPENAI],
        provider_api_bases={"openai": provider.base_url},
        provider_api_key_envs={"openai": "GENQ_FAULTS_OPENAI_KEY"},
        lease=10.0,
        backoff=0.05,
        max_backoff=0.2,
        max_attempts=6,
        # A hang costs this. A loaded box must not reach it before a request is sent (LiteLLM
        # builds each request in a thread first: an attempt cut short there never reaches the
        # provider, and the counts below would be one short).
        silence_timeout=3.0,
        result_ttl=30.0,
    )
    # LiteLLM's first call in a process loads provider modules (seconds on a busy machine):
    # done here, off the clock, so no test's silence timeout fires on it.
    provider.plan(Reply.stream(["warm"]))
    stream = stream_chat(
        OPENAI,
        [{"role": "user", "content": "warm"}],
        api_base=provider.base_url,
        api_key="sk-faults-0123456789",
        silence_timeout=30,
    )
    async with contextlib.aclosing(stream):
        assert [d.text async for d in stream if d.text] == ["warm"]
    provider.requests.clear()
    process = WorkerProcess.build(settings, redis)
    await process.start()
    try:
        yield process
    finally:
        with contextlib.suppress(Exception):
            await process.stop(deadline=0)


async def generate(queue: Queue, prompt: str = "x") -> tuple[str, Viewer]:
    job = await queue.enqueue({"model": OPENAI, "prompt": prompt})
    return job.id, Viewer(queue, job.id)


@pytest.mark.parametrize(
    "reply",
    [
        malformed("garbage", ["Half ", "a "]),
        malformed("html"),
        malformed("error_event", ["Half ", "a "]),
    ],
    ids=["not-json", "html-page", "error-object"],
)
async def test_malformed_stream_is_retried_and_shows_the_text_once(
    workers: WorkerProcess, provider: MalformedOpenAI, reply: Reply
) -> None:
    provider.plan(reply)
    provider.plan(Reply.stream(ANSWER))
    queue = workers.queues["openai"]
    job_id, viewer = await generate(queue)
    events = await viewer.finished(20)
    assert events[-1].type == "completed", [e.type for e in events]
    assert events[-1].data["text"] == "".join(ANSWER)
    record = await queue.get(job_id)
    assert record is not None and record.attempt == 2 and record.error
    assert provider.count() == 2
    assert [e.type for e in events].count("restarted") == (1 if reply.tokens else 0)
    await check_invariants(queue, [job_id], views={job_id: [events]})


async def test_one_generation_through_every_provider_fault_completes_once(
    workers: WorkerProcess, provider: MalformedOpenAI
) -> None:
    faults = [
        Reply.error(429, "Rate limit reached", retry_after="1"),
        Reply.error(503, "overloaded"),
        Reply.drop(after=2, tokens=["dropped ", "text "]),
        malformed("garbage", ["bad ", "json "]),
        Reply.hang(after=1, tokens=["silent "]),
    ]
    for fault in faults:
        provider.plan(fault)
    provider.plan(Reply.stream(ANSWER))
    queue = workers.queues["openai"]
    started = time.monotonic()
    job_id, viewer = await generate(queue)
    events = await viewer.finished(30)
    assert time.monotonic() - started >= 1.0  # the 429's Retry-After was honoured
    assert events[-1].type == "completed" and events[-1].data["text"] == "".join(ANSWER)
    record = await queue.get(job_id)
    assert record is not None and record.attempt == len(faults) + 1
    assert provider.count() == len(faults) + 1  # one provider call per attempt, no hidden retry
    assert all(r.wait_finished(5) for r in provider.requests)  # no upstream left open
    await check_invariants(queue, [job_id], views={job_id: [events]})


async def test_a_provider_that_keeps_failing_dead_letters_after_max_attempts(
    workers: WorkerProcess, provider: MalformedOpenAI
) -> None:
    provider.plan(malformed("garbage", ["never "]), times=6)
    queue = workers.queues["openai"]
    job_id, viewer = await generate(queue)
    with pytest.raises(JobFailedError):
        await queue.wait(job_id, timeout=20)
    events = await viewer.finished(5)
    assert events[-1].type == "failed"
    assert provider.count() == 6
    assert await queue.dead() == [job_id]
    await check_invariants(queue, [job_id], views={job_id: [events]})
    await asyncio.sleep(0)
