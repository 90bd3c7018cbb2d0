"""One signed POST of one event to one endpoint: what a worker's delivery and the gateway's
``POST /v1/webhook_endpoints/{id}/test`` both do.

The URL's addresses are checked first, and the request sent to one of them, not to the name
(``genq_services.webhook_urls.destination``); the event is signed the Standard Webhooks way
with every secret still valid (``genq_contract.webhooks``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any

import httpx

from genq_contract.webhooks import encode_body, signature_header

from .webhook_endpoints import Endpoint
from .webhook_urls import destination

USER_AGENT = "genq-webhooks"


def client(timeout: float) -> httpx.AsyncClient:
    """The HTTP client deliveries go through: never follows a redirect (a 3xx to an internal
    address would get around the address check)."""
    return httpx.AsyncClient(timeout=timeout, follow_redirects=False)


async def send(
    http: httpx.AsyncClient,
    endpoint: Endpoint,
    message_id: str,
    event: dict[str, Any],
    allow_private: bool,
) -> httpx.Response:
    """POSTs ``event`` as ``message_id`` (``webhook-id``). Raises ``UnsafeUrlError`` for a URL
    that must not be reached, ``httpx.HTTPError`` when no answer came."""
    target = await destination(endpoint.url, allow_private)
    body = encode_body(event)
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(
            endpoint.signing_secrets(timestamp), message_id, timestamp, body
        ),
    }
    headers.update(target.headers)
    post = functools.partial(http.post, content=body, headers=headers, extensions=target.extensions)
    *others, last = target.urls
    for url in others:  # an address that takes no connection was sent nothing: the next
        with contextlib.suppress(httpx.ConnectError):
            return await post(url)
    return await post(last)
