"""What ``genq keys`` does, against the Redis the gateway uses (``GENQ_REDIS_URL``).

Only Redis and the namespace are needed, so these read the common settings rather than the
full gateway settings (which demand a secret). Any URL the servers take works here too,
``redis+cluster://`` included (``genq.connect``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.access import revocation
from gateway.access.auth import ApiKeyStore, new_api_key
from gateway.access.revocation import Revoked
from genq import connect
from genq_contract.api_keys import KeyGrant
from genq_contract.keys import GatewayKeys
from genq_contract.settings import CommonSettings

from .direct import direct


@asynccontextmanager
async def _store() -> AsyncIterator[ApiKeyStore]:
    settings = CommonSettings()
    redis = connect(settings.redis_url)
    try:
        yield ApiKeyStore(redis, GatewayKeys(settings.queue_namespace).api_keys)
    finally:
        await redis.aclose()


async def create_key(
    tenant: str, admin: bool, worker: bool = False, queues: str = ""
) -> tuple[str, str]:
    """A new key and its digest. Raises ValueError for a bad tenant or role (pydantic's
    ValidationError is one)."""
    grant = key_grant(tenant, admin, worker, queues)
    async with _store() as store:
        api_key = new_api_key()
        return api_key, await store.add(api_key, grant)


def key_grant(tenant: str, admin: bool, worker: bool, queues: str) -> KeyGrant:
    """What ``genq keys create`` options grant; a worker key defaults to tenant ``workers``."""
    names = [name.strip() for name in queues.split(",") if name.strip()]
    if worker and not tenant:
        tenant = "workers"
    if not tenant:
        raise ValueError("--tenant is required (a worker key may leave it out)")
    if worker and not names:
        raise ValueError("a worker key needs --queues (comma-separated queue names)")
    return KeyGrant(tenant=tenant, admin=admin, worker=worker, queues=names)


async def list_keys() -> dict[str, KeyGrant]:
    async with _store() as store:
        return await store.all()


async def revoke_key(digest_prefix: str, reason: str | None = None) -> Revoked:
    """Revokes the key and stops its waiting, scheduled and running generations
    (``gateway.access.revocation``); audited."""
    async with direct() as d:
        revoked = await revocation.revoke_key(d.store, d.access, d.queues, digest_prefix)
        await revocation.record(
            d.audit, d.actor, "revoke_key", revoked.key_id, revoked.stopped, reason
        )
        return revoked
