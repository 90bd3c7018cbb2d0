"""The gateway's patch of sse-starlette (``gateway.streaming._sse_patches``) against
sse-starlette's own send: the same streams through both give the same messages and end the same
way, and another sse-starlette release turns the patch off with one warning while the gateway
keeps streaming."""

from __future__ import annotations

import asyncio
import logging
import tomllib
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest
from packaging.requirements import Requirement
from starlette.types import Message

import gateway.streaming._sse_patches as patches
from gateway.middleware import SERVER_SEND
from gateway.streaming.sse import HEADERS, Ending, HeldStream
from tests.gateway.conftest import LiveGateway, Script, create, read_stream

EVENTS = [b"retry: 1000\n\n", b'id: 1-0\nevent: chunk\ndata: "a"\n\n', b": ping\n\n"] + [
    f'id: {n}-0\nevent: chunk\ndata: "{"é" * n}"\n\n'.encode() for n in range(2, 40)
]


@pytest.fixture
def untested_release(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Patches that name another release than the installed one, as after an upgrade."""
    monkeypatch.setitem(patches.TESTED_VERSIONS, "sse-starlette", "0.0.1")
    yield
    monkeypatch.undo()
    assert patches.check()


async def _content(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


async def _run(
    on: bool, events: list[bytes], *, stall_after: int | None = None, method: str = "GET"
) -> dict[str, Any]:
    """Streams ``events`` through a :class:`HeldStream` with the patch ``on`` or off; returns
    every output: the messages in order (as the server got them), which ``send`` took body
    messages, how often the slot was freed, whether it ended by itself."""
    patches.set_patched(on)
    messages: list[Message] = []
    routes: list[str] = []
    released: list[None] = []
    never = asyncio.Event()

    def sender(route: str) -> Any:
        async def send(message: Message) -> None:
            if stall_after is not None and len(messages) >= stall_after:
                await never.wait()  # a client that takes no more data
            messages.append(message)
            routes.append(route)

        return send

    async def receive() -> Message:
        await never.wait()
        return {"type": "http.disconnect"}

    stream = HeldStream(
        _content(events),
        Ending(lambda: released.append(None)),
        ping=0,
        send_timeout=0.2,
        headers=HEADERS,
    )
    scope = {"type": "http", "method": method, "headers": [], SERVER_SEND: sender("server")}
    try:
        async with asyncio.timeout(10):
            await stream(scope, receive, sender("chain"))
    finally:
        patches.check()
    return {"messages": messages, "routes": routes, "released": len(released)}


@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_sse_patches_send_the_messages_sse_starlettes_own_send_sends(method: str) -> None:
    mine, theirs = await _run(True, EVENTS, method=method), await _run(False, EVENTS, method=method)
    assert mine["messages"] == theirs["messages"]
    assert mine["released"] == theirs["released"] == 1
    bodies = len(EVENTS) + 1 if method == "GET" else 1
    assert len(mine["messages"]) == bodies + 1
    assert theirs["routes"] == ["chain"] * len(theirs["messages"])
    if method == "GET":  # the patch sends body messages past the middleware chain
        assert mine["routes"] == ["chain"] + ["server"] * (bodies - 1) + ["chain"]  # its own end


async def test_sse_patches_end_a_stream_whose_client_takes_nothing_as_sse_starlette_does() -> None:
    mine, theirs = await _run(True, EVENTS, stall_after=5), await _run(False, EVENTS, stall_after=5)
    assert mine["messages"] == theirs["messages"]
    assert len(mine["messages"]) == 5
    assert mine["released"] == theirs["released"] == 1


def test_sse_patches_target_the_installed_sse_starlette_within_the_projects_range() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    gateway_extra = pyproject["project"]["optional-dependencies"]["gateway"]
    (allowed,) = [Requirement(d) for d in gateway_extra if d.startswith("sse-starlette")]
    assert patches.TESTED_VERSIONS["sse-starlette"] in allowed.specifier
    assert {"sse-starlette": version("sse-starlette")} == patches.TESTED_VERSIONS
    assert patches.patched()


async def test_sse_patches_another_sse_starlette_turns_it_off_with_one_warning_and_streams_work(
    caplog: pytest.LogCaptureFixture,
    untested_release: None,
    alpha: httpx.AsyncClient,
    script: Script,
    live: LiveGateway,
) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.events"):
        assert patches.check() is False
    assert [r.getMessage() for r in caplog.records] == [
        f"sse-starlette {version('sse-starlette')} is not the tested 0.0.1: the gateway's "
        "sse-starlette patch is off; event streams use sse-starlette's own send (slower with "
        "many viewers)"
    ]
    assert patches.set_patched(True) is False
    created = await create(alpha, metadata={"chunks": 4})
    stream = await read_stream(alpha, created["id"])
    assert stream.status == 200 and stream.ended
    assert [e.event for e in stream.events] == ["chunk"] * 4 + ["completed"]
    assert stream.events[-1].data["text"] == "t0 t1 t2 t3 "
