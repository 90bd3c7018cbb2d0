"""Shared key names: stable (a deployment's data lives under them) and where Cluster needs them."""

from __future__ import annotations

import redis.asyncio as aioredis

from genq import Queue
from genq_contract.keys import GatewayKeys, history_keys, provider_429_counter


def test_keys_gateway_names_are_the_ones_deployments_hold() -> None:
    keys = GatewayKeys("gen")
    assert keys.api_keys == "gen:gateway:apikeys"
    assert keys.audit == "gen:gateway:audit"
    assert keys.rate("acme") == "gen:gateway:rate:acme"
    assert keys.in_flight("acme") == "gen:gateway:inflight:acme"


def test_keys_per_queue_ones_share_the_queues_hash_tag() -> None:
    queue = Queue(aioredis.Redis(), "gen:openai")  # never connects: names only
    for key in (provider_429_counter(queue), *history_keys(queue)):
        assert key.startswith("{gen:openai}:")
    assert provider_429_counter(queue) == "{gen:openai}:x:metrics:provider_429_total"
    assert history_keys(queue) == ("{gen:openai}:x:history:depth", "{gen:openai}:x:history:wait")
