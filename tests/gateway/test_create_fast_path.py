"""``POST /v1/generations`` answers the same through its fast path
(``gateway.routes.generations.create_generation_directly``) as through FastAPI's own handling
(``create_generation``, which the route falls back to, and which any dependency override
selects): the same requests sent both ways give the same statuses, headers and bodies."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from gateway.admission.schemas import GenerationRequest
from gateway.deps import get_gateway
from tests.gateway.conftest import KEY_ALPHA, KEY_BETA, LiveGateway, client_for

BODY = {"model": "demo/fast", "prompt": "hi", "params": {"max_tokens": 8}}
JSON = {"Content-Type": "application/json"}
VARYING = re.compile(r"demo\.[0-9A-Za-z_-]+|[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}|\b\d{10}\b")
"""Job ids, watch tokens and expiry instants: new ones each time."""


def normal(answer: httpx.Response) -> dict[str, Any]:
    headers = {k: v for k, v in answer.headers.items() if k not in ("date", "content-length")}
    return {
        "status": answer.status_code,
        "headers": {k: VARYING.sub("*", v) for k, v in headers.items()},
        "body": VARYING.sub("*", answer.text),
        "length_is_the_body's": int(answer.headers["content-length"]) == len(answer.content),
    }


@pytest.fixture
def validated_json(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Bodies the fast path parsed (FastAPI's handling does not call ``model_validate_json``)."""
    seen: list[bytes] = []
    parse: Callable[..., GenerationRequest] = GenerationRequest.model_validate_json

    def spy(data: bytes, *args: Any, **kwargs: Any) -> GenerationRequest:
        seen.append(data)
        return parse(data, *args, **kwargs)

    monkeypatch.setattr(GenerationRequest, "model_validate_json", spy)
    yield seen


async def both_ways(
    live: LiveGateway, send: Callable[[httpx.AsyncClient, str], Any], key: str | None = KEY_ALPHA
) -> tuple[list[httpx.Response], list[httpx.Response]]:
    """``send(client, tag)``'s answers through the fast path, then through FastAPI's handling
    (an override of a dependency by itself turns the fast path off); ``tag`` differs between
    the two, for Idempotency-Keys of their own."""
    answers: list[list[httpx.Response]] = []
    app = live.app
    async with client_for(live, key) as http:
        for tag in ("fast", "standard"):
            if tag == "standard":
                app.dependency_overrides[get_gateway] = get_gateway
            try:
                sent = await send(http, tag)
            finally:
                app.dependency_overrides.clear()
            answers.append(sent if isinstance(sent, list) else [sent])
    return answers[0], answers[1]


async def test_create_fast_path_answers_as_fastapi_does(
    live: LiveGateway, validated_json: list[bytes]
) -> None:
    async def keyed(http: httpx.AsyncClient, tag: str) -> list[httpx.Response]:
        key = {"Idempotency-Key": f"same-{tag}"}
        first = await http.post("/v1/generations", json=BODY, headers=key)
        replay = await http.post("/v1/generations", json=BODY, headers=key)
        other_body = await http.post("/v1/generations", json={**BODY, "prompt": "x"}, headers=key)
        return [first, replay, other_body]

    cases: list[Callable[[httpx.AsyncClient, str], Any]] = [
        keyed,
        lambda http, tag: http.post("/v1/generations", json=BODY),
        lambda http, tag: http.post(
            "/v1/generations",
            json=BODY,
            headers={"Content-Type": "application/json; charset=utf-8"},
        ),
        lambda http, tag: http.post("/v1/generations", json={**BODY, "model": "no/such"}),
        lambda http, tag: http.post("/v1/generations", json={"model": "demo/fast"}),
        lambda http, tag: http.post("/v1/generations", json={**BODY, "priority": 99}),
        lambda http, tag: http.post("/v1/generations", content=b'{"model": ', headers=JSON),
        lambda http, tag: http.post("/v1/generations", content=b"", headers=JSON),
        lambda http, tag: http.post("/v1/generations", content=b"[1, 2]", headers=JSON),
        lambda http, tag: http.post(
            "/v1/generations", json=BODY, headers={"Idempotency-Key": "has space"}
        ),
        lambda http, tag: http.post(
            "/v1/generations", json=BODY, headers={"Idempotency-Key": "k" * 201}
        ),
        lambda http, tag: http.post(
            "/v1/generations",
            content=b'{"model": "demo/fast", "prompt": "hi"}',
            headers={"Content-Type": "text/plain"},
        ),
        lambda http, tag: http.post(
            "/v1/generations", content=b'{"model": "demo/fast", "prompt": "hi"}'
        ),
    ]
    statuses = []
    for case in cases:
        fast, standard = await both_ways(live, case)
        assert [normal(a) for a in fast] == [normal(a) for a in standard]
        statuses.append([a.status_code for a in fast])
        if case is keyed:  # the replay is of the generation its key made, either way
            for first, replay, _ in (fast, standard):
                assert replay.json()["id"] == first.json()["id"]
    assert statuses == [[202, 200, 422], [202], [202], *[[422]] * 10]
    # parsed there: every JSON body with a well-formed Idempotency-Key or none, valid or not
    assert len(validated_json) == 11


async def test_create_fast_path_refuses_callers_as_fastapi_does(live: LiveGateway) -> None:
    def post(http: httpx.AsyncClient, tag: str) -> Any:
        return http.post("/v1/generations", json=BODY)

    for key in (None, "not-a-key"):
        fast, standard = await both_ways(live, post, key)
        assert [normal(a) for a in fast] == [normal(a) for a in standard]
        assert fast[0].status_code == 401

    def bad_body(http: httpx.AsyncClient, tag: str) -> Any:
        return http.post("/v1/generations", json={"model": "demo/fast"})

    fast, standard = await both_ways(live, bad_body, None)  # the caller is refused first
    assert [normal(a) for a in fast] == [normal(a) for a in standard]
    assert fast[0].status_code == 401

    def basic(http: httpx.AsyncClient, tag: str) -> Any:
        return http.post("/v1/generations", json=BODY, headers={"Authorization": "Basic eDp5"})

    fast, standard = await both_ways(live, basic, KEY_BETA)
    assert [normal(a) for a in fast] == [normal(a) for a in standard]
    assert fast[0].status_code == 401
