"""An attempt's first token reaches its job stream at once, whatever the coalescing window.

A real worker (this process) streams from the fake OpenAI server into real Redis, with a 500 ms
window; the test reads the job's stream as a viewer would and times each event against the
moment the fake server sent the token (both on this process's monotonic clock).
"""

from __future__ import annotations

import time

from genq import Event
from tests.fakes.openai_server import FakeOpenAI, Reply

OPENAI = "openai/gpt-4o-mini"
WINDOW_MS = 500.0
TOKENS = ["The", " answer", " is", " forty", "-", "two", ",", " surely."]


async def test_first_chunk_waits_for_no_window_and_the_rest_are_coalesced(
    start_workers, fake_openai: FakeOpenAI
) -> None:
    # 8 tokens 30 ms apart: the stream ends (and its emitter flushes) well inside one window.
    fake_openai.plan(Reply.stream(TOKENS, delay=0.03))
    workers = await start_workers(coalesce_window_ms=WINDOW_MS)
    queue = workers.queues["openai"]
    job = await queue.enqueue({"model": OPENAI, "prompt": "question", "params": {}})
    seen: list[tuple[float, Event]] = []
    async for event in queue.watch(job.id):
        seen.append((time.monotonic(), event))
    chunks = [(at, e) for at, e in seen if e.type == "chunk"]
    first_sent = fake_openai.requests[0].sent_at[0]
    assert chunks[0][1].data == "The"  # alone: nothing waited to join it
    assert chunks[0][0] - first_sent < WINDOW_MS / 1000 / 2  # far sooner than the window
    # The later tokens are batched as before: one chunk, sent when the stream ended.
    assert [e.data for _, e in chunks[1:]] == ["".join(TOKENS[1:])]
    assert seen[-1][1].type == "completed"
    assert seen[-1][1].data["text"] == "".join(TOKENS)
