"""Who may still run work: revoked API key ids and disabled tenants.

A job carries who it runs as (``GenerationPayload.tenant`` and ``key_id``), and so do watch
tokens and pull receipts. Deleting a key's digest stops new requests, but not what the key
already holds, so revoking also records the key's id here, and every holder checks it on use:
the gateway before it honours a key, a watch token or a receipt, a worker before it calls a
provider and while a generation streams. Keys in ``GENQ_API_KEYS`` can only be revoked this way
(their digest is not in Redis).

Two small Redis sets under the gateway's namespace (``GatewayKeys.revoked_key_ids``,
``GatewayKeys.disabled_tenants``). A key id is the first hex digits of the key's digest
(``genq_contract.api_keys.key_id_of``, what the audit log shows); the reasons a refusal gives
are the contract's (``genq_contract.refusals``).

:class:`Access` reads Redis on every check (watch tokens: a revocation holds at once);
:class:`CachedAccess` keeps a snapshot of both sets for a few seconds (workers check every
streaming generation, one round trip per snapshot per process).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from genq import as_text
from genq_contract.api_keys import KEY_ID_LENGTH, KEY_ID_PATTERN
from genq_contract.keys import GatewayKeys
from genq_contract.refusals import disabled_reason, revoked_reason

log = logging.getLogger(__name__)

DEFAULT_CACHE_SECONDS = 5.0


@dataclass(frozen=True)
class Snapshot:
    """Both sets as read at one moment."""

    revoked_key_ids: frozenset[str]
    disabled_tenants: frozenset[str]

    def refusal(self, key_id: str | None, tenant: str | None) -> str | None:
        if key_id and key_id in self.revoked_key_ids:
            return revoked_reason(key_id)
        if tenant and tenant in self.disabled_tenants:
            return disabled_reason(tenant)
        return None


class Access:
    """Revoked key ids and disabled tenants, read from Redis on every call."""

    def __init__(self, redis: Any, namespace: str) -> None:
        self.redis = redis
        self.keys = GatewayKeys(namespace)

    async def allowed(self, key_id: str | None, tenant: str | None) -> bool:
        """True unless the key id is revoked or the tenant disabled. A missing key id or
        tenant (a job enqueued by other means than the gateway) is not checked."""
        return await self.refusal(key_id, tenant) is None

    async def refusal(self, key_id: str | None, tenant: str | None) -> str | None:
        """Why work of ``key_id`` / ``tenant`` is refused (``"API key ... was revoked"``,
        ``"tenant ... is disabled"``), or None when it is allowed."""
        if not key_id and not tenant:
            return None
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.sismember(self.keys.revoked_key_ids, key_id or "")
            pipe.sismember(self.keys.disabled_tenants, tenant or "")
            revoked, disabled = await pipe.execute()
        if key_id and revoked:
            return revoked_reason(key_id)
        if tenant and disabled:
            return disabled_reason(tenant)
        return None

    async def revoke_key_ids(self, ids: Iterable[str]) -> int:
        """Records key ids (8 hex digits) as revoked, for good; returns how many were new."""
        ids = sorted(set(ids))
        for key_id in ids:
            if not KEY_ID_PATTERN.match(key_id):
                raise ValueError(
                    f"a key id is {KEY_ID_LENGTH} lowercase hex digits, not {key_id!r}"
                )
        if not ids:
            return 0
        return int(await self.redis.sadd(self.keys.revoked_key_ids, *ids))

    async def disable_tenant(self, tenant: str) -> bool:
        """Refuses the tenant's keys, jobs, tokens and receipts; False if it already was."""
        return bool(await self.redis.sadd(self.keys.disabled_tenants, tenant))

    async def enable_tenant(self, tenant: str) -> bool:
        """Undoes :meth:`disable_tenant` (jobs stopped meanwhile stay stopped); False if the
        tenant was not disabled."""
        return bool(await self.redis.srem(self.keys.disabled_tenants, tenant))

    async def disabled_tenants(self) -> set[str]:
        return {as_text(t) for t in await self.redis.smembers(self.keys.disabled_tenants)}

    async def revoked_key_ids(self) -> set[str]:
        return {as_text(k) for k in await self.redis.smembers(self.keys.revoked_key_ids)}

    async def snapshot(self) -> Snapshot:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.smembers(self.keys.revoked_key_ids)
            pipe.smembers(self.keys.disabled_tenants)
            revoked, disabled = await pipe.execute()
        return Snapshot(
            frozenset(as_text(k) for k in revoked), frozenset(as_text(t) for t in disabled)
        )


class CachedAccess:
    """:class:`Access` answered from a snapshot at most ``ttl`` seconds old
    (``GENQ_ACCESS_CACHE_SECONDS``): a revocation reaches its holder within ``ttl``.

    A snapshot past half its ``ttl`` is read again in a task of its own while it still
    answers, so that a check (a generation about to call its provider) seldom waits for the
    read; one ``ttl`` old is never used (the check reads first, as without the task)."""

    def __init__(self, access: Access, ttl: float = DEFAULT_CACHE_SECONDS) -> None:
        if ttl < 0:
            raise ValueError("ttl must be at least 0")
        self.access = access
        self.ttl = ttl
        self._snapshot: Snapshot | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self._forgotten = 0
        """How many times :meth:`forget` ran: a read begun before it is not kept."""
        self._refresh: asyncio.Task[None] | None = None

    async def allowed(self, key_id: str | None, tenant: str | None) -> bool:
        return await self.refusal(key_id, tenant) is None

    async def refusal(self, key_id: str | None, tenant: str | None) -> str | None:
        if not key_id and not tenant:
            return None
        return (await self.snapshot()).refusal(key_id, tenant)

    async def snapshot(self) -> Snapshot:
        """Both sets, as read at most ``ttl`` seconds ago."""
        snapshot = self._snapshot
        if snapshot is not None:
            age = self._age()
            if age < self.ttl:
                if age >= self.ttl / 2 and self._refresh is None:
                    self._refresh = asyncio.get_running_loop().create_task(self._read_ahead())
                return snapshot
        async with self._lock:  # one read for every job that asks at the same moment
            if self._snapshot is None or self._age() >= self.ttl:
                await self._read()
            while self._snapshot is None:  # forgotten while it was read: read again
                await self._read()
            return self._snapshot

    def _age(self) -> float:
        """Seconds since the snapshot held was read."""
        return time.monotonic() - self._read_at

    async def _read(self) -> None:
        """Reads the snapshot and keeps it, unless :meth:`forget` ran meanwhile."""
        forgotten, read_at = self._forgotten, time.monotonic()
        snapshot = await self.access.snapshot()
        if forgotten == self._forgotten:
            self._snapshot, self._read_at = snapshot, read_at

    async def _read_ahead(self) -> None:
        """The background read: a failed one is left to the check that finds the snapshot
        expired (it reads, and raises, as it would have)."""
        try:
            async with self._lock:
                if self._snapshot is not None and self._age() >= self.ttl / 2:
                    await self._read()
        except Exception as exc:
            log.debug("reading the access snapshot ahead failed: %s", exc)
        finally:
            self._refresh = None

    def forget(self) -> None:
        """Drops the snapshot: the next check reads Redis (a read under way is not kept)."""
        self._snapshot = None
        self._forgotten += 1
