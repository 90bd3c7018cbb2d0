"""The direct path's request send: the ``openai`` SDK's ``post`` vs genq's sender, side by side.

Each way sends the same streamed chat request body to an in-process httpx mock transport that
answers a two-chunk stream; what is timed is the call to the moment the transport holds the
request (the worker's time before its request leaves), then the stream is read to its end.
Three ways take turns, ``--calls`` each, for ``--rounds`` rounds:

- ``post``: ``AsyncOpenAI.post(..., stream=True, stream_cls=AsyncStream[object])``, as the
  direct path sent before (:mod:`providers.openai_requests` says what it builds per request).
- ``sender``: :class:`providers.openai_requests.StreamSender`, the request built once.
- ``httpx``: httpx's own ``build_request`` and ``send`` with the same body (the sender's path
  before it made the request directly and sent it with httpx's one-hop send, for a client that
  adds nothing to its requests, as this one and the worker's).

It prints each way's median in microseconds and the sender's ratio to both.

    .venv/bin/python bench/openai_send.py [--calls 2000] [--rounds 3]

Results on the development machine are in ``docs/WORKERS.md``.
"""

# ruff: noqa: E402  (the sys.path fix below must run before the imports)
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path and ``bench/workers.py`` would
# shadow the ``workers`` package.
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable

import httpx
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion

from providers import openai_requests
from providers.direct_openai import STREAM_OPTIONS

PATH = "/chat/completions"
BODY = {
    "messages": [{"role": "user", "content": "How long until the request leaves?"}],
    "model": "gpt-4o-mini",
    "stream": True,
    "stream_options": STREAM_OPTIONS,
}
ANSWER = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


async def run(args: argparse.Namespace) -> None:
    arrived: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        arrived.append(time.perf_counter())
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=ANSWER)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        sdk = AsyncOpenAI(
            api_key="sk-bench",
            base_url="http://provider.invalid/v1",
            max_retries=0,
            http_client=http,  # type: ignore[arg-type]  # an httpx client, as the worker's
        )
        sender = await openai_requests.sender(sdk, PATH)
        if sender is None:
            raise SystemExit("the sender is off (another openai release?): nothing to compare")

        async def post() -> None:
            stream = await sdk.post(
                PATH, body=BODY, cast_to=ChatCompletion, stream=True, stream_cls=AsyncStream[object]
            )
            async for _ in stream:
                pass

        async def send() -> None:
            async for _ in await sender.send(BODY):
                pass

        async def raw() -> None:
            request = http.build_request(
                "POST", f"http://provider.invalid/v1{PATH}", content=json.dumps(BODY).encode()
            )
            response = await http.send(request, stream=True)
            await response.aclose()

        ways: dict[str, Callable[[], Awaitable[None]]] = {
            "post": post,
            "sender": send,
            "httpx": raw,
        }

        async def timed(call: Callable[[], Awaitable[None]]) -> float:
            started = time.perf_counter()
            await call()
            return arrived[-1] - started

        for call in ways.values():  # the first calls pay imports and caches
            for _ in range(100):
                await call()
        for number in range(1, args.rounds + 1):
            medians = {
                name: statistics.median([await timed(call) for _ in range(args.calls)]) * 1e6
                for name, call in ways.items()
            }
            print(
                f"round {number}: post {medians['post']:6.1f} us   sender "
                f"{medians['sender']:6.1f} us   httpx {medians['httpx']:6.1f} us   sender/post "
                f"{medians['sender'] / medians['post']:.2f}x   sender/httpx "
                f"{medians['sender'] / medians['httpx']:.2f}x"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per way per round")
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(run(parser.parse_args()))
