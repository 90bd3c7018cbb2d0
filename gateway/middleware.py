"""ASGI middleware: the last-resort error answer, security headers, the request body limit,
and access logs that never show a secret."""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import BadRequest, PayloadTooLarge, error_response

log = logging.getLogger("gateway.errors")

BODYLESS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods whose body no route reads: not wrapped (an SSE stream sends a lot)."""


SERVER_SEND = "genq.server_send"
"""Scope key of the server's own ``send`` (:class:`GatewayApp`)."""


class GatewayApp(FastAPI):
    """FastAPI keeping the server's own ``send`` in each request's scope (``SERVER_SEND``).

    An event stream sends its body there once its response has started
    (:class:`gateway.streaming._sse_patches.WatchedSend`, on the tested sse-starlette): every
    ``send`` wrapper in the chain (Starlette's and FastAPI's error middleware, CORS and the ones
    in this module) looks at a response's start only and passes body messages through
    unchanged, and a stream sends a body message per viewer and event, so skipping the chain's
    wrappers there takes their cost off every event a viewer gets (what it bought:
    docs/KNOWN_LIMITS.md, docs/GATEWAY.md). A middleware that must see body messages
    (compression, say, which sse-starlette refuses anyway) would have to be applied inside the
    route instead."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[SERVER_SEND] = send
        await super().__call__(scope, receive, send)


class _TrackedSend:
    """``send``, remembering whether the response started: after that, no error answer can
    replace it."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        self.started = self.started or message["type"] == "http.response.start"
        await self._send(message)


class _HttpMiddleware:
    """Passes anything but HTTP (lifespan) straight through to the app; subclasses handle
    HTTP requests in :meth:`http`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.http(scope, receive, send)

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class CatchAll(_HttpMiddleware):
    """Any exception a route lets escape becomes ``{"detail": "internal error"}`` (500), logged
    by type and frames only (:func:`gateway.errors.error_response`), and goes no further.

    Starlette's handler for ``Exception`` answers the same but then re-raises, so uvicorn logs
    the exception's message (it can quote a prompt) and closes the client's connection."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracked = _TrackedSend(send)
        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            response = error_response(exc)  # logs it
            if tracked.started:  # too late for an answer: the connection just ends
                log.warning("response to %s cut short by %s", scope["path"], type(exc).__name__)
                return
            await response(scope, receive, send)


PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
"""The pages keep API keys in localStorage: only their own scripts may run, nothing may frame
them, and they talk to their own origin only."""

DOCUMENT_TYPES = (b"text/html", b"application/xhtml+xml", b"image/svg+xml")
"""Content types a browser renders as a page of this origin (and could frame)."""

COMMON_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


class SecurityHeaders(_HttpMiddleware):
    """On every answer: ``nosniff``, ``Referrer-Policy: no-referrer`` (a job id in a page's
    address stays on this origin) and ``X-Frame-Options: DENY``. On every document, whatever
    its path (``/``, ``/web/admin.html``...), :data:`PAGE_CSP` unless its route set a policy of
    its own (``/docs`` and ``/redoc`` do: ``gateway.routes.docs``).

    Decided from the answer's content type rather than from a list of paths: the static
    ``/web`` mount serves the same pages under other names."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                message = {**message, "headers": [*headers, *_security_headers(headers)]}
            await send(message)

        await self.app(scope, receive, with_headers)


def _security_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    document = has_policy = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-type":
            document = value.split(b";", 1)[0].strip().lower() in DOCUMENT_TYPES
        elif lowered == b"content-security-policy":
            has_policy = True
    if document and not has_policy:
        return [*COMMON_HEADERS, (b"content-security-policy", PAGE_CSP.encode())]
    return list(COMMON_HEADERS)


class BodyLimit(_HttpMiddleware):
    """Answers 413 ``{"detail": ...}`` for a body over ``limit`` bytes, declared or streamed;
    a POST to a path of ``uploads`` has that path's own limit (file uploads)."""

    def __init__(self, app: ASGIApp, limit: int, uploads: dict[str, int] | None = None) -> None:
        super().__init__(app)
        self.limit = limit
        self.uploads = uploads or {}

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] in BODYLESS:
            await self.app(scope, receive, send)
            return
        limit = self.limit
        if scope["method"] == "POST":
            limit = self.uploads.get(scope["path"], limit)
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = PayloadTooLarge(f"request body over the limit of {limit} bytes")
        if declared is not None:
            if not declared.isdigit():
                await error_response(BadRequest("invalid Content-Length"))(scope, receive, send)
                return
            if int(declared) > limit:
                await error_response(too_large)(scope, receive, send)
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge(too_large.detail)
            return message

        tracked = _TrackedSend(send)
        try:
            await self.app(scope, limited_receive, tracked)
        except _TooLarge:
            if tracked.started:
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
