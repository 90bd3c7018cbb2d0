"""What ``genq tenants`` does, against the Redis the gateway uses (``GENQ_REDIS_URL``):
disable a tenant (its keys, watch tokens and generations stop), enable it, list them."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.access import revocation
from gateway.access.revocation import Stopped

from .direct import direct


@dataclass(frozen=True)
class TenantRow:
    tenant: str
    keys: int
    """Keys in the key store (those of GENQ_API_KEYS are not visible here)."""
    disabled: bool


async def disable(tenant: str, reason: str | None) -> tuple[bool, Stopped]:
    async with direct() as d:
        changed, stopped = await revocation.disable_tenant(d.access, d.queues, tenant)
        await revocation.record(d.audit, d.actor, "disable_tenant", tenant, stopped, reason)
        return changed, stopped


async def enable(tenant: str, reason: str | None) -> bool:
    async with direct() as d:
        changed = await d.access.enable_tenant(revocation.check_tenant(tenant))
        await revocation.record(d.audit, d.actor, "enable_tenant", tenant, None, reason)
        return changed


async def list_tenants() -> list[TenantRow]:
    async with direct() as d:
        disabled = await d.access.disabled_tenants()
        counts = dict.fromkeys(disabled, 0)
        for grant in (await d.store.all()).values():
            counts[grant.tenant] = counts.get(grant.tenant, 0) + 1
        return [TenantRow(t, n, t in disabled) for t, n in sorted(counts.items())]
