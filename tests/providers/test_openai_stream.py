"""The direct path's chunk stream against the ``openai`` SDK's ``AsyncStream[object]``.

Hypothesis writes event streams (chunks, provider error events, ``thread.`` events, comments,
ids and retries, several data lines, text that is not JSON or not UTF-8, ``[DONE]`` and what
follows it), ends each line with LF, CRLF or CR, cuts the bytes at random places or between
events (the pieces the short path reads) and may make the connection fail or time out after
the last piece. The SDK's stream and :class:`providers.openai_stream.ChunkStream` each read
the same pieces from a response of their own; what they yield, the exception they end with
(its type, message, body and cause), how many pieces they read and whether the response is
closed must be the same.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import AsyncOpenAI, AsyncStream
from openai._models import FinalRequestOptions
from openai._streaming import SSEDecoder

from providers.openai_stream import ChunkStream

URL = "http://provider.test/v1/chat/completions"
OPTIONS = FinalRequestOptions.construct(method="post", url="/chat/completions", json_data={})


@dataclass
class Source(httpx.AsyncByteStream):
    """The response's bytes, piece by piece, then ``failure`` (if any) instead of the end."""

    pieces: list[bytes]
    failure: Exception | None = None
    read: int = 0
    closed: bool = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            self.read += 1
            yield piece
        if self.failure is not None:
            raise self.failure

    async def aclose(self) -> None:
        self.closed = True


def response_of(source: Source) -> httpx.Response:
    return httpx.Response(
        200,
        headers={"content-type": "text/event-stream"},
        stream=source,
        request=httpx.Request("POST", URL),
    )


@dataclass
class Outcome:
    items: list[Any]
    error: tuple[Any, ...] | None
    pieces_read: int
    closed: bool


async def read(stream: Any, source: Source, response: httpx.Response, stop_after: int) -> Outcome:
    items: list[Any] = []
    error = None
    try:
        async for item in stream:
            items.append(item)
            if len(items) == stop_after:
                await stream.close()
                break
    except Exception as exc:
        error = (
            type(exc),
            str(exc),
            getattr(exc, "body", None),
            type(exc.__cause__),
            str(exc.__cause__),
        )
    return Outcome(items, error, source.read, response.is_closed and source.closed)


SDK = AsyncOpenAI(
    api_key="sk-test", base_url="http://provider.test/v1", http_client=httpx.AsyncClient()
)
"""Only its stream class's helpers run (nothing is sent)."""


async def both(pieces: list[bytes], failure: Exception | None, stop_after: int = 0) -> None:
    outcomes = []
    for make in (
        lambda r: AsyncStream[object](cast_to=object, response=r, client=SDK, options=OPTIONS),
        lambda r: ChunkStream(r, SSEDecoder()),
    ):
        source = Source(list(pieces), failure)
        response = response_of(source)
        outcomes.append(await read(make(response), source, response, stop_after))
    by_sdk, ours = outcomes
    assert ours == by_sdk


CHUNK = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "choices": [{"index": 0, "delta": {"content": "Hi é ✓"}, "finish_reason": None}],
}

data_values = st.one_of(
    st.just(json.dumps(CHUNK)),
    st.builds(
        lambda text: json.dumps({**CHUNK, "choices": [{"index": 0, "delta": {"content": text}}]}),
        st.text(max_size=12),
    ),
    st.just(json.dumps({"error": {"message": "overloaded", "type": "server_error"}})),
    st.just(json.dumps({"error": {"code": 500}})),  # no message: the SDK's own words
    st.just(json.dumps({"error": "a plain string"})),
    st.just(json.dumps({"error": None, "id": "not an error"})),
    st.just("null"),
    st.just("[1, 2]"),
    st.just("[DONE]"),
    st.just("not json"),
    st.just(""),
)

field_lines = st.one_of(
    st.builds(lambda v: f"data: {v}", data_values),
    st.builds(lambda v: f"data:{v}", data_values),  # no space after the colon
    st.sampled_from(["event: thread.run.created", "event: error", "event: message"]),
    st.sampled_from(["id: 7", "retry: 1500", "retry: soon", ": a comment", "unknown: field"]),
)

events = st.lists(st.lists(field_lines, min_size=1, max_size=3), min_size=0, max_size=6)
endings = st.sampled_from(["\n", "\r\n", "\r"])
failures = st.one_of(
    st.none(),
    st.sampled_from(
        [
            httpx.ReadError("connection reset"),
            httpx.ReadTimeout("timed out"),
            httpx.RemoteProtocolError("peer closed connection"),
        ]
    ),
)


