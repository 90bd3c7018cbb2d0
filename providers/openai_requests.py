"""The direct path's streamed request, sent as the ``openai`` SDK sends it without building
it anew each time.

``AsyncOpenAI.post`` builds every request from scratch: its options copied twice, the auth
and platform headers merged and validated, the URL joined and parsed, before httpx's own
build; that was most of the worker's time between a job's start and its request leaving
(docs/WORKERS.md has the figures). For the clients :mod:`providers.direct_openai` makes (a
static key; no provider runtime, workload identity, custom auth or idempotency header) all of
it but the body comes out the same every time, so :class:`StreamSender` has the SDK build one
request per client and path and sends each body with that request's URL, headers and timeout,
through the client's httpx client (its cookies and transport, as the SDK's build would). The
answer is read as the SDK reads it: its exceptions for a timeout, a connection failure and an
error status, its stream class for the chunks (or :class:`providers.openai_stream.ChunkStream`,
which reads them as that class does, for less).

httpx's own layers were most of what was left: ``build_request`` merges the client's
headers, cookies and query into what the template already holds, and ``send`` walks an auth
flow and a redirect loop around its one-hop send. Where the client adds nothing there (no
stored cookie, no auth or event hook of its own, no credentials in the URL), the request is
made directly and sent with httpx's one-hop send (its transport, cookie store and log line);
a redirect is then followed by httpx's own loop, as ``send`` would. Any other client gets
``build_request`` and ``send``.

It leans on the SDK's and httpx's private request paths, so it is on only with the ``openai``
and ``httpx`` releases it was compared against (:data:`GUARD`: the pinned ``openai``, httpx
0.28.1), and with any other the SDK's ``post`` runs. ``tests/providers/test_openai_requests.py``
sends the same bodies both ways and compares what the server receives and what comes back.
"""

from __future__ import annotations

import weakref
from typing import Any

import httpx
from httpx._client import ClientState
from openai import AsyncOpenAI, AsyncStream, OpenAIError
from openai._base_client import get_platform
from openai._compat import model_copy
from openai._exceptions import APIConnectionError, APITimeoutError
from openai._httpx2 import request_exceptions, status_exceptions, timeout_exceptions
from openai._models import FinalRequestOptions
from openai._streaming import SSEDecoder
from openai._utils import asyncify
from openai._utils._json import openapi_dumps

from genq import PatchGuard, pinned
from providers.openai_stream import ChunkStream

GUARD = PatchGuard(
    tested={**pinned("openai"), "httpx": "0.28.1"},
    off_warning="the direct OpenAI path builds each request with the SDK's post (slower to send)",
    logger="providers",
)
"""On with the ``openai`` and ``httpx`` releases whose request paths :class:`StreamSender`
was compared against."""

_senders: weakref.WeakKeyDictionary[AsyncOpenAI, dict[str, StreamSender | None]] = (
    weakref.WeakKeyDictionary()
)


