"""One signed POST of one event to one endpoint: what a worker's delivery and the gateway's
``POST /v1/webhook_endpoints/{id}/test`` both do.

The URL's addresses are checked first (``genq_services.webhook_urls``), then the event is
signed the Standard Webhooks way with every secret still valid (``genq_contract.webhooks``).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from genq_contract.webhooks import encode_body, signature_header

from .webhook_endpoints import Endpoint
from .webhook_urls import check_url

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
    await check_url(endpoint.url, allow_private)
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
    return await http.post(endpoint.url, content=body, headers=headers)
