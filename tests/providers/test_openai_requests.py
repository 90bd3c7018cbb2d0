"""The direct path's request sender against the ``openai`` SDK's own ``post``.

Each test sends the same bodies both ways, through clients made as the direct path makes them
and through ones with organization, project, extra headers and a cookie a response set, to a
respx-mocked server, and compares what the server received (method, URL, every header in
order, body, timeout) and what came back: the chunks, or the SDK's exception for the same
answer. The httpx clients under them are plain (the sender's own one-hop send, as LiteLLM's
client gets) or add to their requests (query params, basic auth, credentials in the URL, an
event hook), and a redirect is followed or answered as ``send`` does.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import AsyncIterator, Callable
from importlib.metadata import version
from typing import Any

import httpx
import pytest
import respx
from openai import APIConnectionError, APIStatusError, APITimeoutError, AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion

from providers import direct_openai, openai_requests
from providers.openai_stream import ChunkStream

BASE = "http://provider.test/v1"
URL = f"{BASE}/chat/completions"
PATH = "/chat/completions"
BODIES = [
    {
        "messages": [{"role": "user", "content": "hi"}],
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": direct_openai.STREAM_OPTIONS,
    },
    {
        "messages": [{"role": "system", "content": "é ✓"}, {"role": "user", "content": "again"}],
        "model": "gpt-4o-mini",
        "stream": True,
        "stream_options": direct_openai.STREAM_OPTIONS,
        "temperature": 0.2,
        "max_tokens": 7,
    },
]
SSE = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}\n\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n'
    b"data: [DONE]\n\n"
)

Send = Callable[[AsyncOpenAI, dict[str, Any]], Any]


async def through_post(sdk: AsyncOpenAI, body: dict[str, Any]) -> AsyncStream[Any]:
    """The SDK's public request path, as the direct path called it before the sender."""
    return await sdk.post(
        PATH, body=body, cast_to=ChatCompletion, stream=True, stream_cls=AsyncStream[object]
    )


async def through_sender(sdk: AsyncOpenAI, body: dict[str, Any]) -> AsyncStream[Any]:
    sender = await openai_requests.sender(sdk, PATH)
    assert sender is not None, "the sender is off: nothing compared"
    return await sender.send(body)


WAYS = {"post": through_post, "sender": through_sender}


def stream_answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=SSE)


def client_kinds() -> dict[str, Callable[[httpx.AsyncClient], AsyncOpenAI]]:
    return {
        "plain": lambda http: AsyncOpenAI(
            api_key="sk-one", base_url=BASE, max_retries=0, http_client=http
        ),
        "organization, project, headers, timeout": lambda http: AsyncOpenAI(
            api_key="sk-two",
            base_url=BASE,
            organization="org-1",
            project="proj-1",
            default_headers={"X-Team": "genq", "User-Agent": "custom/1"},
            timeout=httpx.Timeout(12.5, connect=3.0),
            max_retries=0,
            http_client=http,
        ),
    }


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    # LiteLLM's kind of client: the direct path hands one to each SDK client it makes.
    async with httpx.AsyncClient(headers={"X-Transport-Default": "kept"}) as client:
        yield client


def seen(request: httpx.Request) -> tuple[Any, ...]:
    return (
        request.method,
        str(request.url),
        request.headers.raw,
        request.content,
        request.extensions.get("timeout"),
    )


async def chunks_of(stream: AsyncStream[Any]) -> list[Any]:
    async with stream:
        return [chunk async for chunk in stream]


@pytest.mark.parametrize("kind", list(client_kinds()))
async def test_the_server_receives_what_the_sdks_post_sends(
    http: httpx.AsyncClient, kind: str
) -> None:
    sdk = client_kinds()[kind](http)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(URL).mock(side_effect=stream_answer)
        for body in BODIES:
            for send in WAYS.values():
                await chunks_of(await send(sdk, body))
    requests = [seen(call.request) for call in route.calls]
    assert len(requests) == 2 * len(BODIES)
    for by_post, by_sender in zip(requests[::2], requests[1::2], strict=True):
        assert by_sender == by_post
    assert json.loads(requests[3][3]) == BODIES[1]  # each body its own, not the first one's


async def test_a_cookie_a_response_set_goes_with_the_next_request_either_way(
    http: httpx.AsyncClient,
) -> None:
    sdk = client_kinds()["plain"](http)

    def answer(request: httpx.Request) -> httpx.Response:
        response = stream_answer(request)
        response.headers["set-cookie"] = "__cf_bm=abc123; Path=/; HttpOnly"
        return response

    with respx.mock() as mock:
        route = mock.post(URL).mock(side_effect=answer)
        await chunks_of(await through_sender(sdk, BODIES[0]))  # the cookie is set here
        for send in WAYS.values():
            await chunks_of(await send(sdk, BODIES[0]))
    first, by_post, by_sender = (call.request for call in route.calls)
    assert "cookie" not in first.headers
    assert by_post.headers["cookie"] == "__cf_bm=abc123"
    assert seen(by_sender) == seen(by_post)


