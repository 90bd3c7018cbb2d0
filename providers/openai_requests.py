"""The direct path's streamed request, sent as the ``openai`` SDK sends it without building
it anew each time.

``AsyncOpenAI.post`` builds every request from scratch: its options copied twice, the auth
and platform headers merged and validated, the URL joined and parsed, before httpx's own
build; that was most of the worker's time between a job's start and its request leaving
(docs/WORKERS.md has the figures). For the clients :mod:`providers.direct_openai` makes (a
static key; no provider runtime, workload identity, custom auth or idempotency header) all of
it but the body comes out the same every time, so :class:`StreamSender` has the SDK build one
request per client and path and sends each body with that request's URL, headers and timeout,
through the client's httpx client (its cookies and transport, as the SDK's build would) and
the SDK's own send. The answer is read as the SDK reads it: its exceptions for a timeout, a
connection failure and an error status, its stream class for the chunks.

It leans on the SDK's private request path, so it is on only with the ``openai`` release it
was compared against (:data:`GUARD`, the pinned one), and with any other the SDK's ``post``
runs. ``tests/providers/test_openai_requests.py`` sends the same bodies both ways and compares
what the server receives and what comes back.
"""

from __future__ import annotations

import weakref
from typing import Any

from openai import AsyncOpenAI, AsyncStream, OpenAIError
from openai._base_client import get_platform
from openai._compat import model_copy
from openai._exceptions import APIConnectionError, APITimeoutError
from openai._httpx2 import request_exceptions, status_exceptions, timeout_exceptions
from openai._models import FinalRequestOptions
from openai._utils import asyncify
from openai._utils._json import openapi_dumps

from genq import PatchGuard, pinned

GUARD = PatchGuard(
    tested=pinned("openai"),
    off_warning="the direct OpenAI path builds each request with the SDK's post (slower to send)",
    logger="providers",
)
"""On with the ``openai`` release whose request path :class:`StreamSender` was compared
against."""

_senders: weakref.WeakKeyDictionary[AsyncOpenAI, dict[str, StreamSender | None]] = (
    weakref.WeakKeyDictionary()
)


class StreamSender:
    """Sends JSON bodies to one path of one client as streamed requests, built as the SDK
    built its first one."""

    __slots__ = ("_extensions", "_headers", "_options", "_sdk", "_url")

    def __init__(self, sdk: AsyncOpenAI, options: FinalRequestOptions, template: Any) -> None:
        self._sdk = sdk
        self._options = options
        self._url = str(template.url)
        # The body's own length is set by the build of each request. Kept as the client's
        # own headers type, which the build copies as it is instead of reading each name anew.
        self._headers = template.headers.copy()
        del self._headers["content-length"]
        self._extensions = dict(template.extensions)

    async def send(self, body: dict[str, Any]) -> AsyncStream[Any]:
        """The SDK's stream of chunks (each the JSON object it parsed), or the exception the
        SDK raises for the same answer."""
        sdk = self._sdk
        request = sdk._client.build_request(
            "POST",
            self._url,
            headers=self._headers,
            content=openapi_dumps(body),
            extensions=dict(self._extensions),
        )
        try:
            response = await sdk._send_request(request, stream=True)
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
        return AsyncStream[object](
            cast_to=object, response=response, client=sdk, options=self._options
        )


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
