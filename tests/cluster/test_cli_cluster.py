"""`genq keys` and `genq dead watch` as processes against the 3-master cluster: the CLI takes
every URL form the servers take (``GENQ_REDIS_URL=redis+cluster://...``)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import pytest
from redis.asyncio.cluster import RedisCluster

from genq import Keys
from genq_contract.api_keys import KeyGrant, hash_key
from genq_contract.keys import GatewayKeys

pytestmark = pytest.mark.timeout(60)

GENQ = [sys.executable, "-m", "genq_cli"]


def _env(cluster_url: str, namespace: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENQ_")}
    env.update(GENQ_REDIS_URL=cluster_url, GENQ_QUEUE_NAMESPACE=namespace, GENQ_MODELS="demo/fast")
    return env


async def _genq(*args: str, env: dict[str, str]) -> tuple[str, str]:
    process = await asyncio.create_subprocess_exec(
        *GENQ, *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    return out.decode(), err.decode()


async def test_cli_keys_create_and_list_on_a_cluster(
    cluster_url: str, client: RedisCluster
) -> None:
    namespace = f"cli-{uuid.uuid4().hex[:8]}"
    env = _env(cluster_url, namespace)
    out, err = await _genq("keys", "create", "--tenant", "acme", "--admin", env=env)
    api_key = out.strip()
    digest = hash_key(api_key)
    assert f"stored as sha256:{digest}" in err

    stored = await client.hget(GatewayKeys(namespace).api_keys, digest)
    assert KeyGrant.model_validate_json(stored) == KeyGrant(tenant="acme", admin=True)
    out, _ = await _genq("keys", "list", env=env)
    assert out.split() == [digest[:12], "acme", "admin"]


async def test_cli_dead_watch_on_a_cluster(cluster_url: str, client: RedisCluster) -> None:
    namespace = f"cli-{uuid.uuid4().hex[:8]}"
    process = await asyncio.create_subprocess_exec(
        *GENQ,
        "dead",
        "watch",
        "--count",
        "1",
        env=_env(cluster_url, namespace),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        ready = await asyncio.wait_for(process.stderr.readline(), 30)
        assert b"watching 1 queue(s)" in ready
        notice = {"id": "demo.0123", "reason": "error", "error": "boom", "attempts": 3}
        await client.publish(Keys(f"{namespace}:demo").dead_letters, json.dumps(notice))
        out, _ = await asyncio.wait_for(process.communicate(), 30)
        assert json.loads(out) == {"queue": "demo", **notice}
        assert process.returncode == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
