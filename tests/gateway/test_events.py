"""The SSE route against a live uvicorn: stream, resume, disconnect vs cancel, 204 at the end."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from genq_client import AsyncClient
from tests.gateway.conftest import (
    KEY_ALPHA,
    LiveGateway,
    Script,
    client_for,
    create,
    make_settings,
    queue_for,
    read_stream,
    redis_user,
    sse_blocks,
    wait_until,
)


async def test_events_stream_a_generation_to_its_end(
    alpha: httpx.AsyncClient, anon: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    created = await create(alpha, metadata={"chunks": 4})
    stream = await read_stream(anon, created["id"], params={"token": created["watch_token"]})

    assert stream.status == 200 and stream.ended
    assert [e.event for e in stream.events] == ["chunk"] * 4 + ["completed"]
    assert [e.data for e in stream.events[:4]] == ["t0 ", "t1 ", "t2 ", "t3 "]
    assert stream.events[-1].data["text"] == "t0 t1 t2 t3 "
    ids = [e.id for e in stream.events]
    assert ids == sorted(ids, key=lambda i: tuple(map(int, i.split("-"))))
    assert len(set(ids)) == len(ids)
    base = live.settings.sse_retry_ms
    assert stream.retry_ms is not None and base * 0.5 <= stream.retry_ms <= base * 1.5


async def test_events_resume_from_every_cursor_without_dup_or_gap(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    created = await create(alpha, metadata={"chunks": 6})
    full = await read_stream(alpha, created["id"])
    ids = [e.id for e in full.events]
    assert len(ids) == 7

    for i, cursor in enumerate(ids[:-1]):
        by_query = await read_stream(alpha, created["id"], params={"after": cursor})
        by_header = await read_stream(alpha, created["id"], headers={"Last-Event-ID": cursor})
        assert [e.id for e in by_query.events] == ids[i + 1 :]
        assert [e.id for e in by_header.events] == ids[i + 1 :]
    from_zero = await read_stream(alpha, created["id"], params={"after": "0"})
    assert [e.id for e in from_zero.events] == ids


async def test_events_resume_live_from_every_cursor(
    alpha: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    """Viewers join mid-generation at every cursor seen so far: catch-up then live, exactly."""
    created = await create(alpha, metadata={"chunks": 12, "gate": "late", "gate_at": 6})
    first = await read_stream(alpha, created["id"], limit=6)
    early = [e.id for e in first.events]

    joiners = [
        asyncio.create_task(read_stream(alpha, created["id"], headers={"Last-Event-ID": c}))
        for c in early
    ]
    joiners.append(asyncio.create_task(read_stream(alpha, created["id"])))
    # All joined (and caught up or catching up) before the rest is written.
    await wait_until(lambda: live.gateway.tails["demo"].viewers == len(joiners))
    script.gate("late").set()
    results = await asyncio.gather(*joiners)

    everything = [e.id for e in results[-1].events]
    assert len(everything) == 13 and everything[:6] == early
    for cursor, result in zip(early, results, strict=False):
        assert [e.id for e in result.events] == everything[everything.index(cursor) + 1 :]


async def test_events_last_event_id_wins_over_a_stale_after(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    """A reconnecting EventSource keeps its URL (?after=) and adds a later Last-Event-ID."""
    created = await create(alpha, metadata={"chunks": 5})
    ids = [e.id for e in (await read_stream(alpha, created["id"])).events]
    resumed = await read_stream(
        alpha, created["id"], params={"after": ids[0]}, headers={"Last-Event-ID": ids[2]}
    )
    assert [e.id for e in resumed.events] == ids[3:]


@pytest.mark.parametrize(
    "cursor",
    ["abc", "1-", "-1", "1-2-3", "1.5-0", "99999999999999999999999-0", "1 -0", "1-0x", "$"],
)
async def test_events_malformed_cursor_is_400(alpha: httpx.AsyncClient, cursor: str) -> None:
    created = await create(alpha, delay_ms=60_000)
    url = f"/v1/generations/{created['id']}/events"
    by_query = await alpha.get(url, params={"after": cursor})
    by_header = await alpha.get(url, headers={"Last-Event-ID": cursor})
    for response in (by_query, by_header):
        assert response.status_code == 400, response.text
        assert "malformed" in response.json()["detail"]


async def test_events_204_once_the_cursor_reached_the_end(
    alpha: httpx.AsyncClient, script: Script
) -> None:
    created = await create(alpha)
    events = (await read_stream(alpha, created["id"])).events
    url = f"/v1/generations/{created['id']}/events"
    at_end = await alpha.get(url, headers={"Last-Event-ID": events[-1].id})
    past_end = await alpha.get(url, params={"after": "99999999999999-0"})
    assert (at_end.status_code, past_end.status_code) == (204, 204)
    assert at_end.content == b""


async def test_events_disconnect_is_not_a_cancel(
    alpha: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    created = await create(alpha, metadata={"chunks": 5, "gate": "g", "gate_at": 2})
    partial = await read_stream(alpha, created["id"], limit=2)  # then drops the connection
    assert [e.data for e in partial.events] == ["t0 ", "t1 "]
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 0)

    script.gate("g").set()
    result = (await alpha.get(f"/v1/generations/{created['id']}/result?timeout=10")).json()
    assert result["status"] == "completed"
    assert result["text"] == "t0 t1 t2 t3 t4 "
    assert created["id"] not in script.cancelled


async def test_events_cancel_stops_the_generation_and_ends_the_stream(
    alpha: httpx.AsyncClient, anon: httpx.AsyncClient, script: Script
) -> None:
    created = await create(alpha, metadata={"chunks": 5, "gate": "never", "gate_at": 1})
    token = created["watch_token"]
    watching = asyncio.create_task(read_stream(anon, created["id"], params={"token": token}))
    # At the gate, its first chunk is written (a cancel before it would leave no chunk).
    await asyncio.wait_for(script.at_gate_event(created["id"]).wait(), 5)

    cancel = await anon.post(f"/v1/generations/{created['id']}/cancel", params={"token": token})
    assert cancel.status_code == 200
    assert cancel.json()["cancelled"] is True

    await asyncio.wait_for(script.cancelled_event(created["id"]).wait(), 2)
    stream = await asyncio.wait_for(watching, 5)
    assert stream.ended
    assert [e.event for e in stream.events] == ["chunk", "cancelled"]
    record = (await alpha.get(f"/v1/generations/{created['id']}")).json()
    assert record["status"] == "cancelled"


async def test_events_of_a_job_cancelled_before_it_started(alpha: httpx.AsyncClient) -> None:
    created = await create(alpha, delay_ms=60_000)
    await alpha.post(f"/v1/generations/{created['id']}/cancel")
    stream = await read_stream(alpha, created["id"])
    assert [e.event for e in stream.events] == ["cancelled"]
    assert stream.events[0].data is None


async def test_events_restarted_attempt_clears_the_partial_text(
    alpha: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    created = await create(alpha, metadata={"retry_once": True, "chunks": 2})
    stream = await read_stream(alpha, created["id"])
    kinds = [e.event for e in stream.events]
    assert kinds[0] == "chunk" and stream.events[0].data == "partial"
    assert kinds[1:] == ["restarted", "chunk", "chunk", "completed"]

    async with AsyncClient(live.url, KEY_ALPHA) as client:
        assert await client.text(created["id"]) == "t0 t1 "


async def test_events_redis_connections_stay_constant_as_viewers_grow(
    redis_url: str, prefix: str, redis: aioredis.Redis, script: Script
) -> None:
    from tests.gateway.conftest import client_for, make_settings

    settings = make_settings(redis_url, prefix, redis_max_connections=4)
    names = {f"genq-gateway:{prefix}", f"genq-tail:{prefix}"}

    async def gateway_connections() -> int:
        return sum(1 for c in await redis.client_list() if c.get("name") in names)

    with LiveGateway(settings) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            jobs = [await create(alpha, metadata={"gate": "go", "chunks": 2}) for _ in range(5)]
            limits = httpx.Limits(max_connections=300)
            async with httpx.AsyncClient(
                base_url=live.url, headers=alpha.headers, limits=limits, timeout=30
            ) as many:
                viewers = [
                    asyncio.create_task(read_stream(many, jobs[i % 5]["id"], timeout=25))
                    for i in range(200)
                ]
                await wait_until(lambda: live.gateway.tails["demo"].viewers == 200, timeout=15)
                assert await gateway_connections() <= 4 + 1
                script.gate("go").set()
                results = await asyncio.gather(*viewers)
            assert all(
                [e.event for e in r.events] == ["chunk", "chunk", "completed"] for r in results
            )
            assert await gateway_connections() <= 4 + 1


async def test_events_abrupt_disconnects_do_not_mix_up_redis_replies(
    alpha: httpx.AsyncClient, live: LiveGateway, script: Script
) -> None:
    """Each SSE disconnect cancels the viewer's in-flight Redis calls (redis-py once mixed up
    replies after such a cancel); every other request must still get its own answer."""
    jobs = [await create(alpha, metadata={"gate": "hold"}) for _ in range(10)]

    async def flaky_viewer(job_id: str) -> None:
        with pytest.raises((TimeoutError, httpx.HTTPError)):
            async with asyncio.timeout(0.005):
                await read_stream(alpha, job_id)

    async def reader(job_id: str) -> None:
        for _ in range(5):
            record = (await alpha.get(f"/v1/generations/{job_id}")).json()
            assert record["id"] == job_id

    await asyncio.gather(
        *(flaky_viewer(jobs[i % 10]["id"]) for i in range(100)),
        *(reader(j["id"]) for j in jobs),
    )
    script.gate("hold").set()
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 0)
    for job in jobs:
        result = (await alpha.get(f"/v1/generations/{job['id']}/result?timeout=10")).json()
        assert (result["id"], result["status"]) == (job["id"], "completed")


async def test_events_for_a_queue_job_without_events_yet(
    alpha: httpx.AsyncClient, redis: aioredis.Redis, prefix: str, live: LiveGateway
) -> None:
    """A waiting job has no stream yet: the viewer waits, then sees the job's first event."""
    created = await create(alpha, delay_ms=60_000)
    watching = asyncio.create_task(read_stream(alpha, created["id"]))
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 1)
    assert not watching.done()
    assert await queue_for(redis, prefix).cancel(created["id"])
    stream = await asyncio.wait_for(watching, 5)
    assert [e.event for e in stream.events] == ["cancelled"]


