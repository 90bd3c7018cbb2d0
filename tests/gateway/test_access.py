"""Revoked keys and disabled tenants at the gateway: keys, watch tokens, the admin API, the CLI.

The workers' side (a refused job never reaches the provider) is in tests/workers/test_revocation.py.
"""

from __future__ import annotations

import asyncio
import subprocess
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from gateway.access.auth import ApiKeyStore, WatchTokens, new_api_key
from genq_contract.api_keys import KeyGrant, hash_key
from genq_contract.keys import GatewayKeys
from genq_services.access import Access
from tests.gateway.conftest import KEY_ADMIN, KEY_ALPHA, SECRET, LiveGateway, client_for, create
from tests.gateway.test_cli import GENQ, _env

pytestmark = pytest.mark.timeout(60)


async def audit(admin: httpx.AsyncClient, limit: int) -> list[dict[str, Any]]:
    return list((await admin.get("/v1/audit", params={"limit": limit})).json()["entries"])


async def test_access_watch_token_binds_the_key_and_is_refused_once_revoked(
    redis: aioredis.Redis, prefix: str
) -> None:
    access = Access(redis, prefix)
    tokens = WatchTokens(SECRET, ttl=60, access=access)
    token, _ = tokens.issue("acme", "demo.1", key_id="0123abcd")
    assert tokens.claims(token, "demo.1").key_id == "0123abcd"
    assert await tokens.verify_allowed(token, "demo.1") == "acme"
    await access.revoke_key_ids(["0123abcd"])
    with pytest.raises(Exception, match="watch token refused: API key 0123abcd was revoked"):
        await tokens.verify_allowed(token, "demo.1")
    # Signature and expiry alone still pass: only the checked path knows about revocations.
    assert tokens.verify(token, "demo.1") == "acme"
    with pytest.raises(ValueError, match="8 lowercase hex digits"):
        await access.revoke_key_ids(["0123"])