def stream_bytes(lines: list[list[str]], ending: str, bad_utf8: bool) -> bytes:
    text = "".join(ending.join(event) + ending + ending for event in lines)
    body = text.encode()
    return body + b"data: \xff\xfe\n\n" if bad_utf8 else body


def cut_between_events(body: bytes, cuts: list[int]) -> list[bytes]:
    """Pieces of whole events, as a provider's writes usually arrive (the short path)."""
    ends = [i + 2 for i in range(len(body)) if body[i : i + 2] == b"\n\n"]
    points = sorted({ends[c % len(ends)] for c in cuts if ends} | {0, len(body)})
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


def cut(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    return [body[a:b] for a, b in itertools.pairwise(points) if b > a]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=events,
    ending=endings,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
    failure=failures,
    bad_utf8=st.booleans(),
    stop_after=st.integers(min_value=0, max_value=3),
    between_events=st.booleans(),
)
async def test_the_same_chunks_and_failures_as_the_sdks_stream(
    lines: list[list[str]],
    ending: str,
    cuts: list[int],
    failure: Exception | None,
    bad_utf8: bool,
    stop_after: int,
    between_events: bool,
) -> None:
    body = stream_bytes(lines, ending, bad_utf8)
    pieces = cut_between_events(body, cuts) if between_events else cut(body, cuts)
    await both(pieces, failure, stop_after)


def test_whole_events_are_read_on_the_short_path() -> None:
    """The usual piece skips the SDK's decoders (what the tests above compare), any other
    goes through them."""
    stream = ChunkStream(response_of(Source([])), SSEDecoder())
    assert stream._data_values(b'data: {"a": 1}\n\ndata: [DONE]\n\n') == ['{"a": 1}', "[DONE]"]
    for other in (b'data: {"a": 1}\r\n\r\n', b"event: x\ndata: 1\n\n", b"data: 1\n", b"\n\n"):
        assert stream._data_values(other) is None
    # Where the SDK's line splitter holds a piece of a line, or skips an LF after a CR, the
    # next piece is its to read.
    whole = b"data: 2\n\n"
    for held in (b"data: 1", b"data: 1\r\r"):
        stream = ChunkStream(response_of(Source([])), SSEDecoder())
        stream._lines.extend(stream._splitter.feed(held))
        assert stream._data_values(whole) is None


@pytest.mark.parametrize(
    "body",
    [
        b'data: {"a": 1}\n\ndata: [DONE]\n\ndata: {"after": true}\n\n',  # read on, not yielded
        b'data: {"a": 1}\r\n\r\ndata: {"b": 2}',  # no blank line at the end
        b'event: thread.message.delta\ndata: {"d": 1}\n\n',
        b'data: {"error": {"message": "bad key"}}\n\ndata: {"a": 1}\n\n',
        b'data: {"a":\ndata: 1}\n\n',  # one event's data on two lines
        b'data: {"a":\r1}\n\n',  # a CR ends a line
    ],
)
async def test_known_shapes_read_the_same(body: bytes) -> None:
    await both([body], None)
    await both([body[:7], body[7:]], None)


@pytest.mark.parametrize(
    "pieces",
    [
        [b"data: 1\n", b"data: 2\n\n"],  # an event's data begun in the piece before
        [b"event: thread.run.step\n", b'data: {"a": 1}\n\n'],  # its type
        [b"retry: 5\n", b"data: 1\n\n", b"\n"],  # its retry (a lone blank line then ends one)
    ],
)
async def test_an_event_begun_in_an_earlier_piece_reads_the_same(pieces: list[bytes]) -> None:
    await both(pieces, None)


async def test_each_piece_is_read_when_the_iteration_reaches_it() -> None:
    """A chunk is handed over before the next piece of the response is read: a token is the
    worker's as soon as it arrives."""
    source = Source([b'data: {"a": 1}\n\n', b'data: {"b": 2}\n\n'])
    stream = ChunkStream(response_of(source), SSEDecoder())
    assert await anext(stream) == {"a": 1}
    assert source.read == 1
    assert await anext(stream) == {"b": 2}
    with pytest.raises(StopAsyncIteration):
        await anext(stream)
    assert source.closed
