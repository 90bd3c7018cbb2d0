"""Worker keys: `genq keys create --worker --queues ...` as a user runs it, and the grant."""

from __future__ import annotations

import subprocess

import httpx
import pytest
from pydantic import ValidationError

from genq_contract.api_keys import KeyGrant
from tests.gateway.conftest import LiveGateway, make_settings
from tests.gateway.test_cli import GENQ, _env

pytestmark = pytest.mark.timeout(60)


def genq(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*GENQ, "keys", *args], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_worker_key_grant_is_backwards_compatible() -> None:
    old = KeyGrant.model_validate_json('{"tenant": "acme", "admin": true}')
    assert (old.role, old.worker, old.queues) == ("admin", False, [])
    grant = KeyGrant(tenant="gpu", worker=True, queues=["demo"])
    assert KeyGrant.model_validate_json(grant.model_dump_json()) == grant
    assert grant.role == "worker"
    for bad in (
        {"tenant": "gpu", "worker": True},  # no queues
        {"tenant": "gpu", "worker": True, "admin": True, "queues": ["demo"]},
        {"tenant": "gpu", "queues": ["demo"]},  # queues without the worker role
        {"tenant": "gpu", "worker": True, "queues": ["a/b"]},
    ):
        with pytest.raises(ValidationError):
            KeyGrant.model_validate(bad)


def test_cli_creates_a_worker_key_that_only_pulls(redis_url: str, prefix: str) -> None:
    env = _env(redis_url, prefix)
    created = genq(env, "create", "--worker", "--queues", "demo,openai")
    assert created.returncode == 0, created.stderr
    api_key = created.stdout.strip()
    listed = genq(env, "list").stdout.split()
    assert listed[1:] == ["workers", "worker", "(demo,openai)"]
    refused = genq(env, "create", "--worker")
    assert refused.returncode == 2 and "needs --queues" in refused.stderr
    refused = genq(env, "create")
    assert refused.returncode == 2 and "--tenant is required" in refused.stderr

    with LiveGateway(make_settings(redis_url, prefix)) as live:
        auth = {"Authorization": f"Bearer {api_key}"}
        pulled = httpx.post(f"{live.url}/v1/queues/demo/pull", json={}, headers=auth)
        assert pulled.status_code == 200 and pulled.json() == {"jobs": []}
        body = {"model": "demo/fast", "prompt": "x"}
        enqueue = httpx.post(f"{live.url}/v1/generations", json=body, headers=auth)
        assert enqueue.status_code == 403
        assert "worker key" in enqueue.json()["detail"]
        other = httpx.post(f"{live.url}/v1/queues/other/pull", json={}, headers=auth)
        assert other.status_code == 403
