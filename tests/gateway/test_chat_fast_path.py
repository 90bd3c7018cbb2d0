"""``POST /v1/chat/completions`` answers the same through its fast path
(``gateway.openai.chat.create_chat_completion_directly``) as through FastAPI's own handling
(``create_chat_completion``, which the route falls back to, and which any dependency override
selects): the same requests sent both ways give the same statuses, headers and bodies, streams
and OpenAI-shaped errors included."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import fastapi.routing
import httpx
import pytest

from gateway.openai.chat import create_chat_completion
from gateway.settings import Settings
from tests.gateway.conftest import (
    KEY_ALPHA,
    KEY_BETA,
    LiveGateway,
    Script,
    client_for,
    make_settings,
    wait_until,
)
from tests.gateway.test_create_fast_path import both_ways

URL = "/v1/chat/completions"
USER = [{"role": "user", "content": "hi"}]
CHAT = {"model": "demo/fast", "messages": USER}
STREAM = {**CHAT, "stream": True}
JSON = {"Content-Type": "application/json"}
VARYING = re.compile(r"demo\.[0-9A-Za-z_-]+|\b\d{13}-\d+\b|\b\d{10}\b")
"""Generation ids, stream entry ids and creation instants: new ones each time."""
KEEPALIVE = re.compile(rb"^: ping\n", re.MULTILINE)
"""Sent whenever the stream's reader waited a while: as many as the timing makes."""
Send = Callable[[httpx.AsyncClient, str], Any]


@pytest.fixture
def settings(redis_url: str, prefix: str) -> Settings:
    """Beta holds one stream and one wait at most (the refusals' test)."""
    return make_settings(
        redis_url, prefix, tenant_limits={"beta": {"max_streams": 1, "max_waits": 1}}
    )


def normal(answer: httpx.Response) -> dict[str, Any]:
    headers = {k: v for k, v in answer.headers.items() if k not in ("date", "content-length")}
    length = answer.headers.get("content-length")
    return {
        "status": answer.status_code,
        "headers": {k: VARYING.sub("*", v) for k, v in headers.items()},
        "body": VARYING.sub("*", KEEPALIVE.sub(b"", answer.content).decode()),
        "length_is_the_body's": length is None or int(length) == len(answer.content),
    }


async def same_both_ways(live: LiveGateway, send: Send, key: str | None = KEY_ALPHA) -> list[int]:
    """Sends ``send``'s requests both ways, checks the answers are the same (an error in
    OpenAI's shape), returns their statuses."""
    fast, standard = await both_ways(live, send, key)
    assert [normal(a) for a in fast] == [normal(a) for a in standard]
    for answer in fast:
        assert answer.status_code < 400 or set(answer.json()["error"]) >= {"message", "code"}
    return [a.status_code for a in fast]


def post(body: Any = STREAM, **kwargs: Any) -> Send:
    def send(http: httpx.AsyncClient, tag: str) -> Any:
        if isinstance(body, bytes):
            return http.post(URL, content=body, **kwargs)
        return http.post(URL, json=body, **kwargs)

    return send


def event_ids(stream: httpx.Response) -> list[str]:
    return re.findall(r"^id: (\S+)$", stream.text, re.MULTILINE)


