"""Issue 17, finding 3: model output carrying line separators and control characters reaches
every reader intact. ``str.splitlines()`` splits on U+2028, U+2029, U+0085 and \\x0b \\x0c
\\x1c-\\x1e: an SSE writer or reader that used it cut a chunk's JSON in two."""

from __future__ import annotations

import json
import re

import httpx
import redis.asyncio as aioredis

from genq import ActiveJob, visible_text
from genq_client import AsyncClient
from tests.gateway.conftest import KEY_ALPHA, LiveGateway, create, queue_for

# Every C0 and C1 control, DEL, and the Unicode line and paragraph separators.
AWKWARD = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]]
PIECES = [f"<{c}>" for c in AWKWARD] + ["".join(AWKWARD)]
TEXT = "".join(PIECES)


async def emit_awkward(job: ActiveJob) -> dict[str, str]:
    for piece in PIECES:
        await job.emit(piece)
    return {"text": TEXT}


def sse_events(body: str) -> list[dict[str, str]]:
    """The events of an SSE body, split into lines exactly as the SSE spec says."""
    events, fields = [], {}
    for line in re.split(r"\r\n|\r|\n", body):
        if not line:
            if "data" in fields:
                events.append(fields)
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            if name == "data" and "data" in fields:
                fields["data"] += "\n" + value.removeprefix(" ")
            else:
                fields[name] = value.removeprefix(" ")
    return events


async def test_sse_text_line_separators_and_controls_reach_every_reader_intact(
    alpha: httpx.AsyncClient, live: LiveGateway, redis: aioredis.Redis, prefix: str
) -> None:
    queue = queue_for(redis, prefix)
    async with queue.worker(emit_awkward, concurrency=1):
        created = await create(alpha)
        record = (await alpha.get(f"/v1/generations/{created['id']}/result?timeout=10")).json()
    assert record["text"] == TEXT

    raw = await alpha.get(f"/v1/generations/{created['id']}/events")
    events = sse_events(raw.text)
    assert len(events) == len(PIECES) + 1
    assert [json.loads(e["data"]) for e in events[:-1]] == PIECES  # one data: line each

    async with AsyncClient(live.url, KEY_ALPHA) as client:
        streamed = [e async for e in client.stream(created["id"])]
        assert [e.data for e in streamed[:-1]] == PIECES
        assert await client.text(created["id"]) == TEXT

    assert visible_text([e async for e in queue.watch(created["id"])]) == TEXT
