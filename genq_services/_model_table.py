"""A table of one JSON entry per model, in a Redis hash: what every worker publishes for the
models it serves and the gateway reads (the price table, the capability table)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from genq import RedisClient


async def publish(redis: RedisClient, key: str, entries: Mapping[str, Any]) -> None:
    """Writes ``entries`` (model -> a JSON-ready value) into the table at ``key``."""
    if entries:
        await redis.hset(key, mapping={model: json.dumps(v) for model, v in entries.items()})


async def read(redis: RedisClient, key: str, models: Iterable[str]) -> dict[str, Any]:
    """The decoded entries of ``models`` (a model no worker has published is absent)."""
    wanted = list(dict.fromkeys(models))
    if not wanted:
        return {}
    raw = await redis.hmget(key, wanted)
    return {
        model: json.loads(value)
        for model, value in zip(wanted, raw, strict=True)
        if value is not None
    }
