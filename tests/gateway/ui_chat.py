"""Talking to the AI SDK's routes as ``DefaultChatTransport`` does: bodies, and UI message streams
read off the wire (``data: {json}`` frames up to ``data: [DONE]``)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

UI = "/v1/ui/chat"


def user(text: str, message_id: str = "m1", **part: Any) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text, **part}]}


def chat_body(
    chat_id: str = "chat-1",
    messages: list[dict[str, Any]] | None = None,
    model: str = "demo/fast",
    **fields: Any,
) -> dict[str, Any]:
    """What ``sendMessages`` POSTs: the transport's body, then id, messages, trigger."""
    return {
        "model": model,
        "id": chat_id,
        "messages": messages if messages is not None else [user("hello")],
        "trigger": "submit-message",
        **fields,
    }


@dataclass
class UIStream:
    status: int
    headers: httpx.Headers
    chunks: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    """The ``id:`` lines (stream entry ids), in order."""
    done: bool = False
    """``data: [DONE]`` came, last."""
    body: Any = None
    """The JSON answer of a response that is not a stream."""

    def types(self) -> list[str]:
        return [c["type"] for c in self.chunks]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [c for c in self.chunks if c["type"] == kind]

    def text(self) -> str:
        return "".join(c["delta"] for c in self.of("text-delta"))

    @property
    def generation_id(self) -> str:
        return str(self.chunks[0]["messageMetadata"]["genq"]["generationId"])


async def read_ui(response: httpx.Response, stream: UIStream, limit: int | None = None) -> None:
    """Reads UI chunks into ``stream`` until ``[DONE]``, the end, or ``limit`` chunks."""
    async for line in response.aiter_lines():
        if line.startswith("id: "):
            stream.ids.append(line[4:])
        if not line.startswith("data: "):
            continue
        assert not stream.done, "nothing may follow [DONE]"
        if line == "data: [DONE]":
            stream.done = True
            continue
        stream.chunks.append(json.loads(line[6:]))
        if limit is not None and len(stream.chunks) >= limit:
            return


async def ui_request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    body: dict[str, Any] | None = None,
    limit: int | None = None,
    timeout: float = 15,
) -> UIStream:
    """One request; a UI message stream is read to its end (or ``limit`` chunks)."""
    async with asyncio.timeout(timeout):
        async with client.stream(method, url, json=body) as response:
            stream = UIStream(response.status_code, response.headers)
            if response.status_code != 200 or not response.headers.get(
                "content-type", ""
            ).startswith("text/event-stream"):
                raw = await response.aread()
                stream.body = json.loads(raw) if raw else None
                return stream
            await read_ui(response, stream, limit)
            return stream


async def send(client: httpx.AsyncClient, body: dict[str, Any], **kw: Any) -> UIStream:
    return await ui_request(client, "POST", UI, body, **kw)


async def resume(client: httpx.AsyncClient, chat_id: str, **kw: Any) -> UIStream:
    return await ui_request(client, "GET", f"{UI}/{chat_id}/stream", **kw)


async def stop(client: httpx.AsyncClient, chat_id: str) -> httpx.Response:
    return await client.post(f"{UI}/{chat_id}/stop")
