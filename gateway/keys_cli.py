"""What ``genq keys`` does, against the Redis the gateway uses (``GENQ_REDIS_URL``).

Only Redis and the namespace are needed, so these read the environment directly rather than
the full gateway settings (which demand a secret).
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict
from redis.asyncio import Redis

from providers.routing import DEFAULT_NAMESPACE

from .auth import KeyStore, new_api_key
from .settings import KeyGrant, Settings, gateway_key


class _StoreSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GENQ_", extra="ignore")

    redis_url: str = Settings.model_fields["redis_url"].default
    queue_namespace: str = DEFAULT_NAMESPACE


def _store() -> tuple[Redis, KeyStore]:
    settings = _StoreSettings()
    redis = Redis.from_url(settings.redis_url)
    return redis, KeyStore(redis, gateway_key(settings.queue_namespace, "apikeys"))


async def create_key(tenant: str, admin: bool) -> tuple[str, str]:
    grant = KeyGrant(tenant=tenant, admin=admin)
    redis, store = _store()
    try:
        api_key = new_api_key()
        return api_key, await store.add(api_key, grant)
    finally:
        await redis.aclose()


async def list_keys() -> dict[str, KeyGrant]:
    redis, store = _store()
    try:
        return await store.all()
    finally:
        await redis.aclose()


async def revoke_key(digest_prefix: str) -> list[str]:
    redis, store = _store()
    try:
        return await store.revoke(digest_prefix)
    finally:
        await redis.aclose()
