"""A chat's pointer at the generation it last started: what its resume and its Stop act on.

One string per chat and tenant (``GatewayKeys.ui_chat``): a chat id names nothing for another
tenant. It is moved only by compare and set (``gateway/lua/ui_chat_point.lua``), so of two
requests racing to start the chat's next generation, one wins and the other sees it. It
expires ``GENQ_RESULT_TTL`` after a request last found it (the retention of a finished
generation's record; a request that finds the generation running renews it).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from ..state import Gateway

_POINT = (resources.files("gateway") / "lua" / "ui_chat_point.lua").read_text()


@functools.lru_cache(maxsize=8)
def _point_script(redis: Any) -> Any:
    """The compare-and-set script, registered once per Redis client (a pointer is made per
    request; registering hashes the script's text)."""
    return redis.register_script(_POINT)


class ChatPointer:
    def __init__(self, gateway: Gateway, tenant: str, chat_id: str) -> None:
        self._redis = gateway.redis
        self._script = _point_script(gateway.redis)
        self.key = gateway.settings.keys.ui_chat(tenant, chat_id)
        self._ttl_ms = round(gateway.settings.result_ttl * 1000)

    async def get(self) -> str | None:
        """The id of the generation the chat points at, if any."""
        value = await self._redis.get(self.key)
        return _text(value) or None

    async def point(self, seen: str | None, target: str) -> str | None:
        """Points the chat at ``target`` if it still points at ``seen`` (or already at
        ``target``: then this renews it). None when done; otherwise the id it points at
        instead ('' when its pointer vanished meanwhile)."""
        done = await self._script(keys=[self.key], args=[seen or "", target, self._ttl_ms])
        return None if done == 1 else _text(done)


def _text(value: bytes | str | int | None) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else str(value)