@pytest.fixture
def fastapi_solved(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """The chat requests FastAPI's handler solved the dependencies of (its fast path does
    not)."""
    solved: list[object] = []
    solve: Callable[..., Any] = fastapi.routing.solve_dependencies

    async def spy(*args: Any, **kwargs: Any) -> Any:
        if kwargs["dependant"].call is create_chat_completion:
            solved.append(kwargs["request"])
        return await solve(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", spy)
    yield solved


async def test_chat_fast_path_is_taken_by_an_ordinary_request(
    live: LiveGateway, script: Script, fastapi_solved: list[object]
) -> None:
    async with client_for(live, KEY_ALPHA) as http:
        streamed = await http.post(URL, json=STREAM)
        waited = await http.post(URL, json=CHAT)
        assert (streamed.status_code, waited.status_code) == (200, 200), waited.text
        assert fastapi_solved == []
        await http.post(URL, json={**CHAT, "n": 2})  # declined: FastAPI answers
        assert len(fastapi_solved) == 1


async def test_chat_fast_path_streams_and_waits_as_fastapi_does(
    live: LiveGateway, script: Script
) -> None:
    assert await same_both_ways(live, post()) == [200]
    usage = {**STREAM, "stream_options": {"include_usage": True}, "temperature": 1}
    assert await same_both_ways(live, post(usage)) == [200]
    plain = {"Content-Type": "application/json; charset=utf-8"}
    assert await same_both_ways(live, post(CHAT, headers=plain)) == [200]

    async def keyed(http: httpx.AsyncClient, tag: str) -> list[httpx.Response]:
        key = {"Idempotency-Key": f"same-{tag}"}
        first = await http.post(URL, json=STREAM, headers=key)
        after = {**key, "Last-Event-ID": event_ids(first)[1]}
        resumed = await http.post(URL, json=STREAM, headers=after)
        waited = await http.post(URL, json=CHAT, headers=key)
        return [first, resumed, waited]

    assert await same_both_ways(live, keyed) == [200, 200, 200]
    fast, _ = await both_ways(live, keyed)
    first, resumed, _ = fast
    assert event_ids(resumed) == event_ids(first)[2:]  # the rest, from the same generation


async def test_chat_fast_path_refuses_requests_as_fastapi_does(
    live: LiveGateway, script: Script
) -> None:
    declined = [  # FastAPI answers these both ways
        post(b'{"model": ', headers=JSON),
        post(b"", headers=JSON),
        post({"model": "demo/fast"}),
        post({**STREAM, "messages": []}),
        post({**STREAM, "n": 2}),
        post(STREAM, headers={"Idempotency-Key": "has space"}),
        post(STREAM, headers={"Idempotency-Key": "k" * 201}),
        post(STREAM, headers={"Idempotency-Key": "k", "Last-Event-ID": "1-0" * 21}),
        post(json.dumps(STREAM).encode(), headers={"Content-Type": "text/plain"}),
        post(json.dumps(STREAM).encode()),
    ]
    for send in declined:
        assert await same_both_ways(live, send) == [400]
    taken = [  # valid as they stand: refused by the route itself
        post({**STREAM, "model": "no/such"}),
        post({**STREAM, "functions": []}),
        post(STREAM, headers={"Idempotency-Key": "k", "Last-Event-ID": "not-a-cursor"}),
    ]
    assert [await same_both_ways(live, send) for send in taken] == [[404], [400], [400]]


async def test_chat_fast_path_refuses_callers_as_fastapi_does(
    live: LiveGateway, script: Script
) -> None:
    for key in (None, "not-a-key"):
        assert await same_both_ways(live, post(), key) == [401]
    # the caller is refused before the body is looked at
    assert await same_both_ways(live, post({"model": "demo/fast"}), None) == [401]
    basic = post(STREAM, headers={"Authorization": "Basic eDp5"})
    assert await same_both_ways(live, basic, KEY_BETA) == [401]


async def test_chat_fast_path_refuses_a_tenant_at_its_caps_as_fastapi_does(
    live: LiveGateway, script: Script
) -> None:
    held = {**CHAT, "metadata": {"gate": "held"}}
    async with client_for(live, KEY_BETA) as beta:
        opened = beta.build_request("POST", URL, json={**held, "stream": True})
        stream = await beta.send(opened, stream=True)
        wait = asyncio.create_task(beta.post(URL, json=held))
        state = live.gateway
        await wait_until(lambda: state.open_streams.held("beta") == 1, timeout=10)
        await wait_until(lambda: state.open_waits.held("beta") == 1, timeout=10)
        assert await same_both_ways(live, post(), KEY_BETA) == [429]
        assert await same_both_ways(live, post(CHAT), KEY_BETA) == [429]
        script.open_all_gates()
        await stream.aread()
        await stream.aclose()
        assert (await wait).status_code == 200
