"""The direct path's stream of chunks, read as the ``openai`` SDK's ``AsyncStream`` reads it, in
one loop.

``AsyncStream[object]`` hands each chunk up through nine nested generators (the transport's
and httpx's four byte streams, then the SDK's event decoders, its event loop and its iterator)
before the worker sees it: about 15 µs a chunk on this machine where the parsing itself takes
4 (docs/WORKERS.md has the figures), paid for every token of every generation.
:class:`ChunkStream` reads the response's raw bytes itself and runs the SDK's own pieces on
them: its line splitter (``_SSELineDecoder``), its event decoder (``SSEDecoder``), its
``[DONE]`` drain, and the same error checks in the same order, so a caller gets the same
chunks (each the JSON object parsed), the same exception at the same point (a provider's
error event, a read that timed out or failed, a line that is not UTF-8) and the response
closed when the stream ends, fails or is closed.

It stands in for ``AsyncStream[object]`` only where that one reads the bytes as they came
(the response has no ``content-encoding``) and runs its legacy mode with the SDK's text
decoder, and only with the ``openai`` release it was compared against (the sender's guard,
:data:`providers.openai_requests.GUARD`); ``tests/providers/test_openai_stream.py`` feeds both
the same generated streams, cut at random places.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import httpx
from openai import APIConnectionError, APIError, APITimeoutError
from openai._httpx2 import request_exceptions, timeout_exceptions
from openai._streaming import SSEDecoder, _SSELineDecoder
from openai._streaming_cleanup import drain_response_async
from openai._utils import is_mapping


class ChunkStream:
    """What ``AsyncStream[object](response=response, ...)`` yields and raises, for a response
    read as it came; ``decoder`` is the client's (``_make_sse_decoder``)."""

    __slots__ = ("_decoder", "_ended", "_finished", "_lines", "_raw", "_splitter", "response")

    def __init__(self, response: httpx.Response, decoder: SSEDecoder) -> None:
        self.response = response
        # A response read already (a mock's) holds its content, which httpx's aiter_bytes
        # hands over whole, where aiter_raw would refuse it as consumed.
        self._raw = (
            _whole(response.content) if hasattr(response, "_content") else response.aiter_raw()
        )
        self._splitter = _SSELineDecoder()
        self._decoder = decoder
        self._lines: deque[bytes | str] = deque()
        """Lines read and not decoded yet (bytes), each decoded when the iteration reaches it
        as the SDK's generators do, so a failure in one comes after the chunks before it; or
        the data values of whole events read on the short path (str, :meth:`_data_values`)."""
        self._ended = False  # the response's bytes are all read
        self._finished = False  # nothing more is yielded

    def __aiter__(self) -> ChunkStream:
        return self

    async def __anext__(self) -> Any:
        if self._finished:
            raise StopAsyncIteration
        try:
            return await self._next()
        except BaseException:
            # The SDK's iteration closes the response as it ends, however it ends.
            self._finished = True
            await self.response.aclose()
            raise

    async def _next(self) -> Any:
        decode = self._decoder.decode
        while True:
            while not self._lines:
                if self._ended:
                    raise StopAsyncIteration
                await self._read()
            line = self._lines.popleft()
            if isinstance(line, str):  # a whole event's one data value, read on the short path
                text, event = line, None
            else:
                sse = decode(line.decode("utf-8"))
                if sse is None:
                    continue
                text, event = sse.data, sse.event
            if text.startswith("[DONE]"):
                if self.response.http_version == "HTTP/1.1":  # the connection is reused
                    await drain_response_async(self.response)  # type: ignore[arg-type]
                raise StopAsyncIteration
            data = json.loads(text)
            if event and event.startswith("thread."):
                return {"data": data, "event": event}
            if is_mapping(data) and data.get("error"):
                error = data.get("error")
                message = error.get("message") if is_mapping(error) else None
                if not message or not isinstance(message, str):
                    message = "An error occurred during streaming"
                request: Any = self.response.request
                raise APIError(message=message, request=request, body=data["error"])
            return data

    async def _read(self) -> None:
        try:
            chunk = await anext(self._raw)
        except StopAsyncIteration:
            self._ended = True
            self._lines.extend(self._splitter.finish())
            return
        except timeout_exceptions() as err:
            raise APITimeoutError(request=self.response.request) from err  # type: ignore[arg-type]
        except request_exceptions() as err:
            raise APIConnectionError(request=self.response.request) from err  # type: ignore[arg-type]
        values = self._data_values(chunk)
        if values is None:
            self._lines.extend(self._splitter.feed(chunk))
        else:
            self._lines.extend(values)

    def _data_values(self, chunk: bytes) -> list[str] | None:
        """The short path of a provider's usual piece: whole events of one ``data: `` line
        each, ending in LF, read between events. Their data values are what the SDK's
        decoders would give (and they are left as after such events); None for any other
        piece, which goes through them."""
        splitter, decoder = self._splitter, self._decoder
        if (
            splitter._buffer
            or splitter._skip_lf
            or decoder._event
            or decoder._data
            or decoder._retry is not None
            or not chunk.endswith(b"\n\n")
        ):
            return None
        try:
            text = chunk.decode("utf-8")  # where a line is not UTF-8, the SDK's way fails it
        except UnicodeDecodeError:
            return None
        if "\r" in text:
            return None
        events = text[:-2].split("\n\n")
        for event in events:
            if not event.startswith("data: ") or "\n" in event:
                return None
        return [event[6:] for event in events]

    async def close(self) -> None:
        """Closes the response, as the SDK's ``close`` does (an iteration after it reads what
        is left as the SDK's would)."""
        await self.response.aclose()

    async def aclose(self) -> None:
        await self.close()

    async def __aenter__(self) -> ChunkStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.close()


async def _whole(content: bytes) -> AsyncIterator[bytes]:
    if content:
        yield content