async def test_access_disabled_tenant_is_refused_everywhere_then_enabled_again(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    scheduled = await create(alpha, delay_ms=60_000)
    job, token = scheduled["id"], scheduled["watch_token"]
    assert (await anon.get(f"/v1/generations/{job}", params={"token": token})).status_code == 200
    assert (await alpha.get(f"/v1/generations/{job}")).json()["key_id"] == hash_key(KEY_ALPHA)[:8]

    row = (await admin.get(f"/v1/queues/demo/jobs/{job}")).json()
    assert (row["tenant"], row["key_id"]) == ("alpha", hash_key(KEY_ALPHA)[:8])

    off = await admin.post("/v1/tenants/alpha/disable", json={"reason": "unpaid"})
    assert off.status_code == 200, off.text
    assert off.json() | {"stopped": None} == {
        "tenant": "alpha",
        "disabled": True,
        "changed": True,
        "jobs_stopped": 1,
        "stopped": None,
    }
    assert off.json()["stopped"] == {"demo": [job]}

    refused = await anon.get(f"/v1/generations/{job}", params={"token": token})
    assert refused.status_code == 401
    assert refused.json() == {"detail": "watch token refused: tenant 'alpha' is disabled"}
    by_key = await alpha.post("/v1/generations", json={"model": "demo/fast", "prompt": "x"})
    assert by_key.status_code == 403
    assert by_key.json() == {"detail": "tenant 'alpha' is disabled: its API keys are refused"}
    listed = (await admin.get("/v1/tenants")).json()["tenants"]
    assert {"tenant": "alpha", "disabled": True, "keys": 1} in listed
    assert {"tenant": "beta", "disabled": False, "keys": 1} in listed

    on = await admin.post("/v1/tenants/alpha/enable")
    assert on.json()["changed"] is True and on.json()["disabled"] is False
    again = await anon.get(f"/v1/generations/{job}", params={"token": token})
    assert again.status_code == 200 and again.json()["status"] == "cancelled"  # stays stopped
    assert (await create(alpha, delay_ms=60_000))["status"] == "scheduled"

    actions = [(e["action"], e["queue"], e["ids"]) for e in await audit(admin, 3)]
    assert actions == [
        ("enable_tenant", "access", ["alpha"]),
        ("cancel", "demo", [job]),
        ("disable_tenant", "access", ["alpha"]),
    ]


async def test_access_admin_api_revokes_a_configured_key_by_its_id(
    alpha: httpx.AsyncClient, admin: httpx.AsyncClient, anon: httpx.AsyncClient
) -> None:
    """A key of GENQ_API_KEYS cannot be deleted from Redis: its id is refused instead."""
    first = await create(alpha, delay_ms=60_000)
    second = await create(alpha, delay_ms=60_000)
    digest = hash_key(KEY_ALPHA)
    revoked = await admin.post(f"/v1/keys/sha256:{digest[:16]}/revoke")
    assert revoked.status_code == 200, revoked.text
    body = revoked.json()
    assert (body["key_id"], body["removed"], body["configured"]) == (digest[:8], 0, True)
    assert body["jobs_stopped"] == 2
    assert sorted(body["stopped"]["demo"]) == sorted([first["id"], second["id"]])

    refused = await alpha.get(f"/v1/generations/{first['id']}")
    assert refused.status_code == 401
    assert refused.json() == {"detail": f"API key {digest[:8]} was revoked"}
    token = await anon.get(f"/v1/generations/{first['id']}", params={"token": first["watch_token"]})
    assert token.json() == {"detail": f"watch token refused: API key {digest[:8]} was revoked"}
    assert (await admin.post("/v1/keys/xyz12345/revoke")).status_code == 400


async def test_access_revoking_an_admin_key_stops_what_it_enqueued_for_tenants(
    admin: httpx.AsyncClient, beta: httpx.AsyncClient
) -> None:
    body = {"model": "demo/fast", "prompt": "x", "delay_ms": 60_000, "tenant": "beta"}
    on_behalf = (await admin.post("/v1/queues/demo/jobs", json=body)).json()
    own = await create(beta, delay_ms=60_000)
    admin_id = hash_key(KEY_ADMIN)[:8]
    assert (await beta.get(f"/v1/generations/{on_behalf['id']}")).json()["key_id"] == admin_id
    revoked = (await admin.post(f"/v1/keys/{hash_key(KEY_ADMIN)[:8]}/revoke")).json()
    assert revoked["stopped"] == {"demo": [on_behalf["id"]]}
    assert (await beta.get(f"/v1/generations/{own['id']}")).json()["status"] == "scheduled"
    assert (await admin.get("/v1/tenants")).status_code == 401


async def test_access_cli_revokes_and_disables_as_processes(
    redis: aioredis.Redis, redis_url: str, prefix: str, live: LiveGateway
) -> None:
    store = ApiKeyStore(redis, GatewayKeys(prefix).api_keys)
    api_key = new_api_key()
    digest = await store.add(api_key, KeyGrant(tenant="acme"))
    env = _env(redis_url, prefix)

    def genq(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*GENQ, *args], env=env, capture_output=True, text=True, timeout=30)

    async with client_for(live, api_key) as acme:
        jobs = [await create(acme, delay_ms=60_000) for _ in range(3)]
        off = await asyncio.to_thread(genq, "tenants", "disable", "acme", "--reason", "audit")
        assert off.returncode == 0, off.stderr
        assert off.stdout.splitlines() == ["tenant acme disabled", "stopped 3 job(s)"]
        listed = await asyncio.to_thread(genq, "tenants", "list")
        assert listed.stdout.split() == ["acme", "1", "disabled"]
        assert (await acme.get(f"/v1/generations/{jobs[0]['id']}")).status_code == 403

        on = await asyncio.to_thread(genq, "tenants", "enable", "acme")
        assert on.stdout.strip() == "tenant acme enabled"
        assert (await acme.get(f"/v1/generations/{jobs[0]['id']}")).json()["status"] == "cancelled"
        fresh = await create(acme, delay_ms=60_000)

        out = await asyncio.to_thread(genq, "keys", "revoke", digest[:10])
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [
            f"revoked 1 key(s), key id {digest[:8]}",
            "stopped 1 job(s)",
        ]
        assert (await acme.get(f"/v1/generations/{fresh['id']}")).status_code == 401
        token = fresh["watch_token"]
        watched = await acme.get(f"/v1/generations/{fresh['id']}/events", params={"token": token})
        assert watched.status_code == 401  # the bearer is refused first; then the token
        async with client_for(live, None) as anon:
            by_token = await anon.get(f"/v1/generations/{fresh['id']}", params={"token": token})
        assert by_token.status_code == 401 and "revoked" in by_token.json()["detail"]

    bad = await asyncio.to_thread(genq, "tenants", "disable", "not a tenant")
    assert bad.returncode == 2 and "not a tenant name" in bad.stderr
    entries: Any = await redis.xrevrange(GatewayKeys(prefix).audit, count=10)
    actions = [fields[b"action"].decode() for _, fields in entries]
    assert actions[:2] == ["cancel", "revoke_key"]
    assert "disable_tenant" in actions and "enable_tenant" in actions
    assert entries[-1][1][b"actor"].decode().startswith("genq CLI")
