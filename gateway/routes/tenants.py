"""Tenants as a whole (admin role): list them, disable one (its keys, watch tokens and
generations stop at once), enable it again. Every change is audited."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from genq_contract.api_keys import TENANT_PATTERN
from genq_services.access import Access

from ..access import revocation
from ..access.schemas import AccessChange, TenantChanged, TenantList, TenantOut
from ..deps import AdminDep, GatewayDep
from ..errors import ERRORS
from ..state import Gateway

router = APIRouter(tags=["access"], responses=ERRORS)

Tenant = Annotated[str, Path(pattern=TENANT_PATTERN, description="A tenant")]


def access_of(gateway: Gateway) -> Access:
    return Access(gateway.redis, gateway.settings.queue_namespace)


@router.get("/v1/tenants", response_model=TenantList)
async def list_tenants(gateway: GatewayDep, _: AdminDep) -> TenantList:
    """Every tenant that has an API key (key store or GENQ_API_KEYS) or is disabled, by name."""
    grants = [*gateway.settings.grants().values(), *(await gateway.api_key_store.all()).values()]
    disabled = await access_of(gateway).disabled_tenants()
    counts = dict.fromkeys(disabled, 0)
    for grant in grants:
        counts[grant.tenant] = counts.get(grant.tenant, 0) + 1
    rows = [TenantOut(tenant=t, disabled=t in disabled, keys=n) for t, n in sorted(counts.items())]
    return TenantList(tenants=rows)


@router.post("/v1/tenants/{tenant}/disable", response_model=TenantChanged)
async def disable_tenant(
    tenant: Tenant, gateway: GatewayDep, principal: AdminDep, body: AccessChange | None = None
) -> TenantChanged:
    """Disables the tenant: its API keys get 403 (within GENQ_KEY_CACHE_SECONDS), its watch
    tokens 401 at once, and its waiting, scheduled and running generations are cancelled now
    (``jobs_stopped``). Generations stay stopped when the tenant is enabled again."""
    changed, stopped = await revocation.disable_tenant(access_of(gateway), gateway.queues, tenant)
    gateway.auth.forget()
    reason = body.reason if body else None
    await revocation.record(
        gateway.audit, principal.actor, "disable_tenant", tenant, stopped, reason
    )
    return TenantChanged(
        tenant=tenant,
        disabled=True,
        changed=changed,
        jobs_stopped=stopped.count,
        stopped=stopped.jobs,
    )


@router.post("/v1/tenants/{tenant}/enable", response_model=TenantChanged)
async def enable_tenant(
    tenant: Tenant, gateway: GatewayDep, principal: AdminDep, body: AccessChange | None = None
) -> TenantChanged:
    """Enables a disabled tenant again: its keys and new watch tokens work at once."""
    changed = await access_of(gateway).enable_tenant(tenant)
    gateway.auth.forget()
    reason = body.reason if body else None
    await revocation.record(gateway.audit, principal.actor, "enable_tenant", tenant, None, reason)
    return TenantChanged(tenant=tenant, disabled=False, changed=changed, jobs_stopped=0)
