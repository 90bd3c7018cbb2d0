"""What the client's modules share: its answers' types and how an HTTP answer is read."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, Self

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal


class APIError(Exception):
    """A non-2xx answer. ``retry_after`` is set on 429 and 503."""

    def __init__(self, status: int, detail: Any, retry_after: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


@dataclass(frozen=True)
class Created:
    id: str
    status: str
    deduplicated: bool
    events_url: str
    watch_token: str
    warnings: tuple[str, ...] = ()
    """What the gateway said of an enqueue that succeeded (an admin's ``enqueue_for`` a tenant
    that no API key acts as: a typo?)."""


def created_from(body: dict[str, Any]) -> Created:
    return Created(
        id=body["id"],
        status=body["status"],
        deduplicated=body["deduplicated"],
        events_url=body["events_url"],
        watch_token=body["watch_token"],
        warnings=tuple(body.get("warnings", ())),
    )


def raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text
    retry_after = response.headers.get("Retry-After")
    raise APIError(
        response.status_code, detail, float(retry_after) if retry_after is not None else None
    )


def generate_body(model: str, prompt: str | None, messages: Any, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, **{k: v for k, v in fields.items() if v is not None}}
    if prompt is not None:
        body["prompt"] = prompt
    if messages is not None:
        body["messages"] = messages
    return body


class _Closable(Protocol):
    async def aclose(self) -> None: ...


class OnPortal:
    """A blocking face over an async one (:class:`Client`, :class:`Puller`): every call runs
    on an event loop in a background thread (anyio's blocking portal), so both faces behave
    exactly alike."""

    _portal: BlockingPortal
    _portal_cm: AbstractContextManager[BlockingPortal]
    _async: Any

    def _open(self, make: Callable[[], _Closable]) -> None:
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._async = make()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._portal.call(self._async.aclose)
        finally:
            self._portal_cm.__exit__(None, None, None)