async def test_the_chunks_are_the_sdks(http: httpx.AsyncClient) -> None:
    sdk = client_kinds()["plain"](http)
    with respx.mock() as mock:
        mock.post(URL).mock(side_effect=stream_answer)
        streams = {name: await send(sdk, BODIES[0]) for name, send in WAYS.items()}
        got = {name: await chunks_of(stream) for name, stream in streams.items()}
    assert isinstance(streams["sender"], ChunkStream)  # read in one loop (test_openai_stream)
    assert got["sender"] == got["post"]
    assert [c["choices"][0]["delta"].get("content") for c in got["sender"][:2]] == ["Hel", "lo"]


async def test_an_encoded_answer_is_read_by_the_sdks_stream(http: httpx.AsyncClient) -> None:
    """The chunk stream reads bytes as they came; a compressed answer is the SDK's to read
    (httpx decodes it), with the same chunks."""
    sdk = client_kinds()["plain"](http)

    def gzipped(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
        return httpx.Response(200, headers=headers, content=gzip.compress(SSE))

    got: dict[str, Any] = {}
    with respx.mock() as mock:
        mock.post(URL).mock(side_effect=gzipped)
        for name, send in WAYS.items():
            stream = await send(sdk, BODIES[0])
            got[name] = (isinstance(stream, ChunkStream), await chunks_of(stream))
    assert got["sender"] == got["post"]
    assert got["sender"][0] is False
    assert [c["choices"][0]["delta"].get("content") for c in got["sender"][1][:2]] == ["Hel", "lo"]


ERRORS: dict[str, Callable[[httpx.Request], httpx.Response]] = {
    "429 with a JSON error": lambda request: httpx.Response(
        429,
        headers={"retry-after": "3", "x-request-id": "req-1"},
        json={"error": {"message": "slow down", "type": "rate_limit", "code": "rate_limited"}},
    ),
    "500 with a text body": lambda request: httpx.Response(500, text="upstream broke"),
    "400 with no body": lambda request: httpx.Response(400),
}


@pytest.mark.parametrize("case", list(ERRORS))
async def test_an_error_status_is_the_sdks_exception(http: httpx.AsyncClient, case: str) -> None:
    sdk = client_kinds()["plain"](http)
    raised: dict[str, APIStatusError] = {}
    with respx.mock() as mock:
        mock.post(URL).mock(side_effect=ERRORS[case])
        for name, send in WAYS.items():
            with pytest.raises(APIStatusError) as caught:
                await send(sdk, BODIES[0])
            raised[name] = caught.value
    by_post, by_sender = raised["post"], raised["sender"]
    assert type(by_sender) is type(by_post)
    assert str(by_sender) == str(by_post)
    assert by_sender.status_code == by_post.status_code
    assert by_sender.body == by_post.body
    assert by_sender.code == by_post.code
    assert by_sender.response.headers.raw == by_post.response.headers.raw


FAILURES: dict[str, tuple[Exception, type[Exception]]] = {
    "read timeout": (httpx.ReadTimeout("timed out"), APITimeoutError),
    "refused connection": (httpx.ConnectError("refused"), APIConnectionError),
}


@pytest.mark.parametrize("case", list(FAILURES))
async def test_a_failed_request_is_the_sdks_exception(http: httpx.AsyncClient, case: str) -> None:
    failure, expected = FAILURES[case]
    sdk = client_kinds()["plain"](http)
    raised: dict[str, BaseException] = {}
    with respx.mock() as mock:
        mock.post(URL).mock(side_effect=failure)
        for name, send in WAYS.items():
            with pytest.raises(expected) as caught:
                await send(sdk, BODIES[0])
            raised[name] = caught.value
    assert type(raised["sender"]) is type(raised["post"])
    assert str(raised["sender"]) == str(raised["post"])
    assert type(raised["sender"].__cause__) is type(raised["post"].__cause__)


async def test_a_client_whose_requests_differ_is_left_to_post(http: httpx.AsyncClient) -> None:
    async def fresh_key() -> str:
        return "sk-rotated"

    sdk = AsyncOpenAI(api_key=fresh_key, base_url=BASE, max_retries=0, http_client=http)
    assert await openai_requests.sender(sdk, PATH) is None


@pytest.mark.parametrize("dist", ["openai", "httpx"])
async def test_another_openai_or_httpx_release_leaves_every_request_to_post(
    http: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    dist: str,
) -> None:
    monkeypatch.setitem(openai_requests.GUARD.tested, dist, "0.0.1")
    try:
        with caplog.at_level(logging.WARNING, logger="providers"):
            assert openai_requests.GUARD.check() is False
        assert [r.getMessage() for r in caplog.records] == [
            f"{dist} {version(dist)} is not the tested 0.0.1: the direct OpenAI path builds "
            "each request with the SDK's post (slower to send)"
        ]
        sdk = client_kinds()["plain"](http)
        assert await openai_requests.sender(sdk, PATH) is None
        with respx.mock() as mock:
            route = mock.post(URL).mock(side_effect=stream_answer)
            await chunks_of(await direct_openai._post_stream(sdk, BODIES[0]))
        assert route.call_count == 1  # sent all the same, by the SDK's post
    finally:
        monkeypatch.undo()
        assert openai_requests.GUARD.check()


async def test_a_plain_client_sends_without_its_send_layers(
    http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path the worker takes (LiteLLM's client stores no cookie and has no auth or event
    hook of its own): built and sent without ``build_request`` and ``send``, yet received as
    the SDK's post sends it (the tests above)."""
    sdk = client_kinds()["plain"](http)

    def not_here(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the client's own layers ran")

    sender = await openai_requests.sender(sdk, PATH)  # made before: its template is built
    assert sender is not None
    monkeypatch.setattr(http, "build_request", not_here)
    monkeypatch.setattr(http, "send", not_here)
    with respx.mock() as mock:
        mock.post(URL).mock(side_effect=stream_answer)
        chunks = await chunks_of(await sender.send(BODIES[0]))
    assert [c["choices"][0]["delta"].get("content") for c in chunks[:2]] == ["Hel", "lo"]


def moved(request: httpx.Request) -> httpx.Response:
    return httpx.Response(307, headers={"location": "http://mirror.test/v1/chat/completions"})


@pytest.mark.parametrize("follow", [True, False])
async def test_a_redirect_is_answered_as_send_answers_it(follow: bool) -> None:
    """Followed (the body sent again to the new place, as a 307 asks) where the client
    follows redirects, as LiteLLM's does; else the SDK's error for the 307 either way."""
    async with httpx.AsyncClient(follow_redirects=follow) as http:
        sdk = client_kinds()["plain"](http)
        outcomes: dict[str, Any] = {}
        with respx.mock(assert_all_called=False) as mock:
            first = mock.post(URL).mock(side_effect=moved)
            second = mock.post("http://mirror.test/v1/chat/completions").mock(
                side_effect=stream_answer
            )
            for name, send in WAYS.items():
                try:
                    outcomes[name] = await chunks_of(await send(sdk, BODIES[0]))
                except APIStatusError as exc:
                    outcomes[name] = (type(exc), str(exc), exc.status_code)
    if follow:
        assert outcomes["sender"] == outcomes["post"]
        assert outcomes["sender"][0]["choices"][0]["delta"]["content"] == "Hel"
        assert second.call_count == 2
        by_post, by_sender = (seen(call.request) for call in second.calls)
        assert by_sender == by_post
    else:
        assert outcomes["sender"] == outcomes["post"]
        assert outcomes["sender"][2] == 307
        assert second.call_count == 0
    assert first.call_count == 2


def hooked_client() -> tuple[httpx.AsyncClient, list[str]]:
    heard: list[str] = []

    async def hook(request: httpx.Request) -> None:
        heard.append(str(request.url))

    return httpx.AsyncClient(event_hooks={"request": [hook]}), heard


def basic_auth(request: tuple[Any, ...]) -> bool:
    return any(
        name == b"Authorization" and value.startswith(b"Basic") for name, value in request[2]
    )


ADDING_CLIENTS: dict[str, tuple[Callable[[], httpx.AsyncClient], Callable[..., bool]]] = {
    "query params": (
        lambda: httpx.AsyncClient(params={"api-version": "2024-10-21"}),
        lambda request: "?api-version=2024-10-21" in request[1],
    ),
    "basic auth": (lambda: httpx.AsyncClient(auth=("user", "secret")), basic_auth),
}


@pytest.mark.parametrize("kind", list(ADDING_CLIENTS))
async def test_a_client_that_adds_to_its_requests_is_received_the_same(kind: str) -> None:
    make, added = ADDING_CLIENTS[kind]
    async with make() as http:
        sdk = client_kinds()["plain"](http)
        with respx.mock() as mock:
            route = mock.post(url__startswith=URL).mock(side_effect=stream_answer)
            got = {name: await chunks_of(await send(sdk, BODIES[0])) for name, send in WAYS.items()}
    by_post, by_sender = (seen(call.request) for call in route.calls)
    assert by_sender == by_post
    assert added(by_post)
    assert got["sender"] == got["post"]


async def test_credentials_in_the_base_url_are_received_the_same(http: httpx.AsyncClient) -> None:
    """httpx makes a URL's credentials the request's basic auth, over the SDK's key."""
    base = "http://user:secret@provider.test/v1"
    sdk = AsyncOpenAI(api_key="sk-one", base_url=base, max_retries=0, http_client=http)
    with respx.mock() as mock:
        route = mock.post(URL).mock(side_effect=stream_answer)
        for send in WAYS.values():
            await chunks_of(await send(sdk, BODIES[0]))
    by_post, by_sender = (seen(call.request) for call in route.calls)
    assert by_sender == by_post
    assert basic_auth(by_post)


async def test_an_event_hook_hears_each_request_either_way() -> None:
    http, heard = hooked_client()
    async with http:
        sdk = client_kinds()["plain"](http)
        with respx.mock() as mock:
            mock.post(URL).mock(side_effect=stream_answer)
            for send in WAYS.values():
                await chunks_of(await send(sdk, BODIES[0]))
    assert heard == [URL, URL]
