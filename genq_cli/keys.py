"""What ``genq keys`` does, against the Redis the gateway uses (``GENQ_REDIS_URL``).

Only Redis and the namespace are needed, so these read the common settings rather than the
full gateway settings (which demand a secret). Any URL the servers take works here too,
``redis+cluster://`` included (``genq.connect``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.auth import KeyStore, new_api_key
from genq import connect
from genq_contract.api_keys import KeyGrant
from genq_contract.keys import GatewayKeys
from genq_contract.settings import CommonSettings


@asynccontextmanager
async def _store() -> AsyncIterator[KeyStore]:
    settings = CommonSettings()
    redis = connect(settings.redis_url)
    try:
        yield KeyStore(redis, GatewayKeys(settings.queue_namespace).api_keys)
    finally:
        await redis.aclose()


async def create_key(tenant: str, admin: bool) -> tuple[str, str]:
    grant = KeyGrant(tenant=tenant, admin=admin)
    async with _store() as store:
        api_key = new_api_key()
        return api_key, await store.add(api_key, grant)


async def list_keys() -> dict[str, KeyGrant]:
    async with _store() as store:
        return await store.all()


async def revoke_key(digest_prefix: str) -> list[str]:
    async with _store() as store:
        return await store.revoke(digest_prefix)
