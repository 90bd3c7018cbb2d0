"""The published price table: each worker writes the prices of the models it serves, the gateway
reads them to reserve a generation's most it can cost against a budget (the gateway never
loads LiteLLM's cost map). A Redis hash, model -> :class:`~genq_contract.spend.Price` as JSON,
under :func:`genq_contract.spend.prices_key`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from genq import RedisClient
from genq_contract.spend import Price, prices_key


async def publish_prices(redis: RedisClient, namespace: str, prices: Mapping[str, Price]) -> None:
    if prices:
        await redis.hset(
            prices_key(namespace),
            mapping={model: json.dumps(price.as_json()) for model, price in prices.items()},
        )


async def read_prices(
    redis: RedisClient, namespace: str, models: Iterable[str]
) -> dict[str, Price]:
    """The published prices of ``models`` (a model no worker has published is absent)."""
    wanted = list(dict.fromkeys(models))
    if not wanted:
        return {}
    raw = await redis.hmget(prices_key(namespace), wanted)
    return {
        model: Price.from_json(json.loads(value))
        for model, value in zip(wanted, raw, strict=True)
        if value is not None
    }