async def test_events_quiet_stream_sends_comment_keepalives(redis_url: str, prefix: str) -> None:
    with LiveGateway(make_settings(redis_url, prefix, sse_ping=0.2)) as live:
        async with client_for(live, KEY_ALPHA) as alpha:
            created = await create(alpha, delay_ms=60_000)
            url = f"/v1/generations/{created['id']}/events"
            async with asyncio.timeout(5), alpha.stream("GET", url) as response:
                lines = response.aiter_lines()
                assert (await anext(lines)).startswith("retry:")
                async for line in lines:
                    if line.startswith(":"):
                        break
                    assert line == "", line


# -- issue 17: what one viewer's cursor may do to the others ------------------------------------

BAD_CURSORS = ["\u0661-\u0661", "\u0661", "1-1\n", "0\n", "1\u0660-0", "18446744073709551616-0"]


async def test_events_unicode_digit_cursor_is_400_and_tail_keeps_flowing(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    """Finding 1: a cursor Redis would refuse (Unicode digits, a trailing newline, past 2^64)
    is 400 at the door, and another tenant's viewer of the same queue keeps receiving."""
    theirs = await create(beta, metadata={"gate": "others", "chunks": 3})
    watching = asyncio.create_task(read_stream(beta, theirs["id"]))
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 1)

    mine = await create(alpha, delay_ms=60_000)
    url = f"/v1/generations/{mine['id']}/events"
    for cursor in BAD_CURSORS:
        response = await alpha.get(url, params={"after": cursor})
        assert response.status_code == 400, (cursor, response.text)
        assert "malformed" in response.json()["detail"]
        if "\n" not in cursor:  # a header cannot carry a newline at all
            header = await alpha.get(url, headers={"Last-Event-ID": cursor.encode()})
            assert header.status_code == 400, (cursor, header.text)

    script.gate("others").set()
    stream = await asyncio.wait_for(watching, 5)
    assert [e.event for e in stream.events] == ["chunk"] * 3 + ["completed"]


