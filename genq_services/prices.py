"""The published price table: each worker writes the prices of the models it serves, the gateway
reads them to reserve a generation's most it can cost against a budget (the gateway never
loads LiteLLM's cost map). A Redis hash, model -> :class:`~genq_contract.spend.Price` as JSON,
under :func:`genq_contract.spend.prices_key`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from genq import RedisClient
from genq_contract.spend import Price, prices_key

from ._model_table import publish, read


async def publish_prices(redis: RedisClient, namespace: str, prices: Mapping[str, Price]) -> None:
    await publish(redis, prices_key(namespace), {m: p.as_json() for m, p in prices.items()})


async def read_prices(
    redis: RedisClient, namespace: str, models: Iterable[str]
) -> dict[str, Price]:
    """The published prices of ``models`` (a model no worker has published is absent)."""
    entries = await read(redis, prices_key(namespace), models)
    return {model: Price.from_json(entry) for model, entry in entries.items()}
