"""ASGI middleware: the request body limit, and access logs that never show a secret."""

from __future__ import annotations

import logging
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import BadRequest, PayloadTooLarge, error_response

BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods whose body no route reads: not wrapped (an SSE stream sends a lot)."""


class BodyLimit:
    """Answers 413 ``{"detail": ...}`` for a body over ``limit`` bytes, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in BODYLESS:
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = PayloadTooLarge(f"request body over the limit of {self.limit} bytes")
        if declared is not None:
            if not declared.isdigit():
                await error_response(BadRequest("invalid Content-Length"))(scope, receive, send)
                return
            if int(declared) > self.limit:
                await error_response(too_large)(scope, receive, send)
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _TooLarge(too_large.detail)
            return message

        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if started:
                raise
            await error_response(too_large)(scope, receive, send)


class _TooLarge(HTTPException):
    """Raised from ``receive``, so the route never sees a truncated body. An HTTPException,
    since FastAPI turns any other error while reading the body into a 400."""

    def __init__(self, detail: str) -> None:
        super().__init__(status_code=413, detail=detail)


_SECRET_QUERY = re.compile(r"([?&](?:token|key|api_key)=)[^&\s]*", re.IGNORECASE)


class RedactQuery(logging.Filter):
    """Masks watch tokens (and any ``key=``) in the URLs uvicorn's access log prints."""

    def filter(self, record: logging.LogRecord) -> bool:
        args: Any = record.args
        if isinstance(args, tuple):
            record.args = tuple(
                _SECRET_QUERY.sub(r"\1***", a) if isinstance(a, str) else a for a in args
            )
        return True


def redact_access_logs() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuery) for f in access.filters):
        access.addFilter(RedactQuery())