async def test_events_future_cursor_is_clamped_and_never_delays_a_result_wait(
    alpha: httpx.AsyncClient, script: Script, live: LiveGateway
) -> None:
    """Finding 7: holding ``?after=99999999999999-0`` open on a job made a result wait on the
    same job run to its full timeout. The cursor is clamped to the stream's newest entry."""
    created = await create(alpha, metadata={"gate": "future", "gate_at": 1, "chunks": 3})
    await asyncio.wait_for(script.started_event(created["id"]).wait(), 5)
    first = await read_stream(alpha, created["id"], limit=1)
    future = asyncio.create_task(
        read_stream(alpha, created["id"], params={"after": "99999999999999-0"})
    )
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 1)
    result = asyncio.create_task(
        alpha.get(f"/v1/generations/{created['id']}/result", params={"timeout": 20})
    )
    await wait_until(lambda: live.gateway.tails["demo"].viewers == 2)
    started = asyncio.get_running_loop().time()
    script.gate("future").set()

    response = await asyncio.wait_for(result, 10)
    assert response.status_code == 200 and response.json()["status"] == "completed"
    assert asyncio.get_running_loop().time() - started < 5
    clamped = await asyncio.wait_for(future, 5)
    assert [e.event for e in clamped.events] == ["chunk", "chunk", "completed"]
    assert clamped.events[0].id > first.events[0].id


