"""API keys (hashed, in settings or Redis) and watch tokens (signed, bound, short-lived)."""

from __future__ import annotations

import time

import pytest
import redis.asyncio as aioredis

from gateway.access.auth import ApiKeyStore, Authenticator, WatchTokens
from gateway.errors import Unauthorized
from genq_contract.api_keys import KeyGrant, hash_key
from tests.gateway.conftest import SECRET


def test_auth_hash_key_is_sha256_hex() -> None:
    assert hash_key("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_watch_token_round_trip_names_the_tenant() -> None:
    tokens = WatchTokens(SECRET, ttl=60)
    token, expires = tokens.issue("alpha", "demo.abc")
    assert tokens.verify(token, "demo.abc") == "alpha"
    assert time.time() + 55 < expires <= time.time() + 61


def test_watch_token_expired_is_refused() -> None:
    tokens = WatchTokens(SECRET, ttl=60)
    token, _ = tokens.issue("alpha", "demo.abc", now=time.time() - 120)
    with pytest.raises(Unauthorized):
        tokens.verify(token, "demo.abc")


def test_watch_token_is_bound_to_its_job() -> None:
    tokens = WatchTokens(SECRET, ttl=60)
    token, _ = tokens.issue("alpha", "demo.abc")
    with pytest.raises(Unauthorized):
        tokens.verify(token, "demo.other")


def _swap_claims(token: str) -> str:
    """Another tenant's claims under the genuine signature."""
    other_body = WatchTokens(SECRET, 60).issue("beta", "demo.abc")[0].split(".")[0]
    return f"{other_body}.{token.split('.')[1]}"


def _flip_signature(token: str) -> str:
    body, signature = token.split(".")
    return f"{body}.{signature[:-1]}{'A' if signature[-1] != 'A' else 'B'}"


FORGERIES = {
    "swapped-claims": _swap_claims,
    "other-secret": lambda t: WatchTokens("another-secret-0123456789", 60).issue(
        "alpha", "demo.abc"
    )[0],
    "no-signature": lambda t: t.split(".")[0] + ".",
    "bad-signature": _flip_signature,
    "garbage": lambda t: "not-a-token",
    "empty": lambda t: "",
}


@pytest.mark.parametrize("name", FORGERIES)
def test_watch_token_forgeries_are_refused(name: str) -> None:
    tokens = WatchTokens(SECRET, ttl=60)
    genuine, _ = tokens.issue("alpha", "demo.abc")
    forged = FORGERIES[name](genuine)
    assert forged != genuine
    with pytest.raises(Unauthorized):
        tokens.verify(forged, "demo.abc")


async def test_auth_keys_from_settings_and_store_resolve_to_tenants(
    redis: aioredis.Redis, prefix: str
) -> None:
    store = ApiKeyStore(redis, f"{prefix}:apikeys")
    await store.add("stored-key", KeyGrant(tenant="acme", admin=True))
    auth = Authenticator({hash_key("configured-key"): KeyGrant(tenant="beta")}, store, 0)

    configured = await auth.principal("configured-key")
    stored = await auth.principal("stored-key")
    assert (configured.tenant, configured.admin) == ("beta", False)
    assert (stored.tenant, stored.admin) == ("acme", True)
    with pytest.raises(Unauthorized):
        await auth.principal("unknown-key")
    raw = await redis.hgetall(f"{prefix}:apikeys")
    assert b"stored-key" not in b"".join([*raw.keys(), *raw.values()])


async def test_auth_revoked_key_is_refused(redis: aioredis.Redis, prefix: str) -> None:
    store = ApiKeyStore(redis, f"{prefix}:apikeys")
    digest = await store.add("doomed-key", KeyGrant(tenant="acme"))
    auth = Authenticator({}, store, cache_seconds=0)
    assert (await auth.principal("doomed-key")).tenant == "acme"

    assert await store.revoke(digest[:10]) == [digest]
    with pytest.raises(Unauthorized):
        await auth.principal("doomed-key")


async def test_auth_revoke_needs_a_real_prefix(redis: aioredis.Redis, prefix: str) -> None:
    store = ApiKeyStore(redis, f"{prefix}:apikeys")
    with pytest.raises(ValueError, match="8 hex"):
        await store.revoke("ab")
