"""The Python client (async and sync) against a live gateway."""

from __future__ import annotations

import asyncio

import pytest

from genq_client import APIError, AsyncClient, Client
from tests.gateway.conftest import (
    KEY_ALPHA,
    PARTS,
    PARTS_RESULT,
    LiveGateway,
    Script,
    make_settings,
)
from tests.ports import free_port


async def test_client_generate_stream_wait_and_get(live: LiveGateway, script: Script) -> None:
    async with AsyncClient(live.url, KEY_ALPHA) as client:
        created = await client.generate("demo/fast", "hi", metadata={"chunks": 2})
        assert created.status == "waiting" and not created.deduplicated
        events = [event async for event in client.stream(created.id)]
        assert [e.type for e in events] == ["chunk", "chunk", "completed"]
        assert events[-1].data["text"] == "t0 t1 "

        record = await client.wait(created.id, timeout=5)
        assert (record["status"], record["text"]) == ("completed", "t0 t1 ")
        assert (await client.get(created.id))["id"] == created.id
        after_end = [e async for e in client.stream(created.id, after=events[-1].id)]
        assert after_end == []


async def test_client_generate_with_a_key_is_idempotent(live: LiveGateway) -> None:
    async with AsyncClient(live.url, KEY_ALPHA) as client:
        first = await client.generate("demo/fast", "hi", delay_ms=60_000, idempotency_key="c-1")
        again = await client.generate("demo/fast", "hi", delay_ms=60_000, idempotency_key="c-1")
        other = await client.generate("demo/fast", "hi", delay_ms=60_000)
        assert again.id == first.id and again.deduplicated
        assert other.id != first.id


async def test_client_cancel_and_errors(live: LiveGateway) -> None:
    async with AsyncClient(live.url, KEY_ALPHA) as client:
        created = await client.generate("demo/fast", "hi", delay_ms=60_000)
        assert await client.cancel(created.id) == {"cancelled": True, "status": "cancelled"}
        assert [e.type async for e in client.stream(created.id)] == ["cancelled"]
        assert (await client.wait(created.id))["status"] == "cancelled"
        with pytest.raises(APIError) as missing:
            await client.get("demo.nothing")
        assert missing.value.status == 404
        with pytest.raises(APIError) as refused:
            await client.generate("nope/model", "hi")
        assert refused.value.status == 422


async def test_client_stream_resumes_across_a_gateway_restart(
    redis_url: str, prefix: str, script: Script
) -> None:
    settings = make_settings(redis_url, prefix)
    port = free_port()
    first = LiveGateway(settings, port=port).start()
    replacement: LiveGateway | None = None
    try:
        async with AsyncClient(first.url, KEY_ALPHA) as client:
            created = await client.generate(
                "demo/fast", "hi", metadata={"chunks": 6, "gate": "g", "gate_at": 3}
            )
            seen: list[str] = []
            three = asyncio.Event()

            async def watch() -> list[str]:
                async for event in client.stream(created.id):
                    seen.append(event.id or "")
                    if len(seen) == 3:
                        three.set()
                return [*seen]

            watching = asyncio.create_task(watch())
            await asyncio.wait_for(three.wait(), 5)
            await asyncio.to_thread(first.stop)  # drops the open stream
            replacement = await asyncio.to_thread(LiveGateway(settings, port=port).start)
            script.gate("g").set()
            ids = await asyncio.wait_for(watching, 15)
            record = await client.wait(created.id, timeout=5)
        assert len(ids) == 7 and len(set(ids)) == 7
        assert record["text"] == "t0 t1 t2 t3 t4 t5 "
    finally:
        first.stop()
        if replacement is not None:
            replacement.stop()


async def test_client_sync_twin(live: LiveGateway, script: Script) -> None:
    def use_sync_client() -> tuple[str, dict[str, object], dict[str, object]]:
        with Client(live.url, KEY_ALPHA) as client:
            created = client.generate("demo/fast", "hi", metadata={"chunks": 3})
            text = client.text(created.id)
            record = client.wait(created.id, timeout=5)
            later = client.generate("demo/fast", "later", delay_ms=60_000)
            return text, record, client.cancel(later.id)

    text, record, cancelled = await asyncio.to_thread(use_sync_client)
    assert text == "t0 t1 t2 "
    assert record["status"] == "completed"
    assert cancelled == {"cancelled": True, "status": "cancelled"}


async def test_client_generation_folds_reasoning_and_tool_calls(
    live: LiveGateway, script: Script
) -> None:
    async with AsyncClient(live.url, KEY_ALPHA) as client:
        created = await client.generate("demo/fast", "hi", metadata={"chunks": 2, "parts": True})
        events = [event async for event in client.stream(created.id)]
        # The native SSE route names each event by its type: the parts arrive as they are.
        assert [(e.type, e.data) for e in events[2:-1]] == PARTS
        status, folded = await client.generation(created.id)
    assert status == "completed"
    assert (folded.text, folded.reasoning, folded.finish_reason) == (
        "t0 t1 ",
        PARTS_RESULT["reasoning"],
        "tool_calls",
    )
    assert [vars(c) for c in folded.tool_calls] == PARTS_RESULT["tool_calls"]

    def use_sync_client() -> dict[str, object]:
        with Client(live.url, KEY_ALPHA) as blocking:
            return blocking.generation(created.id)[1].as_json()

    assert await asyncio.to_thread(use_sync_client) == folded.as_json()
