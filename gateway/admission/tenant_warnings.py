"""Warnings for an operator who acts for a tenant that no API key acts as.

Setting such a tenant's budget, or enqueueing on its behalf, still succeeds (its keys may come
later), but the answer says so: a typo in the tenant's name would otherwise go unnoticed, the
budget guarding nobody and the generation billed to a tenant nobody reads.
"""

from __future__ import annotations

from ..state import Gateway


async def tenant_has_key(gateway: Gateway, tenant: str) -> bool:
    """Whether a key of ``GENQ_API_KEYS`` or of the key store (``genq keys``) acts as
    ``tenant``, whatever its role."""
    if any(grant.tenant == tenant for grant in gateway.settings.grants().values()):
        return True
    return any(grant.tenant == tenant for grant in (await gateway.api_key_store.all()).values())


async def unknown_tenant(gateway: Gateway, tenant: str) -> list[str]:
    """The answer's ``warnings``: one when no API key acts as ``tenant``, else none."""
    if await tenant_has_key(gateway, tenant):
        return []
    return [
        f"no API key acts as tenant {tenant!r} (GENQ_API_KEYS or the key store): "
        "check the name; nobody can use what was done for it until a key of it exists"
    ]