class StreamSender:
    """Sends JSON bodies to one path of one client as streamed requests, built as the SDK
    built its first one."""

    __slots__ = ("_extensions", "_headers", "_http", "_lean_read", "_options", "_sdk", "_url")

    def __init__(self, sdk: AsyncOpenAI, options: FinalRequestOptions, template: Any) -> None:
        self._sdk = sdk
        self._options = options
        self._url: httpx.URL = template.url  # parsed once
        # The body's own length is set by the build of each request. Kept as the client's
        # own headers type, which the build copies as it is instead of reading each name anew.
        self._headers = template.headers.copy()
        del self._headers["content-length"]
        self._extensions = dict(template.extensions)
        # The client when it is httpx's own (LiteLLM's is; not a subclass, whose methods may
        # differ) and the URL holds no credentials (httpx would make them the request's auth).
        client: Any = sdk._client  # typed by the SDK as its own httpx2 client
        lean = type(client) is httpx.AsyncClient and not self._url.userinfo
        self._http: httpx.AsyncClient | None = client if lean else None
        # Where AsyncStream[object] runs its legacy mode with the SDK's text decoder, its
        # chunks are read by ChunkStream (the same chunks and exceptions, for less).
        self._lean_read = (
            options.stream_mode == "legacy"
            and not options.synthesize_event_and_data
            and type(sdk._make_sse_decoder()) is SSEDecoder
        )

    async def send(self, body: dict[str, Any]) -> AsyncStream[Any] | ChunkStream:
        """The SDK's stream of chunks (each the JSON object it parsed), or the exception the
        SDK raises for the same answer."""
        sdk = self._sdk
        request: Any = self._request(openapi_dumps(body))
        try:
            response: Any = await self._sent(request)
        except timeout_exceptions() as err:
            raise APITimeoutError(request=request) from err
        except OpenAIError:
            raise
        except request_exceptions() as err:
            raise APIConnectionError(request=request) from err
        try:
            response.raise_for_status()
        except status_exceptions() as err:
            if not err.response.is_closed:
                await err.response.aread()
            raise sdk._make_status_error_from_response(err.response) from None
        if self._lean_read and "content-encoding" not in response.headers:
            decoder = sdk._make_sse_decoder()
            assert isinstance(decoder, SSEDecoder)  # _lean_read: the SDK's own
            return ChunkStream(response, decoder)
        return AsyncStream[object](
            cast_to=object, response=response, client=sdk, options=self._options
        )

    def _request(self, content: bytes) -> Any:
        """What the client's ``build_request`` makes of the template and ``content``: made
        directly where the client has nothing to merge into it but what the template, built
        by it, holds already (its headers and query), which is while it stores no cookie."""
        client: Any = self._sdk._client
        make = client.build_request if self._http is None or self._http.cookies else httpx.Request
        return make(
            "POST",
            self._url,
            headers=self._headers,
            content=content,
            extensions=dict(self._extensions),
        )

    async def _sent(self, request: Any) -> Any:
        """What the SDK's send (the client's ``send(request, stream=True)``) answers."""
        client = self._http
        if (
            client is None
            or client.is_closed
            or client.auth is not None
            or any(client.event_hooks.values())
        ):
            return await self._sdk._send_request(request, stream=True)
        # What send does for such a client, its auth flow and redirect loop passing the
        # request and its answer through unchanged, but for a redirect.
        client._state = ClientState.OPENED
        response = await client._send_single_request(request)
        if not response.has_redirect_location:
            return response
        try:
            next_request = client._build_redirect_request(request, response)
            if not client.follow_redirects:
                response.next_request = next_request
                return response
            await response.aread()
            return await client._send_handling_redirects(
                next_request, follow_redirects=True, history=[response]
            )
        except BaseException:
            await response.aclose()
            raise


async def sender(sdk: AsyncOpenAI, path: str) -> StreamSender | None:
    """``sdk``'s sender for ``path``, made at its first request; None where the SDK's ``post``
    must build each request (another ``openai`` release, or a client whose requests differ one
    from the next)."""
    found = _senders.get(sdk)
    if found is None:
        found = _senders[sdk] = {}
    if path not in found:
        found[path] = await _made(sdk, path) if GUARD.patched() and _fixed(sdk) else None
    return found[path]


def _fixed(sdk: AsyncOpenAI) -> bool:
    """Whether every request the SDK builds for one path differs only by its body."""
    return (
        sdk._provider_runtime is None
        and sdk._workload_identity_auth is None
        and sdk._api_key_provider is None
        and sdk.custom_auth is None
        and sdk._idempotency_header is None
        and not sdk.default_query
    )


async def _made(sdk: AsyncOpenAI, path: str) -> StreamSender:
    """A sender whose request is the one the SDK's ``post(path, body={})`` would send, as the
    SDK's ``request`` builds it (the platform read first, the options prepared, a first try)."""
    if sdk._platform is None:
        sdk._platform = await asyncify(get_platform)()
    options = FinalRequestOptions.construct(method="post", url=path, json_data={})
    options = await sdk._prepare_options(model_copy(options))
    template = sdk._build_request(options, retries_taken=0)
    await sdk._prepare_request(template)
    return StreamSender(sdk, options, template)


GUARD.check()