async def test_events_a_backfill_redis_refuses_ends_the_stream_cleanly(
    redis: aioredis.Redis, redis_url: str, prefix: str, script: Script, caplog: Any
) -> None:
    """A stream already answered 200 cannot become a 503: when Redis fails its backfill (the
    pool busy for its whole wait in a reconnect storm, or as here a refused XRANGE), the
    response ends cleanly, so the client resumes from its Last-Event-ID (as an EventSource
    does after ``retry:``) instead of seeing a cut connection. Here the gateway's Redis user
    loses XRANGE (the backfill's command) while a first viewer holds the channel ahead."""
    async with redis_user(redis, redis_url, f"gw-{prefix}") as user:
        with LiveGateway(make_settings(user.url, prefix)) as live:
            async with client_for(live, KEY_ALPHA) as alpha:
                created = await create(alpha, metadata={"chunks": 4, "gate": "g", "gate_at": 2})
                events_url = f"/v1/generations/{created['id']}/events"
                async with alpha.stream("GET", events_url) as ahead:
                    blocks = sse_blocks(ahead)
                    seen = []
                    while len(seen) < 2:  # the tail read these: its channel is past the first
                        event, _ = await anext(blocks)
                        if event is not None:
                            seen.append(event)
                    await user.deny("xrange")
                    with caplog.at_level(logging.WARNING, logger="gateway.events"):
                        cut = await read_stream(
                            alpha, created["id"], headers={"Last-Event-ID": seen[0].id}
                        )
                    assert cut.status == 200 and cut.ended and cut.events == []
                    assert "ended an event stream" in caplog.text
                    assert "NoPermissionError" in caplog.text

                    await user.allow("xrange")
                    resumed = asyncio.create_task(
                        read_stream(alpha, created["id"], headers={"Last-Event-ID": seen[0].id})
                    )
                    await wait_until(lambda: live.gateway.tails["demo"].viewers == 2)
                    script.gate("g").set()
                    stream = await asyncio.wait_for(resumed, 10)
                    assert [e.data for e in stream.events[:3]] == ["t1 ", "t2 ", "t3 "]
                    assert [e.event for e in stream.events] == ["chunk"] * 3 + ["completed"]
