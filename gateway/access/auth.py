"""API keys -> tenants, the admin role, and watch tokens.

Keys are stored only as SHA-256 digests (they are random 256-bit tokens, so a fast hash is
enough), either in settings or in a Redis hash managed with ``genq keys``. A watch token lets an
EventSource (which cannot send headers) follow or cancel one job: it is HMAC-signed and binds a
tenant, the id of the key it was issued to, a job id and an expiry. A revoked key id or a
disabled tenant (``genq_services.access``) is refused: keys within the key cache time, watch
tokens on every use.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from genq import as_text
from genq_contract.api_keys import KeyGrant, hash_key, key_id_of
from genq_contract.refusals import disabled_reason, revoked_reason
from genq_services.access import Access, CachedAccess

from ..errors import Forbidden, Unauthorized

API_KEY_CACHE_SECONDS = 5.0
API_KEY_CACHE_SIZE = 10_000


def new_api_key() -> str:
    return "gq_" + secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Principal:
    tenant: str
    admin: bool = False
    key_id: str = ""
    """The first 8 hex digits of the key's digest (``genq_contract.api_keys.key_id_of``): names
    the key in the audit log, and in the payload of every generation it creates (run-as)."""
    queues: tuple[str, ...] | None = None
    """A worker key's queues: it may pull and settle their jobs and do nothing else. None for
    other keys."""

    @property
    def worker(self) -> bool:
        return self.queues is not None

    @property
    def actor(self) -> str:
        return f"{self.tenant} (key {self.key_id})" if self.key_id else self.tenant


class ApiKeyStore:
    """API keys managed at runtime (``genq keys``), kept in one Redis hash: digest -> grant."""

    def __init__(self, redis: Any, key: str) -> None:
        self.redis = redis
        self.key = key

    async def add(self, api_key: str, grant: KeyGrant) -> str:
        digest = hash_key(api_key)
        await self.redis.hset(self.key, digest, grant.model_dump_json())
        return digest

    async def lookup(self, digest: str) -> KeyGrant | None:
        raw = await self.redis.hget(self.key, digest)
        return KeyGrant.model_validate_json(raw) if raw else None

    async def revoke(self, digest_prefix: str) -> list[str]:
        """Removes every key whose digest starts with ``digest_prefix`` (at least 8 hex digits)."""
        if len(digest_prefix) < 8:
            raise ValueError("give at least 8 hex digits of the key's digest")
        matches = [d for d in await self.all() if d.startswith(digest_prefix)]
        if matches:
            await self.redis.hdel(self.key, *matches)
        return matches

    async def all(self) -> dict[str, KeyGrant]:
        raw = await self.redis.hgetall(self.key)
        return {as_text(d): KeyGrant.model_validate_json(g) for d, g in raw.items()}


class Authenticator:
    """Resolves bearer keys: settings first, then the key store (cached ``cache_seconds``, so
    a revoked key stops working within that time). With ``access``, a key whose id was revoked
    is refused (401; how a key of ``GENQ_API_KEYS`` is revoked) and a key of a disabled tenant
    gets 403, both within ``cache_seconds`` too."""

    def __init__(
        self,
        grants: dict[str, KeyGrant],
        store: ApiKeyStore,
        cache_seconds: float = API_KEY_CACHE_SECONDS,
        access: Access | None = None,
    ) -> None:
        self._grants = grants
        self._store = store
        self._cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, KeyGrant | None]] = {}
        self._access = CachedAccess(access, cache_seconds) if access is not None else None

    def forget(self) -> None:
        """Drops every cached lookup: this process sees a revocation it just made at once."""
        self._cache.clear()
        if self._access is not None:
            self._access.forget()

    async def principal(self, api_key: str) -> Principal:
        digest = hash_key(api_key)
        grant = self._grants.get(digest)
        if grant is None:
            grant = await self._cached_lookup(digest)
        if grant is None:
            raise Unauthorized("invalid API key")
        key_id = key_id_of(digest)
        if self._access is not None:
            snapshot = await self._access.snapshot()
            if key_id in snapshot.revoked_key_ids:
                raise Unauthorized(revoked_reason(key_id))
            if grant.tenant in snapshot.disabled_tenants:
                raise Forbidden(f"{disabled_reason(grant.tenant)}: its API keys are refused")
        queues = tuple(grant.queues) if grant.worker else None
        return Principal(tenant=grant.tenant, admin=grant.admin, key_id=key_id, queues=queues)

    async def _cached_lookup(self, digest: str) -> KeyGrant | None:
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit and hit[0] > now:
            return hit[1]
        grant = await self._store.lookup(digest)
        if len(self._cache) >= API_KEY_CACHE_SIZE:
            self._cache.clear()
        self._cache[digest] = (now + self._cache_seconds, grant)
        return grant


@dataclass(frozen=True)
class WatchClaims:
    """What a valid watch token binds."""

    tenant: str
    key_id: str
    """The id of the key it was issued to ("" for a token issued without one)."""


class WatchTokens:
    """Short-lived tokens bound to (tenant, key id, job id, expiry), signed with HMAC-SHA256.

    With ``access``, :meth:`verify_allowed` refuses the token of a revoked key or a disabled
    tenant on every use (read from Redis each time, no cache)."""

    def __init__(self, secret: str, ttl: float, access: Access | None = None) -> None:
        # A key derived for this one purpose, so the secret can sign other things safely.
        self._key = hmac.new(secret.encode(), b"genq watch token v1", hashlib.sha256).digest()
        self.ttl = ttl
        self.access = access

    def issue(
        self, tenant: str, job_id: str, now: float | None = None, *, key_id: str = ""
    ) -> tuple[str, int]:
        """A token for ``job_id`` and its expiry (epoch seconds); ``key_id``: the key it is
        issued to, so revoking that key stops the token."""
        expires = int((time.time() if now is None else now) + self.ttl)
        claims: dict[str, Any] = {"t": tenant, "j": job_id, "e": expires}
        if key_id:
            claims["k"] = key_id
        body = _b64(json.dumps(claims, separators=(",", ":")))
        return f"{body}.{self._sign(body)}", expires

    def verify(self, token: str, job_id: str, now: float | None = None) -> str:
        """The tenant the token was issued to; raises :class:`Unauthorized` otherwise.
        Signature and expiry only: requests go through :meth:`verify_allowed`."""
        return self.claims(token, job_id, now).tenant

    async def verify_allowed(self, token: str, job_id: str) -> str:
        """:meth:`verify`, then refused (401) when the token's key was revoked or its tenant
        disabled since it was issued."""
        claims = self.claims(token, job_id)
        if self.access is not None:
            refusal = await self.access.refusal(claims.key_id or None, claims.tenant)
            if refusal is not None:
                raise Unauthorized(f"watch token refused: {refusal}")
        return claims.tenant

    def claims(self, token: str, job_id: str, now: float | None = None) -> WatchClaims:
        """What the token binds; raises :class:`Unauthorized` when it is forged, expired or
        for another job."""
        body, _, signature = token.partition(".")
        # Compared as bytes: compare_digest raises TypeError on a str that is not ASCII.
        expected = self._sign(body).encode()
        if not body or not hmac.compare_digest(signature.encode(), expected):
            raise Unauthorized("invalid or expired watch token")
        try:
            claims = json.loads(_unb64(body))
            tenant, bound_job, expires = claims["t"], claims["j"], int(claims["e"])
            key_id = str(claims.get("k", ""))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise Unauthorized("invalid or expired watch token") from exc
        if bound_job != job_id or expires < (time.time() if now is None else now):
            raise Unauthorized("invalid or expired watch token")
        return WatchClaims(str(tenant), key_id)

    def _sign(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


def _b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
